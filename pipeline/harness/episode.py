"""One benchmark episode: one world, one budget, one policy (S3.2 and SPEC sections 7 and 9).

Turn loop
---------
At most ``max_turns`` turns.  Each turn the policy replies; the harness runs
the reply's last fenced code block (or the whole reply when it has no fence
but contains ``print(`` or ``import``) in a fresh sandboxed process for at
most ``timeout`` seconds.  A reply without code uses the turn and is answered
with a formatting hint.  After the program ends, the experiments it queued
with ``request_experiment`` go through the budget ledger in order (charged,
or refused as unknown, repeated or unaffordable) and each delivered result is
written to ``WORK/experiments/<protein>.<kind>.json``, where the next program
finds it; experiments queued in the final turn are delivered and charged all
the same.  The observation reports whether the code ran, its stdout and
stderr (capped), the experiment notices, the work-folder listing, the
submission's state, and the budget and turns left.

Exit rule (SPEC section 9)
--------------------------
``submit()`` ends the episode after the turn in which it is called, with the
submission as it stood at the call.  Otherwise the episode ends at the turn
limit and the latest submission.json that parsed as a JSON object at the end
of a turn is scored.  With ``paper_compat`` the paper's rule applies instead:
the first turn that ends with a parseable submission.json ends the episode.
Every exit path is scored from what WORK holds (submitted, turn limit, a
policy or transport failure); a crash of the harness itself scores zero on
every component and is recorded as such.

Episode folder
--------------
By default ``./episodes/<agent>-<budget>-<time>-<random>/`` under the current
folder (never named after the world: the world's id is not the agent's to
know, and a folder of worlds should hold only worlds)::

    <episode>/work/           WORK (the only folder the program can write)
    <episode>/ledger.jsonl    the budget ledger (the scorer's record of deliveries)
    <episode>/transcript.json every turn: reply, code, observation, timings, experiments
    <episode>/score.json      the score and the episode summary (written on every exit path)
    <episode>/submissions/    each parseable submission version, by turn

While the episode runs, WORK lives in a neutral staging folder (``<episodes>/.sandboxes/dtw-<random>/``,
beside a hard-link tree of the release, the prelude and the request channel,
which are what the sandbox mounts) and ``<episode>/work`` links to it; at the
end it moves into the episode folder and the staging folder is removed.  The
ledger, the transcript and the sealed bundle are never mounted.

Isolation
---------
``isolation="require"`` is the default for every agent whose code is not the
project's own (``openai_chat``, any user agent); the project's reference
agents default to ``"auto"``, which falls back to an unisolated subprocess
when the sandbox cannot run here and says so in one line on stderr before the
first turn and in the score JSON.  The prelude writes a readiness marker
before the agent's code runs: if a program never reaches it and no earlier
turn did, the sandbox itself is broken and the episode ends at once with
``exit_reason`` "sandbox_failure" (an error exit of ``pipeline.episode``),
not as an ordinary turn-limit episode.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from .. import bundle
from ..agents.base import Agent, EpisodeInfo, Observation
from ..oracle import KINDS, Ledger, load_oracle
from ..score import COMPONENT_KEYS, score_episode
from ..score.work import PHENOTYPE_MAX_BYTES
from . import prompt as prompt_mod
from . import safejson
from .limits import Limits
from .sandbox import ISOLATION_MODES, Sandbox
from . import safeio
from .work import atomic_json, money, read_submission, work_listing

BUDGETS = (0, 450_000, 2_000_000)
DEFAULT_TURNS = 30
DEFAULT_TIMEOUT = 300.0
EPISODE_MARKER = ".drugtargetworld-episode"
TRANSCRIPT_FORMAT = "drugtargetworld-transcript/1"

#: Characters of a reply kept in the transcript (a longer one keeps its length and SHA-256).
REPLY_CAP = 200_000
#: Longest program run; a longer one is refused with a notice (the turn is used).
MAX_PROGRAM_CHARS = 1_000_000
#: Bytes of submission versions kept in ``<episode>/submissions/`` (past it, their SHA-256 only).
SUBMISSIONS_KEEP_CAP = 256 * 1024 * 1024

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)
_OPEN_FENCE = re.compile(r"```[^\n`]*\n")


class EpisodeError(ValueError):
    """The episode cannot start (bad world folder, bad arguments, unsafe output folder)."""


# ----------------------------------------------------------------------------- code extraction


def extract_code(reply: Any) -> tuple[Optional[str], str]:
    """(code, how): the last complete fenced block, else the whole reply if it looks like code.

    ``how`` is "fence", "open_fence" (a final fence never closed, e.g. a
    truncated completion: the text after it runs), "whole" or "none".
    """
    if not isinstance(reply, str):
        return None, "none"
    blocks = _FENCE.findall(reply)
    if blocks:
        tail = reply[reply.rfind("```") + 3:]
        # A fence opened after the last closed block is the reply's real last block.
        opened = _OPEN_FENCE.search(reply, reply.rfind("```"))
        if reply.count("```") % 2 == 1 and opened is not None and tail.strip():
            return reply[opened.end():], "open_fence"
        return blocks[-1], "fence"
    opened = _OPEN_FENCE.search(reply)
    if opened is not None and reply.count("```") == 1:
        return reply[opened.end():], "open_fence"
    if "print(" in reply or "import" in reply:
        return reply, "whole"
    return None, "none"


def _bounded_reply(reply: Any) -> dict:
    """The transcript's record of a reply: a printable prefix, and when cut, the full length and hash."""
    kept = safeio.bounded_text(reply, REPLY_CAP)
    out = {"reply": kept["text"]}
    if kept.get("truncated"):
        out.update(reply_chars=kept["chars"], reply_sha256=kept["sha256"])
    return out


# ----------------------------------------------------------------------------- folders


def world_paths(world_dir: os.PathLike | str) -> tuple[Path, Path, Path]:
    world = Path(world_dir).resolve()
    release, sealed = world / "release", world / "sealed"
    if not world.is_dir():
        raise EpisodeError(f"world_dir={world_dir}: not a folder")
    for path, what in ((release, "release"), (sealed, "sealed")):
        if not path.is_dir():
            raise EpisodeError(f"world_dir={world_dir}: no {what}/ folder; pass a built world's folder (it holds release/ and sealed/)")
    return world, release, sealed


def world_id_of(world_dir: os.PathLike | str) -> str:
    world, _, sealed = world_paths(world_dir)
    try:
        value = bundle.read_sealed(sealed, bundle.TRUTH).get("world_id")
    except (OSError, ValueError, AttributeError):
        value = None
    return value if isinstance(value, str) and value else world.name


EPISODES_ROOT = "episodes"


def default_episode_dir(agent_name: str, budget: float, root: os.PathLike | str | None = None) -> Path:
    """``<root>/<agent>-<budget>-<UTC time>-<random>``; ``root`` defaults to ./episodes.

    The name says nothing of the world: the world id stays in the sealed
    bundle and the episode's own records (transcript, score.json).
    """
    root = Path(root) if root is not None else Path.cwd() / EPISODES_ROOT
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", agent_name)[:40] or "agent"
    return (root / f"{safe}-{int(budget)}-{stamp}-{secrets.token_hex(3)}").resolve()


def default_isolation(agent: Agent) -> str:
    """"auto" for the project's own reference agents, "require" for any other code."""
    from ..agents import is_project_agent

    return "auto" if is_project_agent(agent) else "require"


def _prepare_episode_dir(out: Path, world: Path, overwrite: bool) -> None:
    out = out.resolve()
    for forbidden in (world / "release", world / "sealed"):
        if _contains(forbidden, out):
            raise EpisodeError(f"out={out}: inside the world's {forbidden.name}/ folder; choose a folder outside it")
    if _contains(out, world):
        raise EpisodeError(f"out={out}: contains the world folder {world}; choose a folder beside it")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise EpisodeError(f"out={out}: not a folder; choose a folder for the episode")
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise EpisodeError(f"out={out}: already holds an episode; pass overwrite=true to replace it")
        if not (out / EPISODE_MARKER).is_file():
            raise EpisodeError(f"out={out}: not empty and not an episode folder; refusing to delete it")
        # Moved aside in one step, then removed without following links or recursing: an old
        # episode's WORK may hold anything its agent planted, and a failed removal leaves the
        # old episode whole under the aside name rather than half-deleted.
        aside = out.with_name(f".{out.name}.replaced-{secrets.token_hex(4)}")
        os.rename(out, aside)
        try:
            safeio.remove_tree(aside)
        except OSError as error:
            print(f"pipeline.harness: warning: the replaced episode could not be removed ({error}); it is at {aside}",
                  file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    (out / EPISODE_MARKER).write_text("drugtargetworld episode folder; safe to delete\n")


def _contains(folder: Path, path: Path) -> bool:
    folder, path = Path(folder).resolve(), Path(path).resolve()
    return path == folder or path.is_relative_to(folder)


# ----------------------------------------------------------------------------- the episode


@dataclass
class _Submission:
    obj: dict
    raw: bytes
    turn: int
    how: str  # "submit()" or "provisional"


def zero_score(reason: str) -> dict:
    """The score of an episode whose runner crashed (S2.4: zero on every component)."""
    result = {key: 0.0 for key in COMPONENT_KEYS}
    result.update(safety_penalty=0.0, total=0.0, total_unclipped=0.0,
                  details={"runner_crash": reason, "warnings": [], "interpretations": []})
    return result


class Episode:
    """State and steps of one episode; ``run()`` plays it and returns the result."""

    def __init__(
        self,
        world_dir: os.PathLike | str,
        agent: Agent,
        *,
        budget: float,
        agent_name: Optional[str] = None,
        out: Optional[os.PathLike | str] = None,
        max_turns: int = DEFAULT_TURNS,
        timeout: float = DEFAULT_TIMEOUT,
        paper_compat: bool = False,
        isolation: Optional[str] = None,
        overwrite: bool = False,
        limits: Optional[Limits] = None,
        progress: Optional[Callable[[str], None]] = None,
    ):
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not math.isfinite(budget) or budget < 0:
            raise EpisodeError(f"budget={budget!r}: invalid; valid: dollars >= 0 (the benchmark uses {', '.join(map(str, BUDGETS))})")
        if not isinstance(max_turns, int) or max_turns < 1:
            raise EpisodeError(f"turns={max_turns!r}: invalid; valid: an integer >= 1")
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise EpisodeError(f"timeout={timeout!r}: invalid; valid: seconds > 0")
        if isolation is None:
            isolation = default_isolation(agent)
        if isolation not in ISOLATION_MODES:
            raise EpisodeError(f"isolation={isolation!r}: invalid; valid: {', '.join(ISOLATION_MODES)}")
        self.world, self.release, self.sealed = world_paths(world_dir)
        self.world_id = world_id_of(self.world)
        self.episode_id = secrets.token_hex(6)
        self.progress = progress
        self.agent = agent
        self.agent_name = agent_name or getattr(agent, "name", type(agent).__name__)
        self.budget = float(budget)
        self.max_turns = max_turns
        self.timeout = float(timeout)
        self.paper_compat = bool(paper_compat)
        self.isolation = isolation
        self.dir = Path(out).resolve() if out is not None else default_episode_dir(self.agent_name, budget)
        _prepare_episode_dir(self.dir, self.world, overwrite)
        self.ledger_path = self.dir / "ledger.jsonl"
        self.transcript_path = self.dir / "transcript.json"
        self.turns: list[dict] = []
        self.latest: Optional[_Submission] = None
        self._kept_bytes = 0
        self.final: Optional[_Submission] = None
        self.exit_reason: Optional[str] = None
        self.exit_detail: Optional[str] = None
        # Built here, not in run(): isolation="require" on a machine that cannot
        # isolate is a refusal to start, not a crashed episode.  WORK lives in the
        # sandbox's neutral staging folder while the episode runs (mount sources show
        # in /proc/self/mountinfo) and moves into the episode folder at the end.
        try:
            self.sandbox = Sandbox(
                self.release, protected=[self.sealed, self.dir, self.world], isolation=isolation,
                limits=limits, timeout_hint=self.timeout,
            )
        except Exception:
            safeio.remove_tree(self.dir)
            raise
        self.work = self.sandbox.work
        safeio.make_dir(self.work, "experiments", owner=self.sandbox.uid)
        os.symlink(self.work, self.dir / "work")
        self.ready_seen = False
        self.header: dict = {
            "format": TRANSCRIPT_FORMAT, "world_id": self.world_id, "world_dir": str(self.world),
            "agent": self.agent_name, "budget": self.budget, "max_turns": max_turns, "timeout": self.timeout,
            "paper_compat": self.paper_compat, "isolation_mode": isolation, "episode_id": self.episode_id,
            "limits": self.sandbox.limits.describe(), "limits_enforcement": self.sandbox.limits_reason,
            "staging": self.sandbox.staging,
        }

    # -- setup

    def _setup(self) -> EpisodeInfo:
        spec = load_oracle(self.sealed)
        # The paper's harness handed cell perturbations a survival readout; paper_compat
        # reproduces that as well as the prompt and exit rule.
        self.ledger = Ledger(self.budget, self.ledger_path, spec, paper_compat=True if self.paper_compat else None)
        self.costs = {kind: float(spec.costs[kind]) for kind in KINDS}
        system = prompt_mod.system_prompt(
            release_dir=self.release, budget=self.budget, costs=self.costs, max_turns=self.max_turns,
            timeout=self.timeout, paper_compat=self.paper_compat, isolated=self.sandbox.isolated,
            limits=self.sandbox.limits.describe(),
        )
        opening = prompt_mod.opening_message(self.sandbox.agent_paths, isolated=self.sandbox.isolated,
                                             paper_compat=self.paper_compat)
        self.header.update(isolated=self.sandbox.isolated, isolation_reason=self.sandbox.reason,
                           costs=self.costs, system_prompt=system, opening=opening)
        return EpisodeInfo(
            episode_id=self.episode_id, budget=self.budget, max_turns=self.max_turns, timeout=self.timeout,
            costs=dict(self.costs), system_prompt=system, opening=opening, paths=dict(self.sandbox.agent_paths),
            isolated=self.sandbox.isolated, paper_compat=self.paper_compat,
        )

    # -- one turn's pieces

    def _process_requests(self, requests: list, turn: int, malformed: list = ()) -> tuple[list, list]:
        delivered, refused = [], []
        for item in malformed:
            self.ledger.refuse_malformed(turn, item["reason"])
            refused.append({"kind": None, "protein": None, "reason": f"{item['reason']}: {item['excerpt']}"})
        for item in requests:
            payload = self.ledger.request(item.get("kind"), item.get("protein"), turn)
            if payload.get("status") == "ok":
                name = f"{payload['protein']}.{payload['action']}.json"
                safeio.write_file(self.work, f"experiments/{name}",
                                  (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode(), owner=self.sandbox.uid)
                delivered.append({"kind": payload["action"], "protein": payload["protein"],
                                  "cost": self.costs[payload["action"]], "path": f"experiments/{name}"})
            else:
                refused.append({"kind": payload.get("action"), "protein": payload.get("protein"),
                                "reason": payload.get("reason")})
        return delivered, refused

    def _track_submission(self, turn: int) -> str:
        parsed, raw, status = read_submission(self.work)
        if parsed is None:
            if self.latest is not None and status != "absent":
                return f"{status}; the version from turn {self.latest.turn} is the latest parseable one"
            return status
        if self.latest is None or raw != self.latest.raw:
            self.latest = _Submission(parsed, raw, turn, "provisional")
            folder = self.dir / "submissions"
            folder.mkdir(exist_ok=True)
            if self._kept_bytes + len(raw) <= SUBMISSIONS_KEEP_CAP:
                (folder / f"turn_{turn:02d}.json").write_bytes(raw)
                self._kept_bytes += len(raw)
            else:  # the copies the harness keeps have a cap of their own
                (folder / f"turn_{turn:02d}.sha256").write_text(
                    f"{hashlib.sha256(raw).hexdigest()}  {len(raw)} bytes (not kept: past the "
                    f"{SUBMISSIONS_KEEP_CAP // 2**20} MiB kept for submission versions)\n")
        return "parsed"

    def _observation_text(self, turn: int, run, delivered, refused, dropped, listing, sub_status, submitted) -> str:
        if run.timed_out:
            head = f"Your code failed: it exceeded the {self.timeout:g} s limit and was stopped."
        elif run.returncode == 0:
            head = f"Your code ran ({run.duration:.1f} s)."
        else:
            head = f"Your code failed (exit status {run.returncode}, {run.duration:.1f} s)."
        parts = [f"Turn {turn} of {self.max_turns}. {head}"]
        parts.append("--- stdout ---\n" + (run.stdout.rstrip("\n") if run.stdout.strip() else "(nothing printed)"))
        if run.stderr.strip():
            parts.append("--- stderr ---\n" + run.stderr.rstrip("\n"))
        exp = []
        for d in delivered:
            exp.append(f"delivered: {d['kind']} of {d['protein']} ({money(d['cost'])} charged) -> WORK/{d['path']}")
        for r in refused:
            if r["kind"] is None:
                exp.append(f"refused: {safejson.excerpt(r['reason'], 200)}")
            else:
                exp.append(f"refused: {safejson.excerpt(r['kind'])} of {safejson.excerpt(r['protein'])}: "
                           f"{safejson.excerpt(r['reason'], 200)}")
        if dropped:
            exp.append(f"ignored: {dropped} request(s) past the limit of 100 a turn")
        if exp:
            parts.append("--- experiments ---\n" + "\n".join(exp))
        parts.append("--- WORK ---\n" + ("\n".join(listing) if listing else "(empty)"))
        left = self.max_turns - turn
        if submitted:
            status = "submission.json: submitted with submit(); the episode ends now."
        elif self.paper_compat and sub_status == "parsed":
            status = "submission.json: parsed; the episode ends now."
        elif sub_status == "parsed":
            status = "submission.json: parsed (provisional: call submit() to make it final)."
        else:
            status = f"submission.json: {sub_status}."
        parts.append(f"--- status ---\n{status}\nBudget remaining: {money(self.ledger.remaining)}. Turns remaining: {left}.")
        return "\n".join(parts)

    def _save_transcript(self, extra: Optional[dict] = None) -> None:
        data = {**self.header, "turns": self.turns}
        if extra:
            data.update(extra)
        atomic_json(self.transcript_path, data)

    # -- the loop

    def _loop(self, info: EpisodeInfo) -> None:
        try:
            self.agent.reset(info)
        except Exception as error:  # a policy's own failure is an exit path, not a harness crash
            self.exit_reason, self.exit_detail = "policy_error", f"reset: {type(error).__name__}: {error}"
            return
        observation = Observation(turn=1, text=info.opening, kind="opening", turns_remaining=self.max_turns,
                                  budget_remaining=self.ledger.remaining)
        for turn in range(1, self.max_turns + 1):
            record: dict = {"turn": turn}
            t0 = time.monotonic()
            try:
                reply = self.agent.act(observation)
            except Exception as error:
                record.update(policy_error=safeio.printable(f"{type(error).__name__}: {error}", 4000),
                              timings={"policy_s": time.monotonic() - t0})
                self.turns.append(record)
                self.exit_reason, self.exit_detail = "policy_error", record["policy_error"]
                return
            try:
                observation = self._turn(turn, reply, record, time.monotonic() - t0)
            except Exception:
                # The harness's own failure on this turn (never the agent's code, which runs
                # elsewhere): recorded with the turn, and the episode ends scored from WORK.
                record["harness_error"] = traceback.format_exc()[-8000:]
                if record not in self.turns:
                    self.turns.append(record)
                self.exit_reason = "harness_error"
                self.exit_detail = record["harness_error"].strip().splitlines()[-1]
                try:
                    self._save_transcript()
                except Exception:
                    pass
                return
            if self.exit_reason is not None:
                return
        self.exit_reason = "turn_limit"

    def _turn(self, turn: int, reply: Any, record: dict, policy_s: float) -> Optional[Observation]:
        """One turn after the policy replied: run its code, deliver, observe.  Sets ``exit_reason``
        when the episode ends with this turn."""
        code, how = extract_code(reply)
        record.update(**_bounded_reply(reply), code=code, code_source=how)
        left = self.max_turns - turn
        if code is not None and len(code) > MAX_PROGRAM_CHARS:
            record.update(code=code[:2000], code_chars=len(code))
            code, how = None, "too_long"
        if code is None:
            hint = (f"Your program is {record['code_chars']:,} characters long; at most {MAX_PROGRAM_CHARS:,} run. "
                    "Keep code in WORK between turns." if how == "too_long" else prompt_mod.FORMAT_HINT)
            text = f"Turn {turn} of {self.max_turns}. {hint}\nBudget remaining: {money(self.ledger.remaining)}. Turns remaining: {left}."
            record.update(observation=text, timings={"policy_s": policy_s, "run_s": 0.0})
            self.turns.append(record)
            self._save_transcript()
            self._report(f"turn {turn}/{self.max_turns}: no code in the reply")
            return Observation(turn=turn + 1, text=text, kind="no_code", turns_remaining=left,
                               budget_remaining=self.ledger.remaining)

        run = self.sandbox.run(code, self.timeout)
        t1 = time.monotonic()
        if run.ready:
            self.ready_seen = True
        elif not self.ready_seen:
            # The prelude never reached the agent's code: the sandbox (or the
            # interpreter in it) is broken, which no reply can fix.
            detail = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
            record.update(status="sandbox_failure", returncode=run.returncode, stderr=run.stderr[-4000:],
                          timings={"policy_s": policy_s, "run_s": run.duration})
            self.turns.append(record)
            self._save_transcript()
            self.exit_reason = "sandbox_failure"
            self.exit_detail = f"the agent's program never started in the sandbox: {safejson.excerpt(detail, 300)}"
            return None
        delivered, refused = self._process_requests(run.requests, turn, run.refused)
        submitted = run.submitted is not None
        if submitted:
            raw = json.dumps(run.submitted, sort_keys=True).encode()
            self.final = _Submission(run.submitted, raw, turn, "submit()")
        sub_status = self._track_submission(turn)
        if run.submit_error:
            sub_status += f" (submit() not accepted: {run.submit_error})"
        listing = work_listing(self.work)
        status = "timeout" if run.timed_out else ("ran" if run.returncode == 0 else "failed")
        text = self._observation_text(turn, run, delivered, refused, run.requests_dropped, listing,
                                      sub_status, submitted)
        observation = Observation(
            turn=turn + 1, text=text, kind="result", turns_remaining=left, budget_remaining=self.ledger.remaining,
            code=code, status=status, returncode=run.returncode, stdout=run.stdout, stderr=run.stderr,
            delivered=tuple(delivered), refused=tuple(refused), work_listing=tuple(listing),
            submission_status=sub_status,
        )
        record.update(
            observation=text, status=status, returncode=run.returncode,
            output_chars={"stdout": run.stdout_chars, "stderr": run.stderr_chars},
            experiments={"requested": run.requests, "dropped": run.requests_dropped,
                         "delivered": delivered, "refused": refused},
            submission=sub_status, submitted=submitted,
            timings={"policy_s": policy_s, "run_s": run.duration, "harness_s": time.monotonic() - t1},
        )
        self.turns.append(record)
        self._save_transcript()
        self._report(f"turn {turn}/{self.max_turns}: {status} ({run.duration:.1f} s)"
                     + (f", {len(delivered)} experiment(s) delivered" if delivered else "")
                     + (f", {len(refused)} refused" if refused else "")
                     + f"; spent {money(self.ledger.spent)} of {money(self.budget)}"
                     + ("; submitted" if submitted else ""))
        if submitted:
            self.exit_reason = "submitted"
        elif self.paper_compat and sub_status == "parsed":
            self.final = self.latest
            self.exit_reason = "submission_written"
        return observation

    # -- scoring

    def _score(self) -> tuple[dict, str]:
        chosen = self.final or self.latest
        current, _, _ = read_submission(self.work)
        if chosen is None or current == chosen.obj:
            return score_episode(self.sealed, self.work, self.ledger_path, paper_compat=self.paper_compat), "work"
        # WORK's submission.json is not the one the exit rule picks (changed after
        # submit(), or broken after the last parseable version): score a copy.
        scored = self.dir / "scored"
        safeio.remove_tree(scored)
        scored.mkdir()
        (scored / "submission.json").write_bytes(json.dumps(chosen.obj).encode())
        # Only a regular file of WORK is a phenotype (a link, a folder or a pipe is none).
        phenotype, _ = safeio.read_file(self.work, "phenotype.csv", PHENOTYPE_MAX_BYTES)
        if phenotype is not None:
            (scored / "phenotype.csv").write_bytes(phenotype)
        source = f"scored/ (submission from turn {chosen.turn} via {chosen.how}; WORK's phenotype.csv)"
        return score_episode(self.sealed, scored, self.ledger_path, paper_compat=self.paper_compat), source

    def _report(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def run(self) -> dict:
        started = time.time()
        result: dict
        if not self.sandbox.isolated:
            # One line before the first turn: an unisolated episode must not pass unnoticed.
            print(f"pipeline.harness: error: this episode is not isolated: {self.sandbox.reason}", file=sys.stderr)
        try:
            info = self._setup()
            self._save_transcript()
            self._loop(info)
            score, source = self._score()
            result = dict(score)
            if self.exit_reason == "sandbox_failure":
                result["details"]["harness_error"] = self.exit_detail
        except Exception as error:
            self.exit_reason = "runner_crash"
            self.exit_detail = traceback.format_exc()
            result = zero_score(f"{type(error).__name__}: {error}")
            source = None
        finally:
            try:
                self.sandbox.close(keep_work=self.dir / "work")
            except Exception as error:  # the score must still be written
                self.exit_detail = (self.exit_detail or "") + f"\nstaging cleanup failed: {type(error).__name__}: {error}"
            self.work = self.dir / "work"
        isolated, reason = bool(self.sandbox.isolated), self.sandbox.reason
        ledger = getattr(self, "ledger", None)
        summary = {
            "world_id": self.world_id, "agent": self.agent_name, "budget": self.budget,
            "exit_reason": self.exit_reason, "exit_detail": self.exit_detail,
            "turns_used": len(self.turns), "max_turns": self.max_turns,
            "submitted_turn": self.final.turn if self.final else None,
            "scored_from": source,
            "spent": ledger.spent if ledger else 0.0,
            "remaining": ledger.remaining if ledger else self.budget,
            "paper_compat": self.paper_compat,
            "episode_id": self.episode_id,
            "episode_dir": str(self.dir), "transcript": str(self.transcript_path), "ledger": str(self.ledger_path),
            "wall_s": round(time.time() - started, 3),
        }
        result["isolated"] = isolated
        result["isolation"] = reason
        result["episode"] = summary
        try:
            self._save_transcript({"exit": summary, "score": {k: v for k, v in result.items() if k != "episode"}})
            atomic_json(self.dir / "score.json", result)
        except Exception as error:  # the score is still returned; the failure is reported in it
            result["episode"]["save_error"] = f"{type(error).__name__}: {error}"
        return result


def run_episode(world_dir, agent: Agent, *, budget: float, **options) -> dict:
    """Play one episode and return the score plus ``isolated``, ``isolation`` and ``episode`` (a summary).

    Options: agent_name, out, max_turns, timeout, paper_compat, isolation
    ("auto" | "require" | "off"; default: "auto" for the project's reference
    agents, "require" otherwise), overwrite, limits (a ``Limits``), progress
    (a callable receiving one line per turn).
    """
    return Episode(world_dir, agent, budget=budget, **options).run()
