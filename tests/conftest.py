"""Shared fixtures: tiny worlds built once per test session (imaging included
when the imaging stage is available), so the default run stays fast."""
from __future__ import annotations

import os
import shutil

import pytest

from pipeline import config
from pipeline.build import build


def build_world(out_dir, world="all-biases", scale="tiny", extra=(), executor=None):
    overrides = [f"world={world}", f"scale={scale}", f"out={out_dir}", "cluster=sync", "cluster.progress=false", *extra]
    resolved = config.load(overrides)
    build(resolved, executor=executor, progress=False)
    return os.path.join(str(out_dir), resolved.cfg.world.id)


def build_worlds(specs, executor, jobs: int = 4) -> list:
    """Builds ``(out_dir, world, scale, extra)`` specs concurrently on one cluster, as a
    panel does (``jobs`` client threads; configs composed first, in this thread);
    returns the world folders in order."""
    from concurrent.futures import ThreadPoolExecutor

    resolved = [config.load([f"world={world}", f"scale={scale}", f"out={out}", "cluster=local", "cluster.progress=false",
                             *extra]) for out, world, scale, extra in specs]
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda r: build(r, executor=executor, progress=False, live=False), resolved))
    return [os.path.join(str(out), r.cfg.world.id) for (out, *_), r in zip(specs, resolved)]


@pytest.fixture(scope="session")
def local_cluster():
    """One distributed LocalCluster with two worker processes for the whole session:
    the tests that build through a real cluster share it instead of each starting
    their own (the worker-kill test keeps its own: it kills one)."""
    from omegaconf import OmegaConf

    from pipeline.graph.executor import make_executor

    cfg = OmegaConf.structured(config.ClusterConfig(n_workers=2, progress=False, dashboard_address=None))
    executor = make_executor(cfg, processes=True, announce=False)
    assert executor.n_workers == 2
    yield executor
    executor.close()


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory):
    """all-biases at tiny scale (every bias, four drivers, two ambiguous pairs)."""
    out = tmp_path_factory.mktemp("tiny")
    return build_world(out)


@pytest.fixture(scope="session")
def tiny_built(tmp_path_factory):
    """``tiny_built(world, *overrides)``: that tiny world without pixels, built once per
    session however many modules read it.  Read-only: a test that changes files copies
    the world first."""
    built: dict = {}

    def get(world: str = "all-biases", *extra: str) -> str:
        key = (world, *extra)
        if key not in built:
            built[key] = build_world(tmp_path_factory.mktemp(f"tiny_noimg_{world}"), world=world,
                                     extra=("release=noimaging", *extra))
        return built[key]

    return get


@pytest.fixture(scope="session")
def tiny_world_noimaging(tiny_built):
    return tiny_built("all-biases")


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def digest_tree(world_dir) -> dict:
    """SHA-256 of every release and sealed file, manifests included."""
    import hashlib

    out = {}
    for bundle in ("release", "sealed"):
        for root, _, files in os.walk(os.path.join(str(world_dir), bundle)):
            for f in files:
                path = os.path.join(root, f)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, str(world_dir))] = hashlib.sha256(fh.read()).hexdigest()
    return out


def pytest_sessionstart(session):
    """With DTW_REQUIRE_ISOLATION=1 (set by .ci/run) a machine where the agent sandbox
    cannot isolate fails the run at once instead of skipping the isolation tests."""
    if os.environ.get("DTW_REQUIRE_ISOLATION") == "1":
        from pipeline.harness import isolation_status

        ok, reason = isolation_status()
        if not ok:
            pytest.exit(f"DTW_REQUIRE_ISOLATION=1 but the agent sandbox cannot isolate here: {reason}", returncode=3)


@pytest.fixture(scope="session")
def tiny_screening(tmp_path_factory):
    """screening-01 at tiny scale with the smallest library (1,000 conformations): the episode
    tests' screening world, built once per session."""
    out = tmp_path_factory.mktemp("screening_tiny")
    resolved = config.load(["world=screening-01", "scale=tiny", "cluster=sync", "world.conformations=1000",
                            f"out={out}"])
    build(resolved, progress=False)
    return os.path.join(str(out), "screening-01")


@pytest.fixture(params=["biobank", "screening"])
def kind_world(request):
    """(kind, world folder) for every world kind the episode harness serves."""
    if request.param == "biobank":
        return "biobank", request.getfixturevalue("tiny_world_noimaging")
    return "screening", request.getfixturevalue("tiny_screening")
