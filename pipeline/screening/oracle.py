"""The label oracle and the submission ledger of a screening episode (harness side).

Labels are requested in batches of ids.  A batch is answered in full or
refused in full: unknown ids (nothing charged, the first few named), or more
new ids than the budget has left (refused with what remains).  Ids labelled
before cost nothing and are answered from the ledger; an id repeated inside a
batch is charged once.  Up to ``max_submissions`` submissions of at most
``submission_size`` distinct, known ids are each answered with their overlap
with the true top-K; a refused submission (unknown or duplicate ids, too
many ids, none at all, one past the limit) costs nothing and is recorded.
Every request, granted or refused, is one row of the ledger (JSON Lines),
which the scorer reads; the agent never sees the ledger file.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

import numpy as np

from ..formats import check_format
from ..ledger import JsonlLedger, LedgerError
from .bundle import read_sealed

LEDGER_FORMAT = "screening-ledger/1"
_ID = re.compile(r"C([0-9]{6,7})")  # ASCII digits only, the whole string (fullmatch)
NAMED_IN_REFUSAL = 5


def parse_ids(values: Iterable, n: int, width: int) -> tuple[np.ndarray, list]:
    """Row indices of conformation ids, and the ids that are not in the library."""
    rows, unknown = [], []
    for v in values:
        m = _ID.fullmatch(v) if isinstance(v, str) else None
        if m is None or len(m.group(1)) != width or int(m.group(1)) >= n:
            unknown.append(v if isinstance(v, str) else repr(v))
        else:
            rows.append(int(m.group(1)))
    return np.array(rows, dtype=np.int64), unknown


def _named(items: list) -> str:
    # Escaped: an id is the agent's text, and a refusal is shown in observations and written to WORK.
    shown = ", ".join(str(x)[:40].encode("unicode_escape").decode("ascii") for x in items[:NAMED_IN_REFUSAL])
    more = f" and {len(items) - NAMED_IN_REFUSAL} more" if len(items) > NAMED_IN_REFUSAL else ""
    return shown + more


class LabelOracle:
    """Budget, labels and submissions of one episode, recorded in ``ledger_path``."""

    def __init__(self, sealed_dir, ledger_path, budget: Optional[int] = None):
        sealed = read_sealed(sealed_dir)
        o = sealed["oracle"]
        self.n = int(o["conformations"])
        self.width = max(6, len(str(self.n - 1)))
        self.budget = int(o["budget"] if budget is None else budget)
        self.top_k = int(o["top_k"])
        self.submission_size = int(o["submission_size"])
        self.max_submissions = int(o["max_submissions"])
        self._score = sealed["score"]
        top_rows, _ = parse_ids(sealed["topk"], self.n, self.width)
        self._top = np.zeros(self.n, dtype=bool)
        self._top[top_rows] = True
        self.labelled = np.zeros(self.n, dtype=bool)
        self.submissions: list[dict] = []
        self.path = Path(ledger_path)
        header = {"format": LEDGER_FORMAT, "action": "open", "budget": self.budget, "top_k": self.top_k,
                  "submission_size": self.submission_size, "max_submissions": self.max_submissions,
                  "conformations": self.n}
        # Append-only and resumable (pipeline.ledger): an existing ledger's labels and accepted
        # submissions are replayed, so a resumed episode is charged and scored exactly as before.
        self.file = JsonlLedger(self.path, header=header)
        self._replay()

    def _replay(self) -> None:
        rows = self.file.numbered
        if rows and rows[0][1].get("action") == "open" and "format" in rows[0][1]:
            check_format(rows[0][1]["format"], LEDGER_FORMAT, self.path, error=LedgerError)  # another version's ledger
        if not rows or rows[0][1].get("format") != LEDGER_FORMAT or rows[0][1].get("action") != "open":
            raise LedgerError(f"{self.path}: not a screening ledger (no '{LEDGER_FORMAT}' open row); not resumed")
        opened = rows[0][1]
        for key in ("budget", "top_k", "submission_size", "max_submissions", "conformations"):
            if opened.get(key) != getattr(self, "n" if key == "conformations" else key):
                raise LedgerError(f"{self.path}: opened with {key}={opened.get(key)!r}, this world has "
                                  f"{getattr(self, 'n' if key == 'conformations' else key)!r}; not resumed")
        for lineno, row in rows[1:]:
            if row.get("status") != "ok":
                continue
            try:
                if row.get("action") == "labels":
                    self.labelled[np.asarray(row["rows"], dtype=np.int64)] = True
                elif row.get("action") == "submit":
                    self.submissions.append({k: row[k] for k in ("index", "turn", "size", "overlap", "score")})
            except (KeyError, TypeError, ValueError, IndexError):
                raise LedgerError(f"{self.path}:{lineno}: not a screening ledger row; not resumed") from None

    @property
    def used(self) -> int:
        return int(self.labelled.sum())

    @property
    def remaining(self) -> int:
        return self.budget - self.used

    @property
    def submissions_left(self) -> int:
        return self.max_submissions - len(self.submissions)

    def _record(self, row: dict) -> None:
        self.file.append(row)

    def request_labels(self, ids: list, turn: int) -> dict:
        """Answer a batch of label requests (all or nothing); returns the payload for the agent."""
        if not isinstance(ids, list) or not ids:
            return self._refuse_labels(turn, 0, "a label request is a non-empty list of conformation ids")
        rows, unknown = parse_ids(ids, self.n, self.width)
        if unknown:
            return self._refuse_labels(turn, len(ids), f"{len(unknown)} unknown id(s): {_named(unknown)}; nothing was charged")
        uniq = np.unique(rows)
        new = uniq[~self.labelled[uniq]]
        if len(new) > self.remaining:
            return self._refuse_labels(turn, len(ids), f"{len(new):,} new labels requested but {self.remaining:,} of the "
                                                       f"{self.budget:,}-label budget remain; nothing was charged")
        self.labelled[new] = True
        self._record({"action": "labels", "status": "ok", "turn": turn, "requested": len(ids), "distinct": int(len(uniq)),
                      "charged": int(len(new)), "repeats": int(len(uniq) - len(new)), "remaining": self.remaining,
                      "rows": new.tolist()})
        labels = {f"C{r:0{self.width}d}": float(self._score[r]) for r in uniq}
        return {"status": "ok", "labels": labels, "charged": int(len(new)), "repeats": int(len(uniq) - len(new)),
                "remaining": self.remaining}

    def _refuse_labels(self, turn: int, requested: int, reason: str) -> dict:
        self._record({"action": "labels", "status": "refused", "turn": turn, "requested": requested, "reason": reason,
                      "remaining": self.remaining})
        return {"status": "refused", "reason": reason, "labels": {}, "charged": 0, "remaining": self.remaining}

    def submit(self, ids: list, turn: int) -> dict:
        """Score one submission against the top-K, or refuse it; returns the payload for the agent."""
        reason = None
        rows = np.empty(0, dtype=np.int64)
        if self.submissions_left <= 0:
            reason = f"all {self.max_submissions} submissions are used; this one was not scored"
        elif not isinstance(ids, list) or not ids:
            reason = "a submission is a non-empty list of conformation ids"
        elif len(ids) > self.submission_size:
            reason = f"{len(ids):,} ids submitted; at most {self.submission_size:,} are allowed"
        else:
            rows, unknown = parse_ids(ids, self.n, self.width)
            if unknown:
                reason = f"{len(unknown)} unknown id(s): {_named(unknown)}"
            elif len(np.unique(rows)) != len(rows):
                seen, dup = set(), []
                for r in rows.tolist():
                    if r in seen:
                        dup.append(f"C{r:0{self.width}d}")
                    seen.add(r)
                reason = f"{len(dup)} duplicate id(s): {_named(dup)}"
        if reason is not None:
            self._record({"action": "submit", "status": "refused", "turn": turn,
                          "size": len(ids) if isinstance(ids, list) else None, "reason": reason,
                          "submissions_left": self.submissions_left})
            return {"status": "refused", "reason": reason, "submissions_left": self.submissions_left}
        overlap = int(self._top[rows].sum())
        entry = {"index": len(self.submissions) + 1, "turn": turn, "size": int(len(rows)), "overlap": overlap,
                 "score": 100.0 * overlap / self.top_k}
        self.submissions.append(entry)
        self._record({"action": "submit", "status": "ok", **entry, "rows": rows.tolist(),
                      "submissions_left": self.submissions_left})
        return {"status": "ok", **entry, "top_k": self.top_k, "submissions_left": self.submissions_left}

    @property
    def best(self) -> float:
        return max((s["score"] for s in self.submissions), default=0.0)
