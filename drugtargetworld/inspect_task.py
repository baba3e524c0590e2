"""The Inspect task ``drugtargetworld/episode``: episodes of the project's own harness as Inspect samples.

    inspect eval drugtargetworld/episode --model <provider/model> -T world_dir=<a built world> [-T budget=450000]
    inspect eval drugtargetworld/episode --model <provider/model> -T panel=paper-v1 -T scale=tiny \\
        [-T budgets=0,450000] [-T seeds=<sealed seeds file>] [-T worlds_dir=./worlds]
    inspect view                       # the log viewer: one sample per episode

The package registers this module under the entry point ``drugtargetworld`` of the group
``inspect_ai``, so Inspect finds the task by name once ``drugtargetworld[inspect]`` is
installed.  It lives in the import package ``drugtargetworld`` (not ``pipeline``) because
Inspect names a package's tasks, solvers and scorers after the top-level import package that
defines them, and finds them through the entry point of that name; ``pipeline.frameworks.
inspect_task`` is the same module under the project's own namespace.

Design: tools that call the episode core, not an Inspect sandbox environment provider.
A sandbox provider would give Inspect a place to execute commands, but an episode is more
than a place: the turn (one program run), the oracle's ledger and budget, requests charged
and delivered after each program, the exit rules, the transcript and the scorer all live in
``pipeline.harness.core.Session``, which already runs every program in the project's
bubblewrap sandbox (release read-only, WORK writable, no network, sealed bundle and ledger
out of reach).  So each sample opens one Session (``episode_setup``), the episode's own
tools (``Session.tools()``: ``run_python`` first, then the kind's) become Inspect tools with
the ToolSpecs' descriptions and JSON Schemas, every call is ``Session.call`` in a worker
thread, and the scorer is ``Session.finish()``: the same episode, accounting and score as
``python -m pipeline.episode``, the MCP server and the chat adapters.

Dataset: worlds x budgets (a screening world has no budget: its label budget is part of the
world).  Sample ids are neutral (``01-450000``: the world's position and the budget); the world
folder and id are in the sample's metadata, which Inspect never shows the model, and in the
score's metadata.  The sample's input is a neutral placeholder: the setup solver replaces the
messages with the episode's own system prompt (plus the note on tools) and opening message.

The default solver (``episode_agent``) generates, runs the reply's tool calls through
Inspect's ``execute_tools`` (so the log viewer shows each call as a tool event), and plays a
reply without tool calls as the core does (its last fenced block runs; without one the turn is
used and answered with the kind's hint), until the episode ends (``submit``, ``finish``, the
turn limit, the clock).  A call Inspect itself refuses (arguments that are not JSON or break
the tool's schema, an unknown tool) reaches the model as Inspect's tool error and counts
towards the core's cap of calls that run no program, so a model that keeps calling tools
wrongly still uses up turns.  A model error after Inspect's retries ends the episode as
``transport_failure`` and an Inspect limit as ``turn_limit`` (messages), ``time_limit`` (time,
working time) or ``policy_error`` (tokens, cost); either way the episode is scored from WORK,
as every exit path is.  Other
agents can use the tools too: ``solver=[episode_setup(...), react()]`` (the tools are in
``state.tools``).

Score: the value is the total scaled to [0, 1]; the metadata holds every component (biobank:
target identification, causal confidence, bias identification, intervention direction,
phenotype construction), the safety penalty, the unclipped total, the exit reason, the world
id and the episode folder (transcript.json, ledger.jsonl, score.json, work/).
"""
from __future__ import annotations

import atexit
import json
import re
import time
from pathlib import Path
from typing import Any, Optional

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser, ModelOutput,
                              execute_tools, get_model)
from inspect_ai.scorer import Metric, SampleScore, Score, Target, mean, metric, scorer, stderr
from inspect_ai.solver import Generate, TaskState, chain, solver
from inspect_ai.tool import ToolCallContent, ToolCallView, ToolDef, ToolParams

from pipeline.agents.tools import Reply, ToolCall
from pipeline.frameworks import worlds as W
from pipeline.frameworks.common import (BIOBANK_COMPONENTS, BUDGETS, ParameterError, check_bool, check_choice,
                                        check_int, check_number, harness_failed, note_usage, parse_budget, parse_budgets, parse_list,
                                        refuse_call, score_metrics, score_summary)

try:  # Inspect prints a PrerequisiteError's message alone (no traceback): a one-line error
    from inspect_ai._util.error import PrerequisiteError as _InspectError
except ImportError:  # pragma: no cover - a later Inspect without it: a plain error
    _InspectError = Exception

TASK = "drugtargetworld/episode"
PLACEHOLDER = "A DrugTargetWorld episode: the task instructions are given when the episode starts."
NO_TOOL_NOTICE = ("[Your previous reply called no tool (a fenced block in it, if any, ran as a program); call "
                  "run_python to run a program. A reply without a tool call uses a turn.]")
#: Sessions of the samples running in this process, by the sample's uuid (the scorer finishes them).
_SESSIONS: dict = {}
_BINDINGS: dict = {}  # and which of their model's calls are still to run
STORE_KEY = "drugtargetworld:episode"


class TaskParameterError(_InspectError, ValueError):
    """A bad parameter of the task: one line naming it (Inspect prints it without a traceback)."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        self.message = f"{TASK}: error: {message}"

    def __str__(self) -> str:
        return self.message


PARAMETERS = ("world_dir", "budget", "budgets", "panel", "panel_worlds", "scale", "seeds", "worlds_dir", "release",
              "mode", "clock_hours", "turns", "timeout", "isolation", "episodes_dir", "paper_compat")


# ----------------------------------------------------------------------------- the task


@task
def episode(world_dir: Optional[str] = None, budget: Any = None, budgets: Any = None, panel: Optional[str] = None,
            panel_worlds: Any = None, scale: str = "tiny", seeds: Optional[str] = None, worlds_dir: str = "./worlds",
            release: str = "default", mode: Optional[str] = None, clock_hours: Any = None, turns: Any = None,
            timeout: Any = None, isolation: str = "require", episodes_dir: Optional[str] = None,
            paper_compat: Any = False, **unknown: Any) -> Task:
    """DrugTargetWorld episodes (see the module docstring): ``world_dir`` (a built world) or
    ``panel`` (built at ``scale`` into ``worlds_dir``, reused when built already), times
    ``budget`` or ``budgets`` on biobank worlds (default: all three budgets)."""
    try:
        samples, options, kinds = _plan(world_dir=world_dir, budget=budget, budgets=budgets, panel=panel,
                                        panel_worlds=panel_worlds, scale=scale, seeds=seeds, worlds_dir=worlds_dir,
                                        release=release, mode=mode, clock_hours=clock_hours, turns=turns,
                                        timeout=timeout, isolation=isolation, episodes_dir=episodes_dir,
                                        paper_compat=paper_compat, unknown=unknown)
    except (ParameterError, W.WorldBuildError) as error:
        raise TaskParameterError(str(error)) from None
    return Task(dataset=MemoryDataset(samples, name="drugtargetworld", shuffled=False),
                solver=chain(episode_setup(**options), episode_agent()), scorer=episode_scorer(sorted(kinds)),
                name="drugtargetworld-episode", metadata={"kinds": sorted(kinds)})


def _plan(*, world_dir, budget, budgets, panel, panel_worlds, scale, seeds, worlds_dir, release, mode, clock_hours,
          turns, timeout, isolation, episodes_dir, paper_compat, unknown) -> tuple:
    """(samples, the setup solver's options, the kinds of world) — every parameter checked first."""
    from pipeline.harness.core import open_kind
    from pipeline.harness.kind import EpisodeError
    from pipeline.harness.sandbox import ISOLATION_MODES, isolation_status
    from pipeline.screening.episode import MODES

    unknown = {k: v for k, v in unknown.items() if k != "model"}  # Inspect may pass the model along
    if unknown:
        name = sorted(unknown)[0]
        raise ParameterError(f"{name}: not a parameter of {TASK}; valid: {', '.join(PARAMETERS)}")
    if (world_dir is None) == (panel is None):
        raise ParameterError("world_dir, panel: give exactly one (a built world's folder, or a panel to build and run)")
    if budget is not None and budgets is not None:
        raise ParameterError("budget, budgets: give one (budget for one budget, budgets for several)")
    check_choice(isolation, "isolation", ISOLATION_MODES)
    if mode is not None:
        check_choice(mode, "mode", tuple(MODES))
    options = {"turns": check_int(turns, "turns", 1, optional=True),
               "timeout": check_number(timeout, "timeout"), "isolation": isolation,
               "clock_hours": check_number(clock_hours, "clock_hours"), "mode": mode,
               "paper_compat": check_bool(paper_compat, "paper_compat"),
               "episodes_dir": str(Path(episodes_dir).resolve()) if episodes_dir else None}
    chosen = None
    if budget is not None or budgets is not None:
        chosen = (parse_budget(budget),) if budget is not None else parse_budgets(budgets)
    if world_dir is not None:
        for name, value in (("panel_worlds", panel_worlds), ("seeds", seeds)):
            if value is not None:
                raise ParameterError(f"{name}: only with panel=; valid: omit it with world_dir=")
        worlds = [(None, Path(world_dir))]
    else:
        check_choice(scale, "scale", ("tiny", "small", "paper", "biobank"))
        check_choice(release, "release", W.RELEASES)
        worlds = W.panel_worlds(str(panel), scale, worlds_dir, seeds, release, parse_list(panel_worlds, "panel_worlds"))
    samples, kinds = [], set()
    for position, (_, folder) in enumerate(worlds, start=1):
        try:
            _, kind = open_kind(folder)
        except EpisodeError as error:
            raise ParameterError(str(error)) from None
        kinds.add(kind.kind)
        world = str(Path(folder).resolve())
        if kind.kind == "biobank":
            if mode is not None or clock_hours is not None:
                raise ParameterError(f"{'mode' if mode is not None else 'clock_hours'}: not an option of a biobank "
                                     f"world ({world_dir or panel}); valid: omit it")
            for b in chosen or tuple(BUDGETS):
                samples.append(_sample(position, str(b), world, kind, {"budget": b}))
        else:
            if chosen is not None:
                raise ParameterError(f"{'budget' if budget is not None else 'budgets'}: not an option of a "
                                     f"{kind.kind} world (its label budget is part of the world); valid: omit it")
            samples.append(_sample(position, mode or "limited", world, kind, {}))
    if isolation == "require":
        ok, reason = isolation_status()
        if not ok:
            raise ParameterError(f"isolation=require: the agent sandbox cannot isolate here ({reason}); valid: "
                                 "install bubblewrap where user namespaces work, or isolation=auto (unisolated, said)")
    return samples, options, kinds


def _sample(position: int, label: str, world: str, kind, extra: dict) -> Sample:
    return Sample(id=f"{position:02d}-{label}", input=PLACEHOLDER,
                  metadata={"world_dir": world, "world_id": kind.world_id, "kind": kind.kind, **extra})


# ----------------------------------------------------------------------------- tools


def _viewer(spec):
    """How the log viewer shows a call: run_python's code as a Python block."""
    if spec.name != "run_python":
        return None

    def view(call) -> ToolCallView:
        code = call.arguments.get("code") if isinstance(call.arguments, dict) else None
        return ToolCallView(call=ToolCallContent(format="markdown", content=f"```python\n{code}\n```"
                                                 if isinstance(code, str) else "(no code)"))
    return view


class _Binding:
    """The episode's side of the tools: which of the model's calls are still to run (for their ids)."""

    def __init__(self, session):
        self.session = session
        self.pending: list = []  # (id, function, arguments) of the reply's well-formed calls, in order
        self.ran: set = set()

    def expect(self, calls) -> None:
        self.pending = [(c.id, c.function, c.arguments) for c in calls if not c.parse_error]
        self.ran = set()

    def take(self, name: str, arguments: dict) -> Optional[str]:
        for i, (call_id, function, args) in enumerate(self.pending):
            if function == name and args == arguments:
                del self.pending[i]
                self.ran.add(call_id)
                return call_id
        return None


def episode_tools(session, binding: Optional[_Binding] = None) -> list:
    """The episode's tools (``Session.tools()``) as Inspect tools: the ToolSpecs' names,
    descriptions and JSON Schemas; each call is ``Session.call`` in a worker thread."""
    binding = binding or _Binding(session)
    out = []
    for spec in session.tools():
        out.append(_make_tool(spec, binding))
    return out


def _make_tool(spec, binding: _Binding):
    async def execute(**kwargs: Any) -> str:
        call = ToolCall(spec.name, dict(kwargs), binding.take(spec.name, kwargs))
        try:
            text, _ = await anyio.to_thread.run_sync(binding.session.call, call)
        except Exception as error:  # the harness's own failure: the episode ends, scored from WORK
            text = harness_failed(binding.session, error)
        return text

    return ToolDef(execute, name=spec.name, description=spec.description,
                   parameters=ToolParams.model_validate(inspect_parameters(spec.parameters)), viewer=_viewer(spec),
                   max_output=0).as_tool()


def inspect_parameters(schema: dict) -> dict:
    """The ToolSpec's JSON Schema as Inspect takes it: Inspect requires a description of every
    parameter, so one the ToolSpec leaves without gets one said from its schema (its choices,
    or its type); everything else is the ToolSpec's own."""
    import copy

    out = copy.deepcopy(schema)
    for name, prop in (out.get("properties") or {}).items():
        if isinstance(prop, dict) and not prop.get("description"):
            if prop.get("enum"):
                prop["description"] = f"one of: {', '.join(map(str, prop['enum']))}"
            elif prop.get("type") == "object":
                prop["description"] = f"the {name} as a JSON object"
            else:
                prop["description"] = f"the {name} ({prop.get('type', 'any')})"
    return out


# ----------------------------------------------------------------------------- solvers


@solver
def episode_setup(turns: Optional[int] = None, timeout: Optional[float] = None, isolation: str = "require",
                  mode: Optional[str] = None, clock_hours: Optional[float] = None, paper_compat: bool = False,
                  episodes_dir: Optional[str] = None):
    """Open the sample's episode (one ``Session``), set the episode's prompt and tools."""
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from pipeline.harness.core import Session, default_episode_dir

        meta = state.metadata
        kind = meta.get("kind")
        agent = "inspect-" + re.sub(r"[^A-Za-z0-9_.-]", "_", str(state.model))[:40]
        options: dict = {"max_turns": turns, "timeout": timeout, "isolation": isolation, "agent_name": agent}
        if kind == "biobank":
            options.update(budget=meta.get("budget"), paper_compat=paper_compat)
            label = meta.get("budget")
        else:
            options.update(mode=meta.get("mode") or mode, clock_hours=clock_hours)
            label = options["mode"] or "limited"
        options["out"] = default_episode_dir(agent, label, episodes_dir)

        def open_session():
            session = Session(meta["world_dir"], **options)
            return session, session.start()

        session, info = await anyio.to_thread.run_sync(open_session)
        _SESSIONS[state.uuid] = session
        state.store.set(STORE_KEY, {"episode_dir": str(session.dir), "episode_id": session.episode_id})
        binding = _Binding(session)
        _BINDINGS[state.uuid] = binding
        note = f"\n\n{info.tool_note}" if info.tool_note else ""
        state.messages = [ChatMessageSystem(content=info.system_prompt + note), ChatMessageUser(content=info.opening)]
        state.tools = episode_tools(session, binding)
        return state

    return solve


def _usage(output: ModelOutput) -> Optional[dict]:
    usage = output.usage
    if usage is None:
        return None
    out = {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
           "total_tokens": usage.total_tokens}
    if usage.input_tokens_cache_read:
        out["cached_tokens"] = usage.input_tokens_cache_read
    return out


@solver
def episode_agent():
    """Play the sample's episode to its end (see the module docstring)."""
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from inspect_ai.util import LimitExceededError

        session = _SESSIONS.get(state.uuid)
        if session is None:
            raise RuntimeError("episode_agent: no episode for this sample (run episode_setup first)")
        binding = _BINDINGS.get(state.uuid) or _Binding(session)
        model = get_model()
        try:
            while not session.done:
                if session.clock_left() == 0.0:
                    session.end("time_limit")
                    break
                t0 = time.monotonic()
                output = await model.generate(state.messages, state.tools)
                state.output = output
                message = output.message
                state.messages.append(message)
                latency = time.monotonic() - t0
                if message.tool_calls:
                    note_usage(session, _usage(output))
                    await _play_calls(state, session, binding, message)
                else:
                    reply = Reply(text=message.text, usage=_usage(output), latency_s=latency)
                    try:
                        observation = await anyio.to_thread.run_sync(session.respond, reply)
                        text = f"{NO_TOOL_NOTICE}\n{observation.text}"
                    except Exception as error:  # the harness's own failure: the episode ends, scored
                        text = harness_failed(session, error)
                    state.messages.append(ChatMessageUser(content=text))
        except LimitExceededError as error:
            reason = {"time": "time_limit", "working": "time_limit", "message": "turn_limit"}.get(error.type,
                                                                                               "policy_error")
            session.end(reason, f"Inspect's {error.type} limit: {error.message}")
            raise
        except Exception as error:  # the model (or Inspect) failed: an exit path, scored from WORK
            if session.done:
                raise
            session.end("transport_failure", f"{type(error).__name__}: {' '.join(str(error).split())[:2000]}")
        return state

    return solve


async def _play_calls(state: TaskState, session, binding: _Binding, message: ChatMessageAssistant) -> None:
    binding.expect(message.tool_calls)
    result = await execute_tools(state.messages, state.tools)
    state.messages.extend(result.messages)
    by_id = {c.id: c for c in message.tool_calls}
    for reply in result.messages:
        if not isinstance(reply, ChatMessageTool) or reply.error is None or reply.tool_call_id in binding.ran:
            continue
        # Inspect refused the call before the tool ran (not JSON, the schema, an unknown tool).
        call = by_id.get(reply.tool_call_id)
        arguments = (call.arguments if call is not None else None) or {}
        observation = refuse_call(session, reply.function or (call.function if call else "?"), arguments,
                                  reply.tool_call_id, reply.error.message)
        if observation is not None:
            state.messages.append(ChatMessageUser(content=observation.text))


# ----------------------------------------------------------------------------- the scorer


def _finish_leftovers() -> None:
    """At exit, finish any episode whose sample never reached the scorer (Inspect failed around
    it): its staging is cleaned and score.json written, scored from WORK."""
    for key in list(_SESSIONS):
        session = _SESSIONS.pop(key, None)
        if session is not None and session.result is None:
            try:
                session.finish("harness_error", "the Inspect sample ended before its scorer ran")
            except Exception:
                pass


atexit.register(_finish_leftovers)


def _metadata_mean(key: str):
    def compute(scores: list[SampleScore]) -> float:
        values = [s.score.metadata[key] for s in scores
                  if s.score.metadata and isinstance(s.score.metadata.get(key), (int, float))]
        return float(sum(values) / len(values)) if values else 0.0
    return compute


@metric
def target_identification() -> Metric:
    """Mean target identification points (of 30)."""
    return _metadata_mean("target_identification")


@metric
def causal_confidence() -> Metric:
    """Mean causal confidence points (of 25)."""
    return _metadata_mean("causal_confidence")


@metric
def bias_identification() -> Metric:
    """Mean bias identification points (of 15)."""
    return _metadata_mean("bias_identification")


@metric
def intervention_direction() -> Metric:
    """Mean intervention direction points (of 20)."""
    return _metadata_mean("intervention_direction")


@metric
def phenotype_construction() -> Metric:
    """Mean phenotype construction points (of 10)."""
    return _metadata_mean("phenotype_construction")


@metric
def safety_penalty() -> Metric:
    """Mean safety penalty (0 or -30)."""
    return _metadata_mean("safety_penalty")


@metric
def total() -> Metric:
    """Mean total (0-100)."""
    return _metadata_mean("total")


_COMPONENT_METRICS = {"target_identification": target_identification, "causal_confidence": causal_confidence,
                      "bias_identification": bias_identification, "intervention_direction": intervention_direction,
                      "phenotype_construction": phenotype_construction}


def episode_scorer(kinds=("biobank",)):
    """The project's scorer (``Session.finish()``) as an Inspect scorer: the value is the total
    / 100; the metadata every component, the safety penalty and the exit reason.  On a biobank
    task the metrics add each component's mean."""
    metrics = [mean(), stderr(), total()]
    if "biobank" in kinds:
        metrics += [_COMPONENT_METRICS[k]() for k in BIOBANK_COMPONENTS] + [safety_penalty()]
    return _episode_score(metrics)


def _episode_score(metrics):
    @scorer(metrics=metrics, name="drugtargetworld_score")
    def drugtargetworld_score():
        async def score(state: TaskState, target: Target) -> Score:
            session = _SESSIONS.pop(state.uuid, None)
            _BINDINGS.pop(state.uuid, None)
            if session is not None:
                result = await anyio.to_thread.run_sync(session.finish)
            else:  # another process ran the episode (inspect score on a log): its score.json
                folder = (state.store.get(STORE_KEY) or {}).get("episode_dir")
                path = Path(folder) / "score.json" if folder else None
                if path is None or not path.is_file():
                    return Score(value=0.0, explanation="no episode ran for this sample",
                                 metadata={"exit_reason": None})
                result = json.loads(path.read_text())
            return _to_score(result)

        return score

    return drugtargetworld_score()


def _to_score(result: dict) -> Score:
    metrics = score_metrics(result)
    summary = score_summary(result)
    value = max(0.0, min(1.0, metrics["total"] / 100.0))
    parts = [f"total {metrics['total']:.2f}/100"]
    if "target_identification" in metrics:
        parts.append(", ".join(f"{k} {metrics[k]:g}" for k in (*BIOBANK_COMPONENTS, "safety_penalty")))
    parts.append(f"exit {summary['exit_reason']}")
    return Score(value=value, answer=summary["exit_reason"], explanation="; ".join(parts),
                 metadata={**metrics, **summary})
