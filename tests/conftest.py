"""Shared fixtures: tiny worlds built once per test session (imaging included
when the imaging stage is available), so the default run stays fast."""
from __future__ import annotations

import os
import shutil

import pytest

from pipeline import config
from pipeline.build import build


def build_world(out_dir, world="all-biases", scale="tiny", extra=()):
    overrides = [f"world={world}", f"scale={scale}", f"out={out_dir}", "cluster=sync", "cluster.progress=false", *extra]
    resolved = config.load(overrides)
    build(resolved, progress=False)
    return os.path.join(str(out_dir), resolved.cfg.world.id)


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory):
    """all-biases at tiny scale (every bias, four drivers, two ambiguous pairs)."""
    out = tmp_path_factory.mktemp("tiny")
    return build_world(out)


@pytest.fixture(scope="session")
def tiny_world_noimaging(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny_noimg")
    return build_world(out, extra=("release=noimaging",))


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
