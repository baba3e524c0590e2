"""The agent's WORK folder as the episode harness reads it: the submission read with a cap
and without following links, a capped listing with escaped names, and atomic JSON
writes of the harness's own records.  Writes into WORK go through ``safeio``."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Optional

from . import safeio, safejson

LISTING_CAP = 200
SUBMISSION_READ_CAP = 64 * 1024 * 1024


def is_inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def read_submission(work: Path) -> tuple[Optional[dict], Optional[bytes], str]:
    """(parsed object, raw bytes, status) of WORK/submission.json (a regular file, no link followed)."""
    raw, status = safeio.read_file(work, "submission.json", SUBMISSION_READ_CAP)
    if raw is None:
        if status == "absent":
            return None, None, "absent"
        if status.startswith("larger"):
            return None, None, f"larger than {SUBMISSION_READ_CAP // (1024 * 1024)} MB (ignored)"
        if status.startswith("not a regular"):
            return None, None, "not a regular file in WORK (ignored)"
        return None, None, status
    try:
        parsed = safejson.loads(raw, max_bytes=SUBMISSION_READ_CAP)
    except safejson.Refused as error:
        return None, raw, f"not acceptable JSON ({error})"
    if not isinstance(parsed, dict):
        return None, raw, f"valid JSON but a {type(parsed).__name__}, not an object"
    return parsed, raw, "parsed"


def work_listing(work: Path, cap: int = LISTING_CAP) -> list[str]:
    """WORK's files, one line each (names escaped so that none can spoof a line), at most ``cap``."""
    entries: list[str] = []
    total = 0
    too_deep: list = []
    for entry in safeio.walk(work, too_deep=too_deep):
        if entry.is_dir:
            continue
        total += 1
        if len(entries) >= cap:
            continue
        kind = "" if stat.S_ISREG(entry.stat.st_mode) else (" link" if stat.S_ISLNK(entry.stat.st_mode) else " special")
        entries.append(f"{safeio.printable_name(entry.rel)} ({human_size(entry.stat.st_size)}{kind})")
    if total > cap:
        entries.append(f"... and {total - cap} more files")
    if too_deep:
        entries.append(f"... and folders deeper than {safeio.MAX_DEPTH} levels (not listed)")
    return entries


def human_size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def money(value: float) -> str:
    return f"${value:,.0f}"


def atomic_json(path: Path, data: Any) -> None:
    """Write JSON to ``path`` (a harness-only folder) through a temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(safejson.dumps_safe(data, indent=2), encoding="utf-8", errors="replace")
    os.replace(tmp, path)
