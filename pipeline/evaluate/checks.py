"""Checking episode records (``pipeline.evaluate.records``): one record against the fields
of its kind (:data:`pipeline.evaluate.fields.FIELDS`) and the sums it must satisfy, a set
of records against each other (one record per episode, one archetype per world), and the
records of a JSON-Lines file read; every error names the record, the field, the bad value
and what would be valid.

One job: a record the tables can use, or a RecordError saying why not.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Mapping

import numpy as np

from ..formats import check_format
from .fields import COMPONENTS, CONSISTENCY_TOLERANCE, FIELDS, KINDS, RECORD_FORMAT, Field, PathLike, RecordError


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
        A line that is not a JSON object, or a record of another ``record_format`` than
        :data:`RECORD_FORMAT` (the one this version writes), naming the file and line.
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
            if "record_format" in record:  # a record without one is refused by validate_record (required)
                check_format(record["record_format"], RECORD_FORMAT, f"{path}:{lineno}", what="record_format",
                             error=RecordError)
            records.append(record)
    return records
