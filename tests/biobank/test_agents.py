"""Reference agents and the OpenAI-compatible adapter, played through the real harness."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from stub_openai import StubChatServer

from pipeline.agents import REFERENCE_AGENTS, REGISTRY, OpenAIChatAgent, ScriptedAgent, TransportError, create_agent
from pipeline.agents.base import EpisodeInfo, Observation
from pipeline.harness import BUDGETS, isolation_status, run_episode
from pipeline.score import COMPONENT_KEYS

REPO = Path(__file__).resolve().parents[2]
ISOLATED, _ = isolation_status()


@pytest.fixture(scope="module")
def reference_run(tiny_world_noimaging, tmp_path_factory):
    """Runs (and caches) one episode per reference agent and budget on the tiny all-biases world."""
    root = tmp_path_factory.mktemp("reference")
    cache: dict = {}

    def run(agent_name: str, budget: int) -> dict:
        if (agent_name, budget) not in cache:
            sealed = Path(tiny_world_noimaging) / "sealed"
            agent = create_agent(agent_name, sealed_dir=sealed if REGISTRY[agent_name].privileged else None)
            cache[agent_name, budget] = run_episode(tiny_world_noimaging, agent, budget=budget, agent_name=agent_name,
                                                    out=root / f"{agent_name}-{budget}", timeout=120)
        return cache[agent_name, budget]

    return run


def components_add_up(result: dict) -> bool:
    unclipped = sum(result[k] for k in COMPONENT_KEYS) + result["safety_penalty"]
    return (abs(unclipped - result["total_unclipped"]) < 1e-9
            and abs(min(max(unclipped, 0.0), 100.0) - result["total"]) < 1e-9)


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("agent_name", REFERENCE_AGENTS)
def test_reference_agent_plays_a_full_episode(reference_run, agent_name, budget):
    result = reference_run(agent_name, budget)
    summary = result["episode"]
    assert summary["exit_reason"] == "submitted", summary
    assert result["isolated"] == ISOLATED
    assert components_add_up(result)
    assert 0 <= summary["spent"] <= budget
    ledger = [json.loads(line) for line in Path(summary["ledger"]).read_text().splitlines()]
    assert sum(r["cost"] for r in ledger if r["status"] == "delivered") == summary["spent"]
    if agent_name != "null":
        assert result["details"]["phenotype_construction"]["status"] == "scored"
        assert result["phenotype_construction"] > 0


def test_null_agent_scores_zero_in_a_world_with_drivers(reference_run):
    for budget in BUDGETS:
        result = reference_run("null", budget)
        assert result["total"] == 0.0 and all(result[k] == 0.0 for k in COMPONENT_KEYS)
        assert result["details"]["submission"]["status"] == "parsed"


def test_truth_agent_is_the_upper_bound(reference_run):
    at_zero = reference_run("truth", 0)
    assert at_zero["total"] == pytest.approx(92.5)
    assert at_zero["causal_confidence"] == pytest.approx(17.5) and at_zero["episode"]["spent"] == 0
    for budget in BUDGETS[1:]:
        result = reference_run("truth", budget)
        assert result["total"] == pytest.approx(100.0)
        assert result["episode"]["turns_used"] == 2  # waited for the delivery before claiming
        assert all(p["route"].startswith("experiment") for p in result["details"]["pairs"])
        assert result["safety_penalty"] == 0.0


def test_observational_agents_ignore_the_budget(reference_run):
    for name in ("correlation", "cis_mr"):
        totals = {reference_run(name, b)["total"] for b in BUDGETS}
        assert len(totals) == 1 and all(reference_run(name, b)["episode"]["spent"] == 0 for b in BUDGETS)
    assert reference_run("correlation", 0)["details"]["nominations"]["unique_valid"] >= 1
    assert reference_run("mr_knockdown", 0)["total"] == reference_run("cis_mr", 0)["total"]


def test_mr_knockdown_spends_its_budget_on_experiments(reference_run):
    rich = reference_run("mr_knockdown", 2_000_000)
    assert rich["episode"]["spent"] > 0 and rich["episode"]["turns_used"] == 2
    work = Path(rich["episode"]["episode_dir"]) / "work"
    plan = json.loads((work / "experiment_plan.json").read_text())["plan"]
    assert len(plan) >= 1 and all((work / "experiments" / f"{p}.{k}.json").exists() for k, p in plan)


def test_truth_agent_needs_the_sealed_folder_and_others_never_get_it(tiny_world_noimaging):
    with pytest.raises(ValueError, match="sealed"):
        create_agent("truth")
    agent = create_agent("cis_mr", sealed_dir=Path(tiny_world_noimaging) / "sealed")
    assert not hasattr(agent, "truth") and agent.name == "cis_mr"
    with pytest.raises(ValueError, match="agent=nobody: unknown for a biobank world"):
        create_agent("nobody")


class Broken(ScriptedAgent):
    name = "broken"

    def programs(self, info):
        return ["raise RuntimeError('analysis bug')", "print('never reached')"]


def test_a_failing_script_retries_once_then_submits_what_work_holds(tiny_world_noimaging, tmp_path):
    result = run_episode(tiny_world_noimaging, Broken(), budget=0, out=tmp_path / "broken", timeout=60)
    assert result["episode"]["exit_reason"] == "submitted" and result["episode"]["turns_used"] == 3
    assert result["details"]["submission"]["status"] == "parsed"


# ----------------------------------------------------------------------------- OpenAI-compatible adapter

LOOK = "I will look at the release first.\n```python\nprint(sorted(os.listdir(RELEASE)))\n```\nThen decide."
FINISH = ("```python\n"
          "claims = {'nominated': [], 'directions': {}, 'outcome_alignment': {}, 'rejected': [], 'abstentions': []}\n"
          "json.dump(claims, open(os.path.join(WORK, 'submission.json'), 'w'))\n"
          "submit()\n```")


def test_openai_adapter_plays_an_episode_against_a_local_stub(tiny_world_noimaging, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")
    with StubChatServer([LOOK, "Thinking out loud, no code this time.", FINISH]) as server:
        agent = OpenAIChatAgent(base_url=server.base_url, model="stub-model", api_key_env="STUB_KEY",
                                temperature=0.2, seed=7)
        result = run_episode(tiny_world_noimaging, agent, budget=450_000, out=tmp_path / "chat", timeout=60,
                             isolation="auto")
    assert result["episode"]["exit_reason"] == "submitted" and result["episode"]["turns_used"] == 3
    assert server.paths == ["/v1/chat/completions"] * 3
    first, second, third = server.requests
    assert first["model"] == "stub-model" and first["temperature"] == 0.2 and first["seed"] == 7
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    system, opening = first["messages"]
    assert system["role"] == "system" and "$450,000" in system["content"] and "submit()" in system["content"]
    assert opening["role"] == "user" and opening["content"].startswith("Begin.")
    assistant, observation = second["messages"][2:]
    assert assistant == {"role": "assistant", "content": "```python\nprint(sorted(os.listdir(RELEASE)))\n```"}
    assert "Your code ran" in observation["content"] and "proteomics.parquet" in observation["content"]
    assert third["messages"][4] == {"role": "assistant", "content": "(no code)"}
    assert "no code" in third["messages"][5]["content"]
    saved = json.loads(Path(result["episode"]["transcript"]).read_text())
    assert saved["turns"][0]["reply"] == LOOK  # the prose is kept in the transcript, not in the history


def test_openai_adapter_sends_no_key_when_none_is_set(tiny_world_noimaging, tmp_path, monkeypatch):
    monkeypatch.delenv("STUB_KEY", raising=False)
    with StubChatServer([FINISH]) as server:
        agent = OpenAIChatAgent(base_url=server.base_url, model="m", api_key_env="STUB_KEY", temperature=None)
        run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "nokey", timeout=60, isolation="auto")
    assert "Authorization" not in server.headers[0] and "temperature" not in server.requests[0]


def test_openai_transport_failure_ends_the_episode_and_scores_work(tiny_world_noimaging, tmp_path):
    phenotype = ("```python\ncov = pd.read_parquet(os.path.join(RELEASE, 'ecg_features.parquet'))\n"
                 "pd.DataFrame({'subject_id': cov.index, 'phenotype': cov['qrs'].to_numpy()}).to_csv(OUT_CSV, index=False)\n```")
    with StubChatServer([phenotype, 500, 500]) as server:
        agent = OpenAIChatAgent(base_url=server.base_url, model="m", retries=1, retry_base_s=0.01)
        result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "fail", timeout=60, isolation="auto")
    assert len(server.requests) == 3
    assert result["episode"]["exit_reason"] == "transport_failure" and "HTTP 500" in result["episode"]["exit_detail"]
    assert result["phenotype_construction"] > 0 and components_add_up(result)


def test_openai_adapter_rejects_a_bad_response_and_bad_settings():
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatAgent(base_url="localhost:8000", model="m")
    info = EpisodeInfo(episode_id="e", budget=0, max_turns=3, timeout=10, costs={}, system_prompt="sys",
                       opening="Begin.", paths={}, isolated=True, paper_compat=False)
    with StubChatServer([404]) as server:
        agent = OpenAIChatAgent(base_url=server.base_url, model="m", retries=3)
        agent.reset(info)
        with pytest.raises(TransportError, match="HTTP 404"):
            agent.act(Observation(turn=1, text="Begin.", kind="opening", turns_remaining=3, budget_remaining=0))
    assert len(server.requests) == 1  # a client error is not retried


def test_openai_history_window_drops_whole_old_exchanges():
    agent = OpenAIChatAgent(base_url="http://127.0.0.1:1/v1", model="m", max_history_chars=200)
    agent.messages = [{"role": "system", "content": "s" * 20}, {"role": "user", "content": "Begin."}]
    for i in range(6):
        agent.messages += [{"role": "assistant", "content": f"code {i} " + "x" * 30},
                           {"role": "user", "content": f"obs {i} " + "y" * 30}]
    window = agent._window()
    assert window[:2] == agent.messages[:2] and window[-1]["content"].startswith("obs 5")
    assert "earlier turn(s) omitted" in window[3]["content"]
    roles = [m["role"] for m in window[1:]]
    assert all(a != b for a, b in zip(roles, roles[1:]))  # user and assistant still alternate


def test_cli_drives_the_openai_adapter(tiny_world_noimaging, tmp_path):
    with StubChatServer(["OK", FINISH]) as server:  # the CLI's preflight request, then the episode's
        done = subprocess.run(
            [sys.executable, "-m", "pipeline.episode", f"world_dir={tiny_world_noimaging}", "agent=openai_chat",
             "budget=0", f"out={tmp_path / 'cli-chat'}", f"agent.base_url={server.base_url}", "agent.model=stub",
             "agent.temperature=0.5", "agent.api_key_env=NO_SUCH_VARIABLE", "isolation=auto"],
            capture_output=True, text=True, cwd=REPO, timeout=300,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["episode"]["exit_reason"] == "submitted"
    preflight, first = server.requests
    assert preflight["max_tokens"] == 1 and preflight["temperature"] == 0.5
    assert first["model"] == "stub" and first["temperature"] == 0.5 and "max_tokens" not in first


# ----------------------------------------------------------------------------- the benchmark ordering (slow)


@pytest.mark.slow
def test_reference_ordering_holds_at_small_scale(tmp_path):
    """mean mr_knockdown >= cis_mr + 3 >= correlation + 3 over the 12 development worlds of
    paper-v1 at small scale and all budgets: the ordering the benchmark promises, on the worlds
    it promises it for (a proxy of four worlds went below the margin when issue 29's generator
    redrew them: cis_mr - correlation 1.93 there, 7.78 on the development worlds)."""
    sys.path.insert(0, str(REPO / "scripts"))
    import reference_agents

    status = reference_agents.main(["--scale", "small", "--out", str(tmp_path), "--agents",
                                    "correlation,cis_mr,mr_knockdown", "--jobs", "2", "--panel", "paper-v1",
                                    "--development", "--release", "noimaging"])
    scores = json.loads((tmp_path / "reference_scores.json").read_text())
    assert status == 0, scores["failures"]
    means = scores["means"]
    assert means["mr_knockdown"] >= means["cis_mr"] + 3 and means["cis_mr"] >= means["correlation"] + 3
    assert len(scores["worlds"]) == 12


# ----------------------------------------------------------------------------- cis-MR claim rules


def _mr_row(r_obs, wald, wald_se, F=200.0, lead=None, n=6000):
    import math

    z = wald / wald_se
    return {"lead": lead, "F": F, "r_obs": r_obs, "wald": wald, "wald_se": wald_se, "z": z,
            "p": math.erfc(abs(z) / math.sqrt(2)), "p_obs": math.erfc(abs(math.atanh(r_obs)) * math.sqrt(n - 3) / math.sqrt(2)),
            "wald_events": 0.0, "p_events": 1.0}


def test_cis_mr_two_stages_and_observational_standouts():
    """Genome-wide MR hits are nominated; an observational standout is nominated when its Wald
    ratio replicates it one-sided at 0.05 / 5 candidates (P2: z 2.7 > 2.33) or when its instrument
    is too weak to refute it (P3), and rejected when a strong instrument excludes it (P4); a
    candidate with a merely nominal MR p is not nominated (P5: z 2.2 < 2.33, two-sided p 0.03)."""
    import pandas as pd

    from pipeline.agents.cis_mr import mr_claims

    rows = {f"PROT_{i:04d}": _mr_row(0.0, 0.0, 0.05, lead=f"rs{i}") for i in range(6, 600)}
    rows.update({
        "PROT_0001": _mr_row(0.30, 0.32, 0.03, lead="rs1"),    # MR z 10.7: genome-wide
        "PROT_0002": _mr_row(0.33, 0.27, 0.10, lead="rs2"),    # replicated: one-sided z 2.7
        "PROT_0003": _mr_row(-0.25, -0.10, 0.12, lead="rs3"),  # weak instrument: cannot refute
        "PROT_0004": _mr_row(0.35, 0.00, 0.03, lead="rs4"),    # strong instrument excludes r_obs
        "PROT_0005": _mr_row(0.06, 0.20, 0.09, lead="rs5"),    # a candidate (p_obs 3e-6), MR nominal only
    })
    table = pd.DataFrame.from_dict(rows, orient="index")
    checks = pd.DataFrame({"r_raw": [0.35], "r_adjusted": [0.34], "r_within_centre": [0.35]}, index=["PROT_0004"])
    claims = mr_claims(table, checks)
    assert claims["nominated"][:2] == ["PROT_0001", "PROT_0002"]
    assert claims["nominated"][2:] == ["PROT_0003"] and claims["_observational"] == ["PROT_0003"]
    assert claims["directions"] == {"PROT_0001": "inhibit", "PROT_0002": "inhibit", "PROT_0003": "activate"}
    assert [r["molecule"] for r in claims["rejected"]] == ["PROT_0004"]
    assert "PROT_0005" not in claims["nominated"]
