"""The screening kind's half of an episode: the label oracle, three submissions, the scorer.

    python -m pipeline.episode world_dir=<screening world> agent=<random|labels_only|invariant_al|pose_al|...>
        [mode=limited|unrestricted] [turns=N] [timeout=S] [out=<dir>] [isolation=auto|require|off] ...

The episode core (``pipeline.harness.core``) runs it like every kind's; this module
supplies the tools (the prelude ``runtime.py``: ``request_labels``, ``submit``,
``finish`` and the readers), the prompt, the oracle and the scorer.  After a turn's
program ends, its queued label batches go through the oracle in order, then its queued
submissions; the harness rewrites ``WORK/labels.csv`` (every label delivered),
``WORK/submission_results.json`` and ``WORK/status.json`` from its own records (never
through a link the agent planted), so nothing the agent writes there counts.  Modes:
``limited`` (the source's 10 hours of wall clock; 40 turns of at most 900 s, and a turn
never outlasts the clock) and ``unrestricted`` (no clock; 100 turns of at most 3,600 s).
A screening world's label budget is part of the world: ``budget`` is not an option.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from ..agents.tools import ToolCall, ToolSpec
from ..harness import safejson
from ..harness.kind import CallOutcome, EpisodeError, KindEpisode, TurnOutcome
from . import prompt as prompt_mod
from .bundle import KIND as KIND_NAME, ORACLE
from .oracle import LabelOracle
from .score import SCORE_FORMAT, score_episode

MODES = {"limited": {"turns": 40, "timeout": 900.0, "clock": True},
         "unrestricted": {"turns": 100, "timeout": 3600.0, "clock": False}}
CHANNEL_READ_CAP = 64 * 1024 * 1024  # bytes per channel file and turn (3,000-id submissions are ~30 kB)
MAX_BATCHES_PER_TURN = 100
MAX_IDS_PER_CALL = 1_000_000
RUNTIME = Path(__file__).resolve().parent / "runtime.py"

_IDS = {"type": "array", "items": {"type": "string"}, "description": "conformation ids such as C000123"}
TOOLS = (
    ToolSpec("request_labels",
             "Queue one batch of label requests, answered after your next program run in full or refused in full "
             "(unknown ids, or more new ids than the budget has left); repeats cost nothing. Labels arrive in "
             "WORK/labels.csv.",
             {"type": "object", "properties": {"ids": _IDS}, "required": ["ids"], "additionalProperties": False}),
    ToolSpec("submit",
             "Queue one submission (distinct ids, at most the submission size), scored after your next program run; "
             "its overlap with the true top-K is in WORK/submission_results.json. At most three are accepted; the best "
             "counts.",
             {"type": "object", "properties": {"ids": _IDS}, "required": ["ids"], "additionalProperties": False}),
    ToolSpec("budget", "Labels remaining, submissions left, the best score so far, turns and time left."),
    ToolSpec("finish", "End the episode now (what was queued is still answered; the best accepted submission counts).",
             ends_episode=True),
)


def runtime_text() -> str:
    """The prelude as copied into the sandbox: ``runtime.py`` behind one line that puts this
    interpreter's site-packages on the path (the sandbox runs the interpreter with ``-I``)."""
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


def crash_score(world_id: Optional[str], reason: str) -> dict:
    return {"format": SCORE_FORMAT, "kind": KIND_NAME, "world_id": world_id, "score": 0.0, "total": 0.0,
            "best_submission": None, "submissions": [], "refused": [], "top_k": None,
            "details": {"source": "runner crash", "runner_crash": reason, "warnings": [reason]}}


class ScreeningEpisode(KindEpisode):
    kind = "screening"
    options = {"mode": "limited (the source's 10 h clock, 40 turns of 900 s) or unrestricted (100 turns of 3,600 s)",
               "clock_hours": "the limited mode's wall clock in hours (default: the world's, 10)"}

    def configure(self, options: dict) -> None:
        if options.get("budget") is not None:
            raise EpisodeError(f"budget={options['budget']!r}: not an option of a screening world (its label budget "
                               "is part of the world); valid: omit budget")
        mode = options.get("mode") or "limited"
        if mode not in MODES:
            raise EpisodeError(f"mode={mode!r}: invalid; valid: {', '.join(MODES)}")
        spec = json.loads((self.sealed / ORACLE).read_text())
        hours = options.get("clock_hours")
        if hours is None:
            hours = spec["time_limit_hours"]
        if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours > 0:
            raise EpisodeError(f"clock_hours={hours!r}: invalid; valid: hours > 0")
        self.mode = mode
        self.default_turns = MODES[mode]["turns"]
        self.default_timeout = MODES[mode]["timeout"]
        self.clock_s = float(hours) * 3600.0 if MODES[mode]["clock"] else None
        self.delivered: dict = {}  # id -> (score, turn)
        self.results: list = []

    def label(self) -> str:
        return self.mode

    def open(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path
        self.oracle = LabelOracle(self.sealed, ledger_path)

    def runtime(self) -> str:
        return runtime_text()

    def tools(self) -> list:
        return list(TOOLS)

    def sizes(self) -> dict:
        o = self.oracle
        return {"conformations": o.n, "budget": o.budget, "top_k": o.top_k, "submission_size": o.submission_size,
                "max_submissions": o.max_submissions}

    def info(self) -> dict:
        return {"budget": float(self.oracle.budget), "costs": {"label": 1.0}}

    def header(self) -> dict:
        return {"mode": self.mode, "clock_s": self.clock_s, "sizes": self.sizes()}

    def prompts(self, session) -> tuple[str, str]:
        system = prompt_mod.system_prompt(self.sizes(), session.max_turns, session.timeout, self.clock_s,
                                          session.sandbox.isolated)
        return system, prompt_mod.opening_message(session.sandbox.agent_paths)

    def format_hint(self) -> str:
        return prompt_mod.FORMAT_HINT

    def remaining(self) -> float:
        return float(self.oracle.remaining)

    def state(self, session, turns_left: int) -> dict:
        o = self.oracle
        return {"labels_remaining": o.remaining, "labels_used": o.used, "budget": o.budget,
                "submissions_left": o.submissions_left, "submission_size": o.submission_size, "top_k": o.top_k,
                "conformations": o.n, "turns_remaining": turns_left, "seconds_left": session.clock_left(),
                "best_score": o.best}

    def status(self, session, turns_left: int) -> str:
        st = self.state(session, turns_left)
        clock = "" if st["seconds_left"] is None else f" Time left: {st['seconds_left'] / 3600:.2f} h."
        return (f"Labels remaining: {st['labels_remaining']:,}. Submissions left: {st['submissions_left']}. "
                f"Best so far: {st['best_score']:.1f} %. Turns remaining: {turns_left}.{clock}")

    def _write_state(self, session, turns_left: int) -> None:
        lines = ["id,score,turn"] + [f"{i},{s!r},{t}" for i, (s, t) in self.delivered.items()]
        session.write("labels.csv", "\n".join(lines) + "\n")
        session.write("submission_results.json", json.dumps(self.results, indent=1))
        session.write("status.json", json.dumps(self.state(session, turns_left), indent=1))

    def start(self, session) -> None:
        self._write_state(session, session.max_turns)

    # -- tool calls

    def call(self, session, call: ToolCall, args: dict) -> CallOutcome:
        if call.name == "budget":
            return CallOutcome(self.status(session, session.turns_left))
        if call.name == "finish":
            return CallOutcome("Finishing: the best accepted submission counts.", ends="finished")
        if call.name in ("request_labels", "submit"):
            ids = args.get("ids")
            extra = sorted(set(args) - {"ids"})
            if extra or not isinstance(ids, list) or not ids or len(ids) > MAX_IDS_PER_CALL:
                why = (f"unknown argument(s) {', '.join(safejson.excerpt(e, 40) for e in extra)}" if extra else
                       f"ids must be a non-empty list of at most {MAX_IDS_PER_CALL:,} conformation ids")
                return CallOutcome(f"Refused: {why}; nothing was queued.", refused=True)
            ids = [i if isinstance(i, str) else repr(i) for i in ids]
            what = "label request" if call.name == "request_labels" else "submission"
            return CallOutcome(f"Queued: one {what} of {len(ids):,} id(s), answered after your next program run.",
                               queued={call.name: ids})
        return CallOutcome(f"Refused: {call.name} is not a tool of this episode.", refused=True)

    # -- after a turn

    def after_turn(self, session, turn: int, run: Any, queued: list) -> TurnOutcome:
        label_batches = [q["request_labels"] for q in queued if "request_labels" in q]
        sub_batches = [q["submit"] for q in queued if "submit" in q]
        dropped, finish = 0, False
        if run is not None:
            labels, dropped_l = _read_batches(*run.channel_file("label_requests.jsonl"))
            subs, dropped_s = _read_batches(*run.channel_file("submissions.jsonl"))
            label_batches, sub_batches, dropped = label_batches + labels, sub_batches + subs, dropped_l + dropped_s
            finish = "finish.json" in run.channel
        notes = []
        for ids in label_batches:
            payload = self.oracle.request_labels(ids, turn)
            if payload["status"] == "ok":
                for i, s in payload["labels"].items():
                    self.delivered.setdefault(i, (s, turn))
                notes.append(f"labels: {len(payload['labels']):,} delivered ({payload['charged']:,} charged, "
                             f"{payload['repeats']:,} repeats free); {payload['remaining']:,} remain")
            else:
                notes.append(f"labels refused: {payload['reason']}")
        for ids in sub_batches:
            payload = self.oracle.submit(ids, turn)
            if payload["status"] == "ok":
                session.write(f"submissions/{payload['index']}.json", json.dumps({"ids": ids}))
                self.results.append({"index": payload["index"], "turn": turn, "size": payload["size"],
                                     "overlap": payload["overlap"], "score": payload["score"]})
                notes.append(f"submission {payload['index']}: {payload['overlap']} of the top {payload['top_k']:,} "
                             f"({payload['score']:.1f} %); {payload['submissions_left']} left")
            else:
                self.results.append({"status": "refused", "turn": turn, "reason": payload["reason"]})
                notes.append(f"submission refused: {payload['reason']}")
        if dropped:
            notes.append(f"ignored: {dropped} malformed or excess request line(s)")
        left = session.max_turns - turn
        self._write_state(session, left)
        ends = "submissions_used" if self.oracle.submissions_left == 0 else ("finished" if finish else None)
        return TurnOutcome(sections=[("oracle", notes)], status=self.status(session, left),
                           record={"oracle": notes}, ends=ends,
                           report=f"{self.oracle.used:,} labels used, best {self.oracle.best:.1f} %")

    # -- scoring

    def score(self, session) -> tuple[dict, Optional[str]]:
        return score_episode(self.sealed, session.work, str(self.ledger_path)), "ledger"

    def crash_score(self, reason: str) -> dict:
        return crash_score(self.world_id, reason)

    def summary(self) -> dict:
        oracle = getattr(self, "oracle", None)
        return {"mode": self.mode, "labels_used": oracle.used if oracle else 0,
                "budget": oracle.budget if oracle else None,
                "submissions": len(oracle.submissions) if oracle else 0}


def run_episode(world_dir, agent, **options) -> dict:
    """One screening episode through the shared core (``pipeline.harness.run_episode``)."""
    from ..harness.core import run_episode as run

    return run(world_dir, agent, **options)


def main(argv: list[str]) -> int:
    """``python -m pipeline.episode`` on a screening world: the one command line of every kind."""
    from ..episode import main as episode_main

    return episode_main(argv)
