"""Provenance round trip, in the manner of msprime's tests/test_provenance.py: a
world rebuilt from its own sealed/world.yaml alone (no world file, no overrides)
is the same world, byte for byte, manifests included."""
from __future__ import annotations

import os

import pytest

from pipeline import bundle, config
from pipeline.build import build


def _bytes(world_dir: str, kind: str) -> bytes:
    with open(os.path.join(world_dir, kind, bundle.MANIFEST), "rb") as fh:
        return fh.read()


def test_rebuild_from_the_sealed_record_alone(tiny_world_noimaging, tmp_path):
    record = os.path.join(tiny_world_noimaging, bundle.SEALED, bundle.WORLD_CONFIG)
    with open(record) as fh:
        resolved = config.from_record(fh.read(), str(tmp_path), {"kind": "sync", "progress": False})
    summary = build(resolved, progress=False)
    rebuilt = os.path.dirname(summary["release"])
    for kind in (bundle.RELEASE, bundle.SEALED):
        assert _bytes(rebuilt, kind) == _bytes(tiny_world_noimaging, kind), f"{kind}/{bundle.MANIFEST} differs"
    assert bundle.verify(os.path.join(rebuilt, bundle.RELEASE)) == []


def test_a_record_without_its_seed_is_refused():
    with pytest.raises(config.ConfigError, match="world.yaml: not a world record"):
        config.from_record("world: {id: x}\n", "/nonexistent")
