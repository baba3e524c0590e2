"""The chat adapter (``openai_chat``) under both protocols, against the local stub endpoint:
full episodes on both kinds through the harness, token and cost accounting, retries,
preflight, malformed or hostile responses and tool calls, the history window, and
``python -m pipeline.chat_check``."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from stub_openai import StubChatServer, tool_call

from pipeline import bundle, chat_check
from pipeline.agents import OpenAIChatAgent, TransportError
from pipeline.agents.base import EpisodeInfo, Observation
from pipeline.agents.tools import MAX_ARGUMENT_CHARS, MAX_CALLS_PER_TURN, RUN_PYTHON, Reply
from pipeline.harness import isolation_status, run_episode
from pipeline.harness.biobank import TOOLS as BIOBANK_TOOLS
from pipeline.oracle import load_oracle
from pipeline.score import score_episode
from pipeline.screening.score import score_episode as score_screening

REPO = Path(__file__).resolve().parents[2]
ISOLATED, ISOLATION_REASON = isolation_status()

PHENOTYPE = ("cov = pd.read_parquet(os.path.join(RELEASE, 'ecg_features.parquet'))\n"
             "pd.DataFrame({'subject_id': cov.index, 'phenotype': cov['qrs'].to_numpy()}).to_csv(OUT_CSV, index=False)\n"
             "print('phenotype written')\n")
EMPTY_CLAIMS = {"nominated": [], "directions": {}, "outcome_alignment": {}, "rejected": [], "abstentions": [],
                "confidence": 0.0}
SUBMIT_CODE = ("```python\njson.dump(json.loads(%r), open(os.path.join(WORK, 'submission.json'), 'w'))\nsubmit()\n```"
               % json.dumps(EMPTY_CLAIMS))


def chat(server, **options) -> OpenAIChatAgent:
    options.setdefault("retry_base_s", 0.01)
    return OpenAIChatAgent(base_url=server.base_url, model="stub", **options)


def usage(prompt, completion, cached=None) -> dict:
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def transcript(result) -> dict:
    return json.loads(Path(result["episode"]["transcript"]).read_text())


def saved_score(result) -> dict:
    return json.loads((Path(result["episode"]["episode_dir"]) / "score.json").read_text())


def turn_usage_sums(saved: dict) -> dict:
    sums: dict = {}
    for turn in saved["turns"]:
        for key, value in (turn.get("usage") or {}).items():
            sums[key] = sums.get(key, 0) + value
    return sums


def info(kind="biobank", tools=(RUN_PYTHON, *BIOBANK_TOOLS), max_turns=5) -> EpisodeInfo:
    return EpisodeInfo(episode_id="e", budget=0, max_turns=max_turns, timeout=10, costs={}, system_prompt="sys",
                       opening="Begin.", paths={}, isolated=True, paper_compat=False, kind=kind, tools=tuple(tools),
                       tool_note="Use the tools.")


def opening() -> Observation:
    return Observation(turn=1, text="Begin.", kind="opening", turns_remaining=5, budget_remaining=0)


def truth_claims(world) -> tuple[dict, str, str]:
    """(claims that score on this world, the cheaper experiment kind, the protein to test):
    the drivers outside pairs plus one pair's causal member, once tested."""
    sealed = Path(world) / "sealed"
    truth = bundle.read_sealed(sealed, bundle.TRUTH)
    drivers = {d["protein"]: d["direction"] for d in truth["drivers"]}
    pairs = [p for p in truth.get("pairs", []) if p.get("causal") in drivers]
    paired = {p["causal"] for p in pairs}
    tested = pairs[0]["causal"]
    nominated = [d for d in drivers if d not in paired] + [tested]
    claims = {"nominated": nominated, "directions": {p: drivers[p] for p in nominated},
              "outcome_alignment": {p: "aligned" for p in nominated}, "rejected": [], "abstentions": [],
              "confidence": 0.9}
    costs = load_oracle(sealed).costs
    return claims, min(costs, key=lambda k: costs[k]), tested


# ----------------------------------------------------------------------------- full episodes: code_fence


def test_code_fence_episode_counts_tokens_and_cost_per_turn(tiny_world_noimaging, tmp_path):
    look = "Let me look.\n```python\nprint(sorted(os.listdir(RELEASE)))\n```"
    replies = [{"content": look, "usage": usage(1000, 50, cached=400)},
               {"content": "No code this time.", "usage": usage(1500, 20)},
               {"content": SUBMIT_CODE, "usage": usage(2000, 80, cached=1000)}]
    with StubChatServer(replies) as server:
        agent = chat(server, price_in_per_mtok=2.0, price_out_per_mtok=8.0, price_cached_in_per_mtok=0.5)
        result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "fence", timeout=60,
                             isolation="auto")
    assert result["episode"]["exit_reason"] == "submitted" and result["episode"]["turns_used"] == 3
    assert "tools" not in server.requests[0]
    # the paper's history format, unchanged: the code only, "(no code)" for a reply without
    assert server.requests[1]["messages"][2] == {"role": "assistant",
                                                 "content": "```python\nprint(sorted(os.listdir(RELEASE)))\n```"}
    assert server.requests[2]["messages"][4] == {"role": "assistant", "content": "(no code)"}
    cost = ((600 * 2.0 + 400 * 0.5 + 50 * 8.0) + (1500 * 2.0 + 20 * 8.0) + (1000 * 2.0 + 1000 * 0.5 + 80 * 8.0)) / 1e6
    expected = {"prompt_tokens": 4500, "completion_tokens": 150, "cached_tokens": 1400, "total_tokens": 4650}
    for scored in (result, saved_score(result)):
        assert {k: scored["usage"][k] for k in expected} == expected
        assert scored["usage"]["cost_usd"] == pytest.approx(cost)
    saved = transcript(result)
    turns = [t for t in saved["turns"] if "usage" in t]
    assert [t["usage"]["prompt_tokens"] for t in turns] == [1000, 1500, 2000]
    assert [t["usage"].get("cached_tokens") for t in turns] == [400, None, 1000]
    assert turn_usage_sums(saved)["cost_usd"] == pytest.approx(cost)
    assert all(t["latency_s"] >= 0 for t in turns)
    assert saved["turns"][0]["reply"] == look  # the prose stays in the transcript


def test_code_fence_episode_on_a_screening_world(tiny_screening, tmp_path):
    labels = "```python\nids = list(load_library(['id'])['id'][:10])\nrequest_labels(ids)\nprint(len(ids))\n```"
    finish = "```python\nprint(len(labels()))\nfinish()\n```"
    with StubChatServer([{"content": labels, "usage": usage(300, 30)},
                         {"content": finish, "usage": usage(500, 10)}]) as server:
        agent = chat(server, price_in_per_mtok=1.0, price_out_per_mtok=4.0)
        result = run_episode(tiny_screening, agent, out=tmp_path / "screen-fence", timeout=120, isolation="auto")
    assert result["episode"]["exit_reason"] == "finished" and result["episode"]["labels_used"] == 10
    assert result["usage"]["prompt_tokens"] == 800 and result["usage"]["completion_tokens"] == 40
    assert result["usage"]["cached_tokens"] == 0
    assert result["usage"]["cost_usd"] == pytest.approx((800 * 1.0 + 40 * 4.0) / 1e6)
    assert turn_usage_sums(transcript(result))["total_tokens"] == 840
    assert "labels: 10 delivered" in server.requests[1]["messages"][-1]["content"]


# ----------------------------------------------------------------------------- full episodes: tools


def _tools_biobank_episode(world, out, isolation):
    claims, kind, protein = truth_claims(world)
    replies = [
        {"content": "Queue one experiment and write a phenotype.", "usage": usage(1200, 60, cached=200),
         "tool_calls": [tool_call("budget"), tool_call("request_experiment", {"kind": kind, "protein": protein}),
                        tool_call("run_python", {"code": PHENOTYPE})]},
        {"usage": usage(2400, 40, cached=1200),
         "tool_calls": [tool_call("run_python", {"code": f"print(open(os.path.join(WORK, 'experiments', "
                                                         f"'{protein}.{kind}.json')).read())"})]},
        {"usage": usage(3000, 90), "tool_calls": [tool_call("submit", {"submission": claims})]},
    ]
    with StubChatServer(replies) as server:
        agent = chat(server, protocol="tools", price_in_per_mtok=3.0, price_out_per_mtok=15.0)
        result = run_episode(world, agent, budget=450_000, out=out, timeout=120, isolation=isolation)
    return result, server, claims, kind, protein


def _check_tools_biobank(world, result, server, claims, kind, protein):
    summary = result["episode"]
    assert summary["exit_reason"] == "submitted", summary
    # the model got the episode's tools and the tool note
    first = server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["run_python", "request_experiment", "budget", "submit"]
    system = first["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(transcript(result)["system_prompt"])
    assert "You act through tools instead of fenced code blocks" in system["content"]
    # a proper history: the assistant's tool calls, then one tool message per call id
    second = server.requests[1]["messages"]
    assistant = second[2]
    assert assistant["role"] == "assistant" and [c["function"]["name"] for c in assistant["tool_calls"]] == [
        "budget", "request_experiment", "run_python"]
    answers = second[3:]
    assert [m["role"] for m in answers] == ["tool"] * 3
    assert [m["tool_call_id"] for m in answers] == [c["id"] for c in assistant["tool_calls"]]
    assert "Budget remaining: $450,000" in answers[0]["content"]
    assert answers[1]["content"].startswith("Queued:")
    assert "Your code ran" in answers[2]["content"] and "phenotype written" in answers[2]["content"]
    assert f"delivered: {kind} of {protein}" in answers[2]["content"]  # charged after the program run
    third = server.requests[2]["messages"]
    assert json.loads(third[-1]["content"].split("--- stdout ---\n")[1].split("\n---")[0])["protein"] == protein
    # the experiment requested by a tool call is in the harness's ledger, charged in turn 1
    ledger = [json.loads(line) for line in Path(summary["ledger"]).read_text().splitlines()]
    delivered = [r for r in ledger if r["status"] == "delivered"]
    assert [(r["protein"], r["turn"]) for r in delivered] == [(protein, 1)] and summary["spent"] > 0
    # the score is the scorer's on the same WORK and ledger
    work = Path(summary["episode_dir"]) / "work"
    assert json.loads((work / "submission.json").read_text()) == claims
    again = score_episode(Path(world) / "sealed", work, summary["ledger"])
    assert {k: result[k] for k in again} == again
    assert result["total"] > 0 and result["phenotype_construction"] > 0
    # tokens and cost, per turn and in all
    expected = {"prompt_tokens": 6600, "completion_tokens": 190, "cached_tokens": 1400, "total_tokens": 6790}
    cost = (6600 * 3.0 + 190 * 15.0) / 1e6
    for scored in (result, saved_score(result)):
        assert {k: scored["usage"][k] for k in expected} == expected
        assert scored["usage"]["cost_usd"] == pytest.approx(cost)
    saved = transcript(result)
    sums = turn_usage_sums(saved)
    assert {k: sums[k] for k in expected} == expected and sums["cost_usd"] == pytest.approx(cost)
    assert [c["name"] for c in saved["turns"][0]["tool_calls"]] == ["budget", "request_experiment", "run_python"]


def test_tools_episode_on_a_biobank_world_scores_like_the_scorer(tiny_world_noimaging, tmp_path):
    found = _tools_biobank_episode(tiny_world_noimaging, tmp_path / "tools", "auto")
    _check_tools_biobank(tiny_world_noimaging, *found)


@pytest.mark.skipif(not ISOLATED, reason=f"the sandbox cannot isolate here: {ISOLATION_REASON}")
def test_tools_episode_isolated(tiny_world_noimaging, tmp_path):
    found = _tools_biobank_episode(tiny_world_noimaging, tmp_path / "tools-isolated", "require")
    assert found[0]["isolated"] is True
    _check_tools_biobank(tiny_world_noimaging, *found)


def test_tools_episode_on_a_screening_world_scores_like_the_scorer(tiny_screening, tmp_path):
    ids = list(pd.read_parquet(Path(tiny_screening) / "release" / "library.parquet", columns=["id"])["id"])
    size = json.loads((Path(tiny_screening) / "sealed" / "oracle.json").read_text())["submission_size"]
    replies = [
        {"usage": usage(400, 20), "tool_calls": [tool_call("request_labels", {"ids": ids[:25]}),
                                                 tool_call("run_python", {"code": "print('labels asked')"})]},
        {"usage": usage(800, 30, cached=300),
         "tool_calls": [tool_call("run_python", {"code": "print(len(labels()))"}),
                        tool_call("submit", {"ids": ids[:size]}), tool_call("budget")]},
        {"usage": usage(900, 5), "tool_calls": [tool_call("run_python", {"code": "print(submission_results())"}),
                                                tool_call("finish")]},
    ]
    with StubChatServer(replies) as server:
        agent = chat(server, protocol="tools", price_in_per_mtok=1.0, price_out_per_mtok=2.0,
                     price_cached_in_per_mtok=0.1)
        result = run_episode(tiny_screening, agent, out=tmp_path / "screen-tools", timeout=120, isolation="auto")
    summary = result["episode"]
    assert summary["exit_reason"] == "finished" and summary["labels_used"] == 25 and summary["submissions"] == 1
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == [
        "run_python", "request_labels", "submit", "budget", "finish"]
    answers = server.requests[2]["messages"][-3:]
    assert [m["role"] for m in answers] == ["tool"] * 3
    assert answers[0]["content"].startswith("Turn 2") and "\n25\n" in answers[0]["content"]
    assert answers[1]["content"].startswith("Queued: one submission")
    again = score_screening(Path(tiny_screening) / "sealed", Path(summary["episode_dir"]) / "work", summary["ledger"])
    assert result["score"] == again["score"] and result["best_submission"] == again["best_submission"]
    assert result["submissions"] == again["submissions"]
    cost = ((2100 - 300) * 1.0 + 300 * 0.1 + 55 * 2.0) / 1e6
    assert result["usage"]["prompt_tokens"] == 2100 and result["usage"]["cached_tokens"] == 300
    assert result["usage"]["cost_usd"] == pytest.approx(cost)
    assert turn_usage_sums(transcript(result))["cost_usd"] == pytest.approx(cost)


# ----------------------------------------------------------------------------- tool calls gone wrong


def test_malformed_and_unknown_tool_calls_become_notices(tiny_world_noimaging, tmp_path):
    huge = json.dumps({"code": "x" * (MAX_ARGUMENT_CHARS + 10)})
    replies = [
        {"tool_calls": [tool_call("run_python", "{not json"), tool_call("rm_rf", {"path": "/"}),
                        tool_call("run_python", "[1, 2]"), tool_call("run_python", huge),
                        tool_call("request_experiment", {"kind": "knockdown"}),
                        {"function": {"name": "run_python", "arguments": {"code": "print('dict arguments')"}}},
                        tool_call("run_python", {"code": "print('ran')"}, id=None)]},
        {"tool_calls": [tool_call("submit", {"submission": EMPTY_CLAIMS})]},
    ]
    with StubChatServer(replies) as server:
        agent = chat(server, protocol="tools")
        result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "bad-calls", timeout=60,
                             isolation="auto")
    assert result["episode"]["exit_reason"] == "submitted" and result["episode"]["turns_used"] <= 3
    messages = server.requests[1]["messages"]
    assistant, answers = messages[2], messages[3:]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(ids) == 7 == len(set(ids)) and all(ids)  # calls without an id were given one
    assert [m["tool_call_id"] for m in answers] == ids
    texts = [m["content"] for m in answers]
    assert texts[0].startswith("Refused: arguments are not valid JSON")
    assert texts[1].startswith("Refused: unknown tool") and "run_python" in texts[1]
    assert texts[2].startswith("Refused: arguments must be a JSON object")
    assert texts[3].startswith("Refused: arguments of") and "characters" in texts[3]
    assert texts[4].startswith("Refused:") and "nothing was charged" in texts[4]
    assert "dict arguments" in texts[5] and "ran" in texts[6]
    # the history carries JSON-object arguments only (a strict server re-parses them)
    for call in assistant["tool_calls"]:
        assert isinstance(json.loads(call["function"]["arguments"]), dict)
    assert len(json.dumps(assistant)) < 10_000
    saved = transcript(result)
    first = saved["turns"][0]
    assert sum(bool(c.get("refused")) for c in first["tool_calls"]) == 5
    events = " | ".join(first["events"])
    assert "not valid JSON" in events and "unknown tool 'rm_rf'" in events and "must be a JSON object" in events
    assert "characters" in events


def test_text_only_refused_and_empty_replies_use_a_turn(tiny_world_noimaging, tmp_path):
    replies = ["I will think about it first.",
               {"content": None, "refusal": "I cannot help with that."},
               {"content": "partial", "finish_reason": "content_filter"},
               {"content": None},
               {"tool_calls": [tool_call("submit", {"submission": EMPTY_CLAIMS})]}]
    with StubChatServer(replies) as server:
        agent = chat(server, protocol="tools")
        result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "text-only", timeout=60,
                             isolation="auto")
    assert result["episode"]["exit_reason"] == "submitted"
    saved = transcript(result)
    statuses = [t.get("status") for t in saved["turns"]]
    assert statuses[:4] == ["no_code"] * 4  # each reply without a tool call used a turn
    assert "refusal: I cannot help with that." in saved["turns"][1]["events"][0]
    assert "content_filter" in saved["turns"][2]["events"][0]
    assert any("empty reply" in e for e in saved["turns"][3]["events"])
    second = server.requests[1]["messages"]
    assert second[2] == {"role": "assistant", "content": "I will think about it first."}
    assert second[3]["role"] == "user" and "called no tool" in second[3]["content"]
    assert "refusal" in server.requests[2]["messages"][-1]["content"]
    assert server.requests[2]["messages"][-2] == {"role": "assistant", "content": "I cannot help with that."}


def test_the_per_turn_call_cap_ends_a_looping_model(tiny_world_noimaging, tmp_path):
    loop = lambda body: {"tool_calls": [tool_call("budget")], "usage": usage(10, 1)}  # noqa: E731
    with StubChatServer([], default=loop) as server:
        agent = chat(server, protocol="tools")
        result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "loop", timeout=60,
                             isolation="auto", max_turns=2)
    assert result["episode"]["exit_reason"] == "turn_limit" and result["episode"]["turns_used"] == 2
    assert len(server.requests) == 2 * (MAX_CALLS_PER_TURN + 1)
    assert result["usage"]["prompt_tokens"] == 10 * len(server.requests)
    saved = transcript(result)
    assert all(t["status"] == "no_code" for t in saved["turns"])
    # a turn of 17 replies records the usage of all 17
    assert [t["usage"]["prompt_tokens"] for t in saved["turns"]] == [10 * (MAX_CALLS_PER_TURN + 1)] * 2
    assert turn_usage_sums(saved)["total_tokens"] == result["usage"]["total_tokens"]
    assert f"at most {MAX_CALLS_PER_TURN} between two program runs" in saved["turns"][0]["observation"]
    # the model read the cap in the tool message answering its 17th call
    assert "the turn is used" in server.requests[MAX_CALLS_PER_TURN + 1]["messages"][-1]["content"]


def test_one_reply_with_endless_tool_calls_ends_too(tiny_world_noimaging, tmp_path):
    many = {"tool_calls": [tool_call("budget") for _ in range(200)]}
    with StubChatServer([many], default=many) as server:
        agent = chat(server, protocol="tools")
        result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "many", timeout=60,
                             isolation="auto", max_turns=3)
    assert result["episode"]["exit_reason"] == "turn_limit" and result["episode"]["turns_used"] == 3
    assert len(server.requests) == 1  # 64 calls played: 3 turns of 17 calls end the episode
    assert "200 tool calls in one reply" in transcript(result)["turns"][0]["events"][0]


# ----------------------------------------------------------------------------- the wire


def test_429_then_ok_is_retried_and_recorded():
    with StubChatServer([{"status": 429, "headers": {"Retry-After": "0.3"}}, 503, "```python\nprint(1)\n```"]) as server:
        agent = chat(server)
        agent.reset(info())
        start = time.monotonic()
        reply = agent.act(opening())
        elapsed = time.monotonic() - start
    assert isinstance(reply, Reply) and reply.text == "```python\nprint(1)\n```"
    assert len(server.requests) == 3 and elapsed >= 0.3  # Retry-After honoured
    assert "retry 1/5 in 0.30 s after HTTP 429" in reply.events[0] and "HTTP 503" in reply.events[1]
    assert reply.latency_s >= 0.3 and reply.usage == {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    assert reply.cost_usd is None  # no price table


def test_retries_stop_at_the_wait_bound_and_client_errors_are_not_retried():
    with StubChatServer([{"status": 429, "headers": {"Retry-After": "3600"}}]) as server:
        agent = chat(server, max_retry_wait_s=5)
        agent.reset(info())
        start = time.monotonic()
        with pytest.raises(TransportError, match="asks to wait 3.6e\\+03 s, past max_retry_wait_s=5"):
            agent.act(opening())
        assert time.monotonic() - start < 2 and len(server.requests) == 1
    with StubChatServer([500] * 20) as server:
        agent = chat(server, retries=10, retry_base_s=0.05, max_retry_wait_s=0.4)
        agent.reset(info())
        start = time.monotonic()
        with pytest.raises(TransportError, match="HTTP 500.*past max_retry_wait_s=0.4") as raised:
            agent.act(opening())
        assert time.monotonic() - start < 2 and 2 <= len(server.requests) <= 5
        assert "\n" not in str(raised.value) and raised.value.status == 500
    for status in (400, 401, 404, 422):
        with StubChatServer([status, "never reached"]) as server:
            agent = chat(server)
            agent.reset(info())
            with pytest.raises(TransportError, match=f"HTTP {status}: stub status {status}"):
                agent.act(opening())
            assert len(server.requests) == 1
    agent = OpenAIChatAgent(base_url="http://127.0.0.1:9/v1", model="m", retries=2, retry_base_s=0.01)
    agent.reset(info())
    with pytest.raises(TransportError, match="cannot connect.*after 3 attempts"):
        agent.act(opening())


def test_backoff_doubles_with_bounded_seeded_jitter():
    a = OpenAIChatAgent(model="m", retry_base_s=0.5, seed=3)
    b = OpenAIChatAgent(model="m", retry_base_s=0.5, seed=3)
    waits = [a.backoff(k) for k in range(10)]
    assert waits == [b.backoff(k) for k in range(10)]
    for k, wait in enumerate(waits):
        full = min(0.5 * 2 ** k, 60.0)
        assert full / 2 <= wait <= full
    assert a.backoff(0, retry_after=7.5) == 7.5


def test_garbage_json_and_endless_streams_are_bounded(tiny_world_noimaging, tmp_path):
    # a garbage body, then a good one: retried, recorded with the turn
    with StubChatServer([{"raw": "<html>proxy error</html>"}, {"raw": "{\"choices\": []}"}, SUBMIT_CODE]) as server:
        result = run_episode(tiny_world_noimaging, chat(server), budget=0, out=tmp_path / "garbage", timeout=60,
                             isolation="auto")
    assert result["episode"]["exit_reason"] == "submitted"
    events = transcript(result)["turns"][0]["events"]
    assert "response is not JSON" in events[0] and "without choices[0].message" in events[1]
    # an endless body: capped, retried, then a transport failure recorded with the turn; WORK is scored
    with StubChatServer([], default={"endless": True}) as server:
        agent = chat(server, max_response_bytes=256 * 1024, retries=2)
        start = time.monotonic()
        result = run_episode(tiny_world_noimaging, agent, budget=0, out=tmp_path / "endless", timeout=60,
                             isolation="auto")
        assert time.monotonic() - start < 60
    assert result["episode"]["exit_reason"] == "transport_failure"
    assert "larger than max_response_bytes=262,144" in result["episode"]["exit_detail"]
    assert "transport_failure" in transcript(result)["turns"][-1] and len(server.requests) == 3
    assert "total" in result and result["usage"]["total_tokens"] == 0
    # a trickle that never ends: the request deadline holds
    with StubChatServer([], default={"endless": True, "chunk_delay": 0.05}) as server:
        agent = chat(server, request_timeout=0.5, retries=0)
        agent.reset(info())
        start = time.monotonic()
        with pytest.raises(TransportError, match="no complete response within request_timeout=0.5 s"):
            agent.act(opening())
        assert time.monotonic() - start < 3
    # a server that never answers at all
    with StubChatServer([{"delay": 2, "content": "late"}]) as server:
        agent = chat(server, request_timeout=0.3, retries=0)
        agent.reset(info())
        with pytest.raises(TransportError, match="request_timeout=0.3"):
            agent.act(opening())


def test_usage_normalisation_and_missing_usage():
    with StubChatServer([{"content": "hi", "usage": None},
                         {"content": "hi", "usage": {"prompt_tokens": 10, "completion_tokens": 2,
                                                     "cached_tokens": 4}},
                         {"content": "hi", "usage": {"prompt_tokens": True, "completion_tokens": -1}}]) as server:
        agent = chat(server, price_in_per_mtok=1, price_out_per_mtok=1)
        agent.reset(info())
        missing = agent.act(opening())
        direct = agent.act(Observation(turn=2, text="o", kind="no_code", turns_remaining=4, budget_remaining=0))
        nonsense = agent.act(Observation(turn=3, text="o", kind="no_code", turns_remaining=3, budget_remaining=0))
    assert missing.usage is None and missing.cost_usd is None
    assert "no token usage; cost unknown" in missing.events[0]
    assert direct.usage == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "cached_tokens": 4}
    assert direct.cost_usd == pytest.approx(12 / 1e6)
    assert nonsense.usage is None and nonsense.cost_usd is None


# ----------------------------------------------------------------------------- preflight and chat_check


def test_preflight_says_in_one_line_what_is_wrong(monkeypatch):
    monkeypatch.delenv("DTW_NO_SUCH_KEY", raising=False)
    cases = [
        (401, ["HTTP 401", "DTW_NO_SUCH_KEY is not set"]),
        (404, ["HTTP 404", "check base_url", "model=stub"]),
        ({"raw": "<!doctype html><p>hello"}, ["response is not JSON", "<!doctype html>"]),
        ({"status": 400, "error": "Unsupported parameter: 'max_tokens'"}, ["max_tokens_key=max_completion_tokens"]),
    ]
    for reply, words in cases:
        with StubChatServer([reply, reply]) as server:
            problem = chat(server, api_key_env="DTW_NO_SUCH_KEY", retries=0).preflight()
        assert problem is not None and "\n" not in problem, problem
        assert all(w in problem for w in words), problem
    down = OpenAIChatAgent(base_url="http://127.0.0.1:9/v1", model="m", retries=0).preflight()
    assert "cannot connect" in down and "is the server running" in down
    with StubChatServer(["OK", "OK"]) as server:
        assert chat(server, temperature=0.3).preflight() is None
        assert chat(server, protocol="tools", max_tokens_key="max_completion_tokens").preflight() is None
    fence, tools = server.requests
    assert fence["max_tokens"] == 1 and fence["temperature"] == 0.3 and "tools" not in fence
    assert tools["max_completion_tokens"] == 1 and [t["function"]["name"] for t in tools["tools"]] == ["ping"]


def test_the_episode_cli_refuses_a_401_endpoint_in_one_line(tiny_world_noimaging, tmp_path):
    out = tmp_path / "never"
    with StubChatServer([401, 401]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "pipeline.episode", f"world_dir={tiny_world_noimaging}", "agent=openai_chat",
             "budget=0", f"out={out}", f"agent.base_url={server.base_url}", "agent.model=stub",
             "agent.protocol=tools", "agent.api_key_env=DTW_NO_SUCH_KEY", "isolation=auto"],
            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 401" in lines[0] and lines[0].startswith("pipeline.episode: error: agent openai_chat")
    assert not out.exists() and len(server.requests) == 1


def test_chat_check_verdicts(capsys, monkeypatch):
    ping = {"tool_calls": [tool_call("ping", {"word": "ok"})], "usage": usage(40, 6, cached=10)}
    with StubChatServer(["OK", ping, "I would call ping now", 401, {"raw": "garbage"}]) as server:
        url = server.base_url
        assert chat_check.main([f"base_url={url}", "model=stub"]) == 0
        ok = capsys.readouterr().out.strip()
        assert ok.startswith("pipeline.chat_check: ok: chat completion") and "tokens prompt 1" in ok
        assert chat_check.main(["--base-url", url, "--model", "stub", "protocol=tools", "price_in_per_mtok=1",
                                "price_out_per_mtok=10"]) == 0
        ok = capsys.readouterr().out.strip()
        assert 'tool call ping({"word": "ok"})' in ok and "cached 10" in ok and "$0.000100" in ok
        assert chat_check.main([f"base_url={url}", "model=stub", "protocol=tools"]) == 2
        err = capsys.readouterr().err.strip()
        assert "without a tool call" in err and "not parsing tool calls" in err and len(err.splitlines()) == 1
        assert chat_check.main([f"base_url={url}", "model=stub", "retries=0", "api_key_env=null"]) == 2
        assert "HTTP 401" in capsys.readouterr().err
        assert chat_check.main([f"base_url={url}", "model=stub", "retries=0"]) == 2
        assert "not JSON" in capsys.readouterr().err
    assert server.requests[1]["max_tokens"] == 256 and server.requests[1]["tools"][0]["function"]["name"] == "ping"
    assert chat_check.main(["model=stub"]) == 2 and "missing base_url" in capsys.readouterr().err
    assert chat_check.main(["base_url=localhost:1", "model=stub"]) == 2 and "base_url" in capsys.readouterr().err
    assert chat_check.main(["--help"]) == 0 and "protocol" in capsys.readouterr().out


def test_chat_check_runs_as_a_module():
    with StubChatServer([{"tool_calls": [tool_call("ping", {"word": "ok"})]}]) as server:
        done = subprocess.run([sys.executable, "-m", "pipeline.chat_check", f"base_url={server.base_url}",
                               "model=stub", "protocol=tools", "api_key_env=null"],
                              capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and "ok: tool call ping" in done.stdout
    assert "Authorization" not in server.headers[0]


# ----------------------------------------------------------------------------- options and the history window


def test_options_are_checked_in_one_line():
    for options, words in [({"protocol": "mcp"}, "protocol='mcp'"),
                           ({"price_in_per_mtok": 1}, "give both"),
                           ({"price_in_per_mtok": -1, "price_out_per_mtok": 1}, "price_in_per_mtok=-1"),
                           ({"retries": 1.5}, "retries=1.5"),
                           ({"request_timeout": 0}, "request_timeout=0"),
                           ({"extra_body": '{"model": "x"}'}, "may not set model"),
                           ({"extra_body": "{nope"}, "extra_body: not JSON"),
                           ({"temperature": True}, "temperature=True")]:
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("+", r"\+")):
            OpenAIChatAgent(model="m", **options)
    with pytest.raises(ValueError) as raised:
        OpenAIChatAgent(model="m", api_key_env="sk-live-123456")
    assert "sk-live" not in str(raised.value)  # a key passed by mistake is not echoed
    agent = OpenAIChatAgent(model="m", extra_body='{"top_p": 0.5}', api_key_env="null")
    assert agent.api_key_env is None and agent._body([])["top_p"] == 0.5


def test_tools_history_window_keeps_tool_messages_with_their_call():
    agent = OpenAIChatAgent(model="m", protocol="tools", max_history_chars=600)
    agent.reset(info())
    agent.messages.append({"role": "user", "content": "Begin."})
    for i in range(8):
        calls = [{"id": f"c{i}_{j}", "type": "function",
                  "function": {"name": "budget", "arguments": "{}"}} for j in range(i % 3 + 1)]
        agent.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        agent.messages += [{"role": "tool", "tool_call_id": c["id"], "content": f"result {i} " + "z" * 40}
                           for c in calls]
        if i == 4:
            agent.messages.append({"role": "user", "content": "[a notice]"})
    window = agent._window()
    assert window[:2] == agent.messages[:2] and "earlier turn(s) omitted" in window[3]["content"]
    assert sum(len(m.get("content") or "") for m in window) < 700
    open_ids: set = set()
    for before, message in zip(window, window[1:]):
        if message["role"] == "tool":
            assert before["role"] in ("assistant", "tool") and message["tool_call_id"] in open_ids
        if message["role"] == "assistant":
            open_ids = {c["id"] for c in message.get("tool_calls", [])}
    assert window[-1]["tool_call_id"] == "c7_1"  # the latest exchange is whole
    last_assistant = max(i for i, m in enumerate(window) if m["role"] == "assistant")
    assert [m["tool_call_id"] for m in window[last_assistant + 1:]] == ["c7_0", "c7_1"]
    tiny = OpenAIChatAgent(model="m", max_history_chars=1)
    tiny.messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "Begin."},
                     {"role": "assistant", "content": "a" * 50}, {"role": "user", "content": "now"}]
    assert tiny._window()[-1]["content"] == "now"  # never dropped, however small the window
