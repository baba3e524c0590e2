"""The episode harness: turn protocol, exit rules, scoring on every exit path, isolation, CLI."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.agents.base import Agent
from pipeline.harness import EpisodeError, extract_code, isolation_status, run_episode
from pipeline.harness import episode as episode_mod
from pipeline.score import COMPONENT_KEYS

REPO = Path(__file__).resolve().parents[2]
ISOLATED, ISOLATION_REASON = isolation_status()


class Replies(Agent):
    """Plays fixed replies (strings, or callables of the observation); records what it saw."""

    name = "replies"

    def __init__(self, *replies):
        self.replies = list(replies)
        self.observations = []

    def act(self, observation):
        self.observations.append(observation)
        if not self.replies:
            return "```python\nprint('idle')\n```"
        reply = self.replies.pop(0)
        return reply(observation) if callable(reply) else reply


def py(code: str) -> str:
    return f"```python\n{code}\n```"


def truth_of(world: str) -> dict:
    return json.loads((Path(world) / "sealed" / "truth.json").read_text())


def episode(world, agent, tmp_path, name="ep", **options):
    options.setdefault("budget", 0)
    options.setdefault("timeout", 60)
    # These tests are about the turn protocol: they run isolated where bubblewrap works
    # and fall back elsewhere (the isolation tests below and tests/harness/test_adversarial.py
    # check isolation itself).
    options.setdefault("isolation", "auto")
    return run_episode(world, agent, out=tmp_path / name, **options)


def transcript(result) -> dict:
    return json.loads(Path(result["episode"]["transcript"]).read_text())


SUBMIT_EMPTY = "submit({'nominated': [], 'directions': {}, 'outcome_alignment': {}, 'rejected': [], 'abstentions': []})"


# ----------------------------------------------------------------------------- code extraction


def test_extract_code_takes_the_last_fenced_block():
    reply = "Plan:\n```python\nprint(1)\n```\nThen:\n```py\nprint(2)\n```\nDone."
    assert extract_code(reply) == ("print(2)\n", "fence")


def test_extract_code_runs_an_unfenced_reply_with_code_whole():
    assert extract_code("import os\nprint(os.getcwd())") == ("import os\nprint(os.getcwd())", "whole")
    assert extract_code("x = 1\nprint(x)")[1] == "whole"


def test_extract_code_finds_nothing_in_prose():
    assert extract_code("I will first look at the data, then decide.") == (None, "none")
    assert extract_code(None) == (None, "none")


def test_extract_code_runs_a_final_fence_left_open():
    reply = "```python\nprint(1)\n```\nand now\n```python\nprint(2)\n"
    assert extract_code(reply) == ("print(2)\n", "open_fence")


# ----------------------------------------------------------------------------- turn protocol


def test_a_reply_without_code_uses_a_turn_and_gets_a_hint(tiny_world_noimaging, tmp_path):
    agent = Replies("Let me think about the data first.", py(SUBMIT_EMPTY))
    result = episode(tiny_world_noimaging, agent, tmp_path)
    hint = agent.observations[1]
    assert hint.kind == "no_code" and "no code" in hint.text and "```python" in hint.text
    assert hint.turns_remaining == 29
    assert result["episode"]["turns_used"] == 2 and result["episode"]["exit_reason"] == "submitted"
    turns = transcript(result)["turns"]
    assert turns[0]["code"] is None and turns[0]["code_source"] == "none"


def test_only_the_last_fenced_block_runs(tiny_world_noimaging, tmp_path):
    reply = ("First:\n" + py("open(os.path.join(WORK, 'first.txt'), 'w').write('1')")
             + "\nSecond:\n" + py("open(os.path.join(WORK, 'second.txt'), 'w').write('2')\n" + SUBMIT_EMPTY))
    result = episode(tiny_world_noimaging, Replies(reply), tmp_path)
    work = Path(result["episode"]["episode_dir"]) / "work"
    assert (work / "second.txt").exists() and not (work / "first.txt").exists()


def test_prelude_binds_names_and_reports_failures(tiny_world_noimaging, tmp_path):
    probe = py(
        "assert OUT_CSV == os.path.join(WORK, 'phenotype.csv')\n"
        "assert os.path.isdir(RELEASE) and os.access(WORK, os.W_OK)\n"
        "g = load_genotypes()\n"
        "cov = pd.read_parquet(os.path.join(RELEASE, 'covariates.parquet'))\n"
        "assert list(g.index) == list(cov.index) and g.dtypes.iloc[0] == np.int8\n"
        "print('shape', g.shape, type(gzip), type(subprocess), type(glob))"
    )
    agent = Replies(probe, py("raise ValueError('boom')"), py(SUBMIT_EMPTY))
    episode(tiny_world_noimaging, agent, tmp_path)
    ran, failed = agent.observations[1], agent.observations[2]
    assert ran.status == "ran" and "Your code ran" in ran.text and "shape (1200, 1024)" in ran.stdout
    assert failed.status == "failed" and "Your code failed" in failed.text
    assert "ValueError: boom" in failed.stderr and "dtw_runtime" not in failed.stderr


def test_output_is_capped(tiny_world_noimaging, tmp_path):
    agent = Replies(py("print('x' * 200000)\nprint('THE END')"), py(SUBMIT_EMPTY))
    episode(tiny_world_noimaging, agent, tmp_path)
    out = agent.observations[1].stdout
    assert len(out) < 33_000 and "bytes omitted" in out and "THE END" in out


def test_experiments_arrive_next_turn_charged_and_duplicates_refused(tiny_world_noimaging, tmp_path):
    protein = truth_of(tiny_world_noimaging)["drivers"][0]["protein"]
    path = f"os.path.join(WORK, 'experiments', '{protein}.knockdown.json')"
    turn1 = py(f"where = request_experiment('knockdown', '{protein}')\nprint('exists now:', os.path.exists({path}))")
    turn2 = py(
        f"payload = json.load(open({path}))\nprint('delta', payload['delta']['cavity_r'])\n"
        f"request_experiment('knockdown', '{protein}')\n"
        "request_experiment('cell_perturbation', 'PROT_9999')\n"
        "request_experiment('western_blot', 'PROT_0001')"
    )
    turn3 = py(f"request_experiment('cell_perturbation', '{protein}')\n"
               "request_experiment('knockdown', 'PROT_0000')\n" + SUBMIT_EMPTY)
    agent = Replies(turn1, turn2, turn3)
    result = episode(tiny_world_noimaging, agent, tmp_path, budget=450_000)
    first, second = agent.observations[1:3]
    third = transcript(result)["turns"][2]
    assert "exists now: False" in first.stdout
    assert [d["protein"] for d in first.delivered] == [protein] and first.budget_remaining == 50_000
    assert "delivered: knockdown" in first.text and "$400,000 charged" in first.text
    assert "delta" in second.stdout and second.status == "ran"
    reasons = [r["reason"] for r in second.refused]
    assert len(reasons) == 3 and reasons[0].startswith("duplicate") and "unknown protein" in reasons[1]
    assert "unknown experiment kind" in reasons[2]
    assert [r["reason"].split(":")[0] for r in third["experiments"]["refused"]] == ["over budget", "over budget"]
    assert "refused: cell_perturbation of " + protein in third["observation"]
    ledger = [json.loads(line) for line in Path(result["episode"]["ledger"]).read_text().splitlines()]
    delivered = [(r["kind"], r["protein"]) for r in ledger if r["status"] == "delivered"]
    assert delivered == [("knockdown", protein)]
    assert result["episode"]["spent"] == 400_000 and result["episode"]["remaining"] == 50_000


def test_experiments_requested_in_the_final_turn_are_delivered_and_charged(tiny_world_noimaging, tmp_path):
    pair = truth_of(tiny_world_noimaging)["pairs"][0]
    causal = pair["causal"]
    code = (f"request_experiment('cell_perturbation', '{causal}')\n"
            f"submit({{'nominated': ['{causal}'], 'directions': {{}}, 'outcome_alignment': {{}}}})")
    result = episode(tiny_world_noimaging, Replies(py(code)), tmp_path, budget=450_000)
    assert result["episode"]["exit_reason"] == "submitted" and result["episode"]["spent"] == 150_000
    work = Path(result["episode"]["episode_dir"]) / "work"
    assert (work / "experiments" / f"{causal}.cell_perturbation.json").exists()
    assert result["details"]["experiments_delivered"] == [causal]
    assert result["details"]["experiments_source"].startswith("ledger")
    record = [p for p in result["details"]["pairs"] if p["causal"] == causal][0]
    assert record["experiment_on_causal"] is True


def test_final_turn_at_the_turn_limit_also_delivers(tiny_world_noimaging, tmp_path):
    protein = truth_of(tiny_world_noimaging)["drivers"][0]["protein"]
    code = py(f"request_experiment('knockdown', '{protein}')")
    result = episode(tiny_world_noimaging, Replies(code), tmp_path, budget=450_000, max_turns=1)
    assert result["episode"]["exit_reason"] == "turn_limit" and result["episode"]["spent"] == 400_000
    assert result["details"]["experiments_delivered"] == [protein]


def test_a_program_past_its_time_limit_is_killed_with_its_children(tiny_world_noimaging, tmp_path):
    psutil = pytest.importorskip("psutil")
    marker = "987654"
    code = py(f"import subprocess, time\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
              "print('started', flush=True)\nwhile True:\n    time.sleep(0.1)")
    agent = Replies(code, py(SUBMIT_EMPTY))
    start = time.monotonic()
    episode(tiny_world_noimaging, agent, tmp_path, timeout=5)
    assert time.monotonic() - start < 30
    obs = agent.observations[1]
    assert obs.status == "timeout" and "exceeded the 5 s limit" in obs.text and "started" in obs.stdout
    time.sleep(0.5)
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert left == []


# ----------------------------------------------------------------------------- exit rules and scoring


def test_submit_is_final_even_if_the_file_changes_afterwards(tiny_world_noimaging, tmp_path):
    driver = truth_of(tiny_world_noimaging)["drivers"][0]
    code = (f"submit({{'nominated': ['{driver['protein']}'], 'directions': {{'{driver['protein']}': '{driver['direction']}'}}}})\n"
            "json.dump({'nominated': []}, open(os.path.join(WORK, 'submission.json'), 'w'))")
    agent = Replies(py(code), py("print('never runs')"))
    result = episode(tiny_world_noimaging, agent, tmp_path)
    assert result["episode"]["exit_reason"] == "submitted" and result["episode"]["turns_used"] == 1
    assert result["episode"]["scored_from"].startswith("scored/")
    assert result["details"]["nominations"]["processed"] == [driver["protein"]]


def test_submit_refuses_a_missing_or_broken_submission(tiny_world_noimaging, tmp_path):
    agent = Replies(py("submit()"), py("open(os.path.join(WORK, 'submission.json'), 'w').write('{')\nsubmit()"),
                    py(SUBMIT_EMPTY))
    result = episode(tiny_world_noimaging, agent, tmp_path)
    assert "write WORK/submission.json first" in agent.observations[1].stderr
    assert "not valid JSON" in agent.observations[2].stderr
    assert result["episode"]["turns_used"] == 3 and result["episode"]["exit_reason"] == "submitted"


def test_turn_limit_scores_the_latest_parseable_submission(tiny_world_noimaging, tmp_path):
    drivers = [d["protein"] for d in truth_of(tiny_world_noimaging)["drivers"]]
    write = "json.dump({s!r}, open(os.path.join(WORK, 'submission.json'), 'w'))"
    agent = Replies(
        py(write.format(s={"nominated": drivers[:1]})),
        py(write.format(s={"nominated": drivers[:2]})),
        py("open(os.path.join(WORK, 'submission.json'), 'w').write('{not json')"),
    )
    result = episode(tiny_world_noimaging, agent, tmp_path, max_turns=3)
    assert result["episode"]["exit_reason"] == "turn_limit" and result["episode"]["submitted_turn"] is None
    assert result["details"]["nominations"]["processed"] == drivers[:2]
    assert result["episode"]["scored_from"].startswith("scored/ (submission from turn 2")
    assert "latest parseable" in transcript(result)["turns"][2]["observation"]
    snapshots = sorted(p.name for p in (Path(result["episode"]["episode_dir"]) / "submissions").iterdir())
    assert snapshots == ["turn_01.json", "turn_02.json"]


def test_turn_limit_without_any_submission_still_scores_the_phenotype(tiny_world_noimaging, tmp_path):
    code = ("cov = pd.read_parquet(os.path.join(RELEASE, 'ecg_features.parquet'))\n"
            "pd.DataFrame({'subject_id': cov.index, 'phenotype': cov['qrs'].to_numpy()}).to_csv(OUT_CSV, index=False)")
    result = episode(tiny_world_noimaging, Replies(py(code)), tmp_path, max_turns=2)
    assert result["episode"]["exit_reason"] == "turn_limit"
    assert result["details"]["submission"]["file"] == "absent"
    assert result["details"]["phenotype_construction"]["status"] == "scored"
    assert result["phenotype_construction"] > 0 and result["total"] == result["phenotype_construction"]


def test_paper_compat_ends_at_the_first_parseable_submission(tiny_world_noimaging, tmp_path):
    write = py("json.dump({'nominated': []}, open(os.path.join(WORK, 'submission.json'), 'w'))")
    agent = Replies(py("print('looking')"), write, py("print('too late')"))
    result = episode(tiny_world_noimaging, agent, tmp_path, paper_compat=True)
    assert result["episode"]["exit_reason"] == "submission_written" and result["episode"]["turns_used"] == 2
    fixed = Replies(write, py(SUBMIT_EMPTY))
    result = episode(tiny_world_noimaging, fixed, tmp_path, name="fixed")
    assert result["episode"]["exit_reason"] == "submitted" and result["episode"]["turns_used"] == 2


def test_prompt_wording_fixed_by_default_and_restored_by_paper_compat(tiny_world_noimaging, tmp_path):
    fixed = transcript(episode(tiny_world_noimaging, Replies(py(SUBMIT_EMPTY)), tmp_path, name="a"))["system_prompt"]
    paper = transcript(episode(tiny_world_noimaging, Replies(py(SUBMIT_EMPTY)), tmp_path, name="b",
                               paper_compat=True))["system_prompt"]
    assert "it is also possible that none do" in fixed and "A small number of proteins causally drive" not in fixed
    assert "submit()" in fixed and "scores nothing" not in fixed and "latest submission.json" in fixed
    assert "long tables" in fixed and "indexed by `protein`" in fixed
    assert "A small number of proteins causally drive" in paper and "scores nothing" in paper
    assert "holds no per-participant scans" in fixed and "$0" in fixed and "$150,000" in fixed


def test_a_policy_failure_is_scored_from_work(tiny_world_noimaging, tmp_path):
    def fail(observation):
        raise ConnectionError("endpoint went away")

    code = ("cov = pd.read_parquet(os.path.join(RELEASE, 'ecg_features.parquet'))\n"
            "pd.DataFrame({'subject_id': cov.index, 'phenotype': cov['qrs'].to_numpy()}).to_csv(OUT_CSV, index=False)")
    result = episode(tiny_world_noimaging, Replies(py(code), fail), tmp_path)
    assert result["episode"]["exit_reason"] == "policy_error"
    assert "endpoint went away" in result["episode"]["exit_detail"]
    assert result["phenotype_construction"] > 0
    assert "policy_error" in transcript(result)["turns"][-1]


def test_a_runner_crash_scores_zero_and_is_recorded(tiny_world_noimaging, tmp_path, monkeypatch):
    code = ("cov = pd.read_parquet(os.path.join(RELEASE, 'ecg_features.parquet'))\n"
            "pd.DataFrame({'subject_id': cov.index, 'phenotype': cov['qrs'].to_numpy()}).to_csv(OUT_CSV, index=False)\n"
            + SUBMIT_EMPTY)

    def broken(*args, **kwargs):
        raise OSError("disk on fire")

    from pipeline.harness import biobank

    monkeypatch.setattr(biobank, "score_episode", broken)
    result = episode(tiny_world_noimaging, Replies(py(code)), tmp_path)
    assert result["episode"]["exit_reason"] == "runner_crash"
    assert all(result[k] == 0.0 for k in (*COMPONENT_KEYS, "safety_penalty", "total", "total_unclipped"))
    assert "disk on fire" in result["details"]["runner_crash"]
    saved = transcript(result)
    assert saved["exit"]["exit_reason"] == "runner_crash" and "disk on fire" in saved["exit"]["exit_detail"]
    assert json.loads((Path(result["episode"]["episode_dir"]) / "score.json").read_text())["total"] == 0.0


def test_transcript_records_every_turn(tiny_world_noimaging, tmp_path):
    protein = truth_of(tiny_world_noimaging)["drivers"][0]["protein"]
    agent = Replies("thinking...", py(f"request_experiment('knockdown', '{protein}')\nprint('hello')"), py(SUBMIT_EMPTY))
    result = episode(tiny_world_noimaging, agent, tmp_path, budget=2_000_000)
    saved = transcript(result)
    assert saved["format"] == "drugtargetworld-transcript/2" and saved["kind"] == "biobank"
    assert saved["budget"] == 2_000_000
    assert saved["isolated"] == result["isolated"] and saved["system_prompt"] and saved["opening"]
    assert [t["turn"] for t in saved["turns"]] == [1, 2, 3]
    second = saved["turns"][1]
    assert second["reply"].startswith("```python") and "print('hello')" in second["code"]
    assert "hello" in second["observation"] and second["status"] == "ran"
    assert second["experiments"]["delivered"][0]["protein"] == protein
    assert {"policy_s", "run_s", "harness_s"} <= set(second["timings"])
    assert saved["score"]["total"] == result["total"] and saved["exit"]["exit_reason"] == "submitted"


# ----------------------------------------------------------------------------- folders


def test_default_episode_folder_is_under_episodes_and_never_named_after_the_world(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = episode_mod.default_episode_dir("null", 450_000)
    second = episode_mod.default_episode_dir("null", 450_000)
    assert first.parent == (tmp_path / "episodes").resolve() and first != second
    assert first.name.startswith("null-450000-")
    assert episode_mod.default_episode_dir("x/../y", 0, root=tmp_path / "r").parent == tmp_path / "r"


def test_episode_folder_safety(tiny_world_noimaging, tmp_path):
    world = Path(tiny_world_noimaging)
    with pytest.raises(EpisodeError, match="inside the world's sealed"):
        run_episode(world, Replies(), budget=0, out=world / "sealed" / "ep")
    with pytest.raises(EpisodeError, match="contains the world folder"):
        run_episode(world, Replies(), budget=0, out=world.parent)
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "keep.txt").write_text("mine")
    with pytest.raises(EpisodeError, match="refusing to delete"):
        run_episode(world, Replies(), budget=0, out=stranger, overwrite=True)
    assert (stranger / "keep.txt").exists()
    done = episode(world, Replies(py(SUBMIT_EMPTY)), tmp_path, name="again")
    with pytest.raises(EpisodeError, match="overwrite=true"):
        episode(world, Replies(py(SUBMIT_EMPTY)), tmp_path, name="again")
    again = episode(world, Replies(py(SUBMIT_EMPTY)), tmp_path, name="again", overwrite=True)
    assert again["episode"]["episode_dir"] == done["episode"]["episode_dir"]


# ----------------------------------------------------------------------------- isolation


@pytest.fixture
def listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    accepted = []

    def accept():
        try:
            while True:
                conn, _ = server.accept()
                accepted.append(conn)
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


ADVERSARY = r'''
import socket
report = {}
def attempt(name, fn):
    try:
        value = fn()
        report[name] = "SUCCEEDED: " + repr(value)[:120]
    except Exception as error:
        report[name] = "failed: " + type(error).__name__
targets = json.loads(TARGETS)
for name, path in targets.items():
    attempt("read " + name, lambda path=path: open(path, "rb").read(64))
attempt("list sealed", lambda: os.listdir(targets["truth"].rsplit("/", 1)[0]))
found = []
for start in (RELEASE, WORK, IMAGING):
    here = os.path.abspath(start)
    for _ in range(12):
        here = os.path.dirname(here)
        try:
            for entry in os.listdir(here):
                if entry in ("sealed", "truth.json", "oracle.json", "ledger.jsonl", "transcript.json", "conf"):
                    found.append(os.path.join(here, entry))
        except OSError:
            pass
for root, dirs, files in os.walk("/"):
    if root.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    for name in files + dirs:
        if name in ("truth.json", "oracle.json", "ledger.jsonl", "transcript.json", "latent.parquet", "eval_mask.npy") \
                or name.endswith("world.yaml") or name == "all-biases.yaml":
            found.append(os.path.join(root, name))
report["found by walking"] = found
def connect(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect((host, port))
    return "connected"
attempt("connect local listener", lambda: connect("127.0.0.1", PORT))
attempt("connect internet", lambda: connect("1.1.1.1", 53))
attempt("write release", lambda: open(os.path.join(RELEASE, "x.txt"), "w").write("x"))
print("REPORT " + json.dumps(report))
'''


@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot isolate here: {ISOLATION_REASON}")
def test_adversarial_agent_cannot_reach_the_truth_the_ledger_or_the_network(tiny_world_noimaging, tmp_path, listener):
    port, accepted = listener
    world = Path(tiny_world_noimaging)
    out = tmp_path / "adversary"
    targets = {
        "truth": str(world / "sealed" / "truth.json"),
        "oracle": str(world / "sealed" / "oracle.json"),
        "latent": str(world / "sealed" / "latent.parquet"),
        "ledger": str(out / "ledger.jsonl"),
        "transcript": str(out / "transcript.json"),
        "seeds": str(REPO / "conf" / "world" / "all-biases.yaml"),
    }
    code = f"TARGETS = {json.dumps(targets)!r}\nPORT = {port}\n" + ADVERSARY
    agent = Replies(py(code), py(SUBMIT_EMPTY))
    result = run_episode(world, agent, budget=0, out=out, timeout=120)
    assert result["isolated"] is True
    line = [l for l in agent.observations[1].stdout.splitlines() if l.startswith("REPORT ")][0]
    report = json.loads(line[len("REPORT "):])
    assert report["found by walking"] == []
    for name, outcome in report.items():
        if name != "found by walking":
            assert outcome.startswith("failed"), (name, outcome)
    assert accepted == []
    # The harness's own files were there all along, outside the sandbox.
    assert Path(targets["ledger"]).exists() and Path(targets["transcript"]).exists()


def test_links_planted_in_work_do_not_redirect_harness_writes(tiny_world_noimaging, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    protein = truth_of(tiny_world_noimaging)["drivers"][0]["protein"]
    code = (f"import shutil\nshutil.rmtree(os.path.join(WORK, 'experiments'))\n"
            f"os.symlink({str(outside)!r}, os.path.join(WORK, 'experiments'))\n"
            f"os.symlink({str(Path(tiny_world_noimaging) / 'sealed' / 'truth.json')!r}, os.path.join(WORK, 'submission.json'))\n"
            f"request_experiment('knockdown', '{protein}')")
    result = episode(tiny_world_noimaging, Replies(py(code)), tmp_path, budget=450_000, max_turns=1)
    work = Path(result["episode"]["episode_dir"]) / "work"
    assert list(outside.iterdir()) == []
    assert (work / "experiments").is_dir() and not (work / "experiments").is_symlink()
    assert (work / "experiments" / f"{protein}.knockdown.json").is_file()
    assert result["details"]["submission"]["file"].startswith("not a regular file")


def test_without_isolation_the_episode_says_so(tiny_world_noimaging, tmp_path):
    agent = Replies(py("print(RELEASE)\n" + SUBMIT_EMPTY))
    result = episode(tiny_world_noimaging, agent, tmp_path, isolation="off")
    assert result["isolated"] is False and "isolation=off" in result["isolation"]
    assert str(Path(tiny_world_noimaging).resolve() / "release") in agent.observations[0].text
    saved = transcript(result)
    assert saved["isolated"] is False and "not isolated" in saved["opening"]
    assert "real folders on the host" in agent.observations[0].text


def test_without_bubblewrap_auto_falls_back_and_require_refuses(tiny_world_noimaging, tmp_path, monkeypatch):
    from pipeline.harness import SandboxUnavailable, bwrap

    monkeypatch.setattr(bwrap, "BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setattr(bwrap, "_probe_cache", {})
    with pytest.raises(SandboxUnavailable, match="not found"):
        episode(tiny_world_noimaging, Replies(py(SUBMIT_EMPTY)), tmp_path, name="req", isolation="require")
    result = episode(tiny_world_noimaging, Replies(py(SUBMIT_EMPTY)), tmp_path, name="auto")
    assert result["isolated"] is False and "not found" in result["isolation"]
    assert result["episode"]["exit_reason"] == "submitted"


# ----------------------------------------------------------------------------- CLI


def test_cli_runs_an_episode_and_prints_the_score(tiny_world_noimaging, tmp_path):
    out = tmp_path / "cli"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.episode", f"world_dir={tiny_world_noimaging}", "agent=null", "budget=0",
         f"out={out}", "turns=5", "timeout=60"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(COMPONENT_KEYS) <= set(result) and result["total"] == 0.0
    assert result["episode"]["exit_reason"] == "submitted" and result["isolated"] == ISOLATED
    assert (out / "transcript.json").exists() and (out / "score.json").exists() and (out / "ledger.jsonl").exists()


@pytest.mark.parametrize("args, message", [
    (["agent=null", "budget=0"], "missing world_dir="),
    (["world_dir=WORLD", "agent=nobody", "budget=0"], "agent=nobody: unknown for a biobank world; valid:"),
    (["world_dir=WORLD", "agent=null", "budget=100"], "budget=100: invalid; valid: 0, 450000, 2000000"),
    (["world_dir=WORLD", "agent=null", "budget=0", "turns=0"], "turns=0: invalid"),
    (["world_dir=WORLD", "agent=null", "budget=0", "paper_compat=maybe"], "paper_compat=maybe: invalid"),
    (["world_dir=WORLD", "agent=null", "budget=0", "colour=red"], "colour: unknown option"),
    (["world_dir=/nonexistent", "agent=null", "budget=0"], "not a folder"),
    (["world_dir=WORLD", "agent=openai_chat", "budget=0", "agent.flavour=x"], "unknown option(s) agent.flavour"),
])
def test_cli_rejects_bad_arguments_with_one_line(tiny_world_noimaging, args, message, capsys):
    # In-process (the command line's own main); the real subprocess is exercised once below.
    from pipeline.episode import main

    args = [a.replace("WORLD", str(tiny_world_noimaging)) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_cli_rejection_through_the_interpreter_is_one_line(tiny_world_noimaging):
    done = subprocess.run([sys.executable, "-m", "pipeline.episode", f"world_dir={tiny_world_noimaging}", "agent=null",
                           "budget=100"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert "budget=100: invalid" in done.stderr and len(done.stderr.strip().splitlines()) == 1
