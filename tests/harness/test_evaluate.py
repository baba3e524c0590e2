"""pipeline.evaluate's runner (issue 27): agents x worlds x budgets as episodes on a real
LocalCluster with worker processes (the session's ``local_cluster``), the records and the
report, resumption after a limit and after a killed run (only the unfinished episodes are
replayed, the tables end the same), a world whose rebuilt manifest differs, two model
labels on the stub chat server (tokens, cost, S5 between them, max_concurrent, an endpoint
that fails mid-run), a tiny screening panel through the same command, and bad input.

Worlds are tiny and pixel-free; every episode is isolated as the harness isolates it."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from pipeline import config
from pipeline.build import build
from pipeline.evaluate import command, report, runner, settings
from pipeline.evaluate.records import load_records, validate_records
from pipeline.harness import isolation_status

from stub_openai import StubChatServer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
WORLDS = ("standard-01", "null-01")
QUIET = lambda line: None  # noqa: E731


def evaluate(executor, out, worlds_out, *overrides, log=QUIET):
    plan = settings.prepare([f"worlds_out={worlds_out}", f"out={out}", "release=noimaging", "cluster.progress=false",
                             *overrides])
    return runner.run(plan, executor, log=log)


def rows(path) -> list:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def address(local_cluster) -> str:
    return local_cluster.client.scheduler.address


def scored_tables(rep: dict) -> dict:
    """The report's tables without what depends on the wall clock (S10's wall times) or on
    which run played an episode (the records' digest)."""
    out = {}
    for kind in ("biobank", "screening"):
        if kind in rep:
            for name, table in rep[kind]["tables"].items():
                out[name] = [{k: v for k, v in row.items() if "wall" not in k} for row in table]
            out["leaderboard"] = rep[kind]["leaderboard"]
    return out


@pytest.fixture(scope="module")
def worlds_out(tmp_path_factory):
    return tmp_path_factory.mktemp("eval_worlds")


@pytest.fixture(scope="module")
def first(local_cluster, worlds_out, tmp_path_factory):
    """3 reference agents x 2 worlds (built by the evaluation) x the three budgets = 18 episodes."""
    from distributed import get_task_stream

    out = tmp_path_factory.mktemp("eval_first")
    with get_task_stream(local_cluster.client) as stream:
        summary = evaluate(local_cluster, out, worlds_out, f"worlds=[{','.join(WORLDS)}]",
                           "agents=[null,correlation,truth]", "cores_per_worker=1")
    return out, summary, stream.data


def test_biobank_evaluation_on_a_local_cluster(first, worlds_out):
    out, summary, stream = first
    assert summary["worlds_built"] == list(WORLDS)  # built because absent
    records = rows(out / runner.EPISODES)
    assert len(records) == 18 and summary["episodes"]["played"] == 18 and summary["episodes"]["ok"] == 18
    validate_records(records)
    evaluation = json.loads((out / runner.EVALUATION).read_text())
    cells = set()
    for r in records:
        world = evaluation["worlds"][r["world"]]
        assert r["manifest_digest"] == world["manifest_digest"] == runner.manifest_digests(worlds_out / r["world"])[
            "manifest_digest"]
        assert r["world_config_digest"] == world["config_sha256"]
        assert r["agent_config_digest"] == evaluation["agents"][r["agent"]]["config_digest"]
        assert r["harness_version"] == settings.harness_version()
        assert r["status"] == "ok" and r["exit_reason"] == "submitted" and r["fixed_labels_total"] is not None
        assert r["isolated"] is isolation_status()[0]
        assert r["archetype"] == ("dcm" if r["world"] == "standard-01" else
                                  config.load(["world=null-01"]).cfg.world.archetype)
        assert r["worker"].split(":")[1] != str(os.getpid())  # played in a worker process
        episode = Path(r["episode_dir"])
        assert episode.parent == out / runner.EPISODE_DIRS and (episode / "score.json").is_file()
        assert not any(w in episode.name for w in WORLDS)  # folders are named without the world
        assert json.loads((episode / "score.json").read_text())["total"] == r["total"]
        cells.add((r["agent"], r["world"], r["budget"]))
    assert len(cells) == 18
    assert len({r["worker"] for r in records}) == 2  # both workers played
    # cores_per_worker=1: each worker's episodes ran on one core of their own
    cores = {r["worker"]: tuple(r["cores"]) for r in records}
    assert all(len(c) == 1 for c in cores.values()) and len(set(cores.values())) == 2
    assert all(tuple(r["cores"]) == cores[r["worker"]] for r in records)
    # Task keys are neutral: one "episode-<random>" task per episode, and from the first episode on
    # no task names a world (the build before them does: the command gives the episodes a fresh
    # local cluster when it built worlds).
    def start(task):
        return min(s["start"] for s in task["startstops"])

    episodes = [t for t in stream if str(t["key"]).startswith("episode-")]
    assert len(episodes) == 18 and all(len(str(t["key"])) == len("episode-") + 8 for t in episodes)
    later = [t["key"] for t in stream if start(t) >= min(start(e) for e in episodes)]
    assert later and all(str(k).startswith("episode-") for k in later)
    assert not [k for k in later for w in WORLDS if w in str(k)]
    # The report is computed from the records alone, and the Parquet copy holds the same records.
    rep = json.loads((out / "report" / "report.json").read_text())
    assert rep == report(load_records(out / runner.EPISODES))
    for name in ("leaderboard.md", "report.html", "s4.csv", "s5.csv", "s11c.csv", "runner.json"):
        assert (out / "report" / name).is_file(), name
    table = pd.read_parquet(out / runner.PARQUET)
    assert len(table) == 18 and set(table["agent"]) == {"null", "correlation", "truth"}
    assert sorted(table["total"]) == sorted(r["total"] for r in records)
    board = [row["agent"] for row in rep["biobank"]["leaderboard"]]
    assert board == ["truth", "correlation", "null"]
    # The run's own summary: timings and the runner's overhead, printed and in report/runner.json.
    saved = json.loads((out / "report" / "runner.json").read_text())
    assert saved["episodes"] == summary["episodes"] and saved["cluster"]["slots"] == 2
    assert 0 < summary["episode_sums"]["play_s"] <= summary["episode_sums"]["task_s"]
    assert summary["overhead"]["overhead_fraction"] is not None and summary["episodes_per_hour"] > 0
    assert any("runner overhead" in line for line in runner.summary_lines(summary))
    # The reference ordering of scripts/reference_agents.py, for the reference agents present.
    (check,) = summary["reference_checks"]
    means = {row["agent"]: row["mean"] for row in rep["biobank"]["leaderboard"]}
    assert check["check"] == "truth >= 90" and check["a"] == means["truth"] and check["pass"] == (means["truth"] >= 90)


def test_rerun_keeps_everything_and_a_changed_agent_is_replayed(first, local_cluster, worlds_out, tmp_path):
    out, _, _ = first
    copy = tmp_path / "again"
    shutil.copytree(out, copy)
    before = (copy / runner.EPISODES).read_text()
    summary = evaluate(local_cluster, copy, worlds_out, f"worlds=[{','.join(WORLDS)}]",
                       "agents=[null,correlation,truth]")
    assert summary["episodes"]["played"] == 0 and summary["episodes"]["kept"] == 18
    assert summary["worlds_built"] == []  # present and verified: reused
    assert (copy / runner.EPISODES).read_text() == before
    # Another configuration of one label replays that label's episodes only.
    summary = evaluate(local_cluster, copy, worlds_out, f"worlds=[{','.join(WORLDS)}]",
                       "agents=[null,correlation,truth]", "budgets=[0]", "turns=5")
    assert summary["episodes"]["played"] == 6  # turns is part of every agent's configuration: 3 x 2 worlds at $0
    assert summary["episodes"]["superseded"] == {"another agent configuration": 18}
    superseded = rows(copy / runner.SUPERSEDED)
    assert len(superseded) == 18 and all(r["superseded_reason"] == "another agent configuration" for r in superseded)
    assert len(rows(copy / runner.EPISODES)) == 6


def test_resume_after_a_limit_and_after_a_kill_replays_only_the_unfinished(local_cluster, worlds_out, tmp_path):
    grid = [f"worlds=[{','.join(WORLDS)}]", "agents=[null,correlation]", "budgets=[0,2000000]"]  # 8 episodes
    out = tmp_path / "resumed"
    summary = evaluate(local_cluster, out, worlds_out, *grid, "max_episodes=2")
    assert summary["episodes"]["played"] == 2 and summary["episodes"]["not_played"] == 6
    first_two = (out / runner.EPISODES).read_text()
    # A killed run: the command in another process, SIGKILLed once it has recorded an episode.
    args = [sys.executable, "-m", "pipeline.evaluate", *grid, f"worlds_out={worlds_out}", f"out={out}",
            "release=noimaging", "cluster=address", f"cluster.address={address(local_cluster)}"]
    with open(tmp_path / "killed.log", "w") as log:
        proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(rows(out / runner.EPISODES)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "killed.log").read_text()
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with open(out / runner.EPISODES, "a") as handle:
        handle.write('{"record_format": "drugtargetworld-evaluation-rec')  # a torn final line
    text = (out / runner.EPISODES).read_text()
    assert text.startswith(first_two)
    finished = rows_before = [json.loads(line) for line in text.splitlines()[:-1]]
    assert 3 <= len(finished) < 8
    summary = evaluate(local_cluster, out, worlds_out, *grid)
    assert summary["episodes"]["kept"] == len(rows_before)
    assert summary["episodes"]["played"] == 8 - len(rows_before)
    final = rows(out / runner.EPISODES)
    assert final[:len(rows_before)] == rows_before  # nothing finished was replayed or lost
    assert len({runner.cell_key(r) for r in final}) == 8
    # The same tables as one uninterrupted run.
    whole = tmp_path / "whole"
    evaluate(local_cluster, whole, worlds_out, *grid)
    resumed_report = json.loads((out / "report" / "report.json").read_text())
    whole_report = json.loads((whole / "report" / "report.json").read_text())
    assert scored_tables(resumed_report) == scored_tables(whole_report)


def test_a_rebuilt_world_that_differs_stops_the_run(local_cluster, worlds_out, tmp_path, capsys):
    own = tmp_path / "worlds"
    own.mkdir()
    shutil.copytree(worlds_out / "standard-01", own / "standard-01")
    out = tmp_path / "ev"
    evaluate(local_cluster, out, own, "worlds=[standard-01]", "agents=[null]", "budgets=[0]")
    recorded = json.loads((out / runner.EVALUATION).read_text())["worlds"]["standard-01"]["manifest_digest"]
    # Rebuilt elsewhere with another seed: the same world-determining config, another build.
    shutil.rmtree(own / "standard-01")
    resolved = config.load(["world=standard-01", "world.seed=0x5d2c4a1b9e8f7a6b5c4d3e2f1a0b9c8d", "scale=tiny",
                            f"out={own}", "cluster=sync", "cluster.progress=false", "release=noimaging"])
    build(resolved, progress=False)
    with pytest.raises(runner.EvaluationError) as caught:
        evaluate(local_cluster, out, own, "worlds=[standard-01]", "agents=[null]", "budgets=[0]")
    message = str(caught.value)
    assert "standard-01" in message and recorded[:12] in message and "\n" not in message
    # Through the command: one line on stderr, exit status 2, nothing played.
    status = command.main(["worlds=[standard-01]", "agents=[null]", "budgets=[0]", f"worlds_out={own}", f"out={out}",
                           "release=noimaging", "cluster=address", f"cluster.address={address(local_cluster)}",
                           "cluster.progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and err[0].startswith("error: world standard-01:"), err
    assert len(rows(out / runner.EPISODES)) == 1
    # A worker that sees another build than the recorded one refuses the episode.
    job = runner.grid(settings.prepare([f"worlds_out={own}", f"out={out}", "release=noimaging",
                                        "worlds=[standard-01]", "agents=[null]", "budgets=[0]"]),
                      {"standard-01": {"manifest_digest": recorded}})[0]
    job.episode_dir = str(tmp_path / "never")
    with pytest.raises(runner.WorldChanged, match="standard-01"):
        runner.play_episode(job.as_dict())
    assert not (tmp_path / "never").exists()


def _reply(program: str, prompt: int, completion: int) -> dict:
    return {"content": f"```python\n{program}\n```",
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


@pytest.mark.skipif(not isolation_status()[0], reason="model agents run only isolated")
def test_two_model_labels_on_the_stub_server(first, local_cluster, worlds_out, tmp_path):
    from pipeline.agents.correlation import CorrelationAgent
    from pipeline.agents.null import PROGRAM as NULL_PROGRAM

    correlation = CorrelationAgent().programs(None)[0]
    good = _reply(NULL_PROGRAM, 1000, 200)
    with StubChatServer([], default=good) as a, StubChatServer([], default=_reply(correlation, 3000, 500)) as b, \
            StubChatServer([good], default=503) as down:  # answers the preflight, then is down
        def entry(label, server, price_in, price_out, limit=2):
            return (f"{{label:{label},agent:openai_chat,max_concurrent:{limit},options:{{base_url:{server.base_url},"
                    f"model:{label},api_key_env:null,retries:0,price_in_per_mtok:{price_in},"
                    f"price_out_per_mtok:{price_out}}}}}")

        agents = f"agents=[{entry('gpt-a', a, 1.0, 2.0, 1)},{entry('gpt-b', b, 3.0, 6.0)},{entry('gpt-c', down, 1, 1)}]"
        grid = [f"worlds=[{','.join(WORLDS)}]", agents, "budgets=[0,2000000]"]
        out = tmp_path / "models"
        summary = evaluate(local_cluster, out, worlds_out, *grid)
        records = rows(out / runner.EPISODES)
        assert len(records) == 12 and summary["episodes"]["failed"] == 4
        by = {label: [r for r in records if r["agent"] == label] for label in ("gpt-a", "gpt-b", "gpt-c")}
        price = {"gpt-a": (1000, 200, 1.0, 2.0), "gpt-b": (3000, 500, 3.0, 6.0)}
        for label, (prompt, completion, p_in, p_out) in price.items():
            for r in by[label]:
                assert r["status"] == "ok" and r["isolation"] and r["isolated"] is True
                score = json.loads((Path(r["episode_dir"]) / "score.json").read_text())
                assert score["usage"]["prompt_tokens"] == prompt * r["turns_used"]  # summed in score.json
                assert r["prompt_tokens"] == prompt * r["turns_used"]
                assert r["completion_tokens"] == completion * r["turns_used"]
                assert r["cost_usd"] == pytest.approx((prompt * p_in + completion * p_out) / 1e6 * r["turns_used"])
        # The endpoint that went down: every episode recorded as failed with its reason; the run went on.
        for r in by["gpt-c"]:
            assert r["status"] == "failed" and r["exit_reason"] == "transport_failure"
            assert r["failure"].startswith("transport_failure:")
            assert json.loads((Path(r["episode_dir"]) / "score.json").read_text())["total"] == r["total"]
        # At most one gpt-a episode at a time (max_concurrent: 1).
        spans = sorted((r["started_at"], r["finished_at"]) for r in by["gpt-a"])
        assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:]))
        rep = json.loads((out / "report" / "report.json").read_text())
        usage = {row["agent"]: row for row in rep["biobank"]["tables"]["usage"]}
        assert usage["gpt-b"]["cost_usd_mean"] == pytest.approx(sum(r["cost_usd"] for r in by["gpt-b"]) / 4)
        s5 = {(row["agent_a"], row["agent_b"]): row for row in rep["biobank"]["tables"]["s5"]}
        pair = s5[("gpt-b", "gpt-a")]
        assert pair["n_worlds"] == 2 and pair["mean_diff"] == -s5[("gpt-a", "gpt-b")]["mean_diff"]
        world_mean = {w: sum(r["total"] for r in by["gpt-b"] if r["world"] == w) / 2
                      - sum(r["total"] for r in by["gpt-a"] if r["world"] == w) / 2 for w in WORLDS}
        assert pair["mean_diff"] == pytest.approx(sum(world_mean.values()) / 2) and pair["mean_diff"] > 0
        assert "gpt-b" in (out / "report" / "leaderboard.md").read_text()
        # The endpoint is back: the next run replays the failed episodes only.
        down.default = good
        summary = evaluate(local_cluster, out, worlds_out, *grid)
        assert summary["episodes"]["played"] == 4 and summary["episodes"]["kept"] == 8
        final = rows(out / runner.EPISODES)
        assert len(final) == 12 and all(r["status"] == "ok" for r in final)
        assert sum(1 for r in rows(out / runner.SUPERSEDED) if r["agent"] == "gpt-c") == 4


def _sys_path(op: str, folder: str) -> None:
    if op == "add" and folder not in sys.path:
        sys.path.insert(0, folder)
    elif op == "remove" and folder in sys.path:
        sys.path.remove(folder)


@pytest.mark.skipif(not isolation_status()[0], reason="external agents run only isolated")
def test_module_factory_agents_under_labels(first, local_cluster, worlds_out, tmp_path, monkeypatch):
    """A user's own package (the example agent, importable from its source folder) by
    module:factory, twice: under its own name and under a label with other options."""
    src = str(REPO / "examples" / "dtw-example-agent" / "src")
    monkeypatch.syspath_prepend(src)
    local_cluster.client.run(_sys_path, "add", src)  # the workers import it as the client does
    out = tmp_path / "external"
    try:
        summary = evaluate(local_cluster, out, worlds_out, "worlds=[standard-01]", "budgets=[450000]",
                           "agents=[dtw_example_agent:make,{label:example-top1,agent:dtw_example_agent:make,"
                           "options:{top:1}}]")
    finally:
        local_cluster.client.run(_sys_path, "remove", src)
    assert summary["episodes"]["ok"] == 2
    records = {r["agent"]: r for r in rows(out / runner.EPISODES)}
    assert set(records) == {"dtw_example_agent:make", "example-top1"}
    for r in records.values():
        assert r["agent_name"] == "dtw_example_agent:make" and r["isolated"] is True
        assert r["exit_reason"] == "submitted" and r["experiments_requested"] >= 1
        transcript = json.loads((Path(r["episode_dir"]) / "transcript.json").read_text())
        assert "sandbox of its own" in transcript["policy_isolation"]
    assert records["example-top1"]["experiments_requested"] == 1  # top=1: one knockdown
    agents = json.loads((out / runner.EVALUATION).read_text())["agents"]
    assert agents["example-top1"]["options"] == {"top": 1}
    assert agents["example-top1"]["config_digest"] != agents["dtw_example_agent:make"]["config_digest"]
    assert settings.code_identity("dtw_example_agent:make").startswith("sha256:")


def test_a_tiny_screening_panel_through_the_command(tmp_path, capsys):
    """The command end to end on its own local cluster: the worlds are built, then the episodes
    get a fresh cluster (whose dashboard never showed the build's world-named tasks)."""
    out, worlds = tmp_path / "screening", tmp_path / "screening_worlds"
    args = ["panel=screening-v1", "panel.worlds=[screening-01,screening-02]", "scale=tiny", "agents=[random,labels_only]",
            f"out={out}", f"worlds_out={worlds}", "cluster=local", "cluster.n_workers=2",
            "cluster.dashboard_address=null"]
    status = command.main(args)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    err = captured.err.splitlines()
    started = [i for i, line in enumerate(err) if line.startswith("dask: local cluster of 2 worker processes")]
    built = [i for i, line in enumerate(err) if line.startswith("building 2 world(s)")]
    assert len(started) == 2 and started[0] < built[0] < started[1], err[:12]
    assert any(line.startswith("evaluate: 8/8 episodes done, 0 running, 0 failed") for line in err)
    records = rows(out / runner.EPISODES)
    assert len(records) == 8  # 2 agents x 2 worlds x 2 modes
    assert {r["kind"] for r in records} == {"screening"} and {r["mode"] for r in records} == set(settings.MODES)
    assert all(r["budget"] is None and r["status"] == "ok" for r in records)
    rep = json.loads((out / "report" / "report.json").read_text())
    assert rep == report(load_records(out / runner.EPISODES)) and "biobank" not in rep
    board = rep["screening"]["leaderboard"]
    assert {(row["mode"], row["agent"]) for row in board} == {(m, a) for m in settings.MODES
                                                              for a in ("random", "labels_only")}
    assert "labels_only" in captured.out  # the leaderboard, on stdout
    # The same command again: everything kept, nothing built or played.
    assert command.main(args) == 0
    again = capsys.readouterr().err
    assert "8 kept from earlier runs; playing 0" in again and "building" not in again
    # budgets are refused on a screening panel
    assert command.main([*args, "budgets=[0]"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: budgets:")


@pytest.mark.parametrize("overrides, starts", [
    (["worlds=[standard-01]", "agents=[cis_mr,cis_mr]"], "error: agents: the label 'cis_mr' is used twice"),
    (["worlds=[standard-01]", "agents=[null,{label:null,agent:cis_mr}]"], "error: agents: the label 'null'"),
    (["worlds=[standard-99]", "agents=[null]"], "error: worlds: unknown world 'standard-99'"),
    (["panel=paper-v9", "agents=[null]"], "error: panel: unknown panel 'paper-v9'"),
    (["worlds=[standard-01]", "agents=[null]", "budgets=[100000]"], "error: budgets: 100000 is not one of the three"),
    (["worlds=[standard-01]", "agents=[null]", "budgets=[0,0]"], "error: budgets: 0 is given twice"),
    (["worlds=[standard-01]", "agents=[null]", "trials=0"], "error: trials: 0 is invalid"),
    (["worlds=[standard-01]", "agents=[null]", "trials=two"], "error: trials: 'two' is invalid"),
    (["worlds=[standard-01]"], "error: agents: none chosen"),
    (["agents=[null]"], "error: panel: none chosen"),
    (["worlds=[standard-01]", "agents=[nobody]"], "error: agents: nobody: agent=nobody: unknown"),
    (["worlds=[standard-01]", "agents=[{label:x,agent:cis_mr,options:{nope:1}}]"], "error: agents: x: unknown option"),
    (["worlds=[standard-01]", "agents=[{label:x,agent:null,max_concurrent:0}]"], "error: agents[0].max_concurrent"),
    (["worlds=[standard-01]", "agents=[null]", "modes=[limited]"], "error: modes:"),
    (["worlds=[heldout-dcm-01]", "agents=[null]"], "error: world.seed:"),
    (["world=standard-01", "agents=[null]"], "error: world=standard-01: an evaluation takes its worlds"),
    (["worlds=[standard-01]", "agents=[null]", "colour=red"], "error: colour=red: no such field"),
    (["worlds=[standard-01]", "agents=[openai_chat]", "isolation=off"], "error: isolation=off: agent openai_chat"),
    (["worlds=[standard-01]", "agents=[no_such_pkg:make]"], "error: agents: no_such_pkg:make:"),
    (["worlds=[standard-01]", "agents=[null]", "cluster=sync", "cores_per_worker=1"], "error: cores_per_worker: 1 "),
    (["worlds=[standard-01]", "agents=[null]", "cores_per_worker=0"], "error: cores_per_worker: 0 is invalid"),
])
def test_bad_input_is_one_line_before_any_compute(overrides, starts, tmp_path, capsys):
    out = tmp_path / "never"
    status = command.main([*overrides, f"out={out}", f"worlds_out={tmp_path / 'no_worlds'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and err[0].startswith(starts), err
    assert not out.exists() and not (tmp_path / "no_worlds").exists()


def test_agent_entries_and_digests():
    entries = settings.parse_agents([None, "cis_mr", {"label": "gpt-a", "agent": "openai_chat",
                                                     "options": {"model": "m", "api_key": "sk-secret"},
                                                     "max_concurrent": 3}])
    assert [(e.label, e.name, e.max_concurrent) for e in entries] == [("null", "null", None), ("cis_mr", "cis_mr", None),
                                                                    ("gpt-a", "openai_chat", 3)]
    assert entries[2].public()["options"] == {"model": "m", "api_key": "<redacted>"}
    base = {"turns": None, "timeout": None, "isolation": None, "paper_compat": False}
    digest = settings.agent_digest(entries[2], base)
    assert digest == settings.agent_digest(settings.parse_agents([{"label": "other", "agent": "openai_chat",
                                                                   "options": {"api_key": "sk-secret", "model": "m"},
                                                                   "max_concurrent": 1}])[0], base)
    assert digest != settings.agent_digest(settings.AgentEntry("gpt-a", "openai_chat", {"model": "n"}), base)
    assert digest != settings.agent_digest(entries[2], {**base, "turns": 5})
