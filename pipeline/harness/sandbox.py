"""Running one turn's agent program in isolation (SPEC section 7).

Each turn's program runs in a fresh ``python`` process.  Under bubblewrap
(``/usr/bin/bwrap``, Debian's package) the process sees only

* read-only: the system folders the interpreter needs (``/usr`` and the
  merged-usr links, a few files of ``/etc``) and the Python installation
  (``sys.prefix``, ``sys.base_prefix``, ``sys.exec_prefix`` and the
  site-packages folders);
* ``/release`` (the world's release, read-only; ``/release/imaging`` is
  IMAGING), ``/opt/dtw`` (the prelude, the genotype reader and the program,
  read-only);
* read-write: ``/work`` (WORK) and ``/run/dtw`` (the request channel);
* a private ``/tmp``, ``/dev`` and ``/proc``;

with every namespace unshared (no network, no view of the harness's
processes), all capabilities dropped, a cleared environment, a new terminal
session, and death with its parent.  A folder that contains a protected path
(the world's sealed bundle, the episode folder with its ledger and
transcript, the repository's conf/ with the development seeds) is never bound.

When bubblewrap is absent or cannot run here (user namespaces disabled, a
container without the privileges), or when the Python installation could
only be bound by exposing a protected path, the program runs as a plain
subprocess and the sandbox says so (``isolated`` False with a ``reason``);
``isolation="require"`` refuses instead.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

BWRAP = "/usr/bin/bwrap"
SANDBOX_RELEASE = "/release"
SANDBOX_WORK = "/work"
SANDBOX_LIB = "/opt/dtw"
SANDBOX_CHANNEL = "/run/dtw"
RUNTIME_NAME = "dtw_runtime.py"
GENOTYPES_NAME = "dtw_genotypes.py"
PROGRAM_NAME = "program.py"
OUTPUT_CAP = 32_000  # characters kept per stream and turn
MAX_REQUESTS_PER_TURN = 100
PROBE_TIMEOUT = 120.0

ISOLATION_MODES = ("auto", "require", "off")

# Only what the dynamic loader, libc's user lookup and Python's locale and
# mimetypes handling read; the rest of /etc stays out of view.
ETC_FILES = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
    "/etc/nsswitch.conf", "/etc/localtime", "/etc/mime.types", "/etc/alternatives", "/etc/fonts",
)
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

_HERE = Path(__file__).resolve().parent
REPOSITORY = _HERE.parents[1]
# The repository's config folder holds the development worlds' seeds, from
# which the generator would rebuild every truth.
REPOSITORY_CONF = REPOSITORY / "conf"


class SandboxUnavailable(RuntimeError):
    """isolation="require" was asked for but the program cannot be isolated here."""


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
    requests: list = field(default_factory=list)  # [{"kind", "protein"}] in request order
    requests_dropped: int = 0  # malformed lines or lines past MAX_REQUESTS_PER_TURN
    submitted: Optional[dict] = None  # the submission object handed to submit(), if any
    submit_error: Optional[str] = None

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


# ----------------------------------------------------------------------------- bind planning


def _contains(folder: Path, path: Path) -> bool:
    try:
        return path == folder or path.is_relative_to(folder)
    except ValueError:
        return False


def _python_dirs() -> list[Path]:
    """The folders the interpreter and its packages live in."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", sys.prefix)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            candidates.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    try:
        candidates.update(site.getsitepackages())
    except AttributeError:  # some virtualenv versions lack it
        pass
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and os.path.isdir(user_site):
        candidates.add(user_site)
    candidates.add(str(Path(sys.executable).resolve().parent))
    dirs = sorted({Path(c).resolve() for c in candidates if c and os.path.isdir(c)}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for d in dirs:
        if not any(_contains(kept, d) for kept in out):
            out.append(d)
    return out


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in MERGED_USR:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


@dataclass(frozen=True)
class _Plan:
    python_dirs: tuple
    problem: Optional[str]


def _plan(protected: Iterable[Path], extra_sources: Iterable[Path]) -> _Plan:
    dirs = _python_dirs()
    protected = [Path(p).resolve() for p in protected]
    for source in [*dirs, Path("/usr"), *[Path(p).resolve() for p in extra_sources]]:
        for p in protected:
            if _contains(source, p):
                return _Plan(tuple(dirs), f"binding {source} would expose the protected path {p}")
    return _Plan(tuple(dirs), None)


_probe_cache: dict = {}
_probe_lock = threading.Lock()


def _probe(python_dirs: tuple) -> Optional[str]:
    """None when bubblewrap can run the interpreter with numpy, pandas and scipy; else why not."""
    key = (BWRAP, python_dirs)
    with _probe_lock:
        if key in _probe_cache:
            return _probe_cache[key]
        if not os.path.exists(BWRAP):
            reason = f"{BWRAP} not found (install Debian's bubblewrap package)"
        else:
            cmd = [BWRAP, *_common_args(python_dirs), "--", _python(), "-I", "-c",
                   "import numpy, pandas, scipy, zarr, numcodecs; print('ok')"]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT, env=_base_env())
                if done.returncode == 0 and done.stdout.strip().endswith("ok"):
                    reason = None
                else:
                    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                    reason = f"bubblewrap probe failed (exit {done.returncode}): {' | '.join(tail) or 'no output'}"
            except (OSError, subprocess.TimeoutExpired) as error:
                reason = f"bubblewrap probe failed: {type(error).__name__}: {error}"
        _probe_cache[key] = reason
        return reason


def _python() -> str:
    return str(Path(sys.executable).resolve())


def _common_args(python_dirs: Iterable[Path]) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    if os.geteuid() == 0:
        # As real root bubblewrap would otherwise keep the capabilities.
        args += ["--cap-drop", "ALL"]
    # The private /tmp first: a Python installation under /tmp is then bound on top of it
    # rather than hidden by it.
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    args += _system_args()
    for d in python_dirs:
        if not _contains(Path("/usr"), d):
            args += ["--ro-bind", str(d), str(d)]
    return args


def _base_env() -> dict:
    path_dirs = [str(Path(_python()).parent), "/usr/local/bin", "/usr/bin", "/bin"]
    return {
        "PATH": os.pathsep.join(dict.fromkeys(path_dirs)),
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MPLBACKEND": "Agg",
    }


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

    ``protected`` paths must never become reachable (the world's sealed
    folder, the episode folder); ``state_dir`` is where the sandbox keeps its
    prelude and channel folders (it may sit inside the episode folder: only
    its ``lib`` and ``channel`` subfolders are ever bound).
    """

    def __init__(
        self,
        release: os.PathLike | str,
        work: os.PathLike | str,
        state_dir: os.PathLike | str,
        *,
        protected: Iterable[os.PathLike | str] = (),
        isolation: str = "auto",
        output_cap: int = OUTPUT_CAP,
    ):
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation={isolation!r} is invalid; valid: {', '.join(ISOLATION_MODES)}")
        self.release = Path(release).resolve()
        self.work = Path(work).resolve()
        self.state_dir = Path(state_dir).resolve()
        self.lib = self.state_dir / "lib"
        self.channel = self.state_dir / "channel"
        self.output_cap = output_cap
        self.protected = [Path(p).resolve() for p in protected] + [REPOSITORY_CONF]
        self.lib.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_HERE / "runtime.py", self.lib / RUNTIME_NAME)
        shutil.copyfile(_HERE.parent / "genotypes_io.py", self.lib / GENOTYPES_NAME)

        self.isolated, self.reason = self._decide(isolation)
        if isolation == "require" and not self.isolated:
            raise SandboxUnavailable(f"isolation=require but the program cannot be isolated: {self.reason}")

    def _decide(self, isolation: str) -> tuple[bool, str]:
        if isolation == "off":
            return False, "isolation=off was requested: agent code runs as a plain subprocess and can read any file the harness can"
        plan = _plan(self.protected, [self.release, self.work, self.lib, self.channel])
        if plan.problem:
            return False, f"not isolated: {plan.problem}"
        self._python_dirs = plan.python_dirs
        problem = _probe(plan.python_dirs)
        if problem:
            return False, f"not isolated: {problem}; agent code runs as a plain subprocess and can read any file the harness can"
        return True, "bubblewrap: release read-only, work writable, no network, sealed bundle and episode folder not mounted"

    @property
    def agent_paths(self) -> dict:
        """RELEASE, IMAGING and WORK as the agent's program sees them."""
        if self.isolated:
            return {"RELEASE": SANDBOX_RELEASE, "IMAGING": f"{SANDBOX_RELEASE}/imaging", "WORK": SANDBOX_WORK}
        return {"RELEASE": str(self.release), "IMAGING": str(self.release / "imaging"), "WORK": str(self.work)}

    def _command(self) -> tuple[list[str], dict]:
        paths = self.agent_paths
        env = _base_env()
        if self.isolated:
            env.update(DTW_RELEASE=paths["RELEASE"], DTW_IMAGING=paths["IMAGING"], DTW_WORK=paths["WORK"],
                       DTW_CHANNEL=SANDBOX_CHANNEL)
            cmd = [BWRAP, *_common_args(self._python_dirs)]
            for key, value in env.items():
                cmd += ["--setenv", key, value]
            cmd += [
                "--ro-bind", str(self.release), SANDBOX_RELEASE,
                "--bind", str(self.work), SANDBOX_WORK,
                "--ro-bind", str(self.lib), SANDBOX_LIB,
                "--bind", str(self.channel), SANDBOX_CHANNEL,
                "--chdir", SANDBOX_WORK,
                "--", _python(), "-I", "-B", f"{SANDBOX_LIB}/{RUNTIME_NAME}", f"{SANDBOX_LIB}/{PROGRAM_NAME}",
            ]
            return cmd, _base_env()
        env.update(DTW_RELEASE=paths["RELEASE"], DTW_IMAGING=paths["IMAGING"], DTW_WORK=paths["WORK"],
                   DTW_CHANNEL=str(self.channel))
        return [_python(), "-I", "-B", str(self.lib / RUNTIME_NAME), str(self.lib / PROGRAM_NAME)], env

    def run(self, code: str, timeout: float) -> RunResult:
        """Run one program to completion or until ``timeout`` seconds, then kill its process tree."""
        if self.channel.exists():
            shutil.rmtree(self.channel)
        self.channel.mkdir(parents=True)
        (self.lib / PROGRAM_NAME).write_text(code, encoding="utf-8")
        cmd, env = self._command()
        cwd = str(self.work) if not self.isolated else None
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd, start_new_session=True,
        )
        out, err = _Capture(proc.stdout, self.output_cap), _Capture(proc.stderr, self.output_cap)
        out.start()
        err.start()
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
        self._read_channel(result)
        return result

    def _read_channel(self, result: RunResult) -> None:
        requests_path = self.channel / "requests.jsonl"
        if requests_path.is_file() and not requests_path.is_symlink():
            with open(requests_path, "rb") as handle:
                # Bounded read: the agent controls this file's size.
                raw = handle.read(MAX_REQUESTS_PER_TURN * 4096)
            for line in raw.decode("utf-8", errors="replace").splitlines():
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    result.requests_dropped += 1
                    continue
                if not isinstance(item, dict) or len(result.requests) >= MAX_REQUESTS_PER_TURN:
                    result.requests_dropped += 1
                    continue
                result.requests.append({"kind": item.get("kind"), "protein": item.get("protein")})
        submit_path = self.channel / "submit.json"
        if submit_path.is_file() and not submit_path.is_symlink():
            try:
                with open(submit_path, "rb") as handle:
                    parsed = json.loads(handle.read(64 * 1024 * 1024).decode("utf-8"))
            except (OSError, ValueError, UnicodeDecodeError, RecursionError) as error:
                result.submit_error = f"the submit() record is unreadable ({type(error).__name__})"
                return
            if isinstance(parsed, dict):
                result.submitted = parsed
            else:
                result.submit_error = "the submit() record is not a JSON object"

    def close(self) -> None:
        """Remove the prelude and channel folders (the transcript keeps every program)."""
        shutil.rmtree(self.state_dir, ignore_errors=True)


def isolation_status() -> tuple[bool, str]:
    """Whether programs can be isolated on this machine, and why (for tests and reports)."""
    plan = _plan([REPOSITORY_CONF], [])
    if plan.problem:
        return False, plan.problem
    problem = _probe(plan.python_dirs)
    return (problem is None), (problem or "bubblewrap works")

