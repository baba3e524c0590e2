"""The episode core: one world, one policy, every kind of world (S3.2 and SPEC sections 7, 9, 10).

A :class:`Session` is one episode as a state machine that anything can drive: the turn
loop of a policy (:func:`run_episode`), an MCP client (``pipeline.mcp``), Inspect's tools
or a verifiers environment (``pipeline.frameworks``).  The kind of world (``pipeline.kinds``)
supplies only its tools, prompt, oracle and scorer (:class:`pipeline.harness.kind.KindEpisode`);
everything below is shared.

Turns
-----
A turn is one program run (``run_python``, or the last fenced code block of a text reply),
a reply with no code (the turn is used and answered with the kind's formatting hint), or
more than ``MAX_CALLS_PER_TURN`` tool calls that ran no program.  At most ``max_turns``
turns.  After each program ends, the requests it queued — and those tool calls queued
since the previous turn, first — go through the kind's oracle (charged or refused,
delivered into WORK); experiments or labels queued in the final turn are delivered and
charged all the same.  The observation says whether the code ran, its stdout and stderr
(capped), the oracle's answers, the WORK listing (names escaped), and what is left.

Exit rules
----------
``submit()`` (a biobank world) or ``finish()`` (a screening world) ends the episode after
the turn it is called in; so do the kind's own rules (the third screening submission; with
``paper_compat`` on a biobank world, the first parseable submission.json); otherwise the
turn limit, or the clock (``clock_s``).  Every exit path is scored from what WORK holds:
``submitted``, ``finished``, ``turn_limit``, ``time_limit``, ``policy_error`` and
``transport_failure`` (the policy or its model endpoint failed), ``client_disconnected``
(an MCP client left), ``sandbox_failure`` (the first program never started: the sandbox
is broken here), ``harness_error`` (the harness itself failed during a turn: recorded with
that turn, scored from WORK; replaying such an episode would be a free reroll, so it is not
to be replayed).  Only ``runner_crash`` — a failure before the first turn or while scoring —
scores zero on every component.

Episode folder
--------------
``./episodes/<agent>-<budget or mode>-<UTC time>-<random>/`` by default: see ``pipeline.harness.folders``.

Isolation
---------
``require`` (the default for every policy that is not the project's own) refuses to start
where the sandbox cannot isolate; ``auto`` falls back to a plain subprocess and says so on
stderr before the first turn and in score.json; ``off`` runs unisolated on purpose.

This module is the session and the policy loop; the folders are ``pipeline.harness.folders``,
the reading of replies ``pipeline.harness.replies`` (their names are importable from here too).
"""
from __future__ import annotations

import math
import os
import secrets
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

from ..agents.base import Agent, EpisodeInfo, Observation
from ..agents.tools import API_VERSION, MAX_CALLS_PER_TURN, RUN_PYTHON, Reply, ToolCall, add_usage
from . import safeio, safejson
from .folders import (EPISODE_MARKER, EPISODES_ROOT, default_episode_dir, open_kind, prepare_episode_dir,
                      world_id_of, world_paths)
from .kind import EpisodeError
from .limits import Limits
from .replies import REPLY_CAP, bounded_reply, extract_code, usage_totals, with_results
from .sandbox import ISOLATION_MODES, Sandbox
from .work import atomic_json, work_listing

TRANSCRIPT_FORMAT = "drugtargetworld-transcript/2"
#: Longest program run; a longer one is refused with a notice (the turn is used).
MAX_PROGRAM_CHARS = 1_000_000
#: Characters of a tool call's result or arguments kept in the transcript.
TOOL_TEXT_CAP = 20_000


# ----------------------------------------------------------------------------- the session


class Session:
    """One episode of any kind (see the module docstring).

    Options: ``budget`` (a biobank world's dollars; omitted or None on a screening world),
    ``agent_name``, ``out`` (the episode folder), ``max_turns``, ``timeout`` (seconds per
    program), ``isolation`` ("auto", "require", "off"), ``overwrite``, ``limits``
    (a ``Limits``), ``progress`` (a callable receiving one line per turn), ``clock_s`` (a
    wall clock for the whole episode), and the kind's own (``paper_compat``; ``mode``,
    ``clock_hours``).
    """

    def __init__(self, world_dir, *, budget: Optional[float] = None, agent_name: str = "agent",
                 out: Optional[os.PathLike | str] = None, max_turns: Optional[int] = None,
                 timeout: Optional[float] = None, isolation: str = "require", overwrite: bool = False,
                 limits: Optional[Limits] = None, progress: Optional[Callable[[str], None]] = None,
                 **kind_options):
        self.kind_def, self.kind = open_kind(world_dir)
        self.world, self.release, self.sealed = self.kind.world, self.kind.release, self.kind.sealed
        self.world_id = self.kind.world_id
        unknown = sorted(set(kind_options) - set(self.kind.options) - {"budget"})
        if unknown:
            valid = ", ".join(["world_dir", "agent", "out", "turns", "timeout", "isolation", "overwrite", "limits.*",
                               *self.kind.options]) or "none"
            raise EpisodeError(f"{', '.join(unknown)}: not an option of a {self.kind.kind} episode; valid: {valid}")
        kind_options["budget"] = budget
        self.kind.configure(kind_options)  # the kind's options checked before anything is made
        self.max_turns = self.kind.default_turns if max_turns is None else max_turns
        self.timeout = self.kind.default_timeout if timeout is None else timeout
        if isinstance(self.max_turns, bool) or not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise EpisodeError(f"turns={max_turns!r}: invalid; valid: an integer >= 1")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or \
                not (math.isfinite(self.timeout) and self.timeout > 0):
            raise EpisodeError(f"timeout={timeout!r}: invalid; valid: seconds > 0")
        self.timeout = float(self.timeout)
        if isolation not in ISOLATION_MODES:
            raise EpisodeError(f"isolation={isolation!r}: invalid; valid: {', '.join(ISOLATION_MODES)}")
        self.isolation = isolation
        self.agent_name = agent_name
        self.progress = progress
        self.episode_id = secrets.token_hex(6)  # what the agent is told: the world's id is not its to know
        self.dir = Path(out).resolve() if out is not None else default_episode_dir(agent_name, self.kind.label())
        prepare_episode_dir(self.dir, self.world, overwrite)
        self.ledger_path = self.dir / "ledger.jsonl"
        self.transcript_path = self.dir / "transcript.json"
        try:
            self.kind.open(self.ledger_path)
            self.sandbox = Sandbox(self.release, protected=[self.sealed, self.dir, self.world], isolation=isolation,
                                   limits=limits, timeout_hint=self.timeout, runtime=self.kind.runtime())
        except Exception:
            safeio.remove_tree(self.dir)
            raise
        self.work = self.sandbox.work
        os.symlink(self.work, self.dir / "work")
        self.clock_s = getattr(self.kind, "clock_s", None)
        self.turns: list[dict] = []
        self.turn = 0  # turns used
        self.calls_since_turn = 0
        self.queued: list = []  # (ToolCall, the kind's queued action) since the previous turn
        self.pending_record: dict = {}  # tool calls of the turn in progress, for its transcript record
        self.usage: dict = {}
        self.exit_reason: Optional[str] = None
        self.exit_detail: Optional[str] = None
        self.ready_seen = False
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.result: Optional[dict] = None
        self.info: Optional[EpisodeInfo] = None
        self.header: dict = {
            "format": TRANSCRIPT_FORMAT, "kind": self.kind.kind, "world_id": self.world_id,
            "world_dir": str(self.world), "agent": agent_name, "max_turns": self.max_turns, "timeout": self.timeout,
            "isolation_mode": isolation, "episode_id": self.episode_id, "api_version": API_VERSION,
            "limits": self.sandbox.limits.describe(), "limits_enforcement": self.sandbox.limits_reason,
            "staging": self.sandbox.staging,
        }

    # -- helpers for the kinds

    def write(self, rel: str, data: bytes | str) -> None:
        """Write ``WORK/rel`` for the harness: never through a link, owned by the program's uid."""
        safeio.write_file(self.work, rel, data, owner=self.sandbox.uid)

    def make_dir(self, rel: str) -> None:
        safeio.make_dir(self.work, rel, owner=self.sandbox.uid)

    @property
    def turns_left(self) -> int:
        return self.max_turns - self.turn

    def clock_left(self) -> Optional[float]:
        return None if self.clock_s is None else max(0.0, self.clock_s - (time.monotonic() - self.started))

    @property
    def done(self) -> bool:
        return self.exit_reason is not None

    def tools(self) -> list:
        """Every tool of this episode: run_python, then the kind's."""
        return [RUN_PYTHON, *self.kind.tools()]

    def tool_note(self) -> str:
        """How the tools relate to the task instructions (which speak of fenced code blocks)."""
        names = ", ".join(f"{t.name}()" for t in self.kind.tools())
        return ("You act through tools instead of fenced code blocks: run_python(code) runs one program in the "
                f"sandbox and is one turn; {names} act as the functions of the same names do inside a program "
                "(requests are queued and answered after your next program run). A turn is one program run; at "
                f"most {MAX_CALLS_PER_TURN} calls that run no program are accepted between two program runs.")

    # -- start

    def start(self) -> EpisodeInfo:
        """Set the episode up (prompts, WORK's initial state) and return what the policy is told."""
        if self.info is not None:
            return self.info
        if not self.sandbox.isolated:
            # One line before the first turn: an unisolated episode must not pass unnoticed.
            print(f"pipeline.harness: error: this episode is not isolated: {self.sandbox.reason}", file=sys.stderr)
        system, opening = self.kind.prompts(self)
        self.kind.start(self)
        extra = self.kind.info()
        self.header.update(isolated=self.sandbox.isolated, isolation_reason=self.sandbox.reason,
                           system_prompt=system, opening=opening, **self.kind.header())
        self.info = EpisodeInfo(
            episode_id=self.episode_id, budget=float(extra.get("budget", 0.0)), max_turns=self.max_turns,
            timeout=self.timeout, costs=dict(extra.get("costs", {})), system_prompt=system, opening=opening,
            paths=dict(self.sandbox.agent_paths), isolated=self.sandbox.isolated,
            paper_compat=bool(getattr(self.kind, "paper_compat", False)), kind=self.kind.kind,
            tools=tuple(self.tools()), tool_note=self.tool_note(),
        )
        self.save_transcript()
        return self.info

    def opening_observation(self) -> Observation:
        return Observation(turn=1, text=self.info.opening, kind="opening", turns_remaining=self.max_turns,
                           budget_remaining=self.kind.remaining())

    # -- one turn

    def _new_record(self, extra: Optional[dict] = None) -> dict:
        record = {"turn": self.turn + 1}
        if self.pending_record.get("tool_calls"):
            record["tool_calls"] = self.pending_record.pop("tool_calls")
        record.update(self.pending_record)
        self.pending_record = {}
        if extra:
            record.update(extra)
        return record

    def _close_turn(self, record: dict) -> None:
        self.turn += 1
        self.calls_since_turn = 0
        self.turns.append(record)
        self.save_transcript()

    def run_program(self, code: str, *, record: Optional[dict] = None) -> Observation:
        """One turn: run ``code`` in the sandbox, then the oracle's answers."""
        record = self._new_record(record)
        turn = record["turn"]
        if len(code) > MAX_PROGRAM_CHARS:
            return self.no_code(f"Your program is {len(code):,} characters long; at most {MAX_PROGRAM_CHARS:,} run. "
                                "Keep code in WORK between turns.", record=dict(record, code=code[:2000],
                                                                               code_chars=len(code)), fresh=False)
        record.setdefault("code", code)
        timeout = self.timeout
        if self.clock_s is not None:
            timeout = max(1.0, min(self.timeout, self.clock_left() or 1.0))
        run = self.sandbox.run(code, timeout)
        t1 = time.monotonic()
        if run.ready:
            self.ready_seen = True
        elif not self.ready_seen:
            # The prelude never reached the agent's code: the sandbox (or the interpreter in
            # it) is broken, which no reply can fix.
            detail = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
            record.update(status="sandbox_failure", returncode=run.returncode, stderr=run.stderr[-4000:],
                          timings={"run_s": run.duration})
            self._close_turn(record)
            self.end("sandbox_failure", f"the agent's program never started in the sandbox: {safejson.excerpt(detail, 300)}")
            return self._final_observation()
        queued, self.queued = [q for _, q in self.queued], []
        outcome = self.kind.after_turn(self, turn, run, queued)
        listing = work_listing(self.work)
        status = "timeout" if run.timed_out else ("ran" if run.returncode == 0 else "failed")
        if run.timed_out:
            head = f"Your code failed: it exceeded the {timeout:g} s limit and was stopped."
        elif run.returncode == 0:
            head = f"Your code ran ({run.duration:.1f} s)."
        else:
            head = f"Your code failed (exit status {run.returncode}, {run.duration:.1f} s)."
        parts = [f"Turn {turn} of {self.max_turns}. {head}",
                 "--- stdout ---\n" + (run.stdout.rstrip("\n") if run.stdout.strip() else "(nothing printed)")]
        if run.stderr.strip():
            parts.append("--- stderr ---\n" + run.stderr.rstrip("\n"))
        for title, lines in outcome.sections:
            if lines:
                parts.append(f"--- {title} ---\n" + "\n".join(lines))
        parts.append("--- WORK ---\n" + ("\n".join(listing) if listing else "(empty)"))
        parts.append(f"--- status ---\n{outcome.status}")
        text = "\n".join(parts)
        left = self.max_turns - turn
        observation = Observation(
            turn=turn + 1, text=text, kind="result", turns_remaining=left, budget_remaining=self.kind.remaining(),
            code=code, status=status, returncode=run.returncode, stdout=run.stdout, stderr=run.stderr,
            work_listing=tuple(listing), **outcome.fields,
        )
        record.update(observation=text, status=status, returncode=run.returncode,
                      output_chars={"stdout": run.stdout_chars, "stderr": run.stderr_chars}, **outcome.record)
        record.setdefault("timings", {}).update(run_s=run.duration, harness_s=time.monotonic() - t1)
        self._close_turn(record)
        self._report(f"turn {turn}/{self.max_turns}: {status} ({run.duration:.1f} s)"
                     + (f"; {outcome.report}" if outcome.report else ""))
        if outcome.ends:
            self.end(outcome.ends)
        else:
            self._check_limits()
        return observation

    def no_code(self, hint: Optional[str] = None, *, record: Optional[dict] = None, fresh: bool = True) -> Observation:
        """A turn that ran no program (a reply without code, too many calls): the turn is used."""
        record = self._new_record(record) if fresh else record
        record.setdefault("code", None)
        turn = record["turn"]
        text = f"Turn {turn} of {self.max_turns}. {hint or self.kind.format_hint()}\n" \
               f"{self.kind.status(self, self.max_turns - turn)}"
        record.update(observation=text, status="no_code")
        self._close_turn(record)
        self._report(f"turn {turn}/{self.max_turns}: no code")
        self._check_limits()
        return Observation(turn=turn + 1, text=text, kind="no_code", turns_remaining=self.max_turns - turn,
                           budget_remaining=self.kind.remaining())

    def _check_limits(self) -> None:
        if self.exit_reason is None and self.turn >= self.max_turns:
            self.end("turn_limit")
        elif self.exit_reason is None and self.clock_left() == 0.0:
            self.end("time_limit")

    def _final_observation(self) -> Observation:
        return Observation(turn=self.turn + 1, text=f"The episode has ended ({self.exit_reason}).", kind="ended",
                           turns_remaining=0, budget_remaining=self.kind.remaining())

    # -- tool calls

    def call(self, call: ToolCall) -> tuple[str, Optional[Observation]]:
        """Play one tool call; returns (its result text, the observation when it ended a turn)."""
        if not self.done and self.clock_left() == 0.0:
            self.end("time_limit")
        if self.done:
            return f"The episode has ended ({self.exit_reason}); no more calls are accepted.", None
        args, problem = call.parsed()
        entry = {"name": safeio.printable(str(call.name), 200), "id": call.id,
                 "arguments": safeio.bounded_text(call.arguments if isinstance(call.arguments, str)
                                                  else safejson.dumps_safe(call.arguments), TOOL_TEXT_CAP)["text"]}
        names = {t.name: t for t in self.tools()}
        observation = None
        if problem is None and call.name not in names:
            problem = f"unknown tool {safejson.excerpt(call.name, 60)}; valid: {', '.join(names)}"
        if problem is not None:
            text = f"Refused: {problem}."
            entry["refused"] = True
        elif names[call.name].runs_program:
            code = args.get("code")
            if not isinstance(code, str):
                text, entry["refused"] = "Refused: run_python needs the argument code (a string).", True
            else:
                self.pending_record.setdefault("tool_calls", []).append(entry)
                observation = self.run_program(safeio.clean_code(code), record={"code_source": "tool"})
                entry["result"] = safeio.bounded_text(observation.text, TOOL_TEXT_CAP)["text"]
                return observation.text, observation
        else:
            outcome = self.kind.call(self, call, args)
            text = outcome.text
            if outcome.refused:
                entry["refused"] = True
            if outcome.queued is not None:
                self.queued.append((call, outcome.queued))
            if outcome.ends:
                self.pending_record.setdefault("tool_calls", []).append(dict(entry, result=text))
                observation = self.final_actions(outcome.ends)
                return text, observation
        entry["result"] = safeio.bounded_text(text, TOOL_TEXT_CAP)["text"]
        observation = self.record_call(entry)
        if observation is not None:
            text += "\n" + observation.text
        return text, observation

    def record_call(self, entry: dict) -> Optional[Observation]:
        """Keep a call that ran no program in the turn's record and count it towards the cap of
        ``MAX_CALLS_PER_TURN``; past the cap the turn is used (the observation is returned).
        A framework that refuses a call itself (Inspect's schema check) records it here too."""
        self.pending_record.setdefault("tool_calls", []).append(entry)
        self.calls_since_turn += 1
        if self.calls_since_turn > MAX_CALLS_PER_TURN:
            return self.no_code(f"{self.calls_since_turn} tool calls ran no program (at most "
                                f"{MAX_CALLS_PER_TURN} between two program runs): the turn is used.")
        return None

    def note_usage(self, usage: Optional[dict], cost_usd: Optional[float] = None) -> None:
        """Add one model call's token usage to the turn in progress and to the episode's sum (for a
        driver that calls the model itself: Inspect, verifiers)."""
        if usage is None and cost_usd is None:
            return
        add_usage(self.usage, usage, cost_usd)
        add_usage(self.pending_record.setdefault("usage", {}), usage, cost_usd)

    def final_actions(self, reason: str) -> Observation:
        """End the episode after a call that ends it: what was queued is still charged and delivered."""
        queued, self.queued = [q for _, q in self.queued], []
        record = self._new_record({"status": "actions"})
        if queued or record.get("tool_calls"):
            outcome = self.kind.after_turn(self, record["turn"], None, queued)
            record.update(observation="\n".join(
                f"--- {title} ---\n" + "\n".join(lines) for title, lines in outcome.sections if lines), **outcome.record)
            self._close_turn(record)
            reason = outcome.ends or reason
        self.end(reason)
        return self._final_observation()

    # -- a policy's reply

    def respond(self, reply: Any, *, policy_s: float = 0.0) -> Observation:
        """Play a policy's reply (text, or a Reply with tool calls) and return the next observation."""
        # Several replies can come before one turn ends (tool calls that run no program): the
        # turn's record sums their usage, latency and policy time and keeps all their events.
        prior = self.pending_record
        extra: dict = {"timings": {"policy_s": policy_s + prior.get("timings", {}).get("policy_s", 0.0)}}
        if isinstance(reply, Reply):
            if reply.usage is not None or reply.cost_usd is not None:
                extra["usage"] = add_usage(dict(prior.get("usage") or {}), reply.usage, reply.cost_usd)
                add_usage(self.usage, reply.usage, reply.cost_usd)
            if reply.latency_s is not None:
                extra["latency_s"] = reply.latency_s + prior.get("latency_s", 0.0)
            if reply.events:
                extra["events"] = list(prior.get("events", ())) + [safeio.printable(str(e), 2000) for e in reply.events]
            text = reply.text
            calls = list(reply.tool_calls)
        else:
            text, calls = reply, []
        if text is not None:
            extra.update(bounded_reply(text))
        self.pending_record.update(extra)
        if calls:
            results, observation = [], None
            for call in calls:
                if self.done:
                    results.append((call.id, call.name, f"The episode has ended ({self.exit_reason})."))
                    continue
                result, ended = self.call(call)
                results.append((call.id, call.name, result))
                observation = ended or observation
            if observation is None:  # no call ended a turn: the results are the observation
                body = "\n\n".join(f"[{name}] {result}" for _, name, result in results)
                observation = Observation(turn=self.turn + 1, text=body, kind="tool",
                                          turns_remaining=self.max_turns - self.turn,
                                          budget_remaining=self.kind.remaining())
            return with_results(observation, results)
        if text is not None and not isinstance(text, str):
            text = repr(text)
        code, how = extract_code(text)
        if code is None:
            return self.no_code(record={"code": None, "code_source": how})
        return self.run_program(safeio.clean_code(code), record={"code_source": how})

    # -- the end

    def harness_failed(self, trace: str) -> str:
        """The harness's own failure during a turn or call (never the agent's code, which runs
        elsewhere): recorded with that turn, and the episode ends, to be scored from WORK."""
        detail = trace[-8000:]
        record = self.pending_record or {}
        record.update(turn=self.turn + 1, harness_error=detail)
        self.turns.append(record)
        self.pending_record = {}
        self.end("harness_error", detail.strip().splitlines()[-1])
        try:
            self.save_transcript()
        except Exception:
            pass
        return self.exit_detail

    def end(self, reason: str, detail: Optional[str] = None) -> None:
        if self.exit_reason is None:
            self.exit_reason, self.exit_detail = reason, detail

    def save_transcript(self, extra: Optional[dict] = None) -> None:
        data = {**self.header, "turns": self.turns}
        if extra:
            data.update(extra)
        atomic_json(self.transcript_path, data)

    def _report(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def finish(self, reason: Optional[str] = None, detail: Optional[str] = None) -> dict:
        """Score the episode from WORK (idempotent), write score.json and the transcript, clean up."""
        if self.result is not None:
            return self.result
        if reason is not None:
            self.end(reason, detail)
        if self.exit_reason is None:
            self.end("turn_limit" if self.turn >= self.max_turns else "client_disconnected")
        source = None
        try:
            if self.queued and self.exit_reason not in ("runner_crash", "sandbox_failure"):
                queued, self.queued = [q for _, q in self.queued], []
                record = self._new_record({"status": "actions"})
                outcome = self.kind.after_turn(self, record["turn"], None, queued)
                record.update(outcome.record)
                self.turns.append(record)
            score, source = self.kind.score(self)
            result = dict(score)
            if self.exit_reason in ("sandbox_failure", "harness_error"):
                result.setdefault("details", {})["harness_error"] = self.exit_detail
        except Exception as error:
            self.exit_reason = "runner_crash"
            self.exit_detail = traceback.format_exc()
            result = self.kind.crash_score(f"{type(error).__name__}: {error}")
        skipped: list = []
        try:
            skipped = self.sandbox.close(keep_work=self.dir / "work")
        except Exception as error:  # the score must still be written
            self.exit_detail = (self.exit_detail or "") + f"\nstaging cleanup failed: {type(error).__name__}: {error}"
        self.work = self.dir / "work"
        summary = {
            "world_id": self.world_id, "kind": self.kind.kind, "agent": self.agent_name,
            "exit_reason": self.exit_reason, "exit_detail": self.exit_detail,
            "turns_used": self.turn, "max_turns": self.max_turns, "scored_from": source,
            **self.kind.summary(),
            "episode_id": self.episode_id, "episode_dir": str(self.dir), "transcript": str(self.transcript_path),
            "ledger": str(self.ledger_path), "wall_s": round(time.monotonic() - self.started, 3),
        }
        if skipped:
            summary["work_not_kept"] = [safeio.printable_name(p) for p in skipped[:50]]
        result["isolated"] = bool(self.sandbox.isolated)
        result["isolation"] = self.sandbox.reason
        result["usage"] = usage_totals(self.usage)
        result["episode"] = summary
        try:
            self.save_transcript({"exit": summary, "score": {k: v for k, v in result.items() if k != "episode"}})
            atomic_json(self.dir / "score.json", result)
        except Exception as error:  # the score is still returned; the failure is reported in it
            result["episode"]["save_error"] = f"{type(error).__name__}: {error}"
        self.result = result
        return result



# ----------------------------------------------------------------------------- the policy loop


def play(session: Session, agent: Agent) -> dict:
    """Drive ``session`` with a policy until the episode ends; returns the score (score.json)."""
    from ..agents.openai_chat import TransportError
    from .policy import SandboxedPolicy

    if isinstance(agent, SandboxedPolicy):  # an external agent's policy runs in a sandbox of its own
        session.header["policy_isolation"] = agent.reason
    try:
        info = session.start()
    except Exception as error:
        return session.finish("runner_crash", f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
    try:
        agent.reset(info)
    except Exception as error:  # a policy's own failure is an exit path, not a harness crash
        return session.finish("policy_error", safeio.printable(f"reset: {type(error).__name__}: {error}", 4000))
    observation = session.opening_observation()
    while not session.done:
        if session.clock_left() == 0.0:
            session.end("time_limit")
            break
        t0 = time.monotonic()
        try:
            reply = agent.act(observation)
        except Exception as error:
            reason = "transport_failure" if isinstance(error, TransportError) else "policy_error"
            detail = safeio.printable(f"{type(error).__name__}: {error}", 4000)
            session.turns.append({"turn": session.turn + 1, reason: detail,
                                  "timings": {"policy_s": time.monotonic() - t0}})
            session.end(reason, detail)
            break
        try:
            observation = session.respond(reply, policy_s=time.monotonic() - t0)
        except Exception:
            session.harness_failed(traceback.format_exc())
    result = session.finish()
    close = getattr(agent, "close", None)  # a sandboxed policy's process ends with its episode
    if callable(close):
        try:
            close()
        except Exception:
            pass
    return result


def run_episode(world_dir, agent: Agent, *, budget: Optional[float] = None, **options) -> dict:
    """Play one episode of ``agent`` on the world at ``world_dir`` and return the score.

    ``budget`` is a biobank world's (0, 450000 or 2000000 dollars in the benchmark) and is
    omitted on a screening world.  Options: ``agent_name``, ``out``, ``max_turns``,
    ``timeout``, ``isolation`` (default "auto" for the project's reference agents,
    "require" for any other policy), ``overwrite``, ``limits``, ``progress``, and the
    kind's own (``paper_compat``; ``mode``, ``clock_hours``).  The result is the score
    plus ``isolated``, ``isolation``, ``usage`` and ``episode`` (a summary).
    """
    from ..agents.registry import default_isolation

    options.setdefault("isolation", default_isolation(agent))
    options.setdefault("agent_name", getattr(agent, "name", type(agent).__name__))
    session = Session(world_dir, budget=budget, **options)
    return play(session, agent)


__all__ = ["EPISODE_MARKER", "EPISODES_ROOT", "MAX_PROGRAM_CHARS", "REPLY_CAP", "TOOL_TEXT_CAP", "TRANSCRIPT_FORMAT",
           "Session", "bounded_reply", "default_episode_dir", "extract_code", "open_kind", "play",
           "prepare_episode_dir", "run_episode", "world_id_of", "world_paths"]
