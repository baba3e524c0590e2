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

#: The staging folder's name under each candidate root: neutral, the same for every world.
STAGING_NAME = "dtw-sandboxes"


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    while not os.path.ismount(path) and path.parent != path:
        path = path.parent
    return path


def candidates(release: Path) -> list[Path]:
    """Neutral folders for the staging tree, best first: the root of the release's file system,
    then the system's temporary folders and the user's cache (none named by the user or a script)."""
    out = [_mount_point(release) / f".{STAGING_NAME}"]
    for base in ("/var/tmp", tempfile.gettempdir(), "/tmp"):
        out.append(Path(base) / STAGING_NAME)
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if home and os.path.isabs(home):
        out.append(Path(home) / STAGING_NAME)
    return list(dict.fromkeys(out))


def staging_root(release: Path) -> Path:
    """A neutral folder for this sandbox's mount sources, on the release's file system when possible.

    A bind mount shows in ``/proc/self/mountinfo`` as its path on its file
    system, so the staging tree (the release's hard links, WORK, the prelude)
    sits under a folder no user or script chose: the file system's root, the
    system temporary folders or the user's cache.  Hard links need the
    release's own file system; where none of these folders is on it, the
    tree is copied (``link_tree`` says which).
    """
    try:
        device = release.stat().st_dev
    except OSError:
        device = None
    usable = []
    for candidate in candidates(release):
        try:
            candidate.mkdir(mode=0o711, parents=False, exist_ok=True)
            st = candidate.lstat()
            if not stat.S_ISDIR(st.st_mode) or (st.st_uid != os.geteuid() and st.st_uid != 0):
                continue  # a link or a folder someone else made: not ours to trust
            if st.st_uid == os.geteuid():
                os.chmod(candidate, 0o711)
            if not os.access(candidate, os.W_OK | os.X_OK):
                continue
            usable.append(candidate)
            if st.st_dev == device:
                return candidate
        except OSError:
            continue
    if not usable:
        raise OSError(f"no writable folder for the sandbox's staging among {', '.join(map(str, candidates(release)))}")
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
