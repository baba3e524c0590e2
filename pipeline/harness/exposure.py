"""Who besides the harness can read a folder, from the permission bits (``pipeline.mcp``'s
trust check): the real uid and gids of a process (from /proc), whether a user could list a
folder and read a file in it (every folder on the way, and the folder's first regular
files; ACLs and capabilities are not read), and who can read a world's ``sealed/``.

One job: the sealed folder's exposure to users outside the sandbox (an agentic CLI's own
shell and file tools run as its user, outside the episode's sandbox).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional


def _ids_of(pid: int) -> Optional[tuple[int, set]]:
    """(real uid, real and supplementary gids) of process ``pid``, from /proc; None when unknown."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
        uid = int(fields["Uid"].split()[0])
        gids = {int(fields["Gid"].split()[0]), *(int(g) for g in fields.get("Groups", "").split())}
        return uid, gids
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _allows(st: os.stat_result, uid: Optional[int], gids: set, want: int) -> bool:
    """Whether the permission bits give ``uid``/``gids`` (None: any other user) the access ``want`` (4 r, 1 x)."""
    if uid == 0:
        return True
    mode = stat.S_IMODE(st.st_mode)
    if uid is not None and st.st_uid == uid:
        bits = mode >> 6
    elif uid is not None and st.st_gid in gids:
        bits = mode >> 3
    else:
        bits = mode
    return bits & want == want


def can_read_folder(folder: Path, uid: Optional[int], gids: set = frozenset()) -> bool:
    """Whether ``uid`` (None: a user with no relation to the files) could list ``folder`` and read a file in it.

    From the permission bits of every folder on the way and of the folder's first regular
    files (ACLs and capabilities are not read).
    """
    folder = Path(folder).resolve()
    try:
        for step in [*reversed(folder.parents), folder]:
            if not _allows(os.stat(step), uid, gids, 1):
                return False
        if not _allows(os.stat(folder), uid, gids, 4):
            return False
        files = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    files.append(entry)
                    if len(files) >= 8:
                        break
    except OSError:
        return False
    return any(_allows(entry.stat(follow_symlinks=False), uid, gids, 4) for entry in files) if files else True


def sealed_exposure(sealed: Path, launcher: Optional[tuple[int, set]] = None) -> Optional[str]:
    """Who besides this server can read the world's ``sealed/`` (words to follow "readable by"), or None.

    ``launcher`` is (uid, gids) of the process that started the server (default: read from
    /proc for the parent process; this process's own when that cannot be read).
    """
    if launcher is None:
        launcher = _ids_of(os.getppid()) or (os.getuid(), {os.getgid(), *os.getgroups()})
    uid, gids = launcher
    if can_read_folder(sealed, None):
        return "every user of this machine"
    if can_read_folder(sealed, uid, gids):
        return f"{'root' if uid == 0 else f'uid {uid}'}, the user of the process that started this server"
    return None
