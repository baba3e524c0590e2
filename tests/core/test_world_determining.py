"""One definition of the world-determining config (``pipeline.buildrecord.world_determining``,
declared on the schema): the build record's digest, the sealed world record, resumption,
the evaluation's world digest and config difference, the training worlds' cache key and the
screening kind's record all derive from it.  Configs are composed, never built."""
from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from pipeline import FORMAT_VERSION, __version__, buildrecord, config
from pipeline.config_schema import DETERMINES_WORLD, RootConfig

HELDOUT_SEED = "0x" + "c3" * 16


@pytest.fixture(scope="module")
def seeds_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeds") / "seeds.yaml"
    path.write_text(f"heldout-dcm-01: '{HELDOUT_SEED}'\n")
    return path


def load(world: str, *extra: str, out: str = "/tmp/unused-worlds"):
    return config.load([f"world={world}", "scale=tiny", "cluster=sync", "cluster.progress=false", f"out={out}", *extra])


def sha(doc) -> str:
    return hashlib.sha256(config.canonical_json(doc).encode()).hexdigest()


def test_what_determines_a_world_is_declared_on_the_schema():
    import dataclasses

    skipped = {f.name for f in dataclasses.fields(RootConfig) if f.metadata.get(DETERMINES_WORLD) is False}
    assert skipped == {"cluster", "out", "seeds"}
    resolved = load("standard-01")
    doc = buildrecord.world_determining(resolved.cfg)
    assert set(doc) == set(config.to_plain(resolved.cfg)) - skipped
    assert doc == buildrecord.world_determining(config.to_plain(resolved.cfg))  # a plain config too
    assert doc["world"]["seed"] == resolved.cfg.world.seed


@pytest.mark.parametrize("world", ["standard-01", "null-01", "hard-01", "screening-01", "heldout-dcm-01"])
def test_the_build_records_digest_is_over_it(world, seeds_file):
    resolved = load(world, f"seeds={seeds_file}")
    doc = buildrecord.world_determining(resolved.cfg)
    doc["world"].pop("seed")
    assert buildrecord.config_digest(resolved.cfg) == sha(doc)
    # where it runs and where it is written change no byte of the world, nor the digest
    moved = load(world, f"seeds={seeds_file}", "cluster=local", "cluster.n_workers=3", out="/tmp/elsewhere")
    assert buildrecord.config_digest(moved.cfg) == buildrecord.config_digest(resolved.cfg)


def test_a_world_field_changes_the_digest():
    a, b = load("standard-01"), load("standard-01", "world.n_drivers=2")
    assert buildrecord.config_digest(a.cfg) != buildrecord.config_digest(b.cfg)


def test_resumption_matches_it_with_the_seed(tmp_path):
    from pipeline.graph.steps import prepare_work
    from pipeline.outputs import Output

    resolved = load("standard-01", out=str(tmp_path))
    assert buildrecord.resume_doc(resolved) == {**buildrecord.world_determining(resolved.cfg), "seed": str(resolved.seed)}
    output = Output(str(tmp_path), "standard-01")
    assert prepare_work(output, resolved) is False  # nothing to resume: a fresh .build/
    state = json.loads((tmp_path / "standard-01" / ".build" / "state.json").read_text())
    assert state["digest"] == hashlib.sha256(json.dumps(buildrecord.resume_doc(resolved), sort_keys=True).encode()).hexdigest()
    assert prepare_work(output, resolved) is True
    assert prepare_work(output, load("standard-01", "world.n_drivers=2", out=str(tmp_path))) is False


def test_the_sealed_world_record_is_it_with_the_seed_and_rebuilds_the_config(tmp_path):
    from pipeline.writers.sealed import world_record

    resolved = load("standard-01")
    record = world_record(config.to_plain(resolved.cfg), resolved.seed)
    assert {k: v for k, v in record.items() if k not in config.RECORD_ONLY} == buildrecord.world_determining(resolved.cfg)
    assert record["seed_int"] == str(resolved.seed) and record["generator_version"] == __version__
    again = config.from_record(yaml.safe_dump(record, sort_keys=True), out=str(tmp_path))
    assert buildrecord.config_digest(again.cfg) == buildrecord.config_digest(resolved.cfg) and again.seed == resolved.seed


def test_the_screening_record_narrows_it():
    from pipeline.screening.config import world_determining

    resolved = load("screening-01")
    shared = buildrecord.world_determining(resolved.cfg)
    record = world_determining(resolved)
    assert record == {"world": {**shared["world"], "conformations": resolved.n, "seed": hex(resolved.seed)},
                      "scale": shared["scale"]["name"], "release": {"format": "screening/1"}}


def _fake_build(world_dir, digest: str, record: dict | None = None) -> None:
    for bundle in ("release", "sealed"):
        (world_dir / bundle).mkdir(parents=True)
        (world_dir / bundle / "MANIFEST.json").write_text("{}")
    # as pipeline.buildrecord writes it: its format_version (checked on read) and the config digest
    (world_dir / "build-record.json").write_text(json.dumps({"format_version": FORMAT_VERSION, "config_sha256": digest}))
    if record is not None:
        (world_dir / "sealed" / "world.yaml").write_text(yaml.safe_dump(record, sort_keys=True))


def test_the_evaluations_world_digest_is_the_build_records(tmp_path):
    from pipeline.evaluate import settings
    from pipeline.writers.sealed import world_record

    worlds_out = tmp_path / "worlds"
    overrides = [f"worlds_out={worlds_out}", f"out={tmp_path / 'eval'}", "worlds=[standard-01]", "scale=tiny",
                 "agents=[null]"]
    plan = settings.prepare(overrides)
    (world,) = plan.worlds
    assert world.config_digest == buildrecord.config_digest(world.resolved.cfg) and not world.present
    plain = config.to_plain(world.resolved.cfg)
    _fake_build(worlds_out / "standard-01", world.config_digest, world_record(plain, world.resolved.seed))
    assert settings.config_difference(worlds_out / "standard-01", world.resolved) == ""
    assert settings.prepare(overrides).worlds[0].present
    other = load("standard-01", "world.n_drivers=2")
    assert settings.config_difference(worlds_out / "standard-01", other).startswith("world.n_drivers: built 3, wanted 2")
    with pytest.raises(config.ConfigError, match="holds a build of another configuration"):
        settings.prepare([*overrides, "oracle.realism=true"])  # a world-determining option the evaluation sets


def test_the_training_worlds_cache_key_is_over_it():
    from pipeline.frameworks import worlds

    resolved = load("standard-01")
    text = f"{__version__}\0{buildrecord.config_digest(resolved.cfg)}\0{resolved.seed:x}"
    assert worlds.world_key(resolved) == hashlib.sha256(text.encode()).hexdigest()[:24]
