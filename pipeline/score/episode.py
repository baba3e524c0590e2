"""``score_episode``: read a sealed bundle and a work folder, score, and say in the
details where each input came from."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .core import score
from .sealed import load_baseline, load_eval_mask, load_imaged, load_latent, load_truth, load_valid_proteins
from .work import load_experiments, load_phenotype, load_submission


def score_episode(sealed_dir: str | Path, work_dir: str | Path, ledger_path: str | Path | None = None, *,
                  paper_compat: bool = False) -> dict:
    """Read a sealed bundle and a work folder and score the episode.

    Raises SealedBundleError only when truth.json itself is unusable (or the sealed
    manifest names a format this scorer does not read): without the truth no score
    means anything.  Everything the agent wrote is tolerated.  Without ``ledger_path``
    no experiment earns credit (SPEC section 7: which experiments were delivered is the
    harness's record, never the agent's files), and ``warnings`` says so.
    ``paper_compat`` scores the phenotype by S2.5's own rule (the participants given a
    value) instead of on the imaged participants of the eval mask.
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
    imaged = None if paper_compat else load_imaged(sealed, latent, io)

    result = score(truth, submission, phenotype, latent, eval_mask, baseline_b, experiments, valid_proteins,
                   imaged=imaged, paper_compat=paper_compat)
    details = result["details"]
    details["experiments_source"] = io.pop("experiments_source")
    details["submission"]["file"] = io.pop("submission_file")
    details["phenotype_construction"]["file"] = io.pop("phenotype_file")
    details["phenotype_construction"]["baseline_file"] = io.pop("baseline_file")
    if "imaged_source" in io:
        details["phenotype_construction"]["imaged_file"] = io.pop("imaged_source")
    details["warnings"] = io.pop("warnings", []) + details["warnings"]
    return result
