"""Neutral mount sources for one sandbox: a hard-link tree of the release beside WORK.

``/proc/self/mountinfo`` inside a sandbox always shows where a bind mount
comes from, and a world's release sits at ``<out>/<world id>/release``.  The
sandbox therefore mounts a per-episode tree of hard links under a random
name instead (copies where links cannot be made: across filesystems, or for
files other users may not read).
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Optional

def staging_root(release: Path, preferred: Optional[Path]) -> Path:
    """A neutral folder for this sandbox's mount sources, on the release's filesystem when possible."""
    candidates = [preferred] if preferred is not None else []
    candidates += [release.parent.parent / ".dtw-sandboxes", Path(tempfile.gettempdir()) / "dtw-sandboxes"]
    try:
        device = release.stat().st_dev
    except OSError:
        device = None
    usable = []
    for candidate in candidates:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            os.chmod(candidate, 0o711)
            usable.append(candidate)
            if candidate.stat().st_dev == device:
                return candidate
        except OSError:
            continue
    if not usable:
        raise OSError(f"no writable folder for the sandbox's staging among {', '.join(map(str, candidates))}")
    return usable[0]


def link_tree(source: Path, target: Path) -> str:
    """Mirror ``source`` into ``target`` with hard links (copies across filesystems or for unreadable files).

    Returns "links", "copies" or "links and copies".
    """
    used = set()
    target.mkdir(mode=0o755)
    for root, dirs, files in os.walk(source, followlinks=False):
        rel = Path(root).relative_to(source)
        dest_root = target / rel
        for d in sorted(dirs):
            if not (Path(root) / d).is_symlink():
                (dest_root / d).mkdir(mode=0o755)
        for name in sorted(files):
            src, dst = Path(root) / name, dest_root / name
            st = src.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue  # links and special files are not part of a release
            if st.st_mode & stat.S_IROTH:
                try:
                    os.link(src, dst)
                    used.add("links")
                    continue
                except OSError:
                    pass
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o644)
            used.add("copies")
    return " and ".join(sorted(used)) or "links"
