"""``score_episode``: read a sealed bundle and a work folder, score, and say in the
details where each input came from."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .core import score
from .sealed import load_baseline, load_eval_mask, load_latent, load_truth, load_valid_proteins
from .work import load_experiments, load_phenotype, load_submission


def score_episode(sealed_dir: str | Path, work_dir: str | Path, ledger_path: str | Path | None = None) -> dict:
    """Read a sealed bundle and a work folder and score the episode.

    Raises SealedBundleError only when truth.json itself is unusable (or the sealed
    manifest names a format this scorer does not read): without the truth no score
    means anything.  Everything the agent wrote is tolerated.
    """
    sealed, work = Path(sealed_dir), Path(work_dir)
    truth = load_truth(sealed)

    io: dict[str, Any] = {}
    submission = load_submission(work, io)
    phenotype = load_phenotype(work, io)
    experiments = load_experiments(work, Path(ledger_path) if ledger_path is not None else None, io)
    latent = load_latent(sealed, io)
    eval_mask = load_eval_mask(sealed, io)
    baseline_b = load_baseline(sealed, io)
    valid_proteins = load_valid_proteins(sealed, io)

    result = score(truth, submission, phenotype, latent, eval_mask, baseline_b, experiments, valid_proteins)
    details = result["details"]
    details["experiments_source"] = io.pop("experiments_source")
    details["submission"]["file"] = io.pop("submission_file")
    details["phenotype_construction"]["file"] = io.pop("phenotype_file")
    details["phenotype_construction"]["baseline_file"] = io.pop("baseline_file")
    details["warnings"] = io.pop("warnings", []) + details["warnings"]
    return result
