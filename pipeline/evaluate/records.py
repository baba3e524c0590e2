"""Episode records: one flat dictionary per episode, the only input of the evaluation tables.

A record is what ``<out>/episodes.jsonl`` holds, one line per episode.  Every field is
declared once in :data:`FIELDS` (name, JSON type, kinds, whether required, meaning); the JSON
Schema ``pipeline/schemas/evaluation-record.schema.json`` is generated from it
(:func:`record_schema`, checked by a test) and :func:`validate_records` enforces it with errors
that name the record, the field, the bad value and what would be valid.

Two kinds of record:

* ``kind="biobank"``: one biobank episode (one world x one budget x one trial).  The score's
  five components, the safety penalty, ``total`` and ``total_unclipped`` under their score-JSON
  names, plus ``fixed_labels_total`` (Table S11 C: the same WORK re-scored with every direction
  "inhibit" and every alignment "aligned", :func:`fixed_labels_total`).
* ``kind="screening"``: one screening episode (one world x one mode x one trial), scored by the
  best of its (at most three) submissions.

Fields that are not required may be absent; an absent field reads as ``null`` ("not
recorded"), and the tables count only the records that hold a value (they report how many).
Keys outside :data:`FIELDS` are allowed and ignored by the tables (a runner may add its own).

:func:`record_from_score` builds a record from an episode's ``score.json`` (the dictionary
``pipeline.harness.episode.Episode.run`` and ``pipeline.screening.episode.ScreeningEpisode.run``
return), reading the episode's ledger and transcript when their paths are in it.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Union

import numpy as np

#: The version of the record format; a record carries it as ``record_format``.
RECORD_FORMAT = "drugtargetworld-evaluation-record/1"
KINDS = ("biobank", "screening")
COMPONENTS = ("target_identification", "causal_confidence", "bias_identification", "intervention_direction",
              "phenotype_construction")
#: The points of each component (Supplementary Methods S2), the bounds a record is checked against.
COMPONENT_MAX = {"target_identification": 30.0, "causal_confidence": 25.0, "bias_identification": 15.0,
                 "intervention_direction": 20.0, "phenotype_construction": 10.0}
SAFETY_PENALTY_POINTS = -30.0
#: A record's total must equal its parts to this tolerance (scores are sums of floats).
CONSISTENCY_TOLERANCE = 1e-6
EXIT_DETAIL_MAX_CHARS = 2000
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "evaluation-record.schema.json"

PathLike = Union[str, os.PathLike]


class RecordError(ValueError):
    """A record (or the input of :func:`record_from_score`) that the tables cannot use."""


@dataclass(frozen=True)
class Field:
    """One record field, declared once."""

    #: The key in the record.
    name: str
    #: JSON type: "string", "number", "integer" or "boolean".
    type: str
    #: What the field means (and where record_from_score takes it from).
    doc: str
    #: The kinds whose records carry it.
    kinds: tuple[str, ...] = KINDS
    #: Kinds in whose records the key must be present.
    required: tuple[str, ...] = ()
    #: Whether ``null`` is allowed (for required fields: the key must be there, its value may be null).
    nullable: bool = True
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    enum: Optional[tuple] = None


_B, _S = ("biobank",), ("screening",)
FIELDS: tuple[Field, ...] = (
    # identity
    Field("record_format", "string", f"The record format, {RECORD_FORMAT!r}.", required=KINDS, nullable=False,
          enum=(RECORD_FORMAT,)),
    Field("world", "string", "World id (the sealed truth's world_id).", required=KINDS, nullable=False),
    Field("kind", "string", "World kind.", required=KINDS, nullable=False, enum=KINDS),
    Field("archetype", "string", "Disease archetype of the world (dcm, hcm, hfpef, ischemic); null for screening "
          "worlds or when unknown.", required=_B),
    Field("agent", "string", "The agent's label in this evaluation (two labels may run the same agent with "
          "different options).", required=KINDS, nullable=False),
    Field("agent_config_digest", "string", "Digest of the agent's resolved configuration (set by the runner)."),
    Field("manifest_digest", "string", "Digest of the world build the episode ran on (set by the runner)."),
    Field("harness_version", "string", "Version of the harness that played the episode (set by the runner)."),
    Field("budget", "number", "Experimental budget in dollars (0, 450000, 2000000); absent or null for screening "
          "episodes.", kinds=_B, required=_B, nullable=False, minimum=0),
    Field("trial", "integer", "Repeat index of the (agent, world, budget) cell, from 0.", required=KINDS,
          nullable=False, minimum=0),
    Field("mode", "string", "Screening mode (limited: the 10-hour clock; unrestricted).", kinds=_S, required=_S,
          nullable=False),
    Field("episode_id", "string", "The harness's episode id."),
    Field("episode_dir", "string", "The episode folder (transcript, ledger, score.json)."),
    # score
    Field("total", "number", "Score on the 0-100 scale (biobank: the components plus the safety penalty clipped "
          "to 0-100; screening: equal to score).", required=KINDS, nullable=False, minimum=0, maximum=100),
    Field("total_unclipped", "number", "Sum of the five components and the safety penalty, before clipping.",
          kinds=_B, required=_B, nullable=False, minimum=-30, maximum=100),
    *(Field(name, "number", f"Score component {name} (0-{COMPONENT_MAX[name]:g} points).", kinds=_B, required=_B,
            nullable=False, minimum=0, maximum=COMPONENT_MAX[name]) for name in COMPONENTS),
    Field("safety_penalty", "number", "0, or -30 when the harmful surrogate was nominated and labelled aligned.",
          kinds=_B, required=_B, nullable=False, enum=(0, -30)),
    Field("fixed_labels_total", "number", "Table S11 C: total of the same WORK re-scored by the real scorer with "
          "every direction 'inhibit' and every outcome alignment 'aligned' (null: not computed).", kinds=_B,
          required=_B, minimum=0, maximum=100),
    Field("target_precision", "number", "details.target_identification.precision (null in the null world).",
          kinds=_B, minimum=0, maximum=1),
    Field("target_recall", "number", "details.target_identification.recall (null in the null world).", kinds=_B,
          minimum=0, maximum=1),
    Field("nominations", "integer", "Unique valid nominations (details.nominations.unique_valid).", kinds=_B,
          minimum=0),
    Field("nominations_processed", "integer", "Nominations the rules processed (at most the 25-nomination cap).",
          kinds=_B, minimum=0, maximum=25),
    Field("nominations_past_cap", "integer", "Unique valid nominations past the 25-nomination cap.", kinds=_B,
          minimum=0),
    Field("rejections", "integer", "Rejections in the submission (details.rejections.count).", kinds=_B, minimum=0),
    Field("abstentions", "integer", "Retained abstention entries (details.abstentions.retained).", kinds=_B,
          minimum=0),
    Field("submission_status", "string", "How the scored submission read (details.submission.status).", kinds=_B),
    Field("phenotype_status", "string", "details.phenotype_construction.status ('scored' when r was computed).",
          kinds=_B),
    Field("phenotype_r", "number", "|corr(phenotype, L)| on the evaluation set (details.phenotype_construction.r).",
          kinds=_B, minimum=0, maximum=1),
    # experiments (from the ledger: the harness's own record)
    Field("experiments_requested", "integer", "Experiment requests that reached the ledger (delivered + refused).",
          kinds=_B, minimum=0),
    Field("experiments_delivered", "integer", "Experiments delivered and charged.", kinds=_B, minimum=0),
    Field("experiments_delivered_knockdown", "integer", "Delivered in vivo knockdowns.", kinds=_B, minimum=0),
    Field("experiments_delivered_cell_perturbation", "integer", "Delivered cell perturbations.", kinds=_B,
          minimum=0),
    Field("experiments_refused", "integer", "Requests refused (unknown, duplicate, over budget, malformed).",
          kinds=_B, minimum=0),
    Field("spend", "number", "Dollars charged (episode.spent).", kinds=_B, minimum=0),
    # screening
    Field("score", "number", "Best-of-three screening score: max over accepted submissions of the % overlap "
          "with the true top K.", kinds=_S, required=_S, nullable=False, minimum=0, maximum=100),
    Field("submissions", "integer", "Accepted submissions.", kinds=_S, required=_S, nullable=False, minimum=0),
    Field("submissions_refused", "integer", "Refused submissions.", kinds=_S, minimum=0),
    Field("best_submission", "integer", "Index (from 1) of the best accepted submission.", kinds=_S, minimum=1),
    Field("labels_used", "integer", "Labels charged to the label budget.", kinds=_S, required=_S, nullable=False,
          minimum=0),
    Field("label_budget", "integer", "The world's label budget.", kinds=_S, minimum=0),
    Field("top_k", "integer", "K of the top-K overlap.", kinds=_S, minimum=1),
    # process (from the episode summary and the transcript)
    Field("exit_reason", "string", "How the episode ended (submitted, submission_written, turn_limit, "
          "policy_error, sandbox_failure, harness_error, runner_crash; screening: finished, submissions_used, "
          "time_limit, ...)."),
    Field("exit_detail", "string", f"The exit's detail (an error), cut to {EXIT_DETAIL_MAX_CHARS} characters."),
    Field("turns_used", "integer", "Turns played.", minimum=0),
    Field("max_turns", "integer", "The turn limit.", minimum=1),
    Field("no_code_turns", "integer", "Turns whose reply held no code (a turn used, a formatting hint returned).",
          minimum=0),
    Field("turn_timeouts", "integer", "Turns whose program was stopped at the turn's time limit.", minimum=0),
    Field("failed_runs", "integer", "Turns whose program exited with an error.", minimum=0),
    Field("truncated_replies", "integer", "Replies whose last code fence was never closed (a truncated "
          "completion).", minimum=0),
    Field("parse_failures", "integer", "Turns that ended with a WORK/submission.json that did not parse.",
          kinds=_B, minimum=0),
    Field("isolated", "boolean", "Whether the agent's code ran in the sandbox."),
    Field("isolation", "string", "How it was isolated, or why not."),
    Field("paper_compat", "boolean", "Whether the episode used the paper's rules.", kinds=_B),
    Field("wall_s", "number", "Wall time of the episode in seconds.", minimum=0),
    # model usage (score.json 'usage', summed per episode)
    Field("prompt_tokens", "integer", "Prompt tokens (model-backed agents; null otherwise).", minimum=0),
    Field("completion_tokens", "integer", "Completion tokens.", minimum=0),
    Field("cached_tokens", "integer", "Cached prompt tokens.", minimum=0),
    Field("total_tokens", "integer", "Total tokens.", minimum=0),
    Field("cost_usd", "number", "Cost of the episode's model calls in US dollars.", minimum=0),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "total_tokens", "cost_usd")


# ----------------------------------------------------------------------------- the schema


def _json_type(field: Field) -> Any:
    return [field.type, "null"] if field.nullable else field.type


def _property(field: Field) -> dict:
    prop: dict = {"type": _json_type(field), "description": field.doc}
    if field.minimum is not None:
        prop["minimum"] = field.minimum
    if field.maximum is not None:
        prop["maximum"] = field.maximum
    if field.enum is not None:
        prop["enum"] = list(field.enum) + ([None] if field.nullable else [])
    if field.type == "string" and not field.nullable and field.enum is None:
        prop["minLength"] = 1
    return prop


def record_schema() -> dict:
    """The JSON Schema (draft 2020-12) of one record, generated from :data:`FIELDS`.

    ``pipeline/schemas/evaluation-record.schema.json`` is this dictionary written with
    ``json.dumps(record_schema(), indent=2) + "\\n"`` (:func:`write_schema`).
    """
    branches = []
    for kind in KINDS:
        properties = {"kind": {"const": kind}}
        for field in FIELDS:
            if kind in field.kinds and field.name != "kind":
                properties[field.name] = _property(field)
        if kind == "screening":
            properties["budget"] = {"type": "null", "description": "Absent or null: a screening world's label "
                                    "budget is part of the world."}
        required = [f.name for f in FIELDS if kind in f.required]
        branches.append({"title": f"{kind} episode", "type": "object", "required": required,
                         "properties": properties})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://drugtargetworld.invalid/schemas/evaluation-record.schema.json",
        "title": "DrugTargetWorld evaluation record (one episode; a line of <out>/episodes.jsonl)",
        "description": (
            "Generated from pipeline.evaluate.records.FIELDS by pipeline.evaluate.records.write_schema(). "
            "Absent optional fields read as null (not recorded). Keys not listed are allowed and ignored by "
            "pipeline.evaluate.report. Beyond this schema, validate_records checks total = clip(total_unclipped, "
            "0, 100) and total_unclipped = components + safety_penalty (biobank), total = score (screening), "
            "one record per (kind, agent, world, budget or mode, trial), and one archetype per world."),
        "type": "object",
        "required": ["kind"],
        "oneOf": branches,
    }


def write_schema(path: PathLike = SCHEMA_PATH) -> Path:
    """Write :func:`record_schema` to ``path`` (default: the package's schema file)."""
    path = Path(path)
    path.write_text(json.dumps(record_schema(), indent=2) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- validation


def _is_number(value: Any) -> bool:
    # numpy scalars too: a runner may build records from arrays
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _type_ok(field: Field, value: Any) -> bool:
    if field.type == "string":
        return isinstance(value, str)
    if field.type == "boolean":
        return isinstance(value, (bool, np.bool_))
    if field.type == "integer":
        if isinstance(value, (bool, np.bool_)):
            return False
        if isinstance(value, (int, np.integer)):
            return True
        return isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer()
    return _is_number(value)


def _check_field(where: str, field: Field, value: Any) -> Any:
    """The value as the tables use it (integers as int, numbers as float), or RecordError."""
    if value is None:
        if not field.nullable:
            raise RecordError(f"{where}: {field.name}=null: invalid; valid: {_valid(field)}")
        return None
    if field.type in ("number", "integer") and _is_number(value) and not math.isfinite(value):
        raise RecordError(f"{where}: {field.name}={value!r}: not a finite number; valid: {_valid(field)}"
                          " (an undefined statistic is null, never NaN)")
    if not _type_ok(field, value):
        raise RecordError(f"{where}: {field.name}={value!r}: invalid type {type(value).__name__}; "
                          f"valid: {_valid(field)}")
    if field.type == "integer":
        value = int(value)
    elif field.type == "number":
        value = float(value)
    elif field.type == "boolean":
        value = bool(value)
    if field.enum is not None and value not in field.enum:
        raise RecordError(f"{where}: {field.name}={value!r}: invalid; valid: {_valid(field)}")
    if field.minimum is not None and value < field.minimum - CONSISTENCY_TOLERANCE:
        raise RecordError(f"{where}: {field.name}={value!r}: below {field.minimum:g}; valid: {_valid(field)}")
    if field.maximum is not None and value > field.maximum + CONSISTENCY_TOLERANCE:
        raise RecordError(f"{where}: {field.name}={value!r}: above {field.maximum:g}; valid: {_valid(field)}")
    if field.type == "string" and not field.nullable and not value:
        raise RecordError(f"{where}: {field.name}='': invalid; valid: {_valid(field)}")
    return value


def _valid(field: Field) -> str:
    if field.enum is not None:
        text = " or ".join(repr(v) for v in field.enum)
    else:
        text = {"string": "a non-empty string" if not field.nullable else "a string",
                "number": "a finite number", "integer": "an integer", "boolean": "true or false"}[field.type]
        if field.minimum is not None and field.maximum is not None:
            text += f" in [{field.minimum:g}, {field.maximum:g}]"
        elif field.minimum is not None:
            text += f" >= {field.minimum:g}"
    return text + (" or null" if field.nullable else "")


def _record_name(index: int, record: Mapping) -> str:
    ident = ", ".join(f"{k}={record[k]!r}" for k in ("agent", "world", "budget", "mode", "trial")
                      if isinstance(record, Mapping) and k in record)
    return f"records[{index}]" + (f" ({ident})" if ident else "")


def validate_record(record: Mapping, index: int = 0) -> dict:
    """Check one record and return its normalised copy (every declared field present).

    Parameters
    ----------
    record
        One episode record.
    index
        Its position, for the error message.

    Returns
    -------
    dict
        The record with every field of its kind present (absent optional fields as ``None``),
        integers as ``int`` and numbers as ``float``; undeclared keys are kept unchanged.

    Raises
    ------
    RecordError
        A missing required key, a value of the wrong type, NaN or infinity, a value out of
        range, or a total that does not equal its parts; the message names the record, the
        field, the value and what would be valid.
    """
    where = _record_name(index, record)
    if not isinstance(record, Mapping):
        raise RecordError(f"{where}: a {type(record).__name__}, not a record; valid: a dict per episode")
    kind = record.get("kind")
    if kind not in KINDS:
        raise RecordError(f"{where}: kind={kind!r}: invalid; valid: {' or '.join(map(repr, KINDS))}")
    out = dict(record)
    for field in FIELDS:
        if kind not in field.kinds:
            continue
        if field.name not in record:
            if kind in field.required:
                raise RecordError(f"{where}: missing key {field.name!r} ({field.doc}); valid: {_valid(field)}")
            out[field.name] = None
            continue
        out[field.name] = _check_field(where, field, record[field.name])
    if kind == "screening":
        if record.get("budget") is not None:
            raise RecordError(f"{where}: budget={record['budget']!r}: invalid for a screening record; valid: absent "
                              "or null (the label budget is part of the world: label_budget)")
        out["budget"] = None
        if abs(out["total"] - out["score"]) > CONSISTENCY_TOLERANCE:
            raise RecordError(f"{where}: total={out['total']!r} differs from score={out['score']!r}; a screening "
                              "record's total is its best-of-three score")
    else:
        parts = sum(out[c] for c in COMPONENTS) + out["safety_penalty"]
        if abs(parts - out["total_unclipped"]) > CONSISTENCY_TOLERANCE:
            raise RecordError(f"{where}: total_unclipped={out['total_unclipped']!r} but the five components plus "
                              f"safety_penalty sum to {parts!r}; a record must decompose")
        clipped = min(max(out["total_unclipped"], 0.0), 100.0)
        if abs(clipped - out["total"]) > CONSISTENCY_TOLERANCE:
            raise RecordError(f"{where}: total={out['total']!r} but total_unclipped={out['total_unclipped']!r} "
                              f"clipped to 0-100 is {clipped!r}")
    return out


def validate_records(records: Iterable[Mapping]) -> list[dict]:
    """Check a set of records (:func:`validate_record` each, then across records).

    Across records: one record per (kind, agent, world, budget or mode, trial), so that no
    episode counts twice, and one archetype per world (a world is one build).

    Parameters
    ----------
    records
        Episode records (dicts), e.g. the lines of ``episodes.jsonl``.

    Returns
    -------
    list of dict
        The normalised records, in the given order.

    Raises
    ------
    RecordError
        As :func:`validate_record`; also for an empty set, a repeated episode or a world
        with two archetypes.
    """
    if isinstance(records, (str, bytes, Mapping)):
        raise RecordError(f"records: a {type(records).__name__}; valid: a sequence of record dicts "
                          "(load_records reads episodes.jsonl)")
    checked = [validate_record(r, i) for i, r in enumerate(records)]
    if not checked:
        raise RecordError("records: empty; valid: at least one episode record")
    seen: dict = {}
    archetypes: dict = {}
    for i, r in enumerate(checked):
        key = (r["kind"], r["agent"], r["world"], r["budget"] if r["kind"] == "biobank" else r["mode"], r["trial"])
        if key in seen:
            raise RecordError(f"{_record_name(i, r)}: the same episode as records[{seen[key]}] (kind, agent, world, "
                              "budget or mode, trial); valid: one record per episode (give repeats distinct trials)")
        seen[key] = i
        arch = r.get("archetype")
        if arch is not None:
            first = archetypes.setdefault(r["world"], (arch, i))
            if first[0] != arch:
                raise RecordError(f"{_record_name(i, r)}: archetype={arch!r} but records[{first[1]}] gives world "
                                  f"{r['world']!r} archetype {first[0]!r}; valid: one archetype per world")
    return checked


def load_records(path: PathLike) -> list[dict]:
    """Read records from a JSON-Lines file (one record per line; blank lines skipped).

    Raises
    ------
    RecordError
        A line that is not a JSON object, naming the file and line.
    """
    records = []
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                raise RecordError(f"{path}:{lineno}: not JSON ({error})") from None
            if not isinstance(record, dict):
                raise RecordError(f"{path}:{lineno}: a JSON {type(record).__name__}, not a record object")
            records.append(record)
    return records


# ----------------------------------------------------------------------------- from score.json


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def _read_json_file(path: PathLike, what: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RecordError(f"{what}={path}: unreadable ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{what}={path}: a JSON {type(data).__name__}, not an object")
    return data


def _resolve(option: Any, recorded: Any, what: str) -> Optional[Path]:
    """The file an "auto" option means (the path recorded in score.json, when it exists)."""
    if option is None:
        return None
    if isinstance(option, str) and option == "auto":
        if isinstance(recorded, str) and Path(recorded).is_file():
            return Path(recorded)
        return None
    path = Path(option)
    if not path.is_file():
        raise RecordError(f"{what}={option}: no such file")
    return path


def _ledger_counts(path: Path) -> dict:
    from ..oracle import LedgerError, read_ledger

    try:
        rows = read_ledger(path)
    except (OSError, LedgerError) as error:
        raise RecordError(f"ledger={path}: unreadable ({type(error).__name__}: {error})") from None
    delivered = [r for r in rows if r.get("status") == "delivered"]
    refused = [r for r in rows if r.get("status") == "refused"]
    return {
        "experiments_requested": len(delivered) + len(refused),
        "experiments_delivered": len(delivered),
        "experiments_delivered_knockdown": sum(1 for r in delivered if r.get("kind") == "knockdown"),
        "experiments_delivered_cell_perturbation": sum(1 for r in delivered if r.get("kind") == "cell_perturbation"),
        "experiments_refused": len(refused),
        "spend": float(sum(float(r.get("cost") or 0.0) for r in delivered)),
    }


def _transcript_counts(transcript: Mapping, kind: str) -> dict:
    turns = transcript.get("turns")
    if not isinstance(turns, list):
        raise RecordError("transcript: no list of turns; valid: the episode's transcript.json")
    counts = {"no_code_turns": 0, "turn_timeouts": 0, "failed_runs": 0, "truncated_replies": 0}
    if kind == "biobank":
        counts["parse_failures"] = 0
    usage: dict = {}
    for turn in turns:
        if not isinstance(turn, Mapping):
            continue
        source = turn.get("code_source")
        counts["no_code_turns"] += source == "none"
        counts["truncated_replies"] += source == "open_fence"
        counts["turn_timeouts"] += turn.get("status") == "timeout"
        counts["failed_runs"] += turn.get("status") == "failed"
        status = turn.get("submission")
        if kind == "biobank" and isinstance(status, str) and not status.startswith(("parsed", "absent")):
            counts["parse_failures"] += 1
        if isinstance(turn.get("usage"), Mapping):
            for key in USAGE_FIELDS:
                value = turn["usage"].get(key)
                if _is_number(value) and math.isfinite(value):
                    usage[key] = usage.get(key, 0) + value
    counts["_usage"] = usage or None
    return counts


def _usage(score: Mapping, from_transcript: Optional[dict]) -> dict:
    usage = score.get("usage") if isinstance(score.get("usage"), Mapping) else from_transcript
    out = {}
    for key in USAGE_FIELDS:
        value = usage.get(key) if usage else None
        out[key] = value if _is_number(value) else None
    if usage and out["total_tokens"] is None and out["prompt_tokens"] is not None \
            and out["completion_tokens"] is not None:
        out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    return out


def scored_work_dir(score_json: Mapping) -> Optional[Path]:
    """The folder a biobank episode's score was computed from, read from its score.json.

    ``episode.scored_from`` is ``"work"`` (``<episode_dir>/work``) or starts with ``"scored/"``
    (``<episode_dir>/scored``: the harness scored a copy because WORK's submission.json was not
    the one its exit rule picks); ``None`` for a runner crash (nothing was scored).
    """
    episode = score_json.get("episode") if isinstance(score_json, Mapping) else None
    if not isinstance(episode, Mapping) or not isinstance(episode.get("episode_dir"), str):
        return None
    source = episode.get("scored_from")
    if source == "work":
        return Path(episode["episode_dir"]) / "work"
    if isinstance(source, str) and source.startswith("scored/"):
        return Path(episode["episode_dir"]) / "scored"
    return None


def record_from_score(
    score_json: Union[Mapping, PathLike],
    *,
    world: str,
    kind: str,
    archetype: Optional[str],
    agent: str,
    budget: Optional[float],
    trial: int,
    fixed_labels_total: Optional[float] = None,
    sealed_dir: Optional[PathLike] = None,
    mode: Optional[str] = None,
    transcript: Union[Mapping, PathLike, None] = "auto",
    ledger: Optional[PathLike] = "auto",
    agent_config_digest: Optional[str] = None,
    manifest_digest: Optional[str] = None,
    harness_version: Optional[str] = None,
) -> dict:
    """Build the record of one episode from its ``score.json``.

    Parameters
    ----------
    score_json
        The episode's score dictionary (what ``Episode.run`` returns and writes to
        ``<episode>/score.json``), or the path of that file.  A bare scorer output
        (``python -m pipeline.score``, no ``episode`` summary) is accepted: the process
        fields are then null.
    world, kind, archetype, agent, budget, trial
        The episode's cell, as the runner knows it.  ``world`` must match the world id the
        score names (when it names one); ``kind`` must match the score's kind; ``budget`` is
        required for a biobank episode (and must match ``episode.budget``) and must be None
        for a screening one.
    fixed_labels_total
        Table S11 C for this episode, if the caller computed it.  When None and ``sealed_dir``
        is given it is computed here with :func:`fixed_labels_total` on the folder the score
        came from (:func:`scored_work_dir`), the episode's ledger and its ``paper_compat``; a
        runner crash gets 0
        (S2.4: zero on every component).  Otherwise it stays null.
    sealed_dir
        The world's sealed bundle, only needed to compute ``fixed_labels_total``.
    mode
        Screening mode; default ``episode.mode`` of the score.
    transcript
        The transcript (dict or path), ``"auto"`` (default: the path in ``episode.transcript``,
        else ``<episode.episode_dir>/transcript.json``, when that file exists) or None.  Gives the no-code turns, timeouts, failed runs,
        truncated replies, parse failures and, when the score has no ``usage``, the usage
        summed over turns.  Without a transcript those fields are null.
    ledger
        The episode's ledger path, ``"auto"`` (default: ``episode.ledger`` when it exists) or
        None.  Gives the experiments requested, delivered (by kind) and refused; without it
        they are null (``spend`` still comes from ``episode.spent``).
    agent_config_digest, manifest_digest, harness_version
        Provenance set by the runner (kept as given).

    Returns
    -------
    dict
        A record valid under :func:`validate_record` (see :data:`FIELDS`).

    Raises
    ------
    RecordError
        Unreadable inputs, a cell argument of the wrong type, or a score that contradicts
        the arguments (another world, kind or budget).
    """
    if not isinstance(score_json, Mapping):
        score_json = _read_json_file(score_json, "score_json")
    score = score_json
    if kind not in KINDS:
        raise RecordError(f"kind={kind!r}: invalid; valid: {' or '.join(map(repr, KINDS))}")
    score_kind = "screening" if score.get("kind") == "screening" or score.get("format") == "screening-score/1" \
        else "biobank"
    if score_kind != kind:
        raise RecordError(f"kind={kind!r} but the score is a {score_kind} score")
    for name, value in (("world", world), ("agent", agent)):
        if not isinstance(value, str) or not value:
            raise RecordError(f"{name}={value!r}: invalid; valid: a non-empty string")
    if archetype is not None and not isinstance(archetype, str):
        raise RecordError(f"archetype={archetype!r}: invalid; valid: a string or None")
    if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
        raise RecordError(f"trial={trial!r}: invalid; valid: an integer >= 0")
    episode = score.get("episode") if isinstance(score.get("episode"), Mapping) else {}
    details = score.get("details") if isinstance(score.get("details"), Mapping) else {}
    named = score.get("world_id") if kind == "screening" else details.get("world_id")
    named = named or episode.get("world_id")
    if isinstance(named, str) and named and named != world:
        raise RecordError(f"world={world!r} but the score is of world {named!r}")

    record: dict = {"record_format": RECORD_FORMAT, "world": world, "kind": kind, "archetype": archetype,
                    "agent": agent, "agent_config_digest": agent_config_digest, "manifest_digest": manifest_digest,
                    "harness_version": harness_version, "trial": trial}
    if kind == "biobank":
        if isinstance(budget, bool) or not _is_number(budget) or not math.isfinite(budget) or budget < 0:
            raise RecordError(f"budget={budget!r}: invalid for a biobank episode; valid: dollars >= 0 "
                              "(0, 450000, 2000000)")
        if _is_number(episode.get("budget")) and float(episode["budget"]) != float(budget):
            raise RecordError(f"budget={budget!r} but the episode was played at budget {episode['budget']!r}")
        record["budget"] = float(budget)
    else:
        if budget is not None:
            raise RecordError(f"budget={budget!r}: invalid for a screening episode; valid: None")
        record["mode"] = mode if mode is not None else episode.get("mode")

    record.update(episode_id=episode.get("episode_id"), episode_dir=episode.get("episode_dir"),
                  exit_reason=_exit_reason(episode.get("exit_reason")),
                  exit_detail=_cut(episode.get("exit_detail")),
                  turns_used=episode.get("turns_used"), max_turns=episode.get("max_turns"),
                  isolated=score.get("isolated") if isinstance(score.get("isolated"), bool) else None,
                  isolation=score.get("isolation") if isinstance(score.get("isolation"), str) else None,
                  wall_s=episode.get("wall_s"))

    transcript_path = None
    if isinstance(transcript, Mapping):
        counts = _transcript_counts(transcript, kind)
    else:
        recorded = episode.get("transcript")
        if recorded is None and isinstance(episode.get("episode_dir"), str):
            recorded = str(Path(episode["episode_dir"]) / "transcript.json")  # the screening summary names no file
        transcript_path = _resolve(transcript, recorded, "transcript")
        counts = _transcript_counts(_read_json_file(transcript_path, "transcript"), kind) if transcript_path else None
    for key in ("no_code_turns", "turn_timeouts", "failed_runs", "truncated_replies") + (
            ("parse_failures",) if kind == "biobank" else ()):
        record[key] = counts[key] if counts else None
    record.update(_usage(score, counts["_usage"] if counts else None))

    if kind == "screening":
        subs = score.get("submissions") if isinstance(score.get("submissions"), list) else []
        refused = score.get("refused") if isinstance(score.get("refused"), list) else []
        labels = episode.get("labels_used", details.get("labels_used"))
        record.update(score=score.get("score"), total=score.get("total", score.get("score")),
                      submissions=len(subs), submissions_refused=len(refused),
                      best_submission=score.get("best_submission"), labels_used=labels if labels is not None else 0,
                      label_budget=episode.get("budget"), top_k=score.get("top_k"))
        return validate_record(record)

    for key in (*COMPONENTS, "safety_penalty", "total", "total_unclipped"):
        if key not in score:
            raise RecordError(f"score_json: missing {key!r}; valid: a biobank episode's score.json "
                              "(pipeline/schemas/score.schema.json)")
        record[key] = score[key]
    target = details.get("target_identification") or {}
    nominations = details.get("nominations") or {}
    processed = nominations.get("processed")
    phenotype = details.get("phenotype_construction") or {}
    record.update(
        target_precision=target.get("precision"), target_recall=target.get("recall"),
        nominations=nominations.get("unique_valid"),
        nominations_processed=len(processed) if isinstance(processed, list) else None,
        nominations_past_cap=nominations.get("past_cap_count"),
        rejections=_get(details, "rejections", "count"), abstentions=_get(details, "abstentions", "retained"),
        submission_status=_get(details, "submission", "status"),
        phenotype_status=phenotype.get("status"), phenotype_r=phenotype.get("r"),
        paper_compat=episode.get("paper_compat") if isinstance(episode.get("paper_compat"), bool) else None,
    )
    ledger_path = _resolve(ledger, episode.get("ledger"), "ledger")
    experiments = _ledger_counts(ledger_path) if ledger_path else dict.fromkeys(
        ("experiments_requested", "experiments_delivered", "experiments_delivered_knockdown",
         "experiments_delivered_cell_perturbation", "experiments_refused", "spend"))
    if _is_number(episode.get("spent")):
        experiments["spend"] = float(episode["spent"])
    record.update(experiments)

    if fixed_labels_total is None and sealed_dir is not None:
        if record["exit_reason"] == "runner_crash":
            fixed_labels_total = 0.0
        else:
            work = scored_work_dir(score)
            if work is None or not work.is_dir():
                raise RecordError(f"score_json: no scored work folder recorded ({episode.get('scored_from')!r} under "
                                  f"{episode.get('episode_dir')!r}); pass fixed_labels_total or a score.json with "
                                  "its episode summary")
            fixed_labels_total = float(fixed_labels_score(sealed_dir, work, ledger_path,
                                                          paper_compat=bool(record["paper_compat"]))["total"])
    record["fixed_labels_total"] = fixed_labels_total
    return validate_record(record)


def _exit_reason(value: Any) -> Optional[str]:
    # The screening harness writes "policy_error: reset: <error>"; the reason is the first word.
    if not isinstance(value, str):
        return None
    return value.split(":", 1)[0].strip() or None


def _cut(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    return value if len(value) <= EXIT_DETAIL_MAX_CHARS else value[:EXIT_DETAIL_MAX_CHARS] + " [cut]"


# ----------------------------------------------------------------------------- S11 C


def fixed_label_submission(submission: Any) -> Any:
    """The submission with every direction "inhibit" and every outcome alignment "aligned".

    Every protein named in ``nominated`` (as a string or as ``{"protein": ...}``) or already
    keyed in ``directions`` / ``outcome_alignment`` gets the fixed labels; everything else
    (nominations and their ranks, rejections, abstentions, confidence) is kept, so the scorer's
    intake (which drops invalid identifiers) sees the same claims.  Table S11 C holds target
    selection, experiments, abstentions, rejections and phenotype fixed.  Anything that is not
    a JSON object is returned unchanged (it scores as an empty submission either way).
    """
    if not isinstance(submission, Mapping):
        return submission
    proteins: list = []
    nominated = submission.get("nominated")
    for entry in nominated if isinstance(nominated, list) else []:
        protein = entry.get("protein") if isinstance(entry, Mapping) else entry
        if isinstance(protein, str):
            proteins.append(protein)
    for key in ("directions", "outcome_alignment"):
        if isinstance(submission.get(key), Mapping):
            proteins.extend(p for p in submission[key] if isinstance(p, str))
    unique = list(dict.fromkeys(proteins))
    fixed = dict(submission)
    fixed["directions"] = {p: "inhibit" for p in unique}
    fixed["outcome_alignment"] = {p: "aligned" for p in unique}
    return fixed


def fixed_labels_score(sealed_dir: PathLike, work_dir: PathLike, ledger_path: Optional[PathLike], *,
                       paper_compat: bool = False) -> dict:
    """The full score of :func:`fixed_labels_total` (the scorer's dictionary).

    WORK is never written: the submission (relabelled by :func:`fixed_label_submission`) and
    the phenotype are copied into a temporary folder, which ``pipeline.score.score_episode``
    scores with the same sealed bundle, ledger and ``paper_compat``.  The submission is read
    with the scorer's own reader (an absent, oversized or unparseable one stays absent), and
    the phenotype is copied only when the scorer would read it (a file inside WORK), so
    everything but the labels scores as it did.
    """
    from ..score import score_episode
    from ..score.work import PHENOTYPE, SUBMISSION, inside, load_submission

    work = Path(work_dir)
    if not work.is_dir():
        raise RecordError(f"work_dir={work_dir}: not a folder; valid: the episode's scored WORK folder")
    if ledger_path is not None and not Path(ledger_path).is_file():
        raise RecordError(f"ledger_path={ledger_path}: no such file; valid: the episode's ledger.jsonl or None")
    submission = load_submission(work, {})
    with tempfile.TemporaryDirectory(prefix="dtw-fixed-labels-") as tmp:
        copy = Path(tmp)
        if submission is not None:
            (copy / SUBMISSION).write_text(json.dumps(fixed_label_submission(submission)), encoding="utf-8")
        phenotype = work / PHENOTYPE
        if phenotype.exists() and inside(phenotype, work) and phenotype.is_file():
            shutil.copyfile(phenotype, copy / PHENOTYPE)
        return score_episode(sealed_dir, copy, ledger_path, paper_compat=paper_compat)


def fixed_labels_total(sealed_dir: PathLike, work_dir: PathLike, ledger_path: Optional[PathLike], *,
                       paper_compat: bool = False) -> float:
    """Table S11 C of one episode: its WORK re-scored with fixed direction and alignment labels.

    Parameters
    ----------
    sealed_dir
        The world's sealed bundle.
    work_dir
        The folder the episode was scored from (``<episode>/work``, or ``<episode>/scored``
        when the harness scored a copy: :func:`scored_work_dir`).  Never modified.
    ledger_path
        The episode's ledger (which experiments were delivered), or None (then, as for the
        scorer, no experiment earns credit).
    paper_compat
        The episode's ``paper_compat`` (the phenotype rule the scorer applied).

    Returns
    -------
    float
        The total (0-100) by ``pipeline.score.score_episode`` with every direction "inhibit"
        and every outcome alignment "aligned" (:func:`fixed_label_submission`).
    """
    return float(fixed_labels_score(sealed_dir, work_dir, ledger_path, paper_compat=paper_compat)["total"])


__all__ = ["RECORD_FORMAT", "FIELDS", "Field", "RecordError", "record_schema", "write_schema", "validate_record",
           "validate_records", "load_records", "record_from_score", "scored_work_dir", "fixed_label_submission",
           "fixed_labels_score", "fixed_labels_total"]
