"""What the agent left in its work folder, read defensively: ``submission.json``,
``phenotype.csv``; and the harness's ledger of deliveries (without it no experiment
earns credit: the work folder's ``experiments/`` files are the agent's to write).  Every reader caps its input (the agent controls these files, and
a sparse file costs it no disk) and turns any problem into a note, never an exception."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

SUBMISSION = "submission.json"
PHENOTYPE = "phenotype.csv"
EXPERIMENTS = "experiments"

# Input caps: the agent controls these files, and a sparse file costs it no disk.
SUBMISSION_MAX_BYTES = 64 * 1024 * 1024
PHENOTYPE_MAX_BYTES = 64 * 1024 * 1024  # a 500,000-participant phenotype is ~20 MB
PHENOTYPE_MAX_ROWS = 2_000_000


class InputTooLarge(ValueError):
    """An agent-written file past its cap: scored as absent, with the reason."""


def inside(path: Path, root: Path) -> bool:
    # S2.5: the phenotype must reside in the approved submission directory; a symlink
    # out of WORK is not a file the agent wrote there.
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def read_json(path: Path, cap: int | None = None) -> Any:
    with open(path, "rb") as handle:
        if cap is not None and os.fstat(handle.fileno()).st_size > cap:
            raise InputTooLarge(f"{os.fstat(handle.fileno()).st_size} bytes, more than the {cap} allowed")
        data = handle.read() if cap is None else handle.read(cap + 1)
    if cap is not None and len(data) > cap:
        raise InputTooLarge(f"more than the {cap} bytes allowed")
    return json.loads(data.decode("utf-8"))


def load_submission(work: Path, io: dict) -> Any:
    path = work / SUBMISSION
    if not path.exists():
        io["submission_file"] = "absent"
        return None
    if not inside(path, work) or not path.is_file():
        io["submission_file"] = "not a regular file inside the work folder; ignored"
        return None
    try:
        parsed = read_json(path, SUBMISSION_MAX_BYTES)
    except InputTooLarge as error:
        io["submission_file"] = f"too large ({error}); scored as empty"
        return None
    except (OSError, ValueError, RecursionError, UnicodeDecodeError) as error:
        io["submission_file"] = f"unparseable ({type(error).__name__}); scored as empty"
        return None
    io["submission_file"] = "parsed"
    return parsed


def load_phenotype(work: Path, io: dict) -> pd.DataFrame | None:
    path = work / PHENOTYPE
    if not path.exists():
        io["phenotype_file"] = "absent"
        return None
    if not inside(path, work) or not path.is_file():
        io["phenotype_file"] = "not a regular file inside the work folder; zero credit"
        return None
    try:
        size = path.stat().st_size
    except OSError as error:
        io["phenotype_file"] = f"unreadable ({type(error).__name__}); zero credit"
        return None
    if size > PHENOTYPE_MAX_BYTES:
        io["phenotype_file"] = f"too large ({size} bytes, more than the {PHENOTYPE_MAX_BYTES} allowed); zero credit"
        return None
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, encoding_errors="replace",
                            nrows=PHENOTYPE_MAX_ROWS + 1)
        if len(table) > PHENOTYPE_MAX_ROWS:
            io["phenotype_file"] = f"too many rows (more than {PHENOTYPE_MAX_ROWS}); zero credit"
            return None
    except Exception as error:  # pandas raises a wide family (ParserError, EmptyDataError, MemoryError...)
        io["phenotype_file"] = f"unreadable as CSV ({type(error).__name__}); zero credit"
        return None
    io["phenotype_file"] = "read"
    return table


def load_experiments(work: Path, ledger: Path | None, io: dict) -> list[dict]:
    if ledger is not None:
        # The ledger is the harness's own record; when it is named but unreadable the
        # agent-writable experiments folder is not trusted in its place.
        io["experiments_source"] = f"ledger ({ledger})"
        delivered = []
        try:
            lines = ledger.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as error:
            io["experiments_source"] = f"ledger ({ledger}) unreadable ({type(error).__name__}); no deliveries counted"
            return []
        bad = 0
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                bad += 1
                continue
            if not isinstance(record, dict):
                bad += 1
                continue
            if record.get("status") == "delivered":
                delivered.append({"kind": record.get("kind"), "protein": record.get("protein")})
        if bad:
            io.setdefault("warnings", []).append(f"ledger: {bad} malformed line(s) skipped")
        return delivered

    # SPEC section 7: which experiments were delivered is read from the harness's ledger, never
    # from files the agent could write; without one no experiment earns credit.
    io["experiments_source"] = "none: no ledger given, so no experiment earns credit"
    folder = work / EXPERIMENTS
    try:
        present = folder.is_dir() and not folder.is_symlink() and any(folder.glob("*.json"))
    except OSError:
        present = False
    io.setdefault("warnings", []).append(
        "no ledger given (--ledger <episode>/ledger.jsonl): experiment-based credit is zero"
        + (f"; the {EXPERIMENTS}/ files in the work folder are the agent's to write and are not counted" if present else ""))
    return []
