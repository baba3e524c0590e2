"""Per-turn resource limits of agent programs (SPEC section 7; the hardening issue).

Two layers, both applied to every turn's program:

* rlimits, set by util-linux ``prlimit`` at the head of the sandboxed command
  (before the uid drop, so the hard limits cannot be raised again): processes
  of the sandbox uid, address space per process, size of any one file written,
  CPU seconds per process, open files;
* a control group per episode when this process may create one (root, with
  the cgroup v2 ``memory`` and ``pids`` controllers or the v1 hierarchies):
  the memory and process count of the whole program tree together.  rlimits
  alone bound each process, not their sum.

The size of WORK and of the private ``/tmp`` are bounded too: ``/tmp`` and
``/dev/shm`` are size-limited tmpfs mounts; WORK is a file system of its own
where the harness may mount one, and measured otherwise (``quota.py``).

Exceeding any limit ends the turn with an observation that names the limit;
it never ends the episode or touches the host.
"""
from __future__ import annotations

import math
import os
import shutil
import signal
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

GiB = 1024 ** 3
MiB = 1024 ** 2
PRLIMIT = "/usr/bin/prlimit"


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * GiB


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Limits:
    """What one turn's program may use.  Sizes in bytes, times in seconds.

    The memory default fits a paper-scale analysis (54,000 x 8,192 genotypes
    are 442 MB as int8; pandas copies multiply that) but never more than 70 %
    of this machine's memory, so a program cannot push the host into swap or
    the OOM killer's reach of the harness.
    """

    processes: int = 256  # processes and threads of the sandbox uid / the episode's cgroup
    memory: int = 16 * GiB  # cgroup memory of the whole tree; also the address space of each process
    file_size: int = 8 * GiB  # largest single file a program may write
    work_size: int = 32 * GiB  # total size of WORK
    work_files: int = 500_000  # files and folders in WORK (an inode flood costs little disk)
    tmp_size: int = 2 * GiB  # the private /tmp (and /dev/shm), held in memory
    open_files: int = 4096
    cpu_seconds: Optional[int] = None  # per process; None: the turn's timeout x the cores, plus a margin

    def resolved(self, timeout: float) -> "Limits":
        """A copy with the machine-dependent values filled in and bounded."""
        memory = min(self.memory, int(0.7 * _physical_memory()))
        cpu = self.cpu_seconds
        if cpu is None:
            cpu = int(math.ceil(timeout * _cpus())) + 10
        return replace(self, memory=memory, cpu_seconds=cpu)

    def fit_disk(self, folder: Path) -> "Limits":
        """A copy whose WORK limit is at most half the free space of ``folder``'s file system (where
        WORK lives), so that no WORK limit can fill the host's disk."""
        try:
            st = os.statvfs(folder)
        except OSError:
            return self
        free = st.f_bavail * st.f_frsize
        return replace(self, work_size=max(64 * MiB, min(self.work_size, free // 2)))

    def validate(self) -> "Limits":
        for name in ("processes", "memory", "file_size", "work_size", "work_files", "tmp_size", "open_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limits.{name}={value!r}: invalid; valid: a positive integer")
        if self.processes < 8:
            raise ValueError(f"limits.processes={self.processes}: invalid; valid: >= 8 (Python and its helpers need a few)")
        if self.memory < 256 * MiB:
            raise ValueError(f"limits.memory={self.memory}: invalid; valid: >= {256 * MiB} bytes (the interpreter needs it)")
        if self.cpu_seconds is not None and (isinstance(self.cpu_seconds, bool) or self.cpu_seconds < 1):
            raise ValueError(f"limits.cpu_seconds={self.cpu_seconds!r}: invalid; valid: seconds >= 1 or None")
        return self

    def describe(self) -> str:
        return (f"{self.processes} processes, {_bytes(self.memory)} memory, files up to {_bytes(self.file_size)}, "
                f"WORK up to {_bytes(self.work_size)}, /tmp {_bytes(self.tmp_size)}, "
                f"{self.cpu_seconds} CPU-seconds per process")

    def prlimit_args(self) -> list[str]:
        """util-linux prlimit options setting soft = hard for each rlimit."""
        pairs = {
            "--nproc": self.processes,
            "--as": self.memory,
            "--fsize": self.file_size,
            "--nofile": self.open_files,
            "--cpu": self.cpu_seconds,
            "--core": 0,
        }
        return [f"{flag}={value}:{value}" for flag, value in pairs.items()]


def _bytes(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


# ----------------------------------------------------------------------------- control groups


class CgroupJail:
    """A memory + pids control group for one episode's programs, if this process may make one.

    ``available`` says whether it exists; ``reason`` says why not.  Programs
    join it through ``wrap(cmd)`` (a shell writes its own pid into the group,
    then executes the command, so no process of the program ever runs
    outside it).  ``events()`` reports OOM kills and refused forks since the
    last call.
    """

    V2_ROOT = Path("/sys/fs/cgroup")

    def __init__(self, memory: int, processes: int):
        self.memory, self.processes = memory, processes
        self.paths: list[Path] = []
        self.available = False
        self.reason = ""
        self._last = {"oom": 0, "pids": 0}
        if os.geteuid() != 0:
            self.reason = "control groups need root; rlimits only"
            return
        name = f"dtw-{uuid.uuid4().hex[:12]}"
        try:
            if (self.V2_ROOT / "cgroup.controllers").exists():
                self._make_v2(name)
            else:
                self._make_v1(name)
            self.available = True
            self.reason = f"cgroup {'v2' if self.version == 2 else 'v1'}: memory {_bytes(memory)}, {processes} tasks"
        except (OSError, RuntimeError) as error:
            self.close()
            self.reason = f"no control group ({type(error).__name__}: {error}); rlimits only"

    # -- creation

    def _own_v2(self) -> Path:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return self.V2_ROOT / line[3:].lstrip("/")
        raise RuntimeError("no cgroup v2 entry in /proc/self/cgroup")

    def _make_v2(self, name: str) -> None:
        self.version = 2
        # A leaf next to this process's own group: v2 forbids processes in inner nodes,
        # so the group hangs off the parent, which must delegate memory and pids.
        parent = self._own_v2().parent
        controllers = (parent / "cgroup.subtree_control").read_text().split()
        for needed in ("memory", "pids"):
            if needed not in controllers:
                raise RuntimeError(f"{parent} does not delegate the {needed} controller")
        group = parent / name
        group.mkdir()
        self.paths = [group]
        (group / "memory.max").write_text(str(self.memory))
        if (group / "memory.swap.max").exists():
            (group / "memory.swap.max").write_text("0")
        (group / "pids.max").write_text(str(self.processes))

    def _v1_base(self, controller: str) -> Path:
        mount = Path("/sys/fs/cgroup") / controller
        if not mount.is_dir():
            raise RuntimeError(f"no cgroup v1 {controller} hierarchy")
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return mount / path.lstrip("/")
        return mount

    def _make_v1(self, name: str) -> None:
        self.version = 1
        memory = self._v1_base("memory") / name
        memory.mkdir()
        self.paths.append(memory)
        (memory / "memory.limit_in_bytes").write_text(str(self.memory))
        swap = memory / "memory.memsw.limit_in_bytes"
        if swap.exists():
            try:
                swap.write_text(str(self.memory))
            except OSError:
                pass
        pids = self._v1_base("pids") / name
        pids.mkdir()
        self.paths.append(pids)
        (pids / "pids.max").write_text(str(self.processes))

    # -- use

    def wrap(self, cmd: list[str]) -> list[str]:
        if not self.available:
            return cmd
        joins = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.paths)))
        procs = [str(p / "cgroup.procs") for p in self.paths]
        return ["/bin/sh", "-c", f'{joins} && shift {len(procs)} && exec "$@"', "sh", *procs, *cmd]

    def _counter(self) -> dict:
        counts = {"oom": 0, "pids": 0}
        for path in self.paths:
            for name, key, field in (("memory.events", "oom", "oom_kill"), ("pids.events", "pids", "max"),
                                     ("memory.oom_control", "oom", "oom_kill")):
                f = path / name
                if not f.exists():
                    continue
                try:
                    for line in f.read_text().splitlines():
                        parts = line.split()
                        if len(parts) == 2 and parts[0] == field:
                            counts[key] += int(parts[1])
                except (OSError, ValueError):
                    pass
        return counts

    def events(self) -> dict:
        """{"oom": kills, "pids": refused forks} since the previous call."""
        now = self._counter()
        delta = {k: now[k] - self._last[k] for k in now}
        self._last = now
        return delta

    def kill_all(self) -> None:
        """SIGKILL every process still in the group (programs that escaped their session)."""
        for _ in range(3):
            pids = set()
            for path in self.paths:
                try:
                    pids.update(int(x) for x in (path / "cgroup.procs").read_text().split())
                except (OSError, ValueError):
                    pass
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)

    def close(self) -> None:
        self.kill_all()
        for path in reversed(self.paths):
            for _ in range(20):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.paths = []
        self.available = False


def have_prlimit() -> bool:
    return os.path.exists(PRLIMIT) or shutil.which("prlimit") is not None
