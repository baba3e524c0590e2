"""A verifiers environment over the episode core: RL training on fresh worlds that never overlap an evaluation panel.

    import verifiers as vf
    from pipeline.rl import load_environment

    env = load_environment(kind="biobank", scale="tiny", n_worlds=64, seed_namespace="train",
                           budgets=[450000], preset="standard")
    # prime-rl, or any trainer of verifiers' classic API, consumes env; or by hand:
    env.evaluate_sync(client=vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=...)), model="...",
                      num_examples=4, rollouts_per_example=8)

verifiers 0.3.1, the classic API (``verifiers.MultiTurnEnv``, ``Rubric``): ``verifiers`` 0.4.0
keeps only its new ``verifiers.v1`` API and pins ``mcp==2.0.0`` exactly, which conflicts with
the ``[mcp]`` extra's MCP SDK below 2; prime-rl and the environment hub consume the classic
``load_environment`` and ``MultiTurnEnv``.

Dataset.  One row per world x budget (a screening world has no budget), all present at load:
the world specs come from the named training seed namespace (``pipeline.frameworks.worlds``:
a keyed hash of namespace and index, refused when equal to any evaluation seed), in the
chosen curriculum family (``preset``; a list takes the families in turn).  A row's ``info``
says the family (``family_id``, the name a result cites), the namespace, the index and the
budget, never the seed.  Its ``prompt`` is a placeholder: the episode's own system prompt and
opening message replace it when the rollout starts (the prompt names the sandbox's paths and
limits, known only once the episode is open).

Worlds are built lazily, on a row's first rollout, into ``cache_dir`` and reused by config
digest, so a group of rollouts of one row (and every later run) shares one world; a build
that fails is a one-line error naming the world, recorded as the rollout's error.

Rollouts.  Each rollout is one ``Session`` (the sandbox, ledger, budget, turn accounting, exit
rules and scorer of every episode).  A model reply is played as a chat adapter's reply is
(``Session.respond``): its tool calls in order (``run_python`` runs a program: one turn; the
kind's tools act as the functions of the same names; a malformed call is refused by the
episode, and the refusal is the tool message the model reads), or, without tool calls, its
last fenced block as a program (without one the turn is used).  The episode's end
(``submit``, ``finish``, the turn limit, the clock) ends the rollout; so do verifiers' own
limits (a model error, the rollout timeout), and the episode is scored from WORK either way.

Rubric.  The reward is the total / 100 (the benchmark's score), or with ``weights`` the
weighted sum of the named parts / 100; every component, the safety penalty, the total and
whether the episode ended by its own rule are metrics (weight 0).  The full score is
``state["dtw_score"]`` (``state_columns=["dtw_score"]`` keeps it in the outputs).
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any, Optional

from .common import (BIOBANK_COMPONENTS, ParameterError, check_bool, check_choice, check_int, check_number,
                     harness_failed, parse_budgets, score_metrics, score_summary)
from . import worlds as W

PLACEHOLDER = "A DrugTargetWorld training episode: the task instructions are given when the episode starts."
NO_TOOL_NOTICE = ("[Your previous reply called no tool (a fenced block in it, if any, ran as a program); call "
                  "run_python to run a program. A reply without a tool call uses a turn.]")
PARAMETERS = ("kind", "scale", "n_worlds", "seed_namespace", "budgets", "preset", "start_index", "seeds", "seed_key",
              "release", "cache_dir", "episodes_dir", "keep_episodes", "weights", "isolation", "turns", "timeout",
              "mode")
ENDED_BY_RULE = ("submitted", "finished", "submissions_used", "submission_written")


def _import_verifiers():
    try:
        import verifiers as vf
    except ImportError:  # pragma: no cover - the extra is not installed
        raise ParameterError("verifiers: not installed; valid: pip install 'drugtargetworld[rl]'") from None
    return vf


def load_environment(kind: str = "biobank", scale: str = "tiny", n_worlds: int = 8, seed_namespace: str = "train",
                     budgets: Any = None, preset: Any = None, start_index: int = 0, seeds: Optional[str] = None,
                     seed_key: Optional[str] = None, release: Optional[str] = None, cache_dir: Optional[str] = None,
                     episodes_dir: Optional[str] = None, keep_episodes: Any = False, weights: Optional[dict] = None,
                     isolation: str = "require", turns: Any = None, timeout: Any = None, mode: Optional[str] = None,
                     **unknown: Any):
    """A verifiers multi-turn tool environment of DrugTargetWorld episodes (see the module docstring).

    ``kind`` biobank or screening; ``scale`` tiny or small; ``n_worlds`` training worlds
    ``start_index ..`` of ``seed_namespace`` (derived with ``seed_key``, default public;
    refused when any equals a seed of ``conf/`` or of the sealed ``seeds`` file);
    ``budgets`` (biobank; default all three); ``preset`` a world family or a list of them
    (default ``standard`` / ``labels-10``; ``pipeline.frameworks.worlds.FAMILIES``);
    ``release`` default or noimaging (a biobank world; default noimaging: no pixels, ~5 MB
    and seconds to build at tiny scale instead of ~300 MB); ``cache_dir`` where worlds are
    built (default ``$DTW_WORLD_CACHE`` or ``~/.cache/drugtargetworld/worlds``);
    ``episodes_dir`` the episode folders (default a temporary folder); ``keep_episodes``
    keeps them (transcript, ledger, WORK) after scoring; ``weights`` {part: weight} for the
    reward; ``isolation`` require (default), auto or off; ``turns``, ``timeout`` per episode;
    ``mode`` a screening episode's (limited or unrestricted).
    """
    from ..harness.sandbox import ISOLATION_MODES, isolation_status
    from ..screening.episode import MODES

    if unknown:
        name = sorted(unknown)[0]
        raise ParameterError(f"{name}: not a parameter of load_environment; valid: {', '.join(PARAMETERS)}")
    check_choice(kind, "kind", ("biobank", "screening"))
    check_choice(scale, "scale", W.SCALES)
    n_worlds = check_int(n_worlds, "n_worlds", 1)
    start_index = check_int(start_index, "start_index", 0)
    W.check_namespace(seed_namespace)
    if seed_key is not None and (not isinstance(seed_key, str) or not seed_key):
        raise ParameterError("seed_key: invalid; valid: a non-empty secret string (or omit it: the public key)")
    if kind == "screening" and release not in (None, "default"):
        raise ParameterError(f"release={release!r}: not an option of a screening world (it has no images); "
                             "valid: omit it")
    release = release or ("noimaging" if kind == "biobank" else "default")
    check_choice(release, "release", W.RELEASES)
    check_choice(isolation, "isolation", ISOLATION_MODES)
    if kind == "biobank":
        chosen_budgets = parse_budgets(budgets)
        if mode is not None:
            raise ParameterError("mode: not an option of a biobank world; valid: omit it")
    else:
        if budgets is not None:
            raise ParameterError("budgets: not an option of a screening world (its label budget is part of the world "
                                 "and of the preset); valid: omit it")
        chosen_budgets = (None,)
        if mode is not None:
            check_choice(mode, "mode", tuple(MODES))
    options = {"max_turns": check_int(turns, "turns", 1, optional=True), "timeout": check_number(timeout, "timeout"),
               "isolation": isolation}
    if mode is not None:
        options["mode"] = mode
    weights = _check_weights(kind, weights)
    keep = check_bool(keep_episodes, "keep_episodes")
    specs = W.training_specs(kind, preset, scale, n_worlds, seed_namespace, start=start_index, release=release,
                             seed_key=seed_key, seeds=seeds)
    _check_families(specs)
    if isolation == "require":
        ok, reason = isolation_status()
        if not ok:
            raise ParameterError(f"isolation=require: the agent sandbox cannot isolate here ({reason}); valid: "
                                 "install bubblewrap where user namespaces work, or isolation=auto (unisolated, said)")
    cache = Path(cache_dir or os.environ.get("DTW_WORLD_CACHE")
                 or Path.home() / ".cache" / "drugtargetworld" / "worlds")
    episodes = Path(episodes_dir) if episodes_dir else Path(tempfile.mkdtemp(prefix="dtw-episodes-"))
    return _environment_class()(specs=specs, budgets=chosen_budgets, cache_dir=cache.resolve(),
                                episodes_dir=episodes.resolve(), keep_episodes=keep, weights=weights,
                                session_options=options)


def _check_weights(kind: str, weights: Any) -> Optional[dict]:
    if weights is None:
        return None
    parts = (*BIOBANK_COMPONENTS, "safety_penalty") if kind == "biobank" else ("total",)
    if not isinstance(weights, dict) or not weights:
        raise ParameterError(f"weights={weights!r}: invalid; valid: a mapping of {', '.join(parts)} to numbers")
    out = {}
    for key, value in weights.items():
        if key not in parts:
            raise ParameterError(f"weights: unknown part {key!r}; valid: {', '.join(parts)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParameterError(f"weights[{key}]={value!r}: invalid; valid: a number")
        out[key] = float(value)
    return out


def _check_families(specs: list) -> None:
    """Compose and validate one world of every family before any rollout: a family that the
    generator's validation refuses at this scale fails at load (the archetype, the only other
    difference between a family's worlds, is valid for every family)."""
    from ..config_schema import ConfigError

    seen = set()
    for spec in specs:
        key = spec.family
        if key in seen:
            continue
        seen.add(key)
        try:
            W.resolve(spec.overrides(str(Path(tempfile.gettempdir()) / "dtw-check")))
        except ConfigError as error:
            raise ParameterError(f"preset={spec.family!r}: refused at scale={spec.scale}: {error}") from None


def reward_of(result: dict, weights: Optional[dict]) -> float:
    """The reward of an episode's score: total / 100, or the weighted parts / 100."""
    metrics = score_metrics(result)
    if not weights:
        return metrics["total"] / 100.0
    return sum(w * metrics.get(k, 0.0) for k, w in weights.items()) / 100.0


_CLASS = None


def _environment_class():
    """The environment class, made on first use (verifiers is imported only with the extra)."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    vf = _import_verifiers()
    from datasets import Dataset
    from verifiers.types import ToolMessage, UserMessage
    from verifiers.utils.message_utils import normalize_messages

    from ..agents.tools import RUN_PYTHON, Reply, ToolCall
    from ..harness import safeio

    class DrugTargetWorldRubric(vf.Rubric):
        """The reward (total / 100 or the weighted parts) and every part as a metric."""

        def __init__(self, kind: str, weights: Optional[dict]):
            super().__init__()
            self.kind, self.score_weights = kind, weights
            self.add_reward_func(self.reward, weight=1.0)
            parts = (*BIOBANK_COMPONENTS, "safety_penalty", "total") if kind == "biobank" else ("score", "total")
            for part in parts:
                self.add_metric(self._part(part))
            self.add_metric(self.ended_by_rule)

        @staticmethod
        def _result(state) -> dict:
            return state.get("dtw_score") or {}

        async def reward(self, state) -> float:
            return reward_of(self._result(state), self.score_weights)

        def _part(self, part: str):
            async def metric(state) -> float:
                return score_metrics(self._result(state)).get(part, 0.0)
            metric.__name__ = part
            return metric

        async def ended_by_rule(self, state) -> float:
            """1 when the episode ended by its own rule (submit, finish, the last submission)."""
            return float(score_summary(self._result(state)).get("exit_reason") in ENDED_BY_RULE)

    class DrugTargetWorldEnv(vf.MultiTurnEnv):
        """DrugTargetWorld episodes as a multi-turn tool environment (see ``pipeline.frameworks.rl``)."""

        def __init__(self, *, specs: list, budgets: tuple, cache_dir: Path, episodes_dir: Path, keep_episodes: bool,
                     weights: Optional[dict], session_options: dict):
            self.specs = list(specs)
            self.world_kind = specs[0].kind
            self.cache_dir, self.episodes_dir, self.keep_episodes = cache_dir, episodes_dir, keep_episodes
            self.session_options = dict(session_options)
            self.sessions: dict = {}
            rows = []
            for position, spec in enumerate(self.specs):
                for budget in budgets:
                    info = {**spec.row(), "world": position, "budget": budget}
                    rows.append({"prompt": [{"role": "user", "content": PLACEHOLDER}], "answer": "",
                                 "info": info})
            tools = [RUN_PYTHON, *self._kind_tools()]
            super().__init__(dataset=Dataset.from_list(rows), rubric=DrugTargetWorldRubric(self.world_kind, weights),
                             tool_defs=[{"name": t.name, "description": t.description, "parameters": t.parameters}
                                        for t in tools],
                             max_turns=-1, env_id="drugtargetworld",
                             env_args={"kind": self.world_kind, "families": sorted({s.family_id for s in self.specs}),
                                       "namespace": self.specs[0].namespace})

        def _kind_tools(self) -> list:
            if self.world_kind == "biobank":
                from ..harness.biobank import TOOLS
            else:
                from ..screening.episode import TOOLS
            return list(TOOLS)

        # -- a rollout

        def world_dir(self, spec) -> Path:
            """The built world of ``spec`` (built on first use, then shared by every rollout)."""
            return W.ensure_training_world(spec, self.cache_dir)

        async def setup_state(self, state):
            from ..harness.core import Session

            info = state["info"]
            spec = self.specs[int(info["world"])]
            try:
                world = await asyncio.to_thread(self.world_dir, spec)
            except W.WorldBuildError as error:
                raise vf.Error(str(error)) from error
            options = dict(self.session_options)
            if spec.kind == "biobank":
                options["budget"] = info["budget"]
            name = f"rl-{spec.family}-{spec.index:06d}-{info['budget'] if spec.kind == 'biobank' else 'labels'}"
            out = self.episodes_dir / f"{name}-{secrets.token_hex(4)}"

            def open_session():
                session = Session(world, agent_name="verifiers", out=out, **options)
                return session, session.start()

            try:
                session, episode_info = await asyncio.to_thread(open_session)
            except Exception as error:  # the episode cannot start here: the rollout's error, in one line
                raise vf.Error(f"the episode of {spec.family_id} world {spec.index} could not start: "
                               f"{type(error).__name__}: {' '.join(str(error).split())[:300]}") from error
            key = secrets.token_hex(8)
            self.sessions[key] = session
            state["dtw_session"] = key
            note = f"\n\n{episode_info.tool_note}" if episode_info.tool_note else ""
            state["prompt"] = normalize_messages([
                {"role": "system", "content": episode_info.system_prompt + note},
                {"role": "user", "content": episode_info.opening}], field_name="prompt")
            state["tool_defs"] = self._normalize_tool_defs(
                [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in session.tools()])
            return state

        def _session(self, state):
            return self.sessions.get(state.get("dtw_session"))

        async def env_response(self, messages, state, **kwargs):
            session = self._session(state)
            last = messages[-1]
            if session is None or session.done:
                text = f"The episode has ended ({getattr(session, 'exit_reason', None)})."
                reply = [UserMessage(content=text)]
                state["final_env_response"] = reply
                return reply
            calls = tuple(ToolCall(c.name, c.arguments, c.id) for c in (getattr(last, "tool_calls", None) or ()))
            content = getattr(last, "content", None)
            text = content if isinstance(content, str) else (None if content is None else str(content))
            step = state["trajectory"][-1] if state["trajectory"] else {}
            response = step.get("response") if isinstance(step, dict) else None
            usage = getattr(response, "usage", None)
            usage = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                     "total_tokens": usage.total_tokens} if usage is not None else None
            span = state["timing"].model.spans[-1] if state["timing"].model.spans else None
            latency = (span.end - span.start) if span is not None and span.end else None
            reply = Reply(text=text, tool_calls=calls, usage=usage, latency_s=latency)
            try:
                observation = await asyncio.to_thread(session.respond, reply)
            except Exception as error:  # the harness's own failure: the episode ends, scored from WORK
                told = harness_failed(session, error)
                out = [ToolMessage(content=told, tool_call_id=c.id) for c in calls] or [UserMessage(content=told)]
                state["final_env_response"] = out
                return out
            if calls:
                by_id = {r["id"]: r["text"] for r in observation.tool_results}
                out = [ToolMessage(content=by_id.get(c.id, observation.text), tool_call_id=c.id) for c in calls]
            else:
                out = [UserMessage(content=f"{NO_TOOL_NOTICE}\n{observation.text}")]
            if session.done:
                state["final_env_response"] = out
            return out

        @vf.stop
        async def episode_over(self, state) -> bool:
            session = self._session(state)
            return session is not None and session.done

        @vf.cleanup
        async def finish_episode(self, state):
            """Score the episode from WORK (on every exit path) and free its sandbox."""
            session = self.sessions.pop(state.get("dtw_session"), None)
            if session is None:
                state["dtw_score"] = {}
                return
            reason, detail = None, None
            if state.get("error") is not None and not session.done:
                reason, detail = "transport_failure", safeio.printable(repr(state["error"]), 2000)
            elif state.get("timed_out") and not session.done:
                reason, detail = "time_limit", "the rollout's timeout (timeout_seconds)"
            elif state.get("prompt_too_long") and not session.done:
                reason, detail = "policy_error", "the prompt outgrew the model's context"
            result = await asyncio.to_thread(session.finish, reason, detail)
            state["dtw_score"] = json.loads(json.dumps(result, default=str))
            if not self.keep_episodes:
                await asyncio.to_thread(safeio.remove_tree, session.dir)

    _CLASS = DrugTargetWorldEnv
    return _CLASS
