"""The hidden world model (``pipeline.model``): a World is built whole by the sampler, once,
and is frozen afterwards; its parts stay apart (reading the constants or the data loads no
sampler)."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline import config
from pipeline.model.sampler import sample_world
from pipeline.model.world import Roles, World

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def world() -> World:
    return sample_world(config.load(["world=standard-01", "scale=tiny"]))


def test_a_world_is_frozen(world):
    for name, value in (("protein_cis", np.zeros(3)), ("pathways", None), ("extras", {}), ("n", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(world, name, value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        world.roles.drivers = np.zeros(2, np.int64)
    assert dataclasses.is_dataclass(World) and World.__dataclass_params__.frozen
    assert Roles.__dataclass_params__.frozen


def test_the_sampler_builds_every_field(world):
    """Nothing is left for later: no placeholder, every structure the build reads is there."""
    missing = [f.name for f in dataclasses.fields(World) if getattr(world, f.name) is None
               and f.name not in ("t9_centre", "site_fields")]  # None where the world plants no T9 / T5
    assert not missing, missing
    assert world.pathways is not None and "movers" in world.extras and world.cis_placement
    assert len(world.protein_cis) == world.n_proteins and (world.protein_cis >= 0).all()
    assert world.transcript_cov.shape == (world.n_proteins, 3) and world.metabolite_cov.shape == (world.n_metabolites, 3)
    # the followers' fitted loadings are the World's, the ordinary draws kept beside them
    follows = np.flatnonzero(world.pathways.follows >= 0)
    assert len(follows) and not np.allclose(world.protein_loadings[follows], world.pathways.total_loadings[follows])


def test_sampling_is_a_function_of_the_config(world):
    again = sample_world(config.load(["world=standard-01", "scale=tiny"]))
    for f in dataclasses.fields(World):
        a, b = getattr(world, f.name), getattr(again, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), f.name
    assert world.oracle_key == again.oracle_key and world.cis_placement == again.cis_placement


def test_the_constants_and_the_data_load_no_sampler():
    code = ("import json, sys\nimport pipeline.model.constants, pipeline.model.world, pipeline.model.linear\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pipeline'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "pipeline.model.world" in loaded
    assert not [m for m in loaded if m in ("pipeline.model.sampler", "pipeline.pathways", "pipeline.linkage",
                                           "pipeline.modalities", "pipeline.loci")], loaded
