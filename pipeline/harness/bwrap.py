"""The bubblewrap command of an agent program: what is mounted, who it runs as, and the probe.

``layout()`` decides, once per environment, which folders are bound
(the interpreter's own, with protected paths inside them masked), the
mount points inside the sandbox and the unprivileged uid a root harness
switches to; ``base_args()`` and ``exec_chain()`` turn that into bubblewrap
options and the ``prlimit``/``setpriv`` chain; ``BwrapCall`` passes the
options through a file descriptor so that the sandbox's ``/proc/1/cmdline``
shows none of them; ``probe()`` runs the scientific stack in such a sandbox
once and says exactly what failed when it cannot.  The reasons for each
choice are in ``sandbox.py``'s docstring.
"""
from __future__ import annotations

import os
import pwd
import site
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .limits import PRLIMIT, Limits, have_prlimit
from .seccomp import build_filter

BWRAP = "/usr/bin/bwrap"
SETPRIV = "/usr/bin/setpriv"
PROBE_TIMEOUT = 120.0
PROBE_MODULES = ("numpy", "pandas", "scipy", "zarr", "numcodecs")


# Mount points inside the sandbox; the second set is used when the environment's
# own folders sit under one of the first (e.g. a venv in /work/venv).
MOUNT_SETS = (
    {"release": "/release", "work": "/work", "lib": "/opt/dtw", "channel": "/run/dtw"},
    {"release": "/dtw/release", "work": "/dtw/work", "lib": "/dtw/lib", "channel": "/dtw/channel"},
)

# Only what the dynamic loader, libc's user lookup and Python's locale and
# mimetypes handling read; the rest of /etc stays out of view.
ETC_FILES = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
    "/etc/nsswitch.conf", "/etc/localtime", "/etc/mime.types", "/etc/alternatives", "/etc/fonts",
)
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

_HERE = Path(__file__).resolve().parent
REPOSITORY = _HERE.parents[1]


def project_paths() -> list[Path]:
    """The project's own code and configuration wherever they are installed.

    The config folder holds the development worlds' seeds, from which the
    generator would rebuild every truth; the package itself is never needed
    by agent code.  Inside a bound folder (site-packages of a wheel install)
    these are masked, never exposed.
    """
    import pipeline  # the installed package, wherever it lives
    import kernels

    from ..paths import CONF_DIR, SCHEMA_DIR

    paths = {Path(pipeline.__file__).resolve().parent, Path(kernels.__file__).resolve().parent,
             REPOSITORY / "worlds", REPOSITORY / "episodes"}
    # The configs (conf/world/*.yaml carry the development seeds) and the schemas: inside the
    # package of a wheel, the repository's root folders of a checkout or an editable install.
    for folder in (Path(CONF_DIR).resolve(), Path(SCHEMA_DIR).resolve()):
        if not any(contains(p, folder) for p in paths):
            paths.add(folder)
    return sorted(paths)


class SandboxUnavailable(RuntimeError):
    """isolation="require" was asked for but the program cannot be isolated here."""


# ----------------------------------------------------------------------------- paths


def contains(folder: Path, path: Path) -> bool:
    try:
        return path == folder or path.is_relative_to(folder)
    except ValueError:
        return False


def python_executable() -> str:
    """The interpreter as this process was started: a venv's own ``bin/python``, not its link target.

    Resolving the link would start the base interpreter, which has none of
    the venv's packages.
    """
    return os.path.abspath(sys.executable)


def _symlink_hops(path: str) -> list[Path]:
    """Every path the kernel visits resolving ``path``'s chain of links (the last is the real file)."""
    hops, current = [], Path(path)
    for _ in range(40):
        hops.append(current)
        if not current.is_symlink():
            break
        target = Path(os.readlink(current))
        current = target if target.is_absolute() else current.parent / target
        current = Path(os.path.normpath(current))
    return hops


def site_dirs() -> list[str]:
    """The site folders of this environment, user site included when it is enabled."""
    dirs = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # some virtualenv versions lack it
        pass
    if site.ENABLE_USER_SITE:
        user = site.getusersitepackages()
        if user and os.path.isdir(user):
            dirs.append(user)
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _installed_path_dirs() -> list[str]:
    """Folders on sys.path that hold installed distributions (added by a .pth file, PYTHONPATH or conda).

    A folder that holds the project's own package without being a site folder (a
    source checkout on the path) is left out: agent code never needs it.
    """
    project = Path(__file__).resolve().parents[1]
    sites = {os.path.abspath(d) for d in site_dirs()}
    out = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        if not any(n.endswith(".dist-info") for n in names):
            continue
        if os.path.abspath(entry) not in sites and contains(Path(os.path.abspath(entry)), project):
            continue
        out.append(entry)
    return out


def python_dirs() -> list[Path]:
    """The folders the interpreter and its packages live in (outermost only)."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", sys.prefix)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            candidates.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    candidates.update(site_dirs())
    candidates.update(_installed_path_dirs())
    for hop in _symlink_hops(python_executable()):
        candidates.add(str(hop.parent))
    dirs = sorted({Path(os.path.abspath(c)) for c in candidates if c and os.path.isdir(c)}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for d in dirs:
        if not any(contains(kept, d) for kept in out):
            out.append(d)
    return out


def _sandbox_uid() -> int:
    """An unprivileged host uid for programs when the harness runs as root.

    ``DTW_SANDBOX_UID`` picks one; otherwise the first uid of 64100-64999 with
    no account and no running process, starting from an offset taken from this
    process's id so that concurrent episodes rarely share one (the process
    limit is counted per uid).
    """
    chosen = os.environ.get("DTW_SANDBOX_UID")
    if chosen:
        uid = int(chosen)
        if uid <= 0:
            raise SandboxUnavailable(f"DTW_SANDBOX_UID={chosen}: invalid; valid: a uid > 0")
        return uid
    busy = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                busy.add(os.stat(f"/proc/{entry}").st_uid)
            except OSError:
                pass
    start = os.getpid() % 900
    for k in range(900):
        uid = 64100 + (start + k) % 900
        if uid in busy:
            continue
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            return uid
    raise SandboxUnavailable("no free uid in 64100-64999 for the sandbox; set DTW_SANDBOX_UID")


# ----------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class Layout:
    """How this environment is mounted: python folders, masks, mount points, uid."""

    python_dirs: tuple
    masks: tuple  # protected paths inside a bound folder, hidden under an empty mount
    mounts: dict
    uid: Optional[int]  # host uid the program runs as (root harness only)
    seccomp: Optional[bytes]


def layout(protected: Iterable[Path]) -> tuple[Optional[Layout], Optional[str]]:
    dirs = python_dirs()
    bound = [Path("/usr"), *dirs]
    masks = []
    for p in protected:
        p = Path(os.path.abspath(p))
        if any(contains(b, p) for b in bound) and p.exists():
            masks.append(p)
    mounts = None
    for candidate in MOUNT_SETS:
        points = [Path(v) for v in candidate.values()]
        if not any(contains(m, d) or contains(d, m) for m in points for d in bound):
            mounts = candidate
            break
    if mounts is None:
        return None, f"the Python folders {', '.join(map(str, dirs))} overlap every set of sandbox mount points"
    uid = _sandbox_uid() if os.geteuid() == 0 else None
    return Layout(tuple(dirs), tuple(sorted(masks)), dict(mounts), uid, build_filter()), None


def system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in MERGED_USR:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # /etc itself made readable first: bubblewrap would otherwise create it 0700 for root,
    # and a program running as the unprivileged uid could not reach the files bound in it
    # (the loader's cache, the alternatives links that plink2, awk and which resolve through).
    args += ["--perms", "0755", "--dir", "/etc"]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


def parents_args(paths: Iterable[Path], made: set) -> list[str]:
    """World-readable folders for every ancestor of ``paths`` (bubblewrap would make them 0700)."""
    args = []
    for path in paths:
        for parent in reversed(path.parents):
            if str(parent) == "/" or parent in made or contains(Path("/usr"), parent):
                continue
            made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def base_args(layout: Layout, limits: Limits) -> list[str]:
    args = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]
    if layout.uid is not None:
        # Root: no user namespace (uid 0 inside one is uid 0 outside); keep only what
        # setpriv needs to switch to the unprivileged uid, which then drops everything.
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                 "--cap-add", "CAP_SETPCAP"]
    else:
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    tmp = str(limits.tmp_size)
    args += ["--dev", "/dev", "--perms", "1777", "--size", tmp, "--tmpfs", "/dev/shm",
             "--proc", "/proc", "--remount-ro", "/proc",
             "--perms", "1777", "--size", tmp, "--tmpfs", "/tmp"]
    args += system_args()
    made: set = set()
    outside_usr = [d for d in layout.python_dirs if not contains(Path("/usr"), d)]
    args += parents_args(outside_usr, made)
    for d in outside_usr:
        args += ["--ro-bind", str(d), str(d)]
    for m in layout.masks:
        if m.is_dir():
            args += ["--perms", "0555", "--tmpfs", str(m)]
        else:
            args += ["--ro-bind", "/dev/null", str(m)]
    return args


def exec_chain(layout: Optional[Layout], limits: Limits) -> list[str]:
    """prlimit (and setpriv for a root harness) before the interpreter."""
    chain = []
    if have_prlimit():
        chain += [PRLIMIT, *limits.prlimit_args(), "--"]
    if layout is not None and layout.uid is not None:
        chain += [SETPRIV, f"--reuid={layout.uid}", f"--regid={layout.uid}", "--clear-groups",
                  "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return chain


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class BwrapCall:
    """One bubblewrap invocation with its arguments (and filter) passed as file descriptors."""

    def __init__(self, args: list[str], command: list[str], seccomp: Optional[bytes]):
        self.fds = []
        extra = []
        if seccomp is not None:
            fd = _memfd("dtw-seccomp", seccomp)
            self.fds.append(fd)
            extra = ["--seccomp", str(fd)]
        # The options (every mount source among them) go through the descriptor; only
        # the command, which names nothing of the world, stays on the command line.
        payload = "\0".join([*args, *extra]) + "\0"
        self.args_fd = _memfd("dtw-args", payload.encode())
        self.fds.append(self.args_fd)
        self.argv = [BWRAP, "--args", str(self.args_fd), "--", *command]

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


def base_env() -> dict:
    path_dirs = [str(Path(python_executable()).parent), "/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(path_dirs)),
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "DTW_SITE_DIRS": os.pathsep.join(site_dirs()),
    }
    return env


# ----------------------------------------------------------------------------- probing


_probe_cache: dict = {}
_probe_lock = threading.Lock()

_PROBE_CODE = (
    "import os, site\n"
    "for d in os.environ.get('DTW_SITE_DIRS', '').split(os.pathsep):\n"
    "    d and site.addsitedir(d)\n"
    "import " + ", ".join(PROBE_MODULES) + "\n"
    "print('ok', os.getuid())\n"
)


def _runprobe(layout: Layout, limits: Limits, command: list[str]) -> tuple[int, str, str]:
    bw = BwrapCall(base_args(layout, limits), [*exec_chain(layout, limits), *command], layout.seccomp)
    try:
        done = subprocess.run(bw.argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              env=base_env(), pass_fds=tuple(bw.fds))
        return done.returncode, done.stdout, done.stderr
    finally:
        bw.close()


def probe(layout: Layout, limits: Limits) -> Optional[str]:
    """None when the sandbox can run this interpreter with its scientific stack; else what failed."""
    key = (layout.python_dirs, layout.masks, layout.uid is not None, python_executable())
    with _probe_lock:
        if key in _probe_cache:
            return _probe_cache[key]
        reason = None
        if not os.path.exists(BWRAP):
            reason = f"{BWRAP} not found (install Debian's bubblewrap package)"
        elif layout.uid is not None and not os.path.exists(SETPRIV):
            reason = f"{SETPRIV} not found (util-linux): a root harness cannot drop to an unprivileged uid"
        else:
            try:
                code, out, err = _runprobe(layout, limits, ["/usr/bin/true"])
                if code != 0:
                    reason = (f"bubblewrap cannot start a sandbox here (exit {code}): "
                              f"{_tail(err) or 'no message'}")
                else:
                    code, out, err = _runprobe(layout, limits, [python_executable(), "-I", "-B", "-c", _PROBE_CODE])
                    if code != 0 or not out.strip().startswith("ok"):
                        reason = (f"inside the sandbox the interpreter {python_executable()} cannot import "
                                  f"{', '.join(PROBE_MODULES)}: {_tail(err) or _tail(out) or f'exit {code}'} "
                                  f"(bound read-only: {', '.join(map(str, layout.python_dirs))})")
                    elif layout.uid is not None and out.split()[1] != str(layout.uid):
                        reason = f"the program did not switch to uid {layout.uid} (it reported {out.split()[1]})"
            except (OSError, subprocess.TimeoutExpired) as error:
                reason = f"bubblewrap probe failed: {type(error).__name__}: {error}"
        _probe_cache[key] = reason
        return reason


def _tail(text: str, lines: int = 2) -> str:
    return " | ".join(line.strip() for line in (text or "").strip().splitlines()[-lines:])
