"""WORK with a size limit that holds (SPEC section 7; the security issue).

Kernel-enforced where the harness may mount (root, ``mkfs.ext4`` and a loop
device): WORK is a per-episode ext4 file system in a sparse image file of the
limit's size, with as many inodes as the file limit, mounted ``nosuid,nodev``
at WORK's neutral mount source.  The kernel then refuses a write past the
limit (``ENOSPC``) whatever the program does — ``fallocate``, sparse files,
files it unlinks while holding them open, a fork bomb of writers — and the
free space a program sees is WORK's own, not the host disk's.  A small
reserve is kept for uid 0, so the harness's own writes into WORK
(experiment results, screening labels) still fit when the agent has filled
its share.  At the end of the episode WORK is copied out of the image into the
episode folder and the image is removed.

Elsewhere (a harness running as a normal user) the limit is checked: a
watcher measures WORK while the program runs (files it unlinked but holds
open included) and stops the program past the limit, and at the end of every
turn WORK is measured again; what is over the limit is removed — the files
changed in that turn, largest first — and the turn is told which.

Either way, at every turn's end a folder deeper than ``safeio.MAX_DEPTH``
levels is removed (the harness walks WORK without recursion, holding one
descriptor per level), and nothing over the limit survives into the next
turn: a turn's cap never grows with what an earlier turn left.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from . import safeio

MiB = 1024 ** 2
#: Space (and inodes) kept for the harness's own writes into a full WORK.
ROOT_RESERVE = 64 * MiB
INODE_SIZE = 256
BLOCK = 4096
_TOOLS = ("mkfs.ext4", "tune2fs", "dumpe2fs", "mount", "umount")


def _tool(name: str) -> Optional[str]:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"]))


def _run(args: list[str], timeout: float = 60.0) -> tuple[int, str]:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        return 1, f"{type(error).__name__}: {error}"
    return done.returncode, (done.stdout + "\n" + done.stderr).strip()


class WorkArea:
    """WORK's host folder for one episode and how its limits are enforced.

    ``path`` is the folder the sandbox binds as WORK and ``channel`` the one it
    binds as the request channel (both on WORK's own file system when the
    kernel enforces the limit, so one limit covers everything the program may
    write); ``kernel`` says whether the limit is the kernel's (``reason`` says
    how, or why not); ``owner`` (a uid) owns both when the program runs as
    another uid.
    """

    def __init__(self, state: Path, size: int, files: int, *, owner: Optional[int] = None, kernel: bool = True):
        self.state = Path(state)
        self.size, self.files, self.owner = int(size), int(files), owner
        self.image = self.state / "work.img"
        self.mountpoint = self.state / "fs"
        self.mounted = False
        self.kernel = False
        self.reason = ""
        problem = self._mount() if kernel else "kernel enforcement not requested"
        if problem is None:
            self.kernel = True
            base = self.mountpoint
            self.reason = (f"WORK is a file system of its own ({safeio_size(self.size)}, {self.files:,} files; "
                           "kernel-enforced)")
        else:
            base = self.state
            self.reason = f"WORK's limits are checked while a program runs and at every turn's end ({problem})"
        self.path = base / "work"
        self.channel = base / "channel"
        self.path.mkdir(mode=0o755)
        if owner is not None:
            os.chown(self.path, owner, owner)

    # -- the kernel's limit

    def _mount(self) -> Optional[str]:
        if os.geteuid() != 0:
            return "mounting a file system needs root"
        missing = [t for t in _TOOLS if _tool(t) is None]
        if missing:
            return f"{', '.join(missing)} not found (e2fsprogs, util-linux)"
        inodes = max(1024, self.files + 64)
        # Room for the inode tables, the group metadata and the reserve; the reserve is then set so
        # that what a non-root program may use is the limit exactly.
        image_size = self.size + ROOT_RESERVE + inodes * INODE_SIZE * 9 // 8 + self.size // 32 + 32 * MiB
        try:
            with open(self.image, "wb") as handle:
                handle.truncate(image_size)
        except OSError as error:
            return f"cannot make the image file: {error}"
        code, out = _run([_tool("mkfs.ext4"), "-q", "-F", "-b", str(BLOCK), "-O", "^has_journal", "-N", str(inodes),
                          "-m", "0", "-E", "lazy_itable_init=1,nodiscard,root_owner=0:0", str(self.image)])
        if code != 0:
            self._drop_image()
            return f"mkfs.ext4 failed: {out[-200:]}"
        free = self._free_blocks()
        wanted = -(-self.size // BLOCK)
        if free is None or free - wanted < ROOT_RESERVE // BLOCK:
            self._drop_image()
            return f"the image has {free} free blocks, fewer than the limit and the reserve need"
        code, out = _run([_tool("tune2fs"), "-r", str(free - wanted), str(self.image)])
        if code != 0:
            self._drop_image()
            return f"tune2fs failed: {out[-200:]}"
        self.mountpoint.mkdir(mode=0o711)
        code, out = _run([_tool("mount"), "-o", "loop,nosuid,nodev,noatime,noinit_itable", str(self.image),
                          str(self.mountpoint)])
        if code != 0:
            self.mountpoint.rmdir()
            self._drop_image()
            return f"mount failed: {out[-200:]}"
        self.mounted = True
        os.chmod(self.mountpoint, 0o711)
        lost = self.mountpoint / "lost+found"
        if lost.is_dir():
            lost.rmdir()
        return None

    def _free_blocks(self) -> Optional[int]:
        code, out = _run([_tool("dumpe2fs"), "-h", str(self.image)])
        for line in out.splitlines() if code == 0 else []:
            if line.startswith("Free blocks:"):
                return int(line.split(":", 1)[1])
        return None

    def _drop_image(self) -> None:
        try:
            self.image.unlink()
        except FileNotFoundError:
            pass

    # -- after every turn

    def enforce(self, turn_started: float) -> list[str]:
        """Bring WORK back within its limits after a program ended; one note per action taken."""
        notes: list[str] = []
        too_deep: list[str] = []
        entries: list[safeio.Entry] = []
        total = 0
        for entry in safeio.walk(self.path, too_deep=too_deep):
            entries.append(entry)
            total += entry.stat.st_blocks * 512
        if too_deep:
            removed = safeio.remove_entries(self.path, too_deep)
            notes.append(f"WORK may hold at most {safeio.MAX_DEPTH} levels of folders: removed "
                         f"{len(removed)} folder(s) at that depth, e.g. {safeio.printable_name(removed[0][:120]) if removed else '?'}")
            gone = tuple(p + "/" for p in removed)
            kept = [e for e in entries if not (e.rel + "/").startswith(gone) and e.rel not in removed]
            entries, total = kept, sum(e.stat.st_blocks * 512 for e in kept)
        if self.kernel:
            return notes
        if total > self.size:
            victims = self._over(entries, total - self.size, turn_started)
            safeio.remove_entries(self.path, [e.rel for e in victims])
            freed = sum(e.stat.st_blocks * 512 for e in victims)
            notes.append(f"WORK held {safeio_size(total)}, over its limit of {safeio_size(self.size)}: removed "
                         f"{len(victims)} file(s) ({safeio_size(freed)}), largest first among this turn's: "
                         + ", ".join(safeio.printable_name(e.rel[:80]) for e in victims[:5])
                         + (" ..." if len(victims) > 5 else ""))
            entries = [e for e in entries if e not in victims]
        if len(entries) > self.files:
            recent = sorted(entries, key=lambda e: (-e.stat.st_ctime, e.rel))
            extra = [e for e in recent if not e.is_dir][: len(entries) - self.files]
            if len(extra) < len(entries) - self.files:
                extra += [e for e in recent if e.is_dir][: len(entries) - self.files - len(extra)]
            removed = safeio.remove_entries(self.path, [e.rel for e in extra])
            notes.append(f"WORK held {len(entries):,} files and folders, over its limit of {self.files:,}: removed "
                         f"the {len(removed):,} newest")
        return notes

    @staticmethod
    def _over(entries: list, excess: int, turn_started: float) -> list:
        """Files to remove to free ``excess`` bytes: this turn's (by ctime, which a program cannot
        set back), largest first, then older ones largest first."""
        files = [e for e in entries if stat.S_ISREG(e.stat.st_mode)]
        fresh = sorted((e for e in files if e.stat.st_ctime >= turn_started - 1.0),
                       key=lambda e: (-e.stat.st_blocks, e.rel))
        old = sorted((e for e in files if e.stat.st_ctime < turn_started - 1.0), key=lambda e: (-e.stat.st_blocks, e.rel))
        chosen, freed = [], 0
        for e in fresh + old:
            if freed >= excess:
                break
            chosen.append(e)
            freed += e.stat.st_blocks * 512
        return chosen

    # -- the end

    def close(self, keep: Optional[Path] = None) -> list[str]:
        """Move (or copy) WORK to ``keep`` if given, then remove the file system; returns what was not kept."""
        skipped: list[str] = []
        if keep is not None:
            keep = Path(keep)
            if keep.is_symlink() or keep.exists():
                safeio.remove_tree(keep)
            if self.mounted:
                skipped = safeio.copy_tree(self.path, keep)
            else:
                try:
                    os.rename(self.path, keep)
                except OSError:
                    skipped = safeio.copy_tree(self.path, keep)
        if self.mounted:
            code, out = _run([_tool("umount"), str(self.mountpoint)])
            if code != 0:
                _run([_tool("umount"), "-l", str(self.mountpoint)])
            self.mounted = False
            self._drop_image()
        return skipped

    def usage(self) -> tuple[int, int]:
        """(bytes, entries) of WORK and the channel together."""
        size, count, _ = safeio.tree_usage(self.path, max_entries=self.files + 1)
        extra, more, _ = safeio.tree_usage(self.channel, max_entries=self.files + 1)
        return size + extra, count + more


def safeio_size(n: int) -> str:
    for unit, size in (("GiB", 1024 ** 3), ("MiB", MiB), ("kB", 1024)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


# ----------------------------------------------------------------------------- while a program runs


def open_unlinked_bytes(pids: list[int]) -> int:
    """Bytes held by regular files that processes ``pids`` keep open after unlinking them."""
    seen, total = set(), 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 0 and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


class WorkWatch(threading.Thread):
    """Measures WORK while a program runs (files unlinked but held open by its processes
    included); calls ``on_exceed`` once past ``limit`` bytes or ``max_files`` entries."""

    def __init__(self, area: WorkArea, limit: int, max_files: int, on_exceed: Callable[[], None],
                 pids: Callable[[], list] = lambda: [], interval: float = 0.25):
        super().__init__(daemon=True)
        self.area, self.limit, self.max_files, self.on_exceed = area, limit, max_files, on_exceed
        self.pids, self.interval = pids, interval
        self.exceeded: Optional[int] = None
        self.too_many: Optional[int] = None
        self._stop = threading.Event()

    def run(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            started = time.monotonic()
            size, count = self.area.usage()
            size += open_unlinked_bytes(self.pids())
            if size > self.limit or count > self.max_files:
                if size > self.limit:
                    self.exceeded = size
                else:
                    self.too_many = count
                self.on_exceed()
                return
            # A very large WORK takes a while to walk: never spend more than a fifth of the time on it.
            wait = max(self.interval, 4 * (time.monotonic() - started))

    def stop(self) -> None:
        self._stop.set()
