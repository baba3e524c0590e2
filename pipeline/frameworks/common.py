"""What the Inspect task and the verifiers environment share.

* :class:`ParameterError`: a bad parameter, as one line that names it (raised before any
  episode starts);
* budget parsing (the benchmark's three budgets only);
* the score of an episode as flat metrics (every component, the safety penalty, the exit
  reason);
* the bookkeeping of a framework that validates tool calls itself (Inspect checks a call
  against the tool's JSON Schema before the tool runs): such a refusal counts towards the
  core's cap of calls that run no program, exactly as a refusal by ``Session.call`` does.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Optional

#: The benchmark's budgets (dollars) of a biobank episode.
from ..harness.biobank import BUDGETS  # noqa: F401  (re-exported)


class ParameterError(ValueError):
    """A bad parameter of a framework entry point: one line naming it and what is valid."""


# ----------------------------------------------------------------------------- parameters


def parse_budget(value: Any, name: str = "budget") -> int:
    """One of the benchmark's budgets (0, 450000, 2000000) from an int, float or text."""
    number: Optional[float] = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip().replace("_", ""))
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number not in BUDGETS:
        raise ParameterError(f"{name}={value!r}: invalid; valid: one of {', '.join(map(str, BUDGETS))}")
    return int(number)


def parse_budgets(value: Any, name: str = "budgets") -> tuple:
    """A list of budgets (a list, tuple or comma-separated text), each checked, no repeats."""
    if value is None:
        return tuple(BUDGETS)
    if isinstance(value, str):
        items = [v for v in value.replace(" ", "").strip("[]()").split(",") if v]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise ParameterError(f"{name}={value!r}: empty; valid: a list of {', '.join(map(str, BUDGETS))}")
    out = tuple(parse_budget(v, name) for v in items)
    if len(set(out)) != len(out):
        raise ParameterError(f"{name}={value!r}: a budget is listed twice; valid: each budget once")
    return out


def parse_list(value: Any, name: str) -> list:
    """A list parameter given as a list or as comma-separated text (Inspect's ``-T k=a,b``)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.replace(" ", "").strip("[]").split(",") if v]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ParameterError(f"{name}={value!r}: invalid; valid: a list or comma-separated names")


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ParameterError(f"{name}={value!r}: invalid; valid: {', '.join(choices)}")
    return value


def check_int(value: Any, name: str, lo: int, hi: Optional[int] = None, optional: bool = False) -> Optional[int]:
    if value is None and optional:
        return None
    try:
        number = int(value) if not isinstance(value, bool) and float(value) == int(float(value)) else None
    except (TypeError, ValueError):
        number = None
    if number is None or number < lo or (hi is not None and number > hi):
        bound = f">= {lo}" if hi is None else f"{lo}-{hi}"
        raise ParameterError(f"{name}={value!r}: invalid; valid: an integer {bound}")
    return number


def check_number(value: Any, name: str, optional: bool = True) -> Optional[float]:
    if value is None and optional:
        return None
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise ParameterError(f"{name}={value!r}: invalid; valid: a number > 0")
    return number


def check_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ParameterError(f"{name}={value!r}: invalid; valid: true or false")


# ----------------------------------------------------------------------------- the score

#: The biobank score's components (S2), in the scorer's order.
BIOBANK_COMPONENTS = ("target_identification", "causal_confidence", "bias_identification", "intervention_direction",
                      "phenotype_construction")


def score_metrics(result: dict) -> dict:
    """The score dictionary of ``Session.finish()`` as flat numbers: the total (0-100) and,
    on a biobank world, every component, the safety penalty and the unclipped total; on a
    screening world the best submission's score and the number of accepted submissions."""
    def num(key: str) -> float:
        value = result.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    out = {"total": num("total")}
    if "target_identification" in result:
        for key in BIOBANK_COMPONENTS:
            out[key] = num(key)
        out["safety_penalty"] = num("safety_penalty")
        out["total_unclipped"] = num("total_unclipped")
    else:
        out["score"] = num("score")
        out["submissions"] = float(len(result.get("submissions") or ()))
    return out


def score_summary(result: dict) -> dict:
    """What a framework's record keeps of an episode beyond the metrics (never shown to a model)."""
    episode = result.get("episode") or {}
    return {
        "kind": episode.get("kind"),
        "world_id": episode.get("world_id"),
        "exit_reason": episode.get("exit_reason"),
        "exit_detail": episode.get("exit_detail"),
        "turns_used": episode.get("turns_used"),
        "episode_dir": episode.get("episode_dir"),
        "transcript": episode.get("transcript"),
        "isolated": result.get("isolated"),
        "usage": result.get("usage"),
    }


# ----------------------------------------------------------------------------- tool dispatch


def note_usage(session, usage: Optional[dict], cost_usd: Optional[float] = None) -> None:
    """Add one model call's token usage to the episode (the turn's record and the episode's
    sum), as ``Session.respond`` does for a reply it plays itself."""
    session.note_usage(usage, cost_usd)


def refuse_call(session, name: Any, arguments: Any, call_id: Optional[str], problem: str):
    """Record a tool call the framework refused before it reached the episode (its own
    schema check): kept in the turn's transcript record and counted towards the core's cap
    of calls that run no program (``MAX_CALLS_PER_TURN``), so a model that keeps calling
    tools wrongly still uses up turns.  Returns the observation when the cap used the turn."""
    from ..harness import safeio, safejson
    from ..harness.core import TOOL_TEXT_CAP

    if session.done:
        return None
    text = arguments if isinstance(arguments, str) else safejson.dumps_safe(arguments)
    return session.record_call({
        "name": safeio.printable(str(name), 200), "id": call_id,
        "arguments": safeio.bounded_text(text, TOOL_TEXT_CAP)["text"], "refused": True, "refused_by": "framework",
        "result": safeio.bounded_text(f"Refused: {problem}", TOOL_TEXT_CAP)["text"]})


def harness_failed(session, error: BaseException) -> str:
    """The harness's own failure during a call or turn (never the agent's code, which runs in the
    sandbox): the episode ends with ``harness_error``, to be scored from WORK (and not replayed),
    as the core's own policy loop ends it.  Returns what the model is told."""
    import traceback

    session.harness_failed("".join(traceback.format_exception(type(error), error, error.__traceback__)))
    return f"The harness failed during this call ({type(error).__name__}); the episode has ended (harness_error)."


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
