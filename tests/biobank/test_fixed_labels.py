"""S11 C, the fixed-label re-score (pipeline.evaluate.records), on a real tiny world: the
totals agree with the project's scorer on a hand-relabelled copy of the submission
(moved from tests/core/test_evaluate_stats.py, which builds no world)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.evaluate import RecordError, record_from_score
from pipeline.evaluate.records import fixed_labels_score, fixed_labels_total


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        digest.update(f"{path.relative_to(folder)}:{stat.st_mode}:{stat.st_mtime_ns}".encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_fixed_labels_total_rescores_with_the_real_scorer(tiny_world_noimaging, tmp_path):
    from pipeline.score import score_episode
    from pipeline.score.sealed import load_latent, load_truth

    sealed = Path(tiny_world_noimaging) / "sealed"
    truth = load_truth(sealed)
    activating = [d["protein"] for d in truth["drivers"] if d["direction"] == "activate"]
    inhibiting = [d["protein"] for d in truth["drivers"] if d["direction"] == "inhibit"]
    driver = (activating or inhibiting)[0]
    wrong = "inhibit" if driver in activating else "activate"
    surrogate = truth["surrogate"]
    submission = {"nominated": [driver, surrogate], "directions": {driver: wrong, surrogate: "activate"},
                  "outcome_alignment": {surrogate: "misaligned"}, "confidence": 0.5}
    work = tmp_path / "work"
    work.mkdir()
    (work / "submission.json").write_text(json.dumps(submission))
    latent = load_latent(sealed, {})
    noise = np.random.default_rng(0).normal(0, 0.5, len(latent))
    pd.DataFrame({"subject_id": latent.index, "phenotype": latent.to_numpy() + noise}).to_csv(
        work / "phenotype.csv", index=False)
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("")
    before = _tree_digest(work)

    original = score_episode(sealed, work, ledger)
    fixed = fixed_labels_score(sealed, work, ledger)
    assert _tree_digest(work) == before  # WORK untouched

    by_hand = tmp_path / "by_hand"
    by_hand.mkdir()
    (by_hand / "phenotype.csv").write_bytes((work / "phenotype.csv").read_bytes())
    (by_hand / "submission.json").write_text(json.dumps({
        **submission, "directions": {driver: "inhibit", surrogate: "inhibit"},
        "outcome_alignment": {driver: "aligned", surrogate: "aligned"}}))
    expected = score_episode(sealed, by_hand, ledger)
    assert fixed_labels_total(sealed, work, ledger) == expected["total"] == fixed["total"]
    assert original["safety_penalty"] == 0.0 and fixed["safety_penalty"] == -30.0  # "aligned" trips the penalty
    for key in ("target_identification", "bias_identification", "phenotype_construction"):
        assert fixed[key] == original[key]
    assert original["phenotype_construction"] > 0  # the phenotype was read, and held fixed
    assert fixed_labels_total(sealed, work, ledger, paper_compat=True) == \
        score_episode(sealed, by_hand, ledger, paper_compat=True)["total"]

    # record_from_score computes it from the scored folder named in score.json
    episode_dir = tmp_path
    score = {**original, "episode": {"world_id": original["details"]["world_id"], "budget": 0.0,
                                     "exit_reason": "submitted", "scored_from": "work",
                                     "episode_dir": str(episode_dir), "ledger": str(ledger), "turns_used": 1}}
    record = record_from_score(score, world=original["details"]["world_id"], kind="biobank", archetype=None,
                               agent="hand", budget=0, trial=0, sealed_dir=sealed, transcript=None)
    assert record["fixed_labels_total"] == expected["total"]
    crashed = {**score, "episode": {**score["episode"], "exit_reason": "runner_crash", "scored_from": None}}
    assert record_from_score(crashed, world=record["world"], kind="biobank", archetype=None, agent="hand",
                             budget=0, trial=0, sealed_dir=sealed, transcript=None)["fixed_labels_total"] == 0.0
    with pytest.raises(RecordError, match="not a folder"):
        fixed_labels_total(sealed, tmp_path / "nowhere", ledger)
    assert sorted(os.listdir(work)) == ["phenotype.csv", "submission.json"]
