"""The declaration of an episode record (``pipeline.evaluate.records``): its format version,
the kinds, the score's components and their bounds, every field declared once in
:data:`FIELDS` (name, JSON type, kinds, whether required, meaning), and the JSON Schema
generated from it (``schemas/evaluation-record.schema.json``, :func:`record_schema`).

One job: what a record is; checking one is ``pipeline.evaluate.checks``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from ..paths import SCHEMA_DIR

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
SCHEMA_PATH = SCHEMA_DIR / "evaluation-record.schema.json"

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

    ``schemas/evaluation-record.schema.json`` is this dictionary written with
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
