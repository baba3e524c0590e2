"""Running one turn's agent program in isolation (SPEC section 7).

Each turn's program runs in a fresh ``python`` process of the harness's own
environment (the interpreter as invoked — a symlinked or ``--copies`` venv,
conda, the system Python — never the base interpreter a venv's link points
at).  Under bubblewrap (``/usr/bin/bwrap``, Debian's package) it sees only

* read-only: the system folders the interpreter needs (``/usr`` and the
  merged-usr links, a few files of ``/etc``) and the environment's own folders
  (``sys.prefix``, ``sys.base_prefix``, the site-packages folders, each hop of
  the interpreter's symlinks), with the project's own package, its config
  (development seeds) and any other protected path inside them masked by an
  empty folder;
* ``/release`` (a per-episode tree of hard links to the world's release,
  read-only; ``/release/imaging`` is IMAGING), ``/opt/dtw`` (the prelude, the
  genotype reader and the program, read-only);
* read-write: ``/work`` (WORK) and ``/run/dtw`` (the request channel);
* a private ``/dev``, a read-only ``/proc``, size-limited ``/tmp`` and
  ``/dev/shm``;

with every namespace unshared (no network, no view of the host's processes),
a seccomp filter (``seccomp.py``), ``no_new_privs``, a cleared environment, a
new terminal session, death with its parent, and the limits of ``limits.py``.
Mount sources carry neutral per-episode names and bubblewrap reads its
arguments from a file descriptor, so neither ``/proc/1/cmdline`` nor
``/proc/self/mountinfo`` names the world or the episode folder.

Who the program runs as: a harness running as root switches to an
unprivileged host uid (``setpriv``) inside the sandbox, without a user
namespace — with one, uid 0 inside would be uid 0 on the host, for which the
kernel allows writes to ``/proc/sys``.  A harness running as a normal user
runs bubblewrap in a user namespace and the program keeps that user's uid.

Isolation modes: ``require`` refuses to run unisolated (the default for every
agent whose code is not the project's own); ``auto`` falls back to a plain
subprocess, with the limits but without isolation, and says so; ``off`` runs
unisolated on purpose.
"""

import os
import secrets
import shutil
import signal
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from . import bwrap
from .bwrap import SandboxUnavailable, project_paths
from . import safeio
from .limits import CgroupJail, Limits
from .quota import WorkArea, WorkWatch
from .staging import link_tree, staging_root

RUNTIME_NAME = "dtw_runtime.py"
GENOTYPES_NAME = "dtw_genotypes.py"
RUNNER_NAME = "dtw_runner.py"  # harness/runner.py: runs the program, shared by every kind's prelude
#: The bundle contract (pipeline/bundle.py), which the genotype reader takes its file names from.
BUNDLE_NAME = "dtw_bundle.py"
PROGRAM_NAME = "program.py"
READY_NAME = "ready"
OUTPUT_CAP = 32_000  # characters kept per stream and turn
CHANNEL_FILE_CAP = 64 * 1024 * 1024  # bytes kept of one channel file (its head)
CHANNEL_FILES_MAX = 32  # channel files read per run
ISOLATION_MODES = ("auto", "require", "off")

_HERE = Path(__file__).resolve().parent


@dataclass
class RunResult:
    """What one program run produced, as the harness sees it."""

    returncode: Optional[int]
    timed_out: bool
    duration: float
    stdout: str
    stderr: str
    stdout_chars: int
    stderr_chars: int
    ready: bool = False  # the prelude reached the agent's code
    limit_notes: list = field(default_factory=list)  # limits this run ran into
    #: What the prelude left in the channel: file name -> (its first CHANNEL_FILE_CAP bytes, whether cut).
    #: Regular files at the channel's top level only; the channel is emptied after every run.
    channel: dict = field(default_factory=dict)

    def channel_file(self, name: str) -> tuple[Optional[bytes], bool]:
        return self.channel.get(name, (None, False))

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


# ----------------------------------------------------------------------------- output capture


class _Capture(threading.Thread):
    """Drains one pipe, keeping the head and the tail within the cap."""

    def __init__(self, stream, cap: int):
        super().__init__(daemon=True)
        self.stream = stream
        self.head_cap = cap * 3 // 4
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def run(self) -> None:
        try:
            while True:
                chunk = self.stream.read(65536)
                if not chunk:
                    break
                self.total += len(chunk)
                room = self.head_cap - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > self.tail_cap:
                        del self.tail[: len(self.tail) - self.tail_cap]
        except (OSError, ValueError):
            pass

    def text(self) -> tuple[str, int]:
        head = self.head.decode("utf-8", errors="replace")
        if not self.tail:
            return head, self.total
        omitted = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", errors="replace")
        if omitted <= 0:
            return head + tail, self.total
        return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}", self.total


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        import psutil

        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
    except ImportError:
        children = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in children:
        # Non-isolated programs can leave the process group with setsid().
        try:
            child.kill()
        except Exception:  # psutil.NoSuchProcess and friends
            pass


# ----------------------------------------------------------------------------- the sandbox


class Sandbox:
    """Runs programs for one episode: the release read-only, WORK writable.

    ``work`` is the host folder bound as WORK: keep it under a neutral name
    (``Sandbox.work_dir()`` gives one in the staging folder when ``work`` is
    None).  ``protected`` paths must never become reachable (the world's
    sealed folder, the episode folder); the project's own package and config
    are always protected.  ``state_dir`` is a neutral folder for the staging
    tree (default: beside the worlds folder, or the system temp folder).
    ``runtime`` is the text of the prelude run before each program (default: the
    biobank harness's ``runtime.py``; another kind of world, ``pipeline.kinds``,
    brings its own tools).
    """

    def __init__(
        self,
        release: os.PathLike | str,
        *,
        protected: Iterable[os.PathLike | str] = (),
        isolation: str = "auto",
        output_cap: int = OUTPUT_CAP,
        limits: Optional[Limits] = None,
        timeout_hint: float = 300.0,
        runtime: Optional[str] = None,
    ):
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation={isolation!r} is invalid; valid: {', '.join(ISOLATION_MODES)}")
        self.source_release = Path(release).resolve()
        self.output_cap = output_cap
        self.limits = (limits or Limits()).validate().resolved(timeout_hint)
        self.protected = [Path(p).resolve() for p in protected] + project_paths()
        # Mount sources live under a neutral root the harness chooses (never beside the
        # world or the episodes: /proc/self/mountinfo shows a bind's path on its file system).
        self.state = staging_root(self.source_release) / f"dtw-{secrets.token_hex(8)}"
        self.state.mkdir(mode=0o711)
        self.lib = self.state / "lib"
        self.lib.mkdir(mode=0o755)
        if runtime is None:
            shutil.copyfile(_HERE / "runtime.py", self.lib / RUNTIME_NAME)
        else:  # another kind of world's prelude (pipeline.kinds), with its own tools
            (self.lib / RUNTIME_NAME).write_text(runtime, encoding="utf-8")
        shutil.copyfile(_HERE / "runner.py", self.lib / RUNNER_NAME)
        shutil.copyfile(_HERE.parent / "genotypes_io.py", self.lib / GENOTYPES_NAME)
        shutil.copyfile(_HERE.parent / "bundle.py", self.lib / BUNDLE_NAME)
        self.layout: Optional[bwrap.Layout] = None
        self.jail: Optional[CgroupJail] = None
        self.area: Optional[WorkArea] = None

        self.isolated, self.reason = self._decide(isolation)
        if isolation == "require" and not self.isolated:
            self.close()
            raise SandboxUnavailable(f"isolation=require but the program cannot be isolated: {self.reason}")
        try:
            uid = self.layout.uid if self.layout is not None else None
            self.limits = self.limits.fit_disk(self.state)
            self.area = WorkArea(self.state, self.limits.work_size, self.limits.work_files, owner=uid,
                                 kernel=self.isolated and uid is not None)
            self.work = self.area.path
            self.channel = self.area.channel
            if self.isolated:
                self.release = self.state / "release"
                self.staging = link_tree(self.source_release, self.release)
            else:
                self.release = self.source_release
                self.staging = "none (not isolated)"
            self.jail = CgroupJail(self.limits.memory, self.limits.processes)
        except BaseException:
            self.close()
            raise
        self.limits_reason = f"{self.jail.reason}; {self.area.reason}"

    # -- decisions

    def _decide(self, isolation: str) -> tuple[bool, str]:
        if isolation == "off":
            return False, "isolation=off was requested: agent code runs as a plain subprocess and can read any file the harness can"
        try:
            layout, problem = bwrap.layout(self.protected)
        except SandboxUnavailable as error:
            layout, problem = None, str(error)
        if problem:
            return False, f"not isolated: {problem}; agent code runs as a plain subprocess and can read any file the harness can"
        self.layout = layout
        problem = bwrap.probe(layout, self.limits)
        if problem:
            self.layout = None
            return False, f"not isolated: {problem}; agent code runs as a plain subprocess and can read any file the harness can"
        who = f"unprivileged uid {layout.uid}" if layout.uid is not None else "the harness's own (non-root) uid in a user namespace"
        filt = "seccomp filter" if layout.seccomp is not None else "no seccomp filter (no table for this machine)"
        return True, (f"bubblewrap: release read-only, work writable, no network, sealed bundle and episode folder "
                      f"not mounted; runs as {who}; {filt}")

    def own(self, path: Path) -> None:
        """Hand ``path`` (and what is in it) to the sandbox uid, so the program can write there."""
        if self.layout is None or self.layout.uid is None:
            return
        safeio.chown_tree(path, self.layout.uid)

    @property
    def uid(self) -> Optional[int]:
        """The host uid agent programs run as when it is not the harness's own (a root harness)."""
        return self.layout.uid if self.layout is not None else None

    @property
    def agent_paths(self) -> dict:
        """RELEASE, IMAGING and WORK as the agent's program sees them."""
        if self.isolated:
            m = self.layout.mounts
            return {"RELEASE": m["release"], "IMAGING": f"{m['release']}/imaging", "WORK": m["work"]}
        return {"RELEASE": str(self.release), "IMAGING": str(self.release / "imaging"), "WORK": str(self.work)}

    # -- one run

    def _command(self) -> tuple[list[str], dict, Optional[bwrap.BwrapCall]]:
        paths = self.agent_paths
        env = bwrap.base_env()
        if self.isolated:
            m = self.layout.mounts
            env.update(DTW_RELEASE=paths["RELEASE"], DTW_IMAGING=paths["IMAGING"], DTW_WORK=paths["WORK"],
                       DTW_CHANNEL=m["channel"])
            args = bwrap.base_args(self.layout, self.limits)
            for key, value in env.items():
                args += ["--setenv", key, value]
            made: set = set()
            args += bwrap.parents_args([Path(v) for v in m.values()], made)
            args += [
                "--ro-bind", str(self.release), m["release"],
                "--bind", str(self.work), m["work"],
                "--ro-bind", str(self.lib), m["lib"],
                "--bind", str(self.channel), m["channel"],
                "--chdir", m["work"],
            ]
            command = [*bwrap.exec_chain(self.layout, self.limits), bwrap.python_executable(), "-I", "-B",
                       f"{m['lib']}/{RUNTIME_NAME}", f"{m['lib']}/{PROGRAM_NAME}"]
            bw = bwrap.BwrapCall(args, command, self.layout.seccomp)
            return self.jail.wrap(bw.argv), bwrap.base_env(), bw
        env.update(DTW_RELEASE=paths["RELEASE"], DTW_IMAGING=paths["IMAGING"], DTW_WORK=paths["WORK"],
                   DTW_CHANNEL=str(self.channel))
        command = [*bwrap.exec_chain(None, self.limits), bwrap.python_executable(), "-I", "-B",
                   str(self.lib / RUNTIME_NAME), str(self.lib / PROGRAM_NAME)]
        return self.jail.wrap(command), env, None

    def run(self, code: str, timeout: float) -> RunResult:
        """Run one program to completion or until ``timeout`` seconds, then kill its process tree."""
        self._reset_channel()
        (self.lib / PROGRAM_NAME).write_text(safeio.clean_code(code), encoding="utf-8")
        turn_started = time.time()
        self.jail.events()
        cmd, env, bw = self._command()
        cwd = str(self.work) if not self.isolated else None
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, cwd=cwd, start_new_session=True, pass_fds=tuple(bw.fds) if bw else (),
            )
        finally:
            if bw is not None:
                bw.close()
        out, err = _Capture(proc.stdout, self.output_cap), _Capture(proc.stderr, self.output_cap)
        out.start()
        err.start()
        watch = WorkWatch(self.area, self.limits.work_size, self.limits.work_files, lambda: _kill_tree(proc),
                          pids=lambda: _tree_pids(proc))
        if not self.area.kernel:
            watch.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(proc)
            proc.wait()
        else:
            # Children the program left running would otherwise outlive the turn.
            _kill_tree(proc)
        watch.stop()
        self.jail.kill_all()
        duration = time.monotonic() - start
        for capture in (out, err):
            capture.join(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
        stdout, stdout_chars = out.text()
        stderr, stderr_chars = err.text()
        if timed_out:
            stderr += f"\n[harness] the program exceeded its {timeout:g} s limit and was killed."
        result = RunResult(
            returncode=None if timed_out else proc.returncode, timed_out=timed_out, duration=duration,
            stdout=stdout, stderr=stderr, stdout_chars=stdout_chars, stderr_chars=stderr_chars,
        )
        self._capture_channel(result)
        self._reset_channel()
        result.ready = READY_NAME in result.channel
        self._limit_notes(result, watch, self.area.enforce(turn_started))
        return result

    def _reset_channel(self) -> None:
        safeio.remove_tree(self.channel)
        self.channel.mkdir(mode=0o755)
        self.own(self.channel)

    def _limit_notes(self, result: RunResult, watch: WorkWatch, enforced: list) -> None:
        notes = result.limit_notes
        events = self.jail.events()
        code = result.returncode
        if watch.exceeded is not None:
            notes.append(f"WORK grew to {watch.exceeded / 2**30:.2f} GiB, past its limit of "
                         f"{self.limits.work_size / 2**30:.3g} GiB: the program was stopped; delete files to continue")
        if watch.too_many is not None:
            notes.append(f"WORK holds more than {self.limits.work_files} files and folders: the program was stopped; "
                         "delete files to continue")
        stopped_by_watch = watch.exceeded is not None or watch.too_many is not None
        if events.get("oom") or (code == -signal.SIGKILL and not result.timed_out and not stopped_by_watch
                                 and not self.jail.available):
            notes.append(f"the program was killed (SIGKILL); unless it did so itself, memory is the likely cause: "
                         f"the limit is {self.limits.memory / 2**30:.3g} GiB for all its processes together")
        if events.get("pids"):
            notes.append(f"process creation was refused {events['pids']} time(s): at most {self.limits.processes} "
                         "processes and threads")
        # Python ignores SIGXFSZ: a write past the limit fails with EFBIG instead.
        if code == -signal.SIGXFSZ or "[Errno 27] File too large" in result.stderr:
            notes.append(f"a file grew past the per-file limit of {self.limits.file_size / 2**30:.3g} GiB")
        if "[Errno 28] No space left on device" in result.stderr:
            notes.append(f"a disk filled up: WORK holds at most {self.limits.work_size / 2**30:.3g} GiB and "
                         f"{self.limits.work_files:,} files, the private /tmp and /dev/shm "
                         f"{self.limits.tmp_size / 2**30:.3g} GiB each")
        if code == -signal.SIGXCPU:
            notes.append(f"a process used its {self.limits.cpu_seconds} CPU-seconds")
        notes.extend(enforced)
        for note in notes:
            result.stderr += f"\n[harness] limit: {note}."

    def _capture_channel(self, result: RunResult) -> None:
        """Copy what the prelude wrote into the channel, bounded, before the channel is reset."""
        names = []
        for entry in safeio.walk(self.channel, max_depth=1):
            if stat.S_ISREG(entry.stat.st_mode) and len(names) < CHANNEL_FILES_MAX:
                names.append(entry.rel)
        for name in names:
            raw, status = safeio.read_file(self.channel, name, CHANNEL_FILE_CAP)
            if raw is not None:
                result.channel[name] = (raw, False)
            elif status.startswith("larger"):
                head, _ = _head(self.channel / name, CHANNEL_FILE_CAP)
                result.channel[name] = (head or b"", True)

    def close(self, keep_work: Optional[Path] = None) -> list[str]:
        """Remove the staging tree; with ``keep_work``, move WORK there first (the transcript keeps every program).

        Returns what of WORK was not kept (special files, folders past the depth limit).
        """
        skipped: list[str] = []
        if self.jail is not None:
            self.jail.close()
        try:
            if self.area is not None:
                skipped = self.area.close(keep_work)
        finally:
            safeio.remove_tree(self.state)
        return skipped


def _head(path: Path, cap: int) -> tuple[Optional[bytes], str]:
    """The first ``cap`` bytes of an over-long regular channel file (it is the agent's own; reading
    the head of it is what a bounded read of the prelude's queue means)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return None, type(error).__name__
    try:
        return os.read(fd, cap), "ok"
    finally:
        os.close(fd)


def _tree_pids(proc: subprocess.Popen) -> list[int]:
    try:
        import psutil

        return [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    except Exception:  # psutil missing, or the process already gone
        return [proc.pid]


def isolation_status() -> tuple[bool, str]:
    """Whether programs can be isolated on this machine, and why (for tests and reports)."""
    try:
        layout, problem = bwrap.layout(project_paths())
    except SandboxUnavailable as error:
        return False, str(error)
    if problem:
        return False, problem
    problem = bwrap.probe(layout, Limits().validate().resolved(300.0))
    return (problem is None), (problem or "bubblewrap works")
