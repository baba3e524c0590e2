"""The agent's WORK folder as the episode harness reads and writes it: paths kept
inside it (no symlink escapes), the submission read with a cap, a capped listing,
and atomic JSON writes."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Optional

from . import safejson

LISTING_CAP = 200
SUBMISSION_READ_CAP = 64 * 1024 * 1024


def is_inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def safe_dir(work: Path, name: str) -> Path:
    """WORK/<name> as a real folder: an agent may have replaced it with a link or a file."""
    folder = work / name
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
    folder.mkdir(exist_ok=True)
    return folder


def safe_write(folder: Path, name: str, data: bytes) -> Path:
    """Create ``folder/name`` afresh, never writing through a link the agent planted."""
    target = folder / name
    if target.is_symlink() or target.exists():
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return target


def read_submission(work: Path) -> tuple[Optional[dict], Optional[bytes], str]:
    """(parsed object, raw bytes, status) of WORK/submission.json."""
    path = work / "submission.json"
    if not path.exists() and not path.is_symlink():
        return None, None, "absent"
    if path.is_symlink() or not path.is_file() or not is_inside(path, work):
        return None, None, "not a regular file in WORK (ignored)"
    try:
        if path.stat().st_size > SUBMISSION_READ_CAP:
            return None, None, f"larger than {SUBMISSION_READ_CAP // (1024 * 1024)} MB (ignored)"
        with open(path, "rb") as handle:
            raw = handle.read(SUBMISSION_READ_CAP + 1)
    except OSError as error:
        return None, None, f"unreadable ({type(error).__name__})"
    if len(raw) > SUBMISSION_READ_CAP:
        return None, None, f"larger than {SUBMISSION_READ_CAP // (1024 * 1024)} MB (ignored)"
    try:
        parsed = safejson.loads(raw, max_bytes=SUBMISSION_READ_CAP)
    except safejson.Refused as error:
        return None, raw, f"not acceptable JSON ({error})"
    if not isinstance(parsed, dict):
        return None, raw, f"valid JSON but a {type(parsed).__name__}, not an object"
    return parsed, raw, "parsed"


def work_listing(work: Path, cap: int = LISTING_CAP) -> list[str]:
    entries: list[str] = []
    total = 0
    for root, dirs, files in os.walk(work, followlinks=False):
        dirs.sort()
        rel_root = Path(root).relative_to(work)
        for name in sorted(files):
            total += 1
            if len(entries) >= cap:
                continue
            path = Path(root) / name
            try:
                size = path.lstat().st_size
            except OSError:
                size = 0
            entries.append(f"{(rel_root / name).as_posix()} ({human_size(size)})")
    if total > cap:
        entries.append(f"... and {total - cap} more files")
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
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(safejson.dumps_safe(data, indent=2), encoding="utf-8")
    os.replace(tmp, path)
