"""The world-kind seam (pipeline.kinds): a second kind, the tests' toy kind
(tests/toy_kind.py), plugs in without touching the biobank kind and runs through
config, build, score, one episode in the sandbox, validation and the audit, all by
the project's own entry points."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import bundle, kinds

import toy_kind


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    kinds.register(toy_kind.KIND)
    try:
        yield tmp_path_factory.mktemp("toy")
    finally:
        kinds.unregister(toy_kind.NAME)


@pytest.fixture(scope="module")
def toy_world(toy):
    from pipeline import config
    from pipeline.build import build

    resolved = config.load(["world=toy-01", f"out={toy / 'worlds'}"])
    assert resolved.kind == toy_kind.NAME and kinds.for_resolved(resolved) is toy_kind.KIND
    summary = build(resolved, progress=False)
    assert summary["files"] == 2
    return Path(summary["release"]).parent


def test_a_kind_must_supply_every_part():
    with pytest.raises(TypeError, match="missing score_episode"):
        kinds.register(type("Half", (), {"name": "half", **{k: None for k in kinds.REQUIRED if k != "score_episode"}})())
    with pytest.raises(ValueError, match="'biobank' is already registered"):
        kinds.register(kinds.WorldKind(**{**{k: None for k in kinds.REQUIRED}, "name": "biobank"}))


def test_build_writes_the_bundle_layout(toy_world):
    assert bundle.verify(toy_world / bundle.RELEASE) == []
    assert bundle.verify(toy_world / bundle.SEALED, bundle.SEALED) == []
    assert kinds.for_world(toy_world) is toy_kind.KIND
    assert kinds.for_sealed(toy_world / bundle.SEALED) is toy_kind.KIND


def test_a_biobank_world_stays_biobank(toy, tmp_path):
    """What no other kind claims is the fallback's: a biobank truth, or no folder at all."""
    sealed = tmp_path / "w" / bundle.SEALED
    sealed.mkdir(parents=True)
    (sealed / bundle.TRUTH).write_text(json.dumps({"world_id": "w", "drivers": [], "decoys": []}))
    assert kinds.for_world(tmp_path / "w") is kinds.BIOBANK
    assert kinds.for_sealed(sealed) is kinds.BIOBANK
    assert kinds.for_sealed(tmp_path / "nothing") is kinds.BIOBANK


def test_score_cli_dispatches_to_the_kind(toy_world, tmp_path, capsys):
    from pipeline.score import main

    truth = json.loads((toy_world / bundle.SEALED / bundle.TRUTH).read_text())
    (tmp_path / "submission.json").write_text(json.dumps({"driver": truth["driver"]}))
    assert main(["--sealed", str(toy_world / bundle.SEALED), "--work", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 1.0
    (tmp_path / "submission.json").write_text(json.dumps({"driver": "nope"}))
    assert main(["--sealed", str(toy_world / bundle.SEALED), "--work", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 0.0


def test_oracle_reports_the_driver(toy_world):
    truth = json.loads((toy_world / bundle.SEALED / bundle.TRUTH).read_text())
    effects = {f: toy_kind.experiment(toy_world / bundle.SEALED, f) for f in truth["features"]}
    # assay noise SD 0.05: the driver's 0.8 and the others' 0 are 16 SD apart
    assert max(effects, key=lambda f: abs(effects[f])) == truth["driver"]


def test_one_episode_through_the_shared_core(toy_world, tmp_path):
    """The toy kind supplies only its tools, prompt, oracle and scorer; the episode is the core's."""
    from pipeline.episode import main

    assert main([f"world_dir={toy_world}", "agent=scripted", f"out={tmp_path / 'ep'}"]) == 0
    result = json.loads((tmp_path / "ep" / "score.json").read_text())
    assert result["score"] == 1.0 and result["episode"]["kind"] == toy_kind.NAME, result
    assert result["episode"]["exit_reason"] == "submitted"
    transcript = json.loads((tmp_path / "ep" / "transcript.json").read_text())
    assert transcript["kind"] == toy_kind.NAME and transcript["turns"][0]["status"] == "ran"


def test_validate_and_audit_dispatch_to_the_kind(toy_world, capsys):
    from pipeline.audit import main as audit_main
    from pipeline.validate import main as validate_main

    assert validate_main([str(toy_world)]) == 0
    assert json.loads(capsys.readouterr().out)["passed"]
    assert audit_main([str(toy_world)]) == 0
    assert json.loads(capsys.readouterr().out)["passed"]
