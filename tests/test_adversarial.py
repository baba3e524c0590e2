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

REPO = Path(__file__).resolve().parents[1]
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

    package = Path(pipeline.__file__).resolve().parent
    program = (
        "import importlib.util\n"
        "spec = importlib.util.find_spec('pipeline')\n"
        "where = list(spec.submodule_search_locations) if spec else []\n"
        "content = sorted(sum((os.listdir(w) for w in where if os.path.isdir(w)), []))\n"
        f"probe = [{str(package / 'config.py')!r}, {str(package / 'conf' / 'world' / 'standard-01.yaml')!r}]\n"
        "readable = [p for p in probe if os.path.exists(p)]\n"
        "print('REPORT ' + json.dumps({'prefix': sys.prefix, 'base': sys.base_prefix, 'content': content,"
        " 'readable': readable}))\n")
    agent = Replies(program, SUBMIT_EMPTY)
    result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "env", timeout=120)
    assert result["isolated"] is True
    report = report_of(agent.observations[1])
    assert report["prefix"] == sys.prefix and report["base"] == sys.base_prefix
    assert report["content"] == [] and report["readable"] == []
