"""The one append-only JSON Lines ledger every kind's oracle keeps (SPEC section 7).

A ledger is the harness's own record of what an episode was charged and given; the
scorer trusts it and nothing the agent wrote.  Each row is one JSON object on one line,
written, flushed and fsynced before the caller hands out what the row records, so the
file never claims less than was handed out.  Opening an existing file resumes it: its
rows are read back (the caller replays them into its state), and a final row cut short
by a crash — an unterminated fragment — is truncated away, since whatever it recorded
was never handed out.  A complete line that is not a JSON object is not a row this
module wrote: resuming from such a file is refused (``LedgerError``), never guessed.

    ledger = JsonlLedger(path, header={"format": "screening-ledger/1", "action": "open", ...})
    for row in ledger.rows: ...            # resumed rows (the header first, when written)
    ledger.append({"action": "labels", ...})

``read_rows(path)`` reads a ledger for the scorer with the same rules, without changing
the file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional, Union


class LedgerError(RuntimeError):
    """The file is not a ledger this module wrote; it is not resumed."""


def _parse(raw: bytes, path) -> tuple[list[tuple[int, dict]], int]:
    """(line number, row) pairs and the byte length of an unterminated final fragment (0 if none)."""
    lines = raw.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    rows = []
    for lineno, line in enumerate(complete, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise LedgerError(f"{path}:{lineno}: not a ledger row") from None
        if not isinstance(row, dict):
            raise LedgerError(f"{path}:{lineno}: not a ledger row")
        rows.append((lineno, row))
    return rows, len(tail) if tail.strip() else 0


def read_rows(path: Union[str, os.PathLike]) -> list[dict]:
    """The complete rows of a ledger file (an unterminated final fragment is ignored)."""
    rows, _ = _parse(Path(path).read_bytes(), path)
    return [row for _, row in rows]


class JsonlLedger:
    """An append-only JSON Lines file: resumed on open, torn tail dropped, every row durable.

    ``header`` is written as the first row of a new (absent or empty) file; a
    resumed file keeps its own.  ``rows`` holds every row, resumed ones first;
    ``numbered`` the same with their line numbers (for error messages).
    """

    def __init__(self, path: Union[str, os.PathLike], *, header: Optional[dict] = None, sort_keys: bool = False):
        self.path = Path(path)
        self.sort_keys = sort_keys
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.numbered: list[tuple[int, dict]] = []
        self.resumed = False
        if self.path.exists() and self.path.stat().st_size:
            raw = self.path.read_bytes()
            self.numbered, tail = _parse(raw, self.path)
            if tail:
                # Crash mid-append: the row never completed, so what it records was never handed out.
                with open(self.path, "r+b") as handle:
                    handle.truncate(len(raw) - tail)
            self.resumed = True
        else:
            self.path.touch()
            if header is not None:
                self.append(header)

    @property
    def rows(self) -> list[dict]:
        return [row for _, row in self.numbered]

    def append(self, row: dict) -> None:
        line = json.dumps(row, sort_keys=self.sort_keys, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        self.numbered.append((len(self.numbered) + 1, row))
