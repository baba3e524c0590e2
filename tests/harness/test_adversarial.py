"""A hostile agent against the harness: each attack must be blocked, none may crash the episode.

Runs wherever bubblewrap can isolate (the tests that need it skip with the
reason otherwise).  Nothing here changes a host setting: privileges are
checked by ownership and by opening for write without writing.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.agents import create_agent
from pipeline.agents.base import Agent
from pipeline.agents.cis_mr import CisMRAgent
from pipeline.harness import isolation_status, run_episode
from pipeline.harness import bwrap as bwrap_mod
from pipeline.harness import sandbox as sandbox_mod
from pipeline.harness.episode import default_isolation
from pipeline.harness.limits import MiB, Limits
from faults import fail_on_call

REPO = Path(__file__).resolve().parents[2]
ISOLATED, ISOLATION_REASON = isolation_status()
needs_isolation = pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot isolate here: {ISOLATION_REASON}")


class Replies(Agent):
    name = "adversary"

    def __init__(self, *replies):
        self.replies = list(replies)
        self.observations = []

    def act(self, observation):
        self.observations.append(observation)
        reply = self.replies.pop(0) if self.replies else SUBMIT_EMPTY
        return reply if reply.startswith("```") else f"```python\n{reply}\n```"


SUBMIT_EMPTY = "submit({'nominated': [], 'directions': {}, 'outcome_alignment': {}, 'rejected': [], 'abstentions': []})"


def report_of(observation) -> dict:
    line = [l for l in observation.stdout.splitlines() if l.startswith("REPORT ")]
    assert line, observation.text
    return json.loads(line[-1][len("REPORT "):])


def truth_of(world) -> dict:
    return json.loads((Path(world) / "sealed" / "truth.json").read_text())


# ----------------------------------------------------------------------------- privileges

PRIVILEGES = r'''
import ctypes, errno
report = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups()}
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
report["caps"] = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
report["no_new_privs"] = status["NoNewPrivs"].strip()
report["seccomp"] = status["Seccomp"].strip()
def open_for_write(path):
    try:
        fd = os.open(path, os.O_WRONLY)
        os.close(fd)
        return "OPENED"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))
report["proc_sys"] = {p: open_for_write(p) for p in (
    "/proc/sys/vm/swappiness", "/proc/sys/kernel/core_pattern", "/proc/sys/fs/file-max", "/proc/sysrq-trigger",
    "/proc/self/oom_score_adj")}
libc = ctypes.CDLL(None, use_errno=True)
def syscall_errno(fn, *args):
    result = fn(*args)
    return "SUCCEEDED" if result == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
report["setuid0"] = syscall_errno(libc.setuid, 0)
report["unshare_user"] = syscall_errno(libc.unshare, 0x10000000)
report["mount_tmpfs"] = syscall_errno(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None)
open(os.path.join(WORK, "mine.txt"), "w").write("x")
print("REPORT " + json.dumps(report))
'''


@needs_isolation
def test_programs_run_unprivileged_and_cannot_touch_host_settings(tiny_world_noimaging, tmp_path):
    agent = Replies(PRIVILEGES, SUBMIT_EMPTY)
    result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "priv", timeout=120)
    assert result["isolated"] is True
    report = report_of(agent.observations[1])
    assert report["uid"] != 0 and report["euid"] != 0 and report["gid"] != 0 and 0 not in report["groups"]
    assert set(report["caps"].values()) == {"0000000000000000"}, report["caps"]
    assert report["no_new_privs"] == "1"
    assert report["seccomp"] == ("2" if bwrap_mod.build_filter() is not None else "0")
    for path, outcome in report["proc_sys"].items():
        assert outcome != "OPENED", path
    assert report["setuid0"] == "EPERM"
    assert report["unshare_user"] == "EPERM" and report["mount_tmpfs"] == "EPERM"
    owner = (Path(result["episode"]["episode_dir"]) / "work" / "mine.txt").stat().st_uid
    assert owner == report["uid"]
    if os.geteuid() == 0:
        assert owner != 0  # the file exists on the host: its owner is the host uid the program ran as


def _unprivileged_python_works(uid: int) -> bool:
    """Whether ``uid`` can run this very environment (same prefixes, same packages)."""
    done = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable,
                           "-c", "import sys, numpy, pandas; print(sys.prefix); print(sys.base_prefix)"],
                          capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.split() == [sys.prefix, sys.base_prefix]


@needs_isolation
def test_a_normal_user_harness_is_isolated_too(tiny_world_noimaging, tmp_path):
    """The harness as a normal user: bubblewrap in a user namespace, the same attacks blocked."""
    if os.geteuid() != 0:
        user_uid = os.geteuid()  # already a normal user: the other tests cover it
        pytest.skip(f"the test suite itself runs as uid {user_uid}")
    uid = 64099
    if not _unprivileged_python_works(uid):
        pytest.skip(f"this interpreter ({sys.executable}) is not readable by an unprivileged user "
                    "(it lives in a private folder), so no harness can run as one here")
    import tempfile

    # pytest's own temp folders are private to root: the user gets a folder it can reach.
    shared = Path(tempfile.mkdtemp(prefix="dtw-normal-user-", dir="/tmp"))
    request_cleanup = shared
    shutil.copytree(tiny_world_noimaging, shared / "world")
    for root, dirs, files in os.walk(shared):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    out = shared / "episodes"
    out.mkdir()
    os.chown(out, uid, uid)
    try:
        _run_as_normal_user(uid, shared, out)
    finally:
        shutil.rmtree(request_cleanup, ignore_errors=True)


def _run_as_normal_user(uid: int, shared: Path, out: Path) -> None:
    code = (
        "import json, sys\n"
        "from pipeline.harness import run_episode\n"
        "from pipeline.agents.base import Agent\n"
        f"PRIV = {PRIVILEGES!r}\n"
        "class A(Agent):\n"
        "    def __init__(self): self.seen = []; self.replies = ['```python\\n' + PRIV + '\\n```']\n"
        "    def act(self, o):\n"
        "        self.seen.append(o.stdout)\n"
        "        return self.replies.pop(0) if self.replies else '```python\\nsubmit({})\\n```'\n"
        "a = A()\n"
        f"r = run_episode({str(shared / 'world')!r}, a, budget=0, out={str(out / 'ep')!r}, timeout=120, isolation='require')\n"
        "print(json.dumps({'isolated': r['isolated'], 'stdout': a.seen[1]}))\n"
    )
    done = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable, "-c", code],
                          capture_output=True, text=True, cwd=REPO, timeout=600, env={**os.environ, "HOME": str(shared)})
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["isolated"] is True
    report = json.loads([l for l in outcome["stdout"].splitlines() if l.startswith("REPORT ")][0][7:])
    assert report["uid"] == uid and set(report["caps"].values()) == {"0000000000000000"}
    assert all(v != "OPENED" for v in report["proc_sys"].values())
    assert report["unshare_user"] == "EPERM" and report["mount_tmpfs"] == "EPERM"


# ----------------------------------------------------------------------------- the world's identity

IDENTITY = r'''
needles = json.loads(NEEDLES)
texts = {}
def grab(path, limit=4_000_000):
    try:
        with open(path, "rb") as handle:
            texts[path] = handle.read(limit)
    except OSError:
        pass
grab("/proc/1/cmdline")
for name in os.listdir("/proc/self"):
    if name not in ("mem", "pagemap", "clear_refs", "kcore"):
        grab("/proc/self/" + name)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        grab(f"/proc/{pid}/cmdline")
        grab(f"/proc/{pid}/environ")
texts["environment"] = "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode()
for top in (RELEASE, WORK, os.path.dirname(__file__), os.environ["DTW_CHANNEL"]):
    for root, dirs, files in os.walk(top):
        texts[root] = "\n".join(dirs + files).encode()
        for name in files:
            if os.path.join(root, name) != __file__:  # this program holds the needles
                grab(os.path.join(root, name), limit=None)
hits = []
for where, data in texts.items():
    lowered = data.lower()
    for needle in needles:
        if needle.lower().encode() in lowered:
            hits.append([needle, where])
print("REPORT " + json.dumps({"hits": hits, "files": len(texts)}))
'''


@needs_isolation
def test_nothing_in_the_sandbox_names_the_world_or_a_host_path(tiny_world_noimaging, tmp_path):
    world = Path(tiny_world_noimaging)
    truth = truth_of(world)
    out = tmp_path / "identity-episode"
    needles = [truth["world_id"], str(world), str(world.parent), str(out), f"archetype: {truth['archetype']}",
               f'"archetype": "{truth["archetype"]}"', f"{truth['world_id']}/release"]
    agent = Replies(f"NEEDLES = {json.dumps(needles)!r}\n" + IDENTITY, SUBMIT_EMPTY)
    result = run_episode(world, agent, budget=0, out=out, timeout=300)
    assert result["isolated"] is True
    report = report_of(agent.observations[1])
    assert report["files"] > 20 and report["hits"] == []
    # The policy itself is not told the world either.
    assert truth["world_id"] not in agent.observations[0].text


@needs_isolation
def test_archetype_names_are_absent_from_every_text_the_program_can_read(tiny_world_noimaging, tmp_path):
    """Release text files, the prelude and /proc carry no archetype name at all (they would name the world's)."""
    agent = Replies(
        "import re\nfound = []\n"
        "for top in (RELEASE, os.path.dirname(__file__)):\n"
        "    for root, _, files in os.walk(top):\n"
        "        for name in files:\n"
        "            if name == 'program.py': continue\n"
        "            if name.endswith(('.md', '.tsv', '.json', '.py', '.txt', '.yaml')):\n"
        "                text = open(os.path.join(root, name), errors='replace').read().lower()\n"
        "                found += [[name, w] for w in ('dcm', 'hcm', 'hfpef', 'ischemic', 'ischaemic', 'archetype')\n"
        "                          if re.search(r'\\b' + w + r'\\b', text)]\n"
        "print('REPORT ' + json.dumps({'found': found}))", SUBMIT_EMPTY)
    result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "arch", timeout=120)
    assert result["isolated"] is True
    assert report_of(agent.observations[1])["found"] == []


# ----------------------------------------------------------------------------- limits

FORK = r'''
import subprocess
children, error = [], None
try:
    for _ in range(100):
        children.append(subprocess.Popen(["sleep", "20"]))
except OSError as exc:
    error = type(exc).__name__
print("REPORT " + json.dumps({"started": len(children), "error": error}))
'''
MEMORY = r'''
try:
    block = bytearray(3 * 1024 ** 3)
    outcome = "allocated"
except MemoryError:
    outcome = "MemoryError"
print("REPORT " + json.dumps({"outcome": outcome}))
'''
BIG_FILE = "with open(os.path.join(WORK, 'big.bin'), 'wb') as f:\n    for _ in range(64):\n        f.write(b'x' * 1024 * 1024)\nprint('wrote it all')"
WORK_FILL = ("import time\nfor i in range(12):\n    with open(os.path.join(WORK, f'part{i}.bin'), 'wb') as f:\n"
             "        f.write(os.urandom(12 * 1024 * 1024))\n    time.sleep(0.3)\nprint('filled')")
TMP_FILL = r'''
try:
    with open("/tmp/fill.bin", "wb") as f:
        for _ in range(64):
            f.write(b"y" * 1024 * 1024)
    outcome = "wrote"
except OSError as exc:
    outcome = type(exc).__name__ + str(exc.errno)
print("REPORT " + json.dumps({"outcome": outcome}))
'''
CLEAN = "import glob\nfor p in glob.glob(os.path.join(WORK, '*.bin')):\n    os.remove(p)\nprint('REPORT ' + json.dumps({'left': os.listdir(WORK)}))"


@needs_isolation
def test_limits_end_the_turn_never_the_episode_or_the_host(tiny_world_noimaging, tmp_path):
    import psutil

    limits = Limits(processes=48, memory=1024 * MiB, file_size=32 * MiB, work_size=96 * MiB, tmp_size=32 * MiB)
    agent = Replies(FORK, MEMORY, BIG_FILE, WORK_FILL, TMP_FILL, CLEAN, SUBMIT_EMPTY)
    before = len(psutil.pids())
    result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "limits", timeout=120, limits=limits,
                         max_turns=8)
    assert result["isolated"] is True and result["episode"]["exit_reason"] == "submitted"
    fork, memory, big, fill, tmp, clean = agent.observations[1:7]
    assert report_of(fork)["started"] < 48 and report_of(fork)["error"] in ("BlockingIOError", "OSError")
    assert report_of(memory)["outcome"] == "MemoryError"
    assert big.status == "failed" and "per-file limit" in big.text and "wrote it all" not in big.stdout
    kernel = "kernel-enforced" in json.loads((tmp_path / "limits" / "transcript.json").read_text())["limits_enforcement"]
    # A kernel-enforced WORK refuses the write (ENOSPC); a measured one stops the program.
    stopped = "No space left on device" in fill.text and "WORK holds at most" in fill.text if kernel else "WORK grew to" in fill.text
    assert fill.status == "failed" and stopped and "filled" not in fill.stdout, fill.text
    assert report_of(tmp)["outcome"].startswith("OSError")  # ENOSPC on the size-limited /tmp
    assert report_of(clean)["left"] == ["experiments"]
    assert len(psutil.pids()) < before + 20  # every child was reaped with its turn


# ----------------------------------------------------------------------------- hostile input

CHANNEL = r'''
path = os.path.join(os.environ["DTW_CHANNEL"], "requests.jsonl")
lines = [b"NaN", b'{"kind": NaN, "protein": "PROT_0001"}', b'{"kind": "knockdown", "protein": 1e999}',
         b"[" * 100_000, b'{"kind": "knockdown", "protein": "' + b"A" * 300_000 + b'"}',
         b'{"kind": "knockdown", "protein": "\xff\xfe"}', b'{"kind": ["knockdown"], "protein": {"x": 1}}',
         json.dumps({"kind": "knockdown", "protein": DRIVER}).encode()]
with open(path, "wb") as handle:
    handle.write(b"\n".join(lines) + b"\n")
print("wrote", len(lines))
'''


def test_hostile_request_lines_are_refused_with_a_ledger_row(tiny_world_noimaging, tmp_path):
    driver = truth_of(tiny_world_noimaging)["drivers"][0]["protein"]
    agent = Replies(f"DRIVER = {driver!r}\n" + CHANNEL, SUBMIT_EMPTY)
    out = tmp_path / "channel"
    result = run_episode(tiny_world_noimaging, agent, budget=450_000, out=out, timeout=120, isolation="auto")
    assert result["episode"]["exit_reason"] == "submitted"
    assert (out / "score.json").exists()
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    refused = [r for r in rows if r["status"] == "refused"]
    delivered = [r for r in rows if r["status"] == "delivered"]
    assert len(refused) == 7 and [r["protein"] for r in delivered] == [driver]
    assert all(len(json.dumps(r)) < 400 for r in rows)
    notice = agent.observations[1].text
    assert notice.count("refused:") == 7 and "A" * 200 not in notice and len(notice) < 20_000
    assert (out / "work" / "experiments" / f"{driver}.knockdown.json").exists()


def test_non_finite_submissions_are_refused_and_score_json_is_always_written(tiny_world_noimaging, tmp_path):
    nan_submit = ("open(os.path.join(WORK, 'submission.json'), 'w').write("
                  "'{\"nominated\": [], \"confidence\": NaN}')\nsubmit()")
    agent = Replies(nan_submit, "print('still here')")
    out = tmp_path / "nan"
    result = run_episode(tiny_world_noimaging, agent, budget=0, out=out, timeout=120, isolation="auto", max_turns=2)
    assert result["episode"]["exit_reason"] == "turn_limit"
    assert "submit() not accepted" in agent.observations[1].text and "non-finite" in agent.observations[1].text
    saved = json.loads((out / "score.json").read_text())
    assert saved["total"] == result["total"]


def test_a_sparse_phenotype_file_is_refused_without_reading_it(tiny_world_noimaging, tmp_path):
    program = f"open(OUT_CSV, 'w').close()\nos.truncate(OUT_CSV, 512 * 1024 * 1024)\n{SUBMIT_EMPTY}"
    agent = Replies(program)
    out = tmp_path / "sparse"
    result = run_episode(tiny_world_noimaging, agent, budget=0, out=out, timeout=120, isolation="auto")
    assert "too large" in result["details"]["phenotype_construction"]["file"]
    assert result["phenotype_construction"] == 0
    # The scorer on its own, held to 1 GiB of address space, refuses it too.
    done = subprocess.run(["prlimit", f"--as={1024 * MiB}", sys.executable, "-m", "pipeline.score",
                           "--sealed", str(Path(tiny_world_noimaging) / "sealed"), "--work", str(out / "work")],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-1000:]
    assert "too large" in json.loads(done.stdout)["details"]["phenotype_construction"]["file"]


# ----------------------------------------------------------------------------- failing closed


def test_an_episode_whose_programs_never_start_is_an_error_exit(tiny_world_noimaging, tmp_path, monkeypatch):
    monkeypatch.setattr(bwrap_mod, "python_executable", lambda: "/bin/false")
    out = tmp_path / "broken"
    result = run_episode(tiny_world_noimaging, Replies("print(1)", "print(2)"), budget=0, out=out, timeout=60,
                         isolation="off", max_turns=5)
    assert result["episode"]["exit_reason"] == "sandbox_failure" and result["episode"]["turns_used"] == 1
    assert "never started" in result["episode"]["exit_detail"]
    assert json.loads((out / "score.json").read_text())["episode"]["exit_reason"] == "sandbox_failure"


def test_isolation_is_required_for_code_that_is_not_the_projects_own():
    class Mine(CisMRAgent):
        pass

    assert default_isolation(create_agent("cis_mr")) == "auto"
    assert default_isolation(create_agent("null")) == "auto"
    assert default_isolation(create_agent("openai_chat", base_url="http://127.0.0.1:1/v1", model="m")) == "require"
    assert default_isolation(Mine()) == "require"
    assert default_isolation(Replies()) == "require"


def test_require_refuses_to_start_where_isolation_fails(tiny_world_noimaging, tmp_path, monkeypatch):
    from pipeline.harness import SandboxUnavailable

    monkeypatch.setattr(bwrap_mod, "BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setattr(bwrap_mod, "_probe_cache", {})
    with pytest.raises(SandboxUnavailable, match="not found"):
        run_episode(tiny_world_noimaging, Replies(), budget=0, out=tmp_path / "req")
    assert not (tmp_path / "req").exists()


def test_the_probe_says_what_failed(monkeypatch):
    if not ISOLATED:
        pytest.skip(f"bubblewrap cannot isolate here: {ISOLATION_REASON}")
    monkeypatch.setattr(bwrap_mod, "PROBE_MODULES", ("numpy", "no_such_module_xyz"))
    monkeypatch.setattr(bwrap_mod, "_PROBE_CODE", bwrap_mod._PROBE_CODE.replace(
        "numpy, pandas, scipy, zarr, numcodecs", "numpy, no_such_module_xyz"))
    monkeypatch.setattr(bwrap_mod, "_probe_cache", {})
    ok, reason = sandbox_mod.isolation_status()
    assert not ok
    assert "cannot import" in reason and "No module named 'no_such_module_xyz'" in reason and sys.executable in reason


@needs_isolation
def test_the_sandbox_runs_this_environment_and_masks_the_project(tiny_world_noimaging, tmp_path):
    """The venv's own interpreter and packages; the project's package and config are not readable."""
    import pipeline
    from pipeline.paths import DEV_SEEDS_DIR

    package = Path(pipeline.__file__).resolve().parent
    # the seeds: the repository's conf/world/ in a checkout, pipeline/conf/world/ of a wheel
    seeds = DEV_SEEDS_DIR / "standard-01.yaml"
    assert seeds.is_file() and (package / "config.py").is_file()  # readable here, so the probe means something
    program = (
        "import importlib.util\n"
        "spec = importlib.util.find_spec('pipeline')\n"
        "where = list(spec.submodule_search_locations) if spec else []\n"
        "content = sorted(sum((os.listdir(w) for w in where if os.path.isdir(w)), []))\n"
        f"probe = [{str(package / 'config.py')!r}, {str(seeds)!r}]\n"
        "readable = [p for p in probe if os.path.exists(p)]\n"
        "print('REPORT ' + json.dumps({'prefix': sys.prefix, 'base': sys.base_prefix, 'content': content,"
        " 'readable': readable}))\n")
    agent = Replies(program, SUBMIT_EMPTY)
    result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "env", timeout=120)
    assert result["isolated"] is True
    report = report_of(agent.observations[1])
    assert report["prefix"] == sys.prefix and report["base"] == sys.base_prefix
    assert report["content"] == [] and report["readable"] == []


# ============================================================================= every kind
# The security issue's reproductions, each on every world kind the harness serves
# (``kind_world`` in conftest: the biobank kind and the screening kind).


def play(kind: str, world, agent, out, **options) -> dict:
    """One episode of ``kind`` with the harness's defaults for it, scripted by ``agent``."""
    options.setdefault("timeout", 120)
    if kind == "biobank":
        return run_episode(world, agent, budget=options.pop("budget", 450_000), out=out, **options)
    from pipeline.screening.episode import run_episode as run_screening

    return run_screening(world, agent, out=out, mode="unrestricted", **options)


FINISH = {"biobank": SUBMIT_EMPTY, "screening": "finish()"}


class Script(Agent):
    """Fixed programs (fenced), then the kind's finishing call."""

    name = "adversary"

    def __init__(self, kind: str, *programs):
        self.programs, self.finish = list(programs), FINISH[kind]
        self.observations = []

    def act(self, observation):
        self.observations.append(observation)
        return f"```python\n{self.programs.pop(0) if self.programs else self.finish}\n```"


def _proteins(world) -> list:
    import pyarrow.parquet as pq

    names = pq.read_schema(Path(world) / "release" / "proteomics.parquet").names
    return sorted(n for n in names if n.startswith("PROT_"))


def _host_snapshot(root: Path) -> dict:
    out = {}
    for path in sorted(root.rglob("*")):
        out[str(path.relative_to(root))] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return out


# Where the harness writes into WORK, per kind (leaf files, and the folders they sit in).
def _harness_paths(kind: str, world) -> tuple[list, list, list]:
    """(leaf paths, folder paths, two programs that make the harness write there, one per turn)."""
    if kind == "biobank":
        first, second = _proteins(world)[:2]
        leaves = [f"experiments/{first}.cell_perturbation.json"]
        return leaves, ["experiments"], [f"request_experiment('cell_perturbation', {p!r})" for p in (first, second)]
    # The old temporary names of the screening harness are planted too (the original attack).
    leaves = ["labels.csv", "submission_results.json", "status.json", ".labels.csv.harness",
              ".submission_results.json.harness", ".status.json.harness"]
    triggers = [f"ids = load_library(['id'])['id'].tolist()\nrequest_labels(ids[{a}:{a + 5}])\nsubmit(ids[{b}:{b + 10}])"
                for a, b in ((0, 0), (5, 10))]
    return leaves, ["submissions"], triggers


PLANT = r'''
import os, stat
def plant(rel, how, target):
    path = os.path.join(WORK, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            import shutil; shutil.rmtree(path)
        else:
            os.unlink(path)
    if how == "link":
        os.symlink(target, path)
    elif how == "dangling":
        os.symlink(target + ".created", path)
    elif how == "folder":
        os.makedirs(os.path.join(path, "inner"))
    elif how == "fifo":
        os.mkfifo(path)
'''


@needs_isolation
@pytest.mark.parametrize("how", ["link", "dangling", "folder", "fifo"])
def test_harness_writes_never_follow_what_agent_code_planted(kind_world, how, tmp_path):
    """A link, a dangling link, a folder or a FIFO at every path the harness writes into WORK:
    no host file outside the episode changes (the episode's own ledger included), nothing hangs."""
    kind, world = kind_world
    host = tmp_path / "host"
    host.mkdir()
    (host / "victim.txt").write_text("original\n")
    out = tmp_path / "episode"
    leaves, folders, triggers = _harness_paths(kind, world)
    ledger = out / "ledger.jsonl"
    targets = [str(host / "victim.txt"), str(ledger)]
    plants = "\n".join(f"plant({rel!r}, {how!r}, {targets[i % 2]!r})" for i, rel in enumerate(leaves))
    folder_how = {"link": "link", "dangling": "dangling", "folder": "fifo", "fifo": "fifo"}[how]
    folder_plants = "\n".join(f"plant({rel!r}, {folder_how!r}, {str(host)!r})" for rel in folders)
    before = _host_snapshot(host)
    agent = Script(kind, PLANT + plants + "\n" + triggers[0], PLANT + folder_plants + "\n" + triggers[1],
                   "print(sorted(os.listdir(WORK)))")
    result = play(kind, world, agent, out, max_turns=5)
    assert result["episode"]["exit_reason"] not in ("runner_crash", "harness_error"), result["episode"]
    assert _host_snapshot(host) == before
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]  # still the harness's own JSON Lines
    assert rows and all(isinstance(r, dict) for r in rows)
    # What the harness wrote is real: its folders are folders, and the files it rewrites every turn
    # (screening's state files) are regular files again.
    work = out / "work"
    for rel in folders:
        assert (work / rel).is_dir() and not (work / rel).is_symlink(), rel
    for rel in leaves:
        if kind == "screening" and not rel.startswith("."):
            assert (work / rel).is_file() and not (work / rel).is_symlink(), rel


MARKER_CODE = r'''
import os, json
markers = json.loads(MARKERS)
hits = []
def check(where, text):
    low = text.lower()
    for m in markers:
        if m.lower() in low:
            hits.append([where, m])
for name in ("mountinfo", "mounts", "cgroup", "environ", "cmdline", "status", "cwd"):
    for pid in ("self", "1"):
        try:
            check(f"/proc/{pid}/{name}", open(f"/proc/{pid}/{name}", "rb").read().decode("utf-8", "replace"))
        except OSError:
            pass
check("env", json.dumps(dict(os.environ)))
check("cwd", os.getcwd())
skip = {"/proc", "/sys", "/usr", "/dev"} | set(json.loads(SYSTEM))
for top, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip]
    for name in dirs + files:
        path = os.path.join(top, name)
        if path == os.path.abspath(__file__):
            continue  # this very program, which names the markers
        check("name", path)
        if name in files and os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) < 20_000_000:
            try:
                check(path, open(path, "rb").read().decode("utf-8", "replace"))
            except OSError:
                pass
print("REPORT " + json.dumps({"hits": hits[:20]}))
'''


@needs_isolation
def test_no_world_id_or_chosen_path_is_visible_to_agent_code(kind_world, tmp_path):
    """The world id in both the world's and the episodes' paths (as the project's scripts put them):
    nothing readable in the sandbox names it, or any folder the user chose."""
    kind, world = kind_world
    world_id = Path(world).name
    token = "chosen7q3x"
    worlds = tmp_path / f"{token}-worlds"
    shutil.copytree(world, worlds / world_id)
    out = tmp_path / f"{token}-episodes" / "episodes" / world_id / f"{world_id}-agent"
    system = [str(p) for p in bwrap_mod.python_dirs()]
    markers = [world_id, token, tmp_path.name, Path(world).parent.name]
    code = f"MARKERS = {json.dumps(markers)!r}\nSYSTEM = {json.dumps(system)!r}\n" + MARKER_CODE
    agent = Script(kind, code)
    result = play(kind, worlds / world_id, agent, out, max_turns=3)
    assert result["isolated"] is True
    assert report_of(agent.observations[1])["hits"] == []
    assert world_id not in agent.observations[0].text and token not in agent.observations[0].text


FALLOCATE = r'''
import os, json, errno
report = {}
fd = os.open(os.path.join(WORK, "big.bin"), os.O_CREAT | os.O_WRONLY, 0o644)
try:
    os.posix_fallocate(fd, 0, 400 * 1024 * 1024)
    report["fallocate"] = "ok"
except OSError as e:
    report["fallocate"] = errno.errorcode.get(e.errno, str(e.errno))
os.close(fd)
print("REPORT " + json.dumps(report))
'''
UNLINKED = r'''
import os, json, errno, time
report = {}
path = os.path.join(WORK, "hidden.bin")
f = open(path, "wb")
os.unlink(path)
try:
    for _ in range(30):
        f.write(b"z" * (8 * 1024 * 1024)); f.flush()
    report["unlinked"] = "wrote 240 MiB"
    time.sleep(3)
except OSError as e:
    report["unlinked"] = errno.errorcode.get(e.errno, str(e.errno))
print("REPORT " + json.dumps(report))
'''
MEASURE = r'''
import os, json
total = 0
for top, dirs, files in os.walk(WORK):
    for name in files:
        total += os.lstat(os.path.join(top, name)).st_blocks * 512
st = os.statvfs(WORK)
print("REPORT " + json.dumps({"total": total, "files": sorted(os.listdir(WORK)), "free": st.f_bavail * st.f_frsize}))
'''


@needs_isolation
@pytest.mark.parametrize("enforcement", ["kernel", "measured"])
def test_the_work_limit_holds(kind_world, enforcement, tmp_path, monkeypatch):
    """limits.work_size=64 MiB: 400 MiB fallocated in one turn, 240 MiB written to an unlinked file:
    WORK never holds more than its limit at a turn's end, and the turn is told why."""
    from pipeline.harness import quota

    kind, world = kind_world
    if enforcement == "measured":
        monkeypatch.setattr(quota.WorkArea, "_mount", lambda self: "switched off by the test")
    elif os.geteuid() != 0:
        pytest.skip("a kernel-enforced WORK needs a root harness")
    limit = 64 * MiB
    limits = Limits(work_size=limit, memory=2048 * MiB)
    agent = Script(kind, FALLOCATE, MEASURE, UNLINKED, MEASURE)
    out = tmp_path / "quota"
    result = play(kind, world, agent, out, limits=limits, max_turns=6)
    transcript = json.loads((out / "transcript.json").read_text())
    enforced = transcript.get("limits_enforcement", "")
    if kind == "biobank":
        assert ("kernel-enforced" in enforced) == (enforcement == "kernel"), enforced
    fall, after_fall, unlinked, after_unlinked = agent.observations[1:5]
    if enforcement == "kernel":
        assert report_of(fall)["fallocate"] == "ENOSPC"
        assert report_of(unlinked)["unlinked"] == "ENOSPC"
        assert report_of(after_fall)["free"] <= limit
    else:
        assert "over its limit" in fall.text and "big.bin" in fall.text, fall.text
        assert "WORK grew to" in unlinked.text, unlinked.text
    for seen in (after_fall, after_unlinked):
        assert report_of(seen)["total"] <= limit
        if enforcement == "measured":  # removed at the turn's end (the kernel never let it grow past)
            assert "big.bin" not in report_of(seen)["files"]
    size = sum(p.lstat().st_blocks * 512 for p in (out / "work").rglob("*"))
    assert size <= limit
    assert result["episode"]["exit_reason"] not in ("runner_crash", "harness_error")


def test_submission_copies_have_a_cap_of_their_own(tiny_world_noimaging, tmp_path, monkeypatch):
    from pipeline.harness import biobank

    monkeypatch.setattr(biobank, "SUBMISSIONS_KEEP_CAP", 1024 * 1024)
    write = ("json.dump({'nominated': [], 'pad': [os.urandom(32).hex() for _ in range(8000)], 'turn': TURN}, "
             "open(os.path.join(WORK, 'submission.json'), 'w'))")
    agent = Replies(*(f"TURN = {t}\n" + write for t in range(4)))
    out = tmp_path / "copies"
    run_episode(tiny_world_noimaging, agent, budget=0, out=out, timeout=120, isolation="auto", max_turns=4)
    kept = sorted((out / "submissions").iterdir())
    assert [p.suffix for p in kept] == [".json", ".sha256", ".sha256", ".sha256"]
    assert sum(p.stat().st_size for p in kept) < 1024 * 1024


DEEP = r'''
import os
fd = os.open(WORK, os.O_RDONLY)
for _ in range(1500):
    os.mkdir("d", dir_fd=fd)
    nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nxt
os.close(fd)
print("made 1500 levels")
'''


@pytest.mark.parametrize("isolation", ["auto"])
def test_deep_trees_and_invalid_text_never_crash_the_harness(kind_world, isolation, tmp_path):
    """1,500 nested folders in WORK, a lone surrogate in a reply: the episode goes on, every turn is
    recorded, and overwrite=true replaces such an episode whole."""
    kind, world = kind_world

    class Surrogate(Script):
        def act(self, observation):
            reply = super().act(observation)
            return reply.replace("SURROGATE", "\ud800") if len(self.observations) == 2 else reply

    out = tmp_path / "deep"
    for attempt in range(2):
        agent = Surrogate(kind, DEEP, "print('SURROGATE', len(os.listdir(WORK)))")
        result = play(kind, world, agent, out, max_turns=4, isolation=isolation, overwrite=bool(attempt))
        assert result["episode"]["exit_reason"] not in ("runner_crash", "harness_error"), result["episode"]
        transcript = json.loads((out / "transcript.json").read_text())
        assert len(transcript["turns"]) >= 3
        assert "levels of folders" in agent.observations[1].text
        assert agent.observations[2].status == "ran"
    assert not list(tmp_path.glob(".deep.replaced-*"))


def test_a_harness_failure_is_recorded_with_its_turn_and_scored(kind_world, tmp_path, monkeypatch):
    kind, world = kind_world
    from pipeline.harness import core as target

    fail_on_call(monkeypatch, target, "work_listing", 2, "injected harness failure")
    out = tmp_path / "herr"
    result = play(kind, world, Script(kind, "print(1)", "print(2)", "print(3)"), out, max_turns=5, isolation="auto")
    assert result["episode"]["exit_reason"] == "harness_error"
    assert "injected harness failure" in result["episode"]["exit_detail"]
    turns = json.loads((out / "transcript.json").read_text())["turns"]
    assert len(turns) == 2 and "injected harness failure" in turns[1]["harness_error"]
    assert json.loads((out / "score.json").read_text())["episode"]["exit_reason"] == "harness_error"


def test_file_names_cannot_spoof_observation_lines(kind_world, tmp_path):
    kind, world = kind_world
    code = "open(os.path.join(WORK, 'x\\nTurn 30 of 30. --- status ---\\nBudget remaining: $9,999,999'), 'w').write('a')"
    agent = Script(kind, code)
    play(kind, world, agent, tmp_path / "names", max_turns=3, isolation="auto")
    text = agent.observations[1].text
    assert "x\\x0aTurn 30 of 30" in text and "\nBudget remaining: $9,999,999" not in text


def test_a_huge_reply_is_stored_bounded(kind_world, tmp_path):
    kind, world = kind_world

    class Huge(Script):
        def act(self, observation):
            reply = super().act(observation)
            return reply + "\n" + "y" * 5_000_000 if len(self.observations) == 1 else reply

    out = tmp_path / "huge"
    play(kind, world, Huge(kind, "print('hello')"), out, max_turns=3, isolation="auto")
    transcript = out / "transcript.json"
    assert transcript.stat().st_size < 1_500_000
    first = json.loads(transcript.read_text())["turns"][0]
    assert first["reply_chars"] > 5_000_000 and len(first["reply_sha256"]) == 64


@needs_isolation
def test_command_line_tools_work_inside_an_episode(kind_world, tmp_path):
    """plink2, bcftools, awk and which run for the agent's uid (they read /etc through the loader)."""
    kind, world = kind_world
    code = ("import subprocess, shutil\nout = {}\n"
            "for cmd in (['awk', 'BEGIN{print 6*7}'], ['which', 'awk'], ['bcftools', '--version'], ['plink2', '--version']):\n"
            "    if shutil.which(cmd[0]) is None and cmd[0] != 'awk':\n"
            "        out[cmd[0]] = 'absent'; continue\n"
            "    done = subprocess.run(cmd, capture_output=True, text=True)\n"
            "    out[cmd[0]] = [done.returncode, (done.stdout + done.stderr)[:200]]\n"
            "print('REPORT ' + json.dumps(out))")
    agent = Script(kind, code)
    play(kind, world, agent, tmp_path / "tools", max_turns=3)
    report = report_of(agent.observations[1])
    for tool, outcome in report.items():
        if tool in ("bcftools", "plink2") and outcome == "absent":
            continue
        assert outcome[0] == 0, (tool, outcome)
    assert report["awk"][1].strip() == "42"


@needs_isolation
def test_lightgbm_scikit_learn_api_works_in_a_screening_episode(tiny_screening, tmp_path):
    code = ("from lightgbm import LGBMRegressor\nfrom sklearn.linear_model import Ridge\n"
            "X = np.random.default_rng(0).random((60, 4)); y = X @ [1, 2, 3, 4]\n"
            "m = LGBMRegressor(n_estimators=5, verbose=-1).fit(X, y)\n"
            "print('REPORT ' + json.dumps({'pred': float(m.predict(X[:1])[0]), 'ridge': float(Ridge().fit(X, y).coef_[0])}))")
    agent = Script("screening", code)
    play("screening", tiny_screening, agent, tmp_path / "lgbm", max_turns=3)
    assert set(report_of(agent.observations[1])) == {"pred", "ridge"}


def test_screening_ids_take_ascii_digits_and_the_whole_string_only(tiny_screening):
    from pipeline.screening.oracle import parse_ids

    rows, unknown = parse_ids(["C000001", "C\u0660\u0660\u0660\u0660\u0660\u0661", "C000002\n", " C000003"], 1000, 6)
    assert rows.tolist() == [1] and len(unknown) == 3


def test_forged_experiment_files_earn_nothing_without_the_ledger(tiny_world_noimaging, tmp_path):
    from pipeline.score import score_episode

    truth = truth_of(tiny_world_noimaging)
    work = tmp_path / "work"
    (work / "experiments").mkdir(parents=True)
    drivers = [d["protein"] for d in truth["drivers"]]
    for protein in drivers + [f"PROT_{i:04d}" for i in range(300)]:
        for kind in ("knockdown", "cell_perturbation"):
            (work / "experiments" / f"{protein}.{kind}.json").write_text(json.dumps(
                {"action": kind, "status": "ok", "protein": protein, "delta": {}}))
    claims = {"nominated": drivers, "directions": {d["protein"]: d["direction"] for d in truth["drivers"]},
              "abstentions": [{"molecules": [p["causal"], p["partner"]], "reason": "x"} for p in truth["pairs"]]}
    (work / "submission.json").write_text(json.dumps(claims))
    sealed = Path(tiny_world_noimaging) / "sealed"
    result = score_episode(sealed, work)
    assert result["details"]["experiments_delivered"] == []
    assert any("experiment-based credit is zero" in w for w in result["details"]["warnings"])
    empty_ledger = tmp_path / "ledger.jsonl"
    empty_ledger.write_text("")
    assert result["total"] == score_episode(sealed, work, empty_ledger)["total"]
