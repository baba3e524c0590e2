"""The biobank kind's half of an episode: experiments, the submission, the S2 scorer.

Tools (the prelude's functions of the same names, ``runtime.py``):
``request_experiment(kind, protein)`` queues an experiment, charged and delivered to
``WORK/experiments/<protein>.<kind>.json`` after the turn's program ends (refused when
unknown, repeated or unaffordable); ``budget()`` answers at once; ``submit(submission)``
makes ``WORK/submission.json`` final (writing it first when given) and ends the episode.

Exit rule (SPEC section 9): ``submit()`` ends the episode after the turn it is called in,
with the submission as it stood at the call; otherwise at the turn limit the latest
submission.json that parsed as a JSON object at the end of a turn is scored.  With
``paper_compat`` the paper's rule applies instead (the first turn that ends with a
parseable submission.json ends the episode), and so do its prompt, its cell-perturbation
survival readout and S2.5's phenotype rule.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..agents.tools import ToolCall, ToolSpec
from ..oracle import KINDS, Ledger, load_oracle
from ..score import COMPONENT_KEYS, score_episode
from ..score.work import PHENOTYPE_MAX_BYTES
from . import prompt as prompt_mod
from . import safeio, safejson
from .kind import CallOutcome, EpisodeError, KindEpisode, TurnOutcome
from .work import money, read_submission

BUDGETS = (0, 450_000, 2_000_000)
MAX_REQUESTS_PER_TURN = 100
MAX_REQUEST_LINE = 4096  # bytes of one request line
MAX_ID_CHARS = 64  # kind and protein identifiers
SUBMIT_CAP = 64 * 1024 * 1024
#: Bytes of submission versions kept in ``<episode>/submissions/`` (past it, their SHA-256 only).
SUBMISSIONS_KEEP_CAP = 256 * 1024 * 1024

TOOLS = (
    ToolSpec("request_experiment",
             "Queue one experiment on a protein: cell_perturbation or knockdown. It is charged after your next program "
             "run (or at submit()) and its result appears in WORK/experiments/<protein>.<kind>.json when the next "
             "program starts; unknown kinds or proteins, repeats and requests over budget are refused at no cost.",
             {"type": "object", "properties": {
                 "kind": {"type": "string", "enum": list(KINDS)},
                 "protein": {"type": "string", "description": "a protein id such as PROT_0123"}},
              "required": ["kind", "protein"], "additionalProperties": False}),
    ToolSpec("budget", "What is left of the budget and of the turns, and the state of WORK/submission.json."),
    ToolSpec("submit",
             "Make WORK/submission.json final and end the episode (given a submission object, it is written to "
             "WORK/submission.json first). Experiments queued before it are still charged; you will not see them.",
             {"type": "object", "properties": {"submission": {"type": "object"}}, "additionalProperties": False},
             ends_episode=True),
)


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


def parse_request(line: bytes) -> tuple[Optional[dict], Optional[str]]:
    """One request line as {"kind", "protein"}, or why it is refused."""
    if len(line) > MAX_REQUEST_LINE:
        return None, f"request line of {len(line)} bytes (at most {MAX_REQUEST_LINE})"
    try:
        item = safejson.loads(line, max_bytes=MAX_REQUEST_LINE, max_string=MAX_ID_CHARS * 4)
    except safejson.Refused as error:
        return None, f"malformed request ({error})"
    return check_request(item)


def check_request(item: Any) -> tuple[Optional[dict], Optional[str]]:
    if not isinstance(item, dict):
        return None, "malformed request (not a JSON object)"
    kind, protein = item.get("kind"), item.get("protein")
    for name, value in (("kind", kind), ("protein", protein)):
        if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
            return None, f"malformed request ({name} must be a string of 1-{MAX_ID_CHARS} characters)"
    return {"kind": kind, "protein": protein}, None


class BiobankEpisode(KindEpisode):
    kind = "biobank"
    default_turns = 30
    default_timeout = 300.0
    options = {"budget": "dollars: 0, 450000 or 2000000 in the benchmark (any amount >= 0 outside it)",
               "paper_compat": "the paper's prompt, exit rule, survival readout and phenotype rule (default false)"}

    def configure(self, options: dict) -> None:
        budget = options.get("budget")
        if budget is None:
            raise EpisodeError(f"budget: required on a biobank world; valid: dollars >= 0 (the benchmark uses "
                               f"{', '.join(map(str, BUDGETS))})")
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not math.isfinite(budget) or budget < 0:
            raise EpisodeError(f"budget={budget!r}: invalid; valid: dollars >= 0 (the benchmark uses "
                               f"{', '.join(map(str, BUDGETS))})")
        self.budget = float(budget)
        self.paper_compat = bool(options.get("paper_compat", False))
        self.latest: Optional[_Submission] = None
        self.final: Optional[_Submission] = None
        self._kept_bytes = 0

    def label(self) -> str:
        return str(int(self.budget)) if float(self.budget).is_integer() else f"{self.budget:g}"

    def open(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path
        spec = load_oracle(self.sealed)
        # The paper's harness handed cell perturbations a survival readout; paper_compat
        # reproduces that as well as the prompt and the exit rule.
        self.ledger = Ledger(self.budget, ledger_path, spec, paper_compat=True if self.paper_compat else None)
        self.costs = {kind: float(spec.costs[kind]) for kind in KINDS}

    def tools(self) -> list:
        return list(TOOLS)

    def info(self) -> dict:
        return {"budget": self.budget, "costs": dict(self.costs)}

    def header(self) -> dict:
        return {"budget": self.budget, "paper_compat": self.paper_compat, "costs": self.costs}

    def prompts(self, session) -> tuple[str, str]:
        box = session.sandbox
        system = prompt_mod.system_prompt(
            release_dir=self.release, budget=self.budget, costs=self.costs, max_turns=session.max_turns,
            timeout=session.timeout, paper_compat=self.paper_compat, isolated=box.isolated, limits=box.limits.describe(),
        )
        opening = prompt_mod.opening_message(box.agent_paths, isolated=box.isolated, paper_compat=self.paper_compat)
        return system, opening

    def format_hint(self) -> str:
        return prompt_mod.FORMAT_HINT

    def start(self, session) -> None:
        session.make_dir("experiments")

    def remaining(self) -> float:
        return self.ledger.remaining

    def status(self, session, turns_left: int) -> str:
        return f"Budget remaining: {money(self.ledger.remaining)}. Turns remaining: {turns_left}."

    # -- the channel

    def _read_channel(self, run) -> tuple[list, list, int, Optional[dict], Optional[str]]:
        """(requests, refused at intake, dropped, the submit() record, why submit() was refused)."""
        requests, refused, dropped = [], [], 0
        raw, _ = run.channel_file("requests.jsonl")
        for line in (raw or b"")[: MAX_REQUESTS_PER_TURN * (MAX_REQUEST_LINE + 1)].split(b"\n"):
            if not line.strip():
                continue
            if len(requests) + len(refused) >= MAX_REQUESTS_PER_TURN:
                dropped += 1
                continue
            item, problem = parse_request(line)
            if problem is None:
                requests.append(item)
            else:
                refused.append({"reason": problem, "excerpt": safejson.excerpt(line.decode("utf-8", "replace"), 60)})
        submitted, error = None, None
        if "submit.json" in run.channel:
            raw, cut = run.channel_file("submit.json")
            if cut:
                error = f"the submit() record was refused: larger than {SUBMIT_CAP} bytes"
            else:
                try:
                    parsed = safejson.loads(raw, max_bytes=SUBMIT_CAP)
                except safejson.Refused as problem:
                    parsed, error = None, f"the submit() record was refused: {problem}"
                if error is None and isinstance(parsed, dict):
                    submitted = parsed
                elif error is None:
                    error = "the submit() record is not a JSON object"
        return requests, refused, dropped, submitted, error

    # -- tool calls

    def call(self, session, call: ToolCall, args: dict) -> CallOutcome:
        if call.name == "budget":
            _, _, status = read_submission(session.work)
            return CallOutcome(f"{self.status(session, session.turns_left)} submission.json: {status}.")
        if call.name == "request_experiment":
            extra = sorted(set(args) - {"kind", "protein"})
            item, problem = check_request(args)
            if extra:
                problem = f"unknown argument(s) {', '.join(safejson.excerpt(e, 40) for e in extra)}"
            if problem is not None:
                return CallOutcome(f"Refused: {problem}; nothing was charged.", refused=True,
                                   queued={"malformed": problem, "excerpt": safejson.excerpt(json.dumps(args), 60)})
            cost = self.costs.get(item["kind"])
            price = f" ({money(cost)} if delivered)" if cost is not None else ""
            return CallOutcome(f"Queued: {safejson.excerpt(item['kind'])} of {safejson.excerpt(item['protein'])}{price}; "
                               "charged after your next program run, its result in WORK/experiments/ when the next "
                               "program starts.", queued={"request": item})
        if call.name == "submit":
            submission = args.get("submission")
            if submission is not None:
                if not isinstance(submission, dict):
                    return CallOutcome("Refused: submission must be a JSON object; nothing was submitted.", refused=True)
                session.write("submission.json", json.dumps(submission, indent=2))
            parsed, raw, status = read_submission(session.work)
            if parsed is None:
                return CallOutcome(f"Refused: WORK/submission.json is {status}; nothing was submitted (write it or pass "
                                   "the submission), and the episode goes on.", refused=True)
            self.final = _Submission(parsed, json.dumps(parsed, sort_keys=True).encode(), session.turn + 1, "submit()")
            return CallOutcome("Submission recorded; the episode ends now.", ends="submitted")
        return CallOutcome(f"Refused: {call.name} is not a tool of this episode.", refused=True)

    # -- after a turn

    def _deliver(self, session, requests: list, malformed: list, turn: int) -> tuple[list, list]:
        delivered, refused = [], []
        for item in malformed:
            self.ledger.refuse_malformed(turn, item["reason"])
            refused.append({"kind": None, "protein": None, "reason": f"{item['reason']}: {item['excerpt']}"})
        for item in requests:
            payload = self.ledger.request(item.get("kind"), item.get("protein"), turn)
            if payload.get("status") == "ok":
                name = f"{payload['protein']}.{payload['action']}.json"
                session.write(f"experiments/{name}", json.dumps(payload, indent=2, sort_keys=True) + "\n")
                delivered.append({"kind": payload["action"], "protein": payload["protein"],
                                  "cost": self.costs[payload["action"]], "path": f"experiments/{name}"})
            else:
                refused.append({"kind": payload.get("action"), "protein": payload.get("protein"),
                                "reason": payload.get("reason")})
        return delivered, refused

    def _track_submission(self, session, turn: int) -> str:
        parsed, raw, status = read_submission(session.work)
        if parsed is None:
            if self.latest is not None and status != "absent":
                return f"{status}; the version from turn {self.latest.turn} is the latest parseable one"
            return status
        if self.latest is None or raw != self.latest.raw:
            self.latest = _Submission(parsed, raw, turn, "provisional")
            folder = session.dir / "submissions"
            folder.mkdir(exist_ok=True)
            if self._kept_bytes + len(raw) <= SUBMISSIONS_KEEP_CAP:
                (folder / f"turn_{turn:02d}.json").write_bytes(raw)
                self._kept_bytes += len(raw)
            else:  # the copies the harness keeps have a cap of their own
                (folder / f"turn_{turn:02d}.sha256").write_text(
                    f"{hashlib.sha256(raw).hexdigest()}  {len(raw)} bytes (not kept: past the "
                    f"{SUBMISSIONS_KEEP_CAP // 2**20} MiB kept for submission versions)\n")
        return "parsed"

    def after_turn(self, session, turn: int, run: Any, queued: list) -> TurnOutcome:
        requests = [q["request"] for q in queued if "request" in q]
        malformed = [{"reason": f"malformed request ({q['malformed']})", "excerpt": q["excerpt"]}
                     for q in queued if "malformed" in q]
        dropped, submitted, submit_error, ran = 0, None, None, []
        if run is not None:
            ran, refused_lines, dropped, submitted, submit_error = self._read_channel(run)
            requests, malformed = requests + ran, malformed + refused_lines
        delivered, refused = self._deliver(session, requests, malformed, turn)
        if submitted is not None:
            self.final = _Submission(submitted, json.dumps(submitted, sort_keys=True).encode(), turn, "submit()")
        sub_status = self._track_submission(session, turn)
        if submit_error:
            sub_status += f" (submit() not accepted: {submit_error})"
        lines = [f"delivered: {d['kind']} of {d['protein']} ({money(d['cost'])} charged) -> WORK/{d['path']}"
                 for d in delivered]
        for r in refused:
            if r["kind"] is None:
                lines.append(f"refused: {safejson.excerpt(r['reason'], 200)}")
            else:
                lines.append(f"refused: {safejson.excerpt(r['kind'])} of {safejson.excerpt(r['protein'])}: "
                             f"{safejson.excerpt(r['reason'], 200)}")
        if dropped:
            lines.append(f"ignored: {dropped} request(s) past the limit of {MAX_REQUESTS_PER_TURN} a turn")
        ends = None
        left = session.max_turns - turn
        if submitted is not None or (self.final is not None and self.final.turn == turn):
            state, ends = "submission.json: submitted with submit(); the episode ends now.", "submitted"
        elif self.paper_compat and sub_status == "parsed":
            self.final = self.latest
            state, ends = "submission.json: parsed; the episode ends now.", "submission_written"
        elif sub_status == "parsed":
            state = "submission.json: parsed (provisional: call submit() to make it final)."
        else:
            state = f"submission.json: {sub_status}."
        status = f"{state}\nBudget remaining: {money(self.ledger.remaining)}. Turns remaining: {left}."
        report = ", ".join(filter(None, [f"{len(delivered)} experiment(s) delivered" if delivered else "",
                                         f"{len(refused)} refused" if refused else ""]))
        report = (report + "; " if report else "") + f"spent {money(self.ledger.spent)} of {money(self.budget)}" + \
            ("; submitted" if ends == "submitted" else "")
        return TurnOutcome(
            sections=[("experiments", lines)], status=status,
            fields={"delivered": tuple(delivered), "refused": tuple(refused), "submission_status": sub_status},
            record={"experiments": {"requested": requests, "dropped": dropped, "delivered": delivered,
                                    "refused": refused},
                    "submission": sub_status, "submitted": ends == "submitted"},
            ends=ends, report=report)

    # -- scoring

    def score(self, session) -> tuple[dict, Optional[str]]:
        chosen = self.final or self.latest
        work = session.work
        current, _, _ = read_submission(work)
        if chosen is None or current == chosen.obj:
            return score_episode(self.sealed, work, self.ledger_path, paper_compat=self.paper_compat), "work"
        # WORK's submission.json is not the one the exit rule picks (changed after
        # submit(), or broken after the last parseable version): score a copy.
        scored = session.dir / "scored"
        safeio.remove_tree(scored)
        scored.mkdir()
        (scored / "submission.json").write_bytes(json.dumps(chosen.obj).encode())
        # Only a regular file of WORK is a phenotype (a link, a folder or a pipe is none).
        phenotype, _ = safeio.read_file(work, "phenotype.csv", PHENOTYPE_MAX_BYTES)
        if phenotype is not None:
            (scored / "phenotype.csv").write_bytes(phenotype)
        source = f"scored/ (submission from turn {chosen.turn} via {chosen.how}; WORK's phenotype.csv)"
        return score_episode(self.sealed, scored, self.ledger_path, paper_compat=self.paper_compat), source

    def crash_score(self, reason: str) -> dict:
        return zero_score(reason)

    def summary(self) -> dict:
        ledger = getattr(self, "ledger", None)
        return {"budget": self.budget, "submitted_turn": self.final.turn if self.final else None,
                "spent": ledger.spent if ledger else 0.0, "remaining": ledger.remaining if ledger else self.budget,
                "paper_compat": self.paper_compat}
