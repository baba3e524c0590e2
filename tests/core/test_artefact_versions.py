"""Every persisted artefact carries the version it was written with, and a reader meeting
another version stops with one error naming the file, the version found and the one
expected (``pipeline.formats``); a known older version is read.  No world is built here."""
from __future__ import annotations

import importlib.util
import json
import pickle
from pathlib import Path

import pytest

from pipeline.formats import FormatError, check_format

REPO = Path(__file__).resolve().parents[2]


def _says(error, path, found, expected) -> None:
    text = str(error.value)
    assert "\n" not in text and str(path) in text and repr(found) in text and repr(expected) in text, text


def test_check_format_reads_its_own_and_known_older_versions_only(tmp_path):
    where = tmp_path / "x.json"
    assert check_format("f/2", "f/2", where) == "f/2"
    assert check_format("f/1", "f/2", where, older=("f/1",)) == "f/1"
    with pytest.raises(FormatError) as caught:
        check_format("f/3", "f/2", where, older=("f/1",))
    _says(caught, where, "f/3", "f/2")
    assert "'f/1'" in str(caught.value)
    with pytest.raises(KeyError):  # the error class is the caller's
        check_format(None, "f/2", where, error=KeyError)


def _score_json(episode_dir: Path) -> dict:
    return {
        "target_identification": 20.0, "causal_confidence": 12.5, "bias_identification": 7.5,
        "intervention_direction": 10.0, "phenotype_construction": 4.0, "safety_penalty": -30.0,
        "total": 24.0, "total_unclipped": 24.0,
        "details": {"world_id": "standard-01", "submission": {"status": "parsed"}},
        "episode": {"world_id": "standard-01", "agent": "a", "budget": 0.0, "exit_reason": "turn_limit",
                    "turns_used": 1, "max_turns": 30, "scored_from": "work", "episode_dir": str(episode_dir),
                    "transcript": str(episode_dir / "transcript.json")},
    }


@pytest.mark.parametrize("fmt", ["drugtargetworld-transcript/1", "drugtargetworld-transcript/3", None])
def test_a_transcript_of_another_version_is_refused_naming_it(tmp_path, fmt):
    from pipeline.evaluate.records import RecordError, record_from_score
    from pipeline.harness.core import TRANSCRIPT_FORMAT

    transcript = tmp_path / "transcript.json"
    doc = {"turns": [{"turn": 1, "code_source": "none"}]}
    if fmt is not None:
        doc["format"] = fmt
    transcript.write_text(json.dumps(doc))
    kwargs = dict(world="standard-01", kind="biobank", archetype=None, agent="a", budget=0.0, trial=0,
                  fixed_labels_total=0.0, ledger=None)
    with pytest.raises(RecordError) as caught:
        record_from_score(_score_json(tmp_path), **kwargs)
    if fmt is None:  # a transcript that names no format
        assert str(transcript) in str(caught.value) and "format none" in str(caught.value)
        assert repr(TRANSCRIPT_FORMAT) in str(caught.value)
    else:
        _says(caught, transcript, fmt, TRANSCRIPT_FORMAT)
    doc["format"] = TRANSCRIPT_FORMAT
    transcript.write_text(json.dumps(doc))
    assert record_from_score(_score_json(tmp_path), **kwargs)["no_code_turns"] == 1


def test_evaluation_json_of_another_version_stops_the_run(tmp_path):
    from pipeline.evaluate.store import EVALUATE_FORMAT, EVALUATION, EvaluationError, read_evaluation

    assert read_evaluation(tmp_path) == {}  # a first run
    path = tmp_path / EVALUATION
    path.write_text(json.dumps({"format": EVALUATE_FORMAT, "worlds": {}}))
    assert read_evaluation(tmp_path)["worlds"] == {}
    path.write_text(json.dumps({"format": "drugtargetworld-evaluate/2", "worlds": {}}))
    with pytest.raises(EvaluationError) as caught:
        read_evaluation(tmp_path)
    _says(caught, path, "drugtargetworld-evaluate/2", EVALUATE_FORMAT)


def test_episode_records_of_another_record_format_are_refused_with_file_and_line(tmp_path):
    from pipeline.evaluate.records import RECORD_FORMAT, RecordError, load_records

    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps({"record_format": RECORD_FORMAT, "kind": "biobank"}) + "\n"
                    + json.dumps({"record_format": "drugtargetworld-evaluation-record/2", "kind": "biobank"}) + "\n")
    with pytest.raises(RecordError) as caught:
        load_records(path)
    _says(caught, f"{path}:2", "drugtargetworld-evaluation-record/2", RECORD_FORMAT)
    path.write_text(json.dumps({"record_format": RECORD_FORMAT, "kind": "biobank"}) + "\n")
    assert len(load_records(path)) == 1


def test_a_build_record_of_another_format_version_is_refused(tmp_path):
    from pipeline import FORMAT_VERSION
    from pipeline.buildrecord import RECORD, read
    from pipeline.config_schema import ConfigError
    from pipeline.evaluate.settings import read_build_record

    assert read(tmp_path) is None and read_build_record(tmp_path) is None  # absent: not built
    path = tmp_path / RECORD
    path.write_text(json.dumps({"format_version": FORMAT_VERSION, "config_sha256": "abc"}))
    assert read(tmp_path)["config_sha256"] == "abc"
    path.write_text(json.dumps({"format_version": "99", "config_sha256": "abc"}))
    with pytest.raises(FormatError) as caught:
        read(tmp_path)
    _says(caught, path, "99", FORMAT_VERSION)
    with pytest.raises(ConfigError) as caught:
        read_build_record(tmp_path)
    _says(caught, path, "99", FORMAT_VERSION)


def test_the_build_state_carries_its_format_and_refuses_another(tmp_path):
    from pipeline.outputs import BUILD_STATE_FORMAT, Output, resume_or_reset

    output = Output(str(tmp_path), "w")
    doc = {"world": {"id": "w"}}
    assert resume_or_reset(output, doc, clear=(output.work,)) is False  # a fresh build
    state = Path(output.work) / "state.json"
    written = json.loads(state.read_text())
    assert written["format"] == BUILD_STATE_FORMAT
    assert resume_or_reset(output, doc, clear=(output.work,)) is True  # resumed
    state.write_text(json.dumps({"digest": written["digest"]}))  # written before the state had a format
    assert resume_or_reset(output, doc, clear=(output.work,)) is True
    state.write_text(json.dumps({"format": "drugtargetworld-build-state/2", "digest": written["digest"]}))
    with pytest.raises(FormatError) as caught:
        resume_or_reset(output, doc, clear=(output.work,))
    _says(caught, state, "drugtargetworld-build-state/2", BUILD_STATE_FORMAT)
    assert state.is_file()  # another version's work is not deleted


def test_the_tell_scan_cache_is_versioned(tmp_path):
    from pipeline.tells.scan import CACHE_FORMAT, read_cached

    path = tmp_path / "w-key.pkl"
    analysis = {"world": "w", "rows": [1, 2]}
    path.write_bytes(pickle.dumps({"format": CACHE_FORMAT, "analysis": analysis}))
    assert read_cached(str(path)) == analysis
    path.write_bytes(pickle.dumps(analysis))  # an unversioned cache (before the format): the analysis itself
    assert read_cached(str(path)) == analysis
    path.write_bytes(pickle.dumps({"format": "drugtargetworld-tells-cache/9", "analysis": analysis}))
    with pytest.raises(FormatError) as caught:
        read_cached(str(path))
    _says(caught, path, "drugtargetworld-tells-cache/9", CACHE_FORMAT)


def test_a_screening_ledger_of_another_version_is_not_resumed(tmp_path):
    from pipeline.ledger import JsonlLedger, LedgerError
    from pipeline.screening.oracle import LEDGER_FORMAT, LabelOracle

    path = tmp_path / "ledger.jsonl"
    path.write_text(json.dumps({"format": "screening-ledger/2", "action": "open", "budget": 10}) + "\n")
    oracle = LabelOracle.__new__(LabelOracle)  # only the resume step: no world needed
    oracle.path, oracle.file = path, JsonlLedger(path)
    with pytest.raises(LedgerError) as caught:
        oracle._replay()
    _says(caught, path, "screening-ledger/2", LEDGER_FORMAT)


def test_the_validity_panel_store_is_versioned(tmp_path):
    spec = importlib.util.spec_from_file_location("validity_panel_under_test", REPO / "scripts" / "validity_panel.py")
    panel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(panel)
    path = tmp_path / "w.pkl"
    path.write_bytes(pickle.dumps({"format": panel.STORE_FORMAT, "digest": "d"}))
    assert panel.read_kept(path)["digest"] == "d"
    path.write_bytes(pickle.dumps({"digest": "d"}))  # kept before the store had a format
    assert panel.read_kept(path)["digest"] == "d"
    path.write_bytes(pickle.dumps({"format": "drugtargetworld-validity-analysis/0", "digest": "d"}))
    with pytest.raises(FormatError) as caught:
        panel.read_kept(path)
    _says(caught, path, "drugtargetworld-validity-analysis/0", panel.STORE_FORMAT)
    # its code digest follows every file of the statistics library (split over several modules)
    from pipeline.tells import features

    assert len(features.source_files()) > 1 and all(Path(p).is_file() for p in features.source_files())
