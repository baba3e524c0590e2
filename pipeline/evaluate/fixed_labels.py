"""Table S11 C (``pipeline.evaluate.records``): an episode's WORK re-scored with every
direction "inhibit" and every outcome alignment "aligned", WORK itself never written.

One job: the fixed-label re-score of one biobank episode.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional

from .fields import PathLike, RecordError


def fixed_label_submission(submission: Any) -> Any:
    """The submission with every direction "inhibit" and every outcome alignment "aligned".

    Every protein named in ``nominated`` (as a string or as ``{"protein": ...}``) or already
    keyed in ``directions`` / ``outcome_alignment`` gets the fixed labels; everything else
    (nominations and their ranks, rejections, abstentions, confidence) is kept, so the scorer's
    intake (which drops invalid identifiers) sees the same claims.  Table S11 C holds target
    selection, experiments, abstentions, rejections and phenotype fixed.  Anything that is not
    a JSON object is returned unchanged (it scores as an empty submission either way).
    """
    if not isinstance(submission, Mapping):
        return submission
    proteins: list = []
    nominated = submission.get("nominated")
    for entry in nominated if isinstance(nominated, list) else []:
        protein = entry.get("protein") if isinstance(entry, Mapping) else entry
        if isinstance(protein, str):
            proteins.append(protein)
    for key in ("directions", "outcome_alignment"):
        if isinstance(submission.get(key), Mapping):
            proteins.extend(p for p in submission[key] if isinstance(p, str))
    unique = list(dict.fromkeys(proteins))
    fixed = dict(submission)
    fixed["directions"] = {p: "inhibit" for p in unique}
    fixed["outcome_alignment"] = {p: "aligned" for p in unique}
    return fixed


def fixed_labels_score(sealed_dir: PathLike, work_dir: PathLike, ledger_path: Optional[PathLike], *,
                       paper_compat: bool = False) -> dict:
    """The full score of :func:`fixed_labels_total` (the scorer's dictionary).

    WORK is never written: the submission (relabelled by :func:`fixed_label_submission`) and
    the phenotype are copied into a temporary folder, which ``pipeline.score.score_episode``
    scores with the same sealed bundle, ledger and ``paper_compat``.  The submission is read
    with the scorer's own reader (an absent, oversized or unparseable one stays absent), and
    the phenotype is copied only when the scorer would read it (a file inside WORK), so
    everything but the labels scores as it did.
    """
    from ..score import score_episode
    from ..score.work import PHENOTYPE, SUBMISSION, inside, load_submission

    work = Path(work_dir)
    if not work.is_dir():
        raise RecordError(f"work_dir={work_dir}: not a folder; valid: the episode's scored WORK folder")
    if ledger_path is not None and not Path(ledger_path).is_file():
        raise RecordError(f"ledger_path={ledger_path}: no such file; valid: the episode's ledger.jsonl or None")
    submission = load_submission(work, {})
    with tempfile.TemporaryDirectory(prefix="dtw-fixed-labels-") as tmp:
        copy = Path(tmp)
        if submission is not None:
            (copy / SUBMISSION).write_text(json.dumps(fixed_label_submission(submission)), encoding="utf-8")
        phenotype = work / PHENOTYPE
        if phenotype.exists() and inside(phenotype, work) and phenotype.is_file():
            shutil.copyfile(phenotype, copy / PHENOTYPE)
        return score_episode(sealed_dir, copy, ledger_path, paper_compat=paper_compat)


def fixed_labels_total(sealed_dir: PathLike, work_dir: PathLike, ledger_path: Optional[PathLike], *,
                       paper_compat: bool = False) -> float:
    """Table S11 C of one episode: its WORK re-scored with fixed direction and alignment labels.

    Parameters
    ----------
    sealed_dir
        The world's sealed bundle.
    work_dir
        The folder the episode was scored from (``<episode>/work``, or ``<episode>/scored``
        when the harness scored a copy: :func:`scored_work_dir`).  Never modified.
    ledger_path
        The episode's ledger (which experiments were delivered), or None (then, as for the
        scorer, no experiment earns credit).
    paper_compat
        The episode's ``paper_compat`` (the phenotype rule the scorer applied).

    Returns
    -------
    float
        The total (0-100) by ``pipeline.score.score_episode`` with every direction "inhibit"
        and every outcome alignment "aligned" (:func:`fixed_label_submission`).
    """
    return float(fixed_labels_score(sealed_dir, work_dir, ledger_path, paper_compat=paper_compat)["total"])
