"""Shared fixtures: worlds built once per test session through one cache keyed by the
config's digest (``worlds.WorldCache``; imaging included when the imaging stage is
available), so the default run stays fast.

The layout: ``tests/core`` builds no world; ``tests/biobank`` and ``tests/screening``
hold each kind's tests; ``tests/harness`` the episode harness and the agent
interfaces, played on worlds of both kinds; ``tests/conformance`` the contract every
registered kind (and the toy kind) is held to.  Helper modules (``worlds``,
``toy_kind``, ``stub_openai``) sit here and import as top-level modules from any
directory (pyproject: ``pythonpath = ["tests"]``)."""
from __future__ import annotations

import os

import pytest

from pipeline import config
from worlds import WorldCache, build_world, build_worlds, cache_root, digest_tree, have

#: Helpers once defined here (``from conftest import build_world`` still works; new code imports ``worlds``).
__all__ = ["build_world", "build_worlds", "digest_tree", "have"]

#: The fixtures that build (or read) a world: a test under tests/core may use none of them.
WORLD_FIXTURES = frozenset({"world_cache", "tiny_world", "tiny_built", "tiny_world_noimaging", "tiny_screening",
                            "kind_world"})
CORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "core") + os.sep


def pytest_collection_modifyitems(config, items):
    """tests/core is the part of the suite that builds no world: a test there that asks
    for a world fixture is a collection error, not a slow surprise."""
    wrong = [item.nodeid for item in items
             if str(item.path).startswith(CORE) and WORLD_FIXTURES.intersection(getattr(item, "fixturenames", ()))]
    if wrong:
        raise pytest.UsageError("tests/core builds no world, but these tests use a world fixture "
                                f"({', '.join(sorted(WORLD_FIXTURES))}): {', '.join(wrong)}; move them to "
                                "tests/biobank, tests/screening, tests/harness or tests/conformance")


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
def world_cache(tmp_path_factory):
    """The session's ``WorldCache``: ``world_cache.get(world, scale, extra)`` (or
    ``world_cache.build(overrides)`` for any kind) is the folder of that world, built
    once per session however many tests and xdist workers ask.  Read-only: a test that
    changes files works on ``world_cache.copy(folder, tmp_path)``; the session fails at
    its end if a cached world was changed."""
    cache = WorldCache(cache_root(tmp_path_factory))
    yield cache
    changed = cache.changed()
    assert not changed, f"tests changed these cached worlds instead of a copy (WorldCache.copy): {changed}"


@pytest.fixture(scope="session")
def tiny_world(world_cache):
    """all-biases at tiny scale (every bias, four drivers, two ambiguous pairs)."""
    return world_cache.get("all-biases")


@pytest.fixture(scope="session")
def tiny_built(world_cache):
    """``tiny_built(world, *overrides)``: that tiny world without pixels, built once per
    session however many modules read it.  Read-only: a test that changes files copies
    the world first."""

    def get(world: str = "all-biases", *extra: str) -> str:
        return world_cache.get(world, extra=("release=noimaging", *extra))

    return get


@pytest.fixture(scope="session")
def tiny_world_noimaging(tiny_built):
    return tiny_built("all-biases")


#: The episode tests' screening world: screening-01 at tiny scale with the smallest library.
TINY_SCREENING = ("world.conformations=1000",)


@pytest.fixture(scope="session")
def tiny_screening(world_cache):
    """screening-01 at tiny scale with the smallest library (1,000 conformations): the episode
    tests' screening world, built once per session."""
    return world_cache.get("screening-01", extra=TINY_SCREENING)


@pytest.fixture(params=["biobank", "screening"])
def kind_world(request):
    """(kind, world folder) for every world kind the episode harness serves."""
    if request.param == "biobank":
        return "biobank", request.getfixturevalue("tiny_world_noimaging")
    return "screening", request.getfixturevalue("tiny_screening")


def pytest_sessionstart(session):
    """With DTW_REQUIRE_ISOLATION=1 (set by .ci/run) a machine where the agent sandbox
    cannot isolate fails the run at once instead of skipping the isolation tests."""
    if os.environ.get("DTW_REQUIRE_ISOLATION") == "1":
        from pipeline.harness import isolation_status

        ok, reason = isolation_status()
        if not ok:
            pytest.exit(f"DTW_REQUIRE_ISOLATION=1 but the agent sandbox cannot isolate here: {reason}", returncode=3)
