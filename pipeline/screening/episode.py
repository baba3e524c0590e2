"""One screening episode: one world, one policy, the label budget, three submissions.

    python -m pipeline.episode world_dir=<screening world> agent=<random|labels_only|invariant_al|pose_al>
        [mode=limited|unrestricted] [turns=N] [timeout=S] [out=<dir>] [isolation=auto|require|off] [overwrite=false]

(``pipeline.episode`` dispatches here when the world is a screening world.)
The turn loop reuses the biobank harness's sandbox (``pipeline.harness.sandbox``):
each turn's program runs in a fresh, isolated process with the release
read-only and WORK writable, with this package's ``runtime.py`` as its
prelude.  After a program ends, its queued label batches go through the
oracle in order, then its queued submissions; the harness rewrites
``WORK/labels.csv`` (every label delivered), ``WORK/submission_results.json``
and ``WORK/status.json`` from its own records, so nothing the agent writes
there counts.  Modes: ``limited`` (the source's 10 hours of wall clock; 40
turns of at most 900 s, and a turn never outlasts the clock) and
``unrestricted`` (no clock; 100 turns of at most 3,600 s).

Episode folder: ``work/`` (WORK), ``ledger.jsonl`` (the oracle's record; the
scorer reads it), ``transcript.json``, ``score.json``, ``sandbox/`` (prelude
and channel, removed at the end).  The sealed bundle, the ledger and the
transcript are never mounted.
"""
from __future__ import annotations

import json
import os
import secrets
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

from ..agents.base import Agent, EpisodeInfo, Observation
from ..harness import sandbox as sandbox_mod
from .. import bundle
from ..harness import safeio, safejson
from ..harness.episode import MAX_PROGRAM_CHARS, EpisodeError, _bounded_reply, _prepare_episode_dir, extract_code
from ..harness.work import work_listing
from . import prompt as prompt_mod
from .bundle import ORACLE, is_screening_world
from .oracle import LabelOracle
from .score import score_episode

MODES = {"limited": {"turns": 40, "timeout": 900.0, "clock": True},
         "unrestricted": {"turns": 100, "timeout": 3600.0, "clock": False}}
TRANSCRIPT_FORMAT = "drugtargetworld-screening-transcript/1"
CHANNEL_READ_CAP = 64 * 1024 * 1024  # bytes per channel file and turn (3,000-id submissions are ~30 kB)
MAX_BATCHES_PER_TURN = 100
RUNTIME = Path(__file__).resolve().parent / "runtime.py"


def runtime_text() -> str:
    """The prelude as copied into the sandbox: ``runtime.py`` behind one line that puts this
    interpreter's site-packages on the path.  The sandbox runs the *resolved* interpreter with
    ``-I``; inside a virtual environment that is the base interpreter, which would not see the
    environment's packages (numpy, pandas, RDKit, LightGBM).  The folders are bound read-only
    by the sandbox already; outside a virtual environment the line changes nothing."""
    import site

    dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
    return f"import sys; sys.path[:0] = [d for d in {dirs!r} if d not in sys.path]\n" + RUNTIME.read_text(encoding="utf-8")


def _read_batches(raw: Optional[bytes], cut: bool) -> tuple[list, int]:
    """Queued batches from a channel file's bytes (bounded; malformed lines are counted, not trusted)."""
    if not raw:
        return [], 0
    dropped = 1 if cut else 0
    batches = []
    for line in raw[:CHANNEL_READ_CAP].decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            item = safejson.loads(line.encode("utf-8", "replace"), max_bytes=CHANNEL_READ_CAP, max_string=256)
        except safejson.Refused:
            dropped += 1
            continue
        if not isinstance(item, dict) or not isinstance(item.get("ids"), list) or len(batches) >= MAX_BATCHES_PER_TURN:
            dropped += 1
            continue
        batches.append(item["ids"])
    return batches, dropped


class ScreeningEpisode:
    """State and steps of one screening episode; ``run()`` plays it and returns the score."""

    def __init__(self, world_dir, agent: Agent, *, agent_name: Optional[str] = None, out=None, mode: str = "limited",
                 max_turns: Optional[int] = None, timeout: Optional[float] = None, isolation: Optional[str] = None,
                 overwrite: bool = False, clock_hours: Optional[float] = None, limits=None):
        if mode not in MODES:
            raise EpisodeError(f"mode={mode!r}: invalid; valid: {', '.join(MODES)}")
        self.world = Path(world_dir).resolve()
        self.release, self.sealed = self.world / bundle.RELEASE, self.world / bundle.SEALED
        if not is_screening_world(self.world):
            raise EpisodeError(f"world_dir={world_dir}: not a built screening world (release/MANIFEST.json kind)")
        spec = json.loads((self.sealed / ORACLE).read_text())
        self.world_id = spec["world_id"]
        self.episode_id = secrets.token_hex(6)  # what the agent is told: the world's id is not its to know
        self.mode = mode
        self.max_turns = int(max_turns or MODES[mode]["turns"])
        self.timeout = float(timeout or MODES[mode]["timeout"])
        if self.max_turns < 1 or not self.timeout > 0:
            raise EpisodeError(f"turns={self.max_turns}, timeout={self.timeout}: invalid; valid: turns >= 1, timeout > 0")
        hours = float(clock_hours if clock_hours is not None else spec["time_limit_hours"])
        self.clock_s = hours * 3600.0 if MODES[mode]["clock"] else None
        self.agent = agent
        self.agent_name = agent_name or getattr(agent, "name", type(agent).__name__)
        self.dir = Path(out).resolve() if out is not None else self.world.parent / "episodes" / self.world_id / f"{self.agent_name}-{mode}"
        _prepare_episode_dir(self.dir, self.world, overwrite)
        self.ledger_path = self.dir / "ledger.jsonl"
        self.transcript_path = self.dir / "transcript.json"
        if isolation is None:  # as the biobank harness: "auto" for the project's own strategies, else "require"
            from .agents import is_reference_agent

            isolation = "auto" if is_reference_agent(agent) else "require"
        # a screening program gets this package's prelude (label requests, submissions) instead of the biobank one
        try:
            self.sandbox = sandbox_mod.Sandbox(self.release, protected=[self.sealed, self.dir, self.world],
                                               isolation=isolation, runtime=runtime_text(), limits=limits,
                                               timeout_hint=self.timeout)
        except Exception:
            safeio.remove_tree(self.dir)
            raise
        # WORK lives in the sandbox's neutral staging folder while the episode runs and moves
        # into the episode folder at the end.
        self.work = self.sandbox.work
        os.symlink(self.work, self.dir / "work")
        self.turns: list = []
        self.delivered: dict = {}  # id -> (score, turn)
        self.results: list = []
        self.exit_reason: Optional[str] = None
        self.exit_detail: Optional[str] = None
        self.started = time.monotonic()

    # -- helpers

    def clock_left(self) -> Optional[float]:
        return None if self.clock_s is None else max(0.0, self.clock_s - (time.monotonic() - self.started))

    def _write_state(self, turn: int) -> None:
        lines = ["id,score,turn"] + [f"{i},{s!r},{t}" for i, (s, t) in self.delivered.items()]
        for name, data in (("labels.csv", "\n".join(lines) + "\n"),
                           ("submission_results.json", json.dumps(self.results, indent=1)),
                           ("status.json", json.dumps(self.status(turn), indent=1))):
            safeio.write_file(self.work, name, data, owner=self.sandbox.uid)

    def status(self, turn: int) -> dict:
        o = self.oracle
        left = self.clock_left()
        return {"labels_remaining": o.remaining, "labels_used": o.used, "budget": o.budget,
                "submissions_left": o.submissions_left, "submission_size": o.submission_size, "top_k": o.top_k,
                "conformations": o.n, "turns_remaining": self.max_turns - turn, "seconds_left": left,
                "best_score": o.best}

    def _save_transcript(self, extra: Optional[dict] = None) -> None:
        data = {**self.header, "turns": self.turns, **(extra or {})}
        tmp = self.transcript_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, self.transcript_path)

    # -- the loop

    def _setup(self) -> EpisodeInfo:
        self.oracle = LabelOracle(self.sealed, self.ledger_path)
        sizes = {"conformations": self.oracle.n, "budget": self.oracle.budget, "top_k": self.oracle.top_k,
                 "submission_size": self.oracle.submission_size, "max_submissions": self.oracle.max_submissions}
        system = prompt_mod.system_prompt(sizes, self.max_turns, self.timeout, self.clock_s, self.sandbox.isolated)
        opening = prompt_mod.opening_message(self.sandbox.agent_paths)
        self.header = {"format": TRANSCRIPT_FORMAT, "world_id": self.world_id, "episode_id": self.episode_id, "agent": self.agent_name,
                       "mode": self.mode, "max_turns": self.max_turns, "timeout": self.timeout, "clock_s": self.clock_s,
                       "isolated": self.sandbox.isolated, "isolation_reason": self.sandbox.reason, "sizes": sizes,
                       "system_prompt": system, "opening": opening}
        self._write_state(0)
        return EpisodeInfo(episode_id=self.episode_id, budget=float(self.oracle.budget), max_turns=self.max_turns,
                           timeout=self.timeout, costs={"label": 1.0}, system_prompt=system, opening=opening,
                           paths=dict(self.sandbox.agent_paths), isolated=self.sandbox.isolated, paper_compat=False)

    def _process(self, turn: int, run) -> tuple[list, list, int, bool]:
        label_batches, dropped_l = _read_batches(*run.channel_file("label_requests.jsonl"))
        sub_batches, dropped_s = _read_batches(*run.channel_file("submissions.jsonl"))
        finish = "finish.json" in run.channel
        label_notes, sub_notes = [], []
        for ids in label_batches:
            payload = self.oracle.request_labels(ids, turn)
            if payload["status"] == "ok":
                for i, s in payload["labels"].items():
                    self.delivered.setdefault(i, (s, turn))
                label_notes.append(f"labels: {len(payload['labels']):,} delivered ({payload['charged']:,} charged, "
                                   f"{payload['repeats']:,} repeats free); {payload['remaining']:,} remain")
            else:
                label_notes.append(f"labels refused: {payload['reason']}")
        for ids in sub_batches:
            payload = self.oracle.submit(ids, turn)
            if payload["status"] == "ok":
                safeio.write_file(self.work, f"submissions/{payload['index']}.json", json.dumps({"ids": ids}),
                                  owner=self.sandbox.uid)
                self.results.append({"index": payload["index"], "turn": turn, "size": payload["size"],
                                     "overlap": payload["overlap"], "score": payload["score"]})
                sub_notes.append(f"submission {payload['index']}: {payload['overlap']} of the top {payload['top_k']:,} "
                                 f"({payload['score']:.1f} %); {payload['submissions_left']} left")
            else:
                self.results.append({"status": "refused", "turn": turn, "reason": payload["reason"]})
                sub_notes.append(f"submission refused: {payload['reason']}")
        if dropped_l or dropped_s:
            label_notes.append(f"ignored: {dropped_l + dropped_s} malformed or excess request line(s)")
        return label_notes, sub_notes, len(label_batches) + len(sub_batches), finish

    def _loop(self, info: EpisodeInfo) -> None:
        try:
            self.agent.reset(info)
        except Exception as error:
            self.exit_reason = f"policy_error: reset: {type(error).__name__}: {error}"
            return
        obs = Observation(turn=1, text=info.opening, kind="opening", turns_remaining=self.max_turns,
                          budget_remaining=float(self.oracle.remaining))
        for turn in range(1, self.max_turns + 1):
            record: dict = {"turn": turn}
            if self.clock_left() == 0.0:
                self.exit_reason = "time_limit"
                return
            t0 = time.monotonic()
            try:
                reply = self.agent.act(obs)
            except Exception as error:
                record["policy_error"] = safeio.printable(f"{type(error).__name__}: {error}", 4000)
                self.turns.append(record)
                self.exit_reason = "policy_error"
                return
            record["policy_s"] = time.monotonic() - t0
            try:
                obs = self._turn(turn, reply, record)
            except Exception:
                # The harness's own failure on this turn: recorded with it, the episode ends, scored.
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

    def _turn(self, turn: int, reply, record: dict) -> Observation:
        code, how = extract_code(reply)
        record.update(**_bounded_reply(reply), code=code, code_source=how)
        left = self.max_turns - turn
        if code is not None and len(code) > MAX_PROGRAM_CHARS:
            record.update(code=code[:2000], code_chars=len(code))
            code, how = None, "too_long"
        if code is None:
            hint = (f"Your program is {record['code_chars']:,} characters long; at most {MAX_PROGRAM_CHARS:,} run."
                    if how == "too_long" else prompt_mod.FORMAT_HINT)
            text = f"Turn {turn} of {self.max_turns}. {hint}"
            record["observation"] = text
            self.turns.append(record)
            self._save_transcript()
            return Observation(turn=turn + 1, text=text, kind="no_code", turns_remaining=left,
                               budget_remaining=float(self.oracle.remaining))
        budget_s = self.timeout if self.clock_s is None else max(1.0, min(self.timeout, self.clock_left() or 1.0))
        run = self.sandbox.run(code, budget_s)
        label_notes, sub_notes, _, finish = self._process(turn, run)
        self._write_state(turn)
        status = "timeout" if run.timed_out else ("ran" if run.returncode == 0 else "failed")
        head = {"ran": f"Your code ran ({run.duration:.1f} s).", "failed": f"Your code failed (exit status {run.returncode}).",
                "timeout": f"Your code exceeded the {budget_s:g} s limit and was stopped."}[status]
        st = self.status(turn)
        parts = [f"Turn {turn} of {self.max_turns}. {head}",
                 "--- stdout ---\n" + (run.stdout.rstrip() or "(nothing printed)")]
        if run.stderr.strip():
            parts.append("--- stderr ---\n" + run.stderr.rstrip())
        if label_notes or sub_notes:
            parts.append("--- oracle ---\n" + "\n".join(label_notes + sub_notes))
        listing = work_listing(self.work)
        parts.append("--- WORK ---\n" + "\n".join(listing))
        clock = "" if st["seconds_left"] is None else f" Time left: {st['seconds_left'] / 3600:.2f} h."
        parts.append(f"--- status ---\nLabels remaining: {st['labels_remaining']:,}. Submissions left: "
                     f"{st['submissions_left']}. Best so far: {st['best_score']:.1f} %. Turns remaining: {left}.{clock}")
        text = "\n".join(parts)
        obs = Observation(turn=turn + 1, text=text, kind="result", turns_remaining=left,
                          budget_remaining=float(self.oracle.remaining), code=code, status=status,
                          returncode=run.returncode, stdout=run.stdout, stderr=run.stderr,
                          work_listing=tuple(listing))
        record.update(observation=text, status=status, run_s=run.duration, oracle=label_notes + sub_notes)
        self.turns.append(record)
        self._save_transcript()
        if self.oracle.submissions_left == 0:
            self.exit_reason = "submissions_used"
        elif finish:
            self.exit_reason = "finished"
        return obs

    def run(self) -> dict:
        try:
            info = self._setup()
            self._save_transcript()
            self._loop(info)
            result = score_episode(self.sealed, self.work, str(self.ledger_path))
        except Exception as error:
            self.exit_reason = "runner_crash"
            result = {"format": "screening-score/1", "kind": "screening", "world_id": self.world_id, "score": 0.0,
                      "total": 0.0, "best_submission": None, "submissions": [], "refused": [], "top_k": None,
                      "details": {"source": "runner crash", "warnings": [f"{type(error).__name__}: {error}"],
                                  "trace": traceback.format_exc()}}
        finally:
            try:
                self.sandbox.close(keep_work=self.dir / "work")
            except Exception as error:
                self.exit_detail = (self.exit_detail or "") + f"\nstaging cleanup failed: {type(error).__name__}: {error}"
        oracle = getattr(self, "oracle", None)
        result["isolated"] = bool(self.sandbox.isolated)
        result["isolation"] = self.sandbox.reason
        result["episode"] = {"world_id": self.world_id, "agent": self.agent_name, "mode": self.mode,
                             "exit_reason": self.exit_reason, "exit_detail": self.exit_detail,
                             "turns_used": len(self.turns), "max_turns": self.max_turns,
                             "labels_used": oracle.used if oracle else 0, "budget": oracle.budget if oracle else None,
                             "episode_dir": str(self.dir), "wall_s": round(time.monotonic() - self.started, 3)}
        try:
            self._save_transcript({"exit": result["episode"]})
            (self.dir / "score.json").write_text(json.dumps(result, indent=2, default=str))
        except Exception as error:
            result["episode"]["save_error"] = f"{type(error).__name__}: {error}"
        return result


def run_episode(world_dir, agent: Agent, **options) -> dict:
    return ScreeningEpisode(world_dir, agent, **options).run()


KEYS = ("world_dir", "agent", "mode", "turns", "timeout", "out", "isolation", "overwrite", "budget")


def main(argv: list[str]) -> int:
    """``python -m pipeline.episode`` on a screening world (``budget=`` is accepted and ignored:
    a screening world's label budget is part of the world)."""
    from .agents import REGISTRY, create_agent

    args = {}
    for item in argv:
        key, sep, value = item.partition("=")
        key = key.lstrip("+")
        if not sep or key not in KEYS:
            print(f"pipeline.episode: {item}: unknown; valid keys for a screening world: {', '.join(KEYS)}", file=sys.stderr)
            return 2
        args[key] = value
    if "agent" not in args or args["agent"] not in REGISTRY:
        print(f"pipeline.episode: agent={args.get('agent')}: invalid; valid for a screening world: {', '.join(REGISTRY)}", file=sys.stderr)
        return 2
    try:
        episode = ScreeningEpisode(
            args["world_dir"], create_agent(args["agent"]), agent_name=args["agent"], out=args.get("out"),
            mode=args.get("mode", "limited"), max_turns=int(args["turns"]) if "turns" in args else None,
            timeout=float(args["timeout"]) if "timeout" in args else None, isolation=args.get("isolation"),
            overwrite=args.get("overwrite", "false").lower() in ("1", "true", "yes", "on"))
    except (EpisodeError, ValueError, OSError, sandbox_mod.SandboxUnavailable) as error:
        print(f"pipeline.episode: {error}", file=sys.stderr)
        return 2
    result = episode.run()
    print(json.dumps(result, indent=2, default=str))
    return 1 if result["episode"]["exit_reason"] == "runner_crash" else 0
