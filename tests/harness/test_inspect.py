"""The Inspect task ``drugtargetworld/episode`` (drugtargetworld.inspect_task) on tiny worlds, offline.

Scripted runs with Inspect's ``mockllm/model`` (and, for the command line, an OpenAI-compatible
stub endpoint): a run that submits a known answer (the truth agent's claims, the true top-K)
scores exactly what the project's scorer gives the same WORK and ledger; mockllm's default
text output still completes and is scored; the Inspect log holds the transcript; wrong tool
calls are tool errors, never a crashed sample; bad parameters are one-line errors naming the
parameter before any episode; every episode runs isolated.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from pipeline import bundle  # noqa: E402
from pipeline.agents.truth import TruthAgent  # noqa: E402
from pipeline.harness import isolation_status  # noqa: E402
from pipeline.oracle import load_oracle  # noqa: E402
from pipeline.score import score_episode  # noqa: E402
from pipeline.screening.score import score_episode as screening_score  # noqa: E402

from stub_openai import StubChatServer  # noqa: E402

from drugtargetworld.inspect_task import TaskParameterError, episode, inspect_parameters  # noqa: E402

M = "mockllm/model"
DEFAULT_TEXT = "Default output from mockllm/model"  # mockllm's default output (MockLLM.default_output)
COMPONENTS = ("target_identification", "causal_confidence", "bias_identification", "intervention_direction",
              "phenotype_construction", "safety_penalty", "total", "total_unclipped")

pytestmark = pytest.mark.skipif(not isolation_status()[0], reason=f"no isolation here: {isolation_status()[1]}")


def _usage(output: ModelOutput) -> ModelOutput:
    # mockllm estimates missing usage with tiktoken, whose encoding is a download: scripted
    # outputs carry their own usage so the tests stay offline.
    output.usage = ModelUsage(input_tokens=11, output_tokens=5, total_tokens=16)
    return output


def call(name: str, args: dict, call_id: str | None = None) -> ModelOutput:
    return _usage(ModelOutput.for_tool_call(M, name, args, tool_call_id=call_id))


def default_output(*_args) -> ModelOutput:
    return _usage(ModelOutput.from_content(M, DEFAULT_TEXT))


def run(tasks, outputs, tmp_path: Path, **kw):
    logs = inspect_eval(tasks, model=get_model(M, custom_outputs=outputs), log_dir=str(tmp_path / "logs"),
                        display="none", **kw)
    for log in logs:
        assert log.status == "success", log.error
    return logs


def only_sample(log):
    (sample,) = log.samples
    return sample


def rescored(meta: dict, world: str, kind: str) -> dict:
    """The project's own scorer on the episode's WORK and ledger."""
    folder = Path(meta["episode_dir"])
    sealed = Path(world) / bundle.SEALED
    if kind == "screening":
        return screening_score(sealed, folder / "work", str(folder / "ledger.jsonl"))
    return score_episode(sealed, folder / "work", folder / "ledger.jsonl")


def test_tool_schemas_are_the_episodes_own():
    """The Inspect tools carry the ToolSpecs' schemas; only descriptions Inspect requires are added."""
    from pipeline.agents.tools import RUN_PYTHON
    from pipeline.harness.biobank import TOOLS

    for spec in (RUN_PYTHON, *TOOLS):
        converted = inspect_parameters(spec.parameters)
        for name, prop in converted.get("properties", {}).items():
            assert prop["description"]
            original = dict(spec.parameters["properties"][name])
            assert {k: v for k, v in prop.items() if k != "description"} == \
                {k: v for k, v in original.items() if k != "description"}
        assert {k: v for k, v in converted.items() if k != "properties"} == \
            {k: v for k, v in spec.parameters.items() if k != "properties"}
    assert inspect_parameters(TOOLS[0].parameters)["properties"]["kind"]["description"] == \
        "one of: cell_perturbation, knockdown"


def test_scripted_biobank_run_scores_as_the_projects_scorer(tiny_world_noimaging, tmp_path):
    world = tiny_world_noimaging
    sealed = Path(world) / bundle.SEALED
    truth = TruthAgent(sealed)
    spec = load_oracle(sealed)
    experiments, claims = truth.plan(SimpleNamespace(budget=2_000_000.0, costs=dict(spec.costs)))
    assert experiments, "the all-biases world has ambiguous pairs to test"
    outputs = [call("run_python", {"code": truth._phenotype_code() + "print('phenotype written')"}, "c-pheno")]
    outputs += [call("request_experiment", {"kind": k, "protein": p}, f"c-exp-{i}") for i, (k, p) in
                enumerate(experiments)]
    outputs += [
        call("request_experiment", {"kind": "bogus", "protein": "PROT_0001"}, "c-bad-enum"),  # Inspect's schema
        call("run_python", {"code": "print(1)", "extra": True}, "c-bad-extra"),
        call("no_such_tool", {}, "c-unknown"),
        call("request_experiment", {"kind": "knockdown", "protein": "NOT_A_PROTEIN"}, "c-bad-protein"),  # the core's
        call("run_python", {"code": "print(sorted(os.listdir(os.path.join(WORK, 'experiments'))))"}, "c-check"),
        call("budget", {}, "c-budget"),
        call("submit", {"submission": claims}, "c-submit"),
    ]
    (log,) = run(episode(world_dir=world, budget=2_000_000, episodes_dir=str(tmp_path / "episodes")), outputs,
                 tmp_path)
    sample = only_sample(log)
    score = sample.scores["drugtargetworld_score"]
    meta = score.metadata
    expected = rescored(meta, world, "biobank")
    assert meta["exit_reason"] == "submitted" and meta["isolated"] is True
    for key in COMPONENTS:
        assert meta[key] == pytest.approx(expected[key]), key
    assert score.value == pytest.approx(expected["total"] / 100)
    assert expected["total"] > 80, expected  # the known answer is worth most of the points
    # usage reached the episode's own record: 11 + 5 tokens for each of the model's replies
    assert meta["usage"]["prompt_tokens"] == 11 * len(outputs)
    assert meta["usage"]["completion_tokens"] == 5 * len(outputs)

    # the wrong calls were tool errors; the episode went on
    tool_messages = {m.tool_call_id: m for m in sample.messages if m.role == "tool"}
    for bad in ("c-bad-enum", "c-bad-extra", "c-unknown"):
        assert tool_messages[bad].error is not None and tool_messages[bad].error.type == "parsing"
    assert "not one of" in tool_messages["c-bad-enum"].error.message
    assert tool_messages["c-bad-protein"].error is None and "Queued" in tool_messages["c-bad-protein"].text
    assert "Turn 2 of 30" in tool_messages["c-check"].text
    assert all(f"{p}.{k}.json" in tool_messages["c-check"].text for k, p in experiments)
    assert tool_messages["c-submit"].text.startswith("Submission recorded")

    # the episode's own transcript: every call with the model's ids, the refusals marked
    transcript = json.loads(Path(meta["transcript"]).read_text())
    calls = [c for turn in transcript["turns"] for c in turn.get("tool_calls", ())]
    assert [c["id"] for c in calls] == [o.message.tool_calls[0].id for o in outputs]
    refused = {c["id"] for c in calls if c.get("refused_by") == "framework"}
    assert refused == {"c-bad-enum", "c-bad-extra", "c-unknown"}
    ledger = [json.loads(line) for line in Path(meta["episode_dir"], "ledger.jsonl").read_text().splitlines()]
    assert {(r["kind"], r["protein"]) for r in ledger if r.get("status") == "delivered"} == set(experiments)
    assert any(r.get("status") == "refused" for r in ledger)  # the unknown protein, refused at no cost

    # the Inspect log on disk holds the transcript: messages and a tool event per call that ran
    saved = read_eval_log(log.location)
    saved_sample = only_sample(saved)
    assert any("phenotype written" in (m.text or "") for m in saved_sample.messages if m.role == "tool")
    tool_events = [e for e in saved_sample.events if e.event == "tool"]
    assert [e.id for e in tool_events] == [o.message.tool_calls[0].id for o in outputs]
    assert saved.results.scores[0].metrics["target_identification"].value == pytest.approx(
        expected["target_identification"])

    # what the model saw never names the world
    world_id = Path(world).name
    assert world_id not in str(sample.id)
    for message in sample.messages:
        assert world_id not in (message.text or ""), message.role
    assert sample.metadata["world_id"] == world_id and meta["world_id"] == world_id


def test_scripted_screening_run_scores_as_the_projects_scorer(tiny_screening, tmp_path):
    world = tiny_screening
    top = json.loads((Path(world) / bundle.SEALED / "topk.json").read_text())["ids"]
    outputs = [
        call("request_labels", {"ids": top[:5]}, "c-labels"),
        call("request_labels", {"ids": "C000001"}, "c-bad-type"),  # Inspect's schema: ids is an array
        call("run_python", {"code": "print('labels are delivered after this program')"}, "c-run"),
        call("submit", {"ids": top}, "c-submit"),
        call("run_python", {"code": "print('lines', open(os.path.join(WORK, 'labels.csv')).read().count(chr(10)))"},
             "c-res"),
        call("finish", {}, "c-finish"),
    ]
    (log,) = run(episode(world_dir=world, episodes_dir=str(tmp_path / "episodes")), outputs, tmp_path)
    sample = only_sample(log)
    assert sample.id == "01-limited"
    score = sample.scores["drugtargetworld_score"]
    expected = rescored(score.metadata, world, "screening")
    assert score.metadata["exit_reason"] == "finished" and score.metadata["isolated"] is True
    assert expected["total"] == pytest.approx(100.0)  # the true top-K
    assert score.metadata["total"] == pytest.approx(expected["total"])
    assert score.metadata["score"] == pytest.approx(expected["score"])
    assert score.value == pytest.approx(expected["total"] / 100)
    tools = {m.tool_call_id: m for m in sample.messages if m.role == "tool"}
    assert tools["c-bad-type"].error is not None
    assert "labels: 5 delivered" in tools["c-run"].text
    assert "lines 6" in tools["c-res"].text  # the header and five labels
    assert "submission 1: 100 of the top 100" in tools["c-res"].text


def test_default_output_completes_and_is_scored(tiny_world_noimaging, tiny_screening, tmp_path):
    """mockllm's default reply (text, no tool call) uses a turn each time: the episodes end at
    the turn limit, scored from WORK like any other exit path."""
    tasks = [episode(world_dir=tiny_world_noimaging, budget=0, episodes_dir=str(tmp_path / "episodes")),
             episode(world_dir=tiny_screening, turns=4, episodes_dir=str(tmp_path / "episodes"))]
    logs = run(tasks, default_output, tmp_path)
    for log, world, kind, turns in zip(logs, (tiny_world_noimaging, tiny_screening), ("biobank", "screening"),
                                       (30, 4)):
        sample = only_sample(log)
        score = sample.scores["drugtargetworld_score"]
        meta = score.metadata
        assert meta["exit_reason"] == "turn_limit" and meta["turns_used"] == turns
        assert meta["total"] == pytest.approx(rescored(meta, world, kind)["total"])
        assert score.value == pytest.approx(meta["total"] / 100)
        replies = [m for m in sample.messages if m.role == "assistant"]
        assert len(replies) == turns and all(m.text == DEFAULT_TEXT for m in replies)
        assert "Your reply held no code" in sample.messages[-1].text


def test_calls_that_run_no_program_use_up_the_turn(tiny_screening, tmp_path):
    """A model that keeps calling tools wrongly still uses turns: Inspect's refusals count
    towards the core's cap of 16 calls between two program runs."""
    outputs = [call("no_such_tool", {"i": i}, f"c{i}") for i in range(17)] + [call("finish", {}, "c-finish")]
    (log,) = run(episode(world_dir=tiny_screening, turns=3, episodes_dir=str(tmp_path / "episodes")), outputs,
                 tmp_path)
    sample = only_sample(log)
    meta = sample.scores["drugtargetworld_score"].metadata
    assert meta["exit_reason"] == "finished"
    transcript = json.loads(Path(meta["transcript"]).read_text())
    first = transcript["turns"][0]
    assert first["status"] == "no_code" and len(first["tool_calls"]) == 17
    assert "17 tool calls ran no program" in sample.messages[-3].text


def test_another_solver_can_play_the_episodes_tools(tiny_screening, tmp_path):
    """After ``episode_setup`` the episode's tools are in ``state.tools``: Inspect's own tool loop
    (``generate()``) plays them, and the scorer finishes the episode."""
    from inspect_ai import Task
    from inspect_ai.solver import generate

    from drugtargetworld.inspect_task import episode_scorer, episode_setup

    base = episode(world_dir=tiny_screening)
    task = Task(dataset=base.dataset, solver=[episode_setup(episodes_dir=str(tmp_path / "episodes")), generate()],
                scorer=episode_scorer(["screening"]))
    outputs = [call("run_python", {"code": "print('via generate')"}), call("finish", {}),
               _usage(ModelOutput.from_content(M, "done"))]
    (log,) = run(task, outputs, tmp_path)
    sample = only_sample(log)
    meta = sample.scores["drugtargetworld_score"].metadata
    assert meta["exit_reason"] == "finished"
    assert any("via generate" in (m.text or "") for m in sample.messages if m.role == "tool")


def test_a_harness_failure_ends_the_episode_scored(tiny_screening, tmp_path, monkeypatch):
    """The harness's own failure during a call ends the episode as harness_error (scored from
    WORK, as the core's own loop does), never a crashed sample."""
    from pipeline.harness.core import Session

    real = Session.call

    def failing(self, tool_call):
        if tool_call.name == "budget":
            raise RuntimeError("a harness bug")
        return real(self, tool_call)

    monkeypatch.setattr(Session, "call", failing)
    outputs = [call("run_python", {"code": "print(1)"}, "c1"), call("budget", {}, "c2"), call("finish", {}, "c3")]
    (log,) = run(episode(world_dir=tiny_screening, episodes_dir=str(tmp_path / "episodes")), outputs, tmp_path)
    sample = only_sample(log)
    meta = sample.scores["drugtargetworld_score"].metadata
    assert meta["exit_reason"] == "harness_error" and "a harness bug" in meta["exit_detail"]
    assert meta["total"] == pytest.approx(rescored(meta, tiny_screening, "screening")["total"])
    assert [m.tool_call_id for m in sample.messages if m.role == "tool"] == ["c1", "c2"]  # c3 never asked for
    assert "the episode has ended (harness_error)" in sample.messages[-1].text


def test_bad_parameters_are_one_line_errors(tiny_world_noimaging, tiny_screening, tmp_path):
    cases = [
        (dict(world_dir=tiny_world_noimaging, budget=5), "budget=5: invalid; valid: one of 0, 450000, 2000000"),
        (dict(world_dir=tiny_world_noimaging, budgets="0,7"), "budgets='7': invalid; valid: one of 0, 450000"),
        (dict(world_dir=tiny_world_noimaging, colour="red"), "colour: not a parameter of drugtargetworld/episode"),
        (dict(world_dir=str(tmp_path)), "world_dir="),
        (dict(world_dir=tiny_screening, budget=0), "budget: not an option of a screening world"),
        (dict(), "world_dir, panel: give exactly one"),
        (dict(world_dir=tiny_world_noimaging, isolation="maybe"), "isolation='maybe': invalid"),
        (dict(world_dir=tiny_world_noimaging, turns=0), "turns=0: invalid"),
        (dict(world_dir=tiny_world_noimaging, mode="limited"), "mode: not an option of a biobank world"),
        (dict(panel="no-such-panel"), "panel='no-such-panel': unknown panel"),
        (dict(panel="paper-v1", panel_worlds="heldout-dcm-01", worlds_dir=str(tmp_path / "w")), "seeds: world heldout"),
    ]
    for kwargs, expected in cases:
        with pytest.raises(TaskParameterError) as info:
            episode(**kwargs)
        text = str(info.value)
        assert expected in text and "\n" not in text, (kwargs, text)
    assert not (tmp_path / "w").exists()  # nothing built before the error


def _cli(args: list, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    inspect_cmd = Path(sys.executable).with_name("inspect")
    command = [str(inspect_cmd)] if inspect_cmd.exists() else [sys.executable, "-m", "inspect_ai"]
    return subprocess.run(command + ["eval", "drugtargetworld/episode", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COLUMNS": "400", **(env or {})}, cwd=cwd)


def _completion(calls=(), content=None) -> dict:
    """A complete OpenAI chat completion body for the stub endpoint."""
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"call-{name}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}} for name, args in calls]
    return {"raw": json.dumps({"id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
                               "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                                            "message": message}],
                               "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})}


def test_command_line_finds_the_task_by_its_entry_point(tiny_screening, tmp_path):
    """``inspect eval drugtargetworld/episode`` through the installed entry point: a bad parameter
    is one line on the console (no traceback); a scripted model over an OpenAI-compatible
    endpoint plays an episode whose score lands in the log."""
    bad = _cli(["--model", M, "-T", f"world_dir={tiny_screening}", "-T", "budget=450000"], cwd=tmp_path)
    out = bad.stdout + bad.stderr
    assert "budget: not an option of a screening world" in out and "Traceback" not in out, out
    assert [line for line in out.splitlines() if "drugtargetworld/episode: error:" in line][0].count("error") == 1

    top = json.loads((Path(tiny_screening) / bundle.SEALED / "topk.json").read_text())["ids"]
    script = [_completion([("run_python", {"code": "print('hello from the sandbox')"})]),
              _completion([("submit", {"ids": top[:50]})]), _completion([("finish", {})])]
    with StubChatServer(script) as server:
        done = _cli(["--model", "openai-api/stub/stub-model", "-T", f"world_dir={tiny_screening}",
                     "-T", f"episodes_dir={tmp_path / 'episodes'}", "--log-dir", str(tmp_path / "logs"),
                     "--display", "plain"], env={"STUB_API_KEY": "stub", "STUB_BASE_URL": server.base_url},
                    cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        sent_tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert sent_tools == {"run_python", "request_labels", "submit", "budget", "finish"}
    (path,) = (tmp_path / "logs").glob("*.eval")
    sample = only_sample(read_eval_log(str(path)))
    meta = sample.scores["drugtargetworld_score"].metadata
    assert meta["exit_reason"] == "finished"
    assert meta["total"] == pytest.approx(rescored(meta, tiny_screening, "screening")["total"]) == pytest.approx(50.0)
    assert any("hello from the sandbox" in (m.text or "") for m in sample.messages if m.role == "tool")


def test_panel_builds_its_worlds_once_and_runs_them(tmp_path, monkeypatch):
    """``panel=`` builds the panel's worlds (here one, null-01, without pixels) before any
    episode and reuses a built world by config digest and seed."""
    import pipeline.build

    calls = []
    real = pipeline.build.build
    monkeypatch.setattr(pipeline.build, "build", lambda resolved, **kw: calls.append(resolved) or real(resolved, **kw))
    options = dict(panel="paper-v1", panel_worlds="null-01", scale="tiny", release="noimaging",
                   worlds_dir=str(tmp_path / "worlds"), budgets="0", turns=1, episodes_dir=str(tmp_path / "episodes"))
    task = episode(**options)
    assert len(calls) == 1 and (tmp_path / "worlds" / "null-01" / "release" / "MANIFEST.json").is_file()
    episode(**options)
    assert len(calls) == 1  # reused
    (log,) = run(task, default_output, tmp_path)
    sample = only_sample(log)
    assert sample.id == "01-0" and sample.metadata["world_id"] == "null-01"
    assert sample.scores["drugtargetworld_score"].metadata["exit_reason"] == "turn_limit"
