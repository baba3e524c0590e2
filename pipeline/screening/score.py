"""The scorer of a screening episode: |submission ∩ true top-K| / K × 100 %, best submission counting.

``score_submissions`` is the pure core; ``score_episode`` reads the sealed
bundle and the harness's ledger (the record of which submissions were made
and accepted; never a file the agent can write).  Without a ledger no
submission counts (the work folder's ``submissions/`` files are the agent's to
write), and ``details.warnings`` says so.  Malformed input is scored (zero for
what cannot count), never a crash.  ``python -m pipeline.score --sealed DIR --work DIR [--ledger
FILE]`` dispatches here for a screening world.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from .bundle import KIND, read_sealed
from .oracle import parse_ids

SCORE_FORMAT = "screening-score/1"


def score_submissions(submissions: list[list], top_ids: list, n: int, submission_size: int, max_submissions: int) -> dict:
    """Score up to ``max_submissions`` valid submissions (lists of ids) against ``top_ids``."""
    width = max(6, len(str(n - 1)))
    top_rows, _ = parse_ids(top_ids, n, width)
    top = np.zeros(n, dtype=bool)
    top[top_rows] = True
    k = len(top_rows)
    scored, refused = [], []
    for i, ids in enumerate(submissions):
        if len(scored) >= max_submissions:
            refused.append({"position": i + 1, "reason": f"past the {max_submissions}-submission limit"})
            continue
        if not isinstance(ids, list) or not ids:
            refused.append({"position": i + 1, "reason": "not a non-empty list of ids"})
            continue
        if len(ids) > submission_size:
            refused.append({"position": i + 1, "reason": f"{len(ids)} ids; at most {submission_size}"})
            continue
        rows, unknown = parse_ids(ids, n, width)
        if unknown:
            refused.append({"position": i + 1, "reason": f"{len(unknown)} unknown id(s)"})
            continue
        if len(np.unique(rows)) != len(rows):
            refused.append({"position": i + 1, "reason": "duplicate ids"})
            continue
        overlap = int(top[rows].sum())
        scored.append({"index": len(scored) + 1, "size": int(len(rows)), "overlap": overlap, "score": 100.0 * overlap / k})
    best = max(scored, key=lambda s: (s["score"], -s["index"])) if scored else None
    return {"score": best["score"] if best else 0.0, "best_submission": best["index"] if best else None,
            "submissions": scored, "refused": refused, "top_k": k}


def _from_ledger(path: Path) -> tuple[list, dict]:
    """Accepted submissions and label use from the harness's ledger; a damaged line (invalid text,
    not a row) is counted in ``malformed_rows`` and skipped, never a crash."""
    subs, info = [], {"labels_used": 0, "refused_rows": 0, "malformed_rows": 0}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError
                if row.get("action") == "labels" and row.get("status") == "ok":
                    info["labels_used"] += int(row.get("charged", 0))
                elif row.get("action") == "submit" and row.get("status") == "ok":
                    rows = row.get("rows", [])
                    subs.append([int(r) for r in rows] if isinstance(rows, list) else None)
                elif row.get("status") == "refused":
                    info["refused_rows"] += 1
            except (ValueError, TypeError, RecursionError):
                info["malformed_rows"] += 1
    return subs, info


def score_episode(sealed_dir, work_dir, ledger: Optional[str] = None) -> dict:
    sealed = read_sealed(sealed_dir)
    o = sealed["oracle"]
    n = int(o["conformations"])
    width = max(6, len(str(n - 1)))
    details: dict = {"warnings": []}
    if ledger is not None and Path(ledger).is_file():
        rows, info = _from_ledger(Path(ledger))
        submissions = [None if sub is None else [f"C{r:0{width}d}" for r in sub] for sub in rows]
        details["source"] = "ledger"
        details.update(info)
    else:
        # Which submissions were made and accepted is the harness's record, never the agent's files
        # (the biobank scorer's rule for experiments, SPEC section 7): without a ledger none counts.
        submissions = []
        details["source"] = "none: no ledger given, so no submission counts"
        details["warnings"].append("no ledger given (--ledger <episode>/ledger.jsonl): no submission counts; the work "
                                   "folder's submissions/ files are the agent's to write")
    result = score_submissions(submissions, sealed["topk"], n, int(o["submission_size"]), int(o["max_submissions"]))
    result.update(format=SCORE_FORMAT, kind=KIND, world_id=o.get("world_id"), total=result["score"], details=details)
    return result
