"""Episode records: one flat dictionary per episode, the only input of the evaluation tables.

A record is what ``<out>/episodes.jsonl`` holds, one line per episode.  Every field is
declared once in :data:`FIELDS` (name, JSON type, kinds, whether required, meaning); the JSON
Schema ``schemas/evaluation-record.schema.json`` is generated from it
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

This module is the records' one address; the jobs live beside it: the declaration and the
schema in ``pipeline.evaluate.fields``, the checks in ``pipeline.evaluate.checks``, the record
from score.json in ``pipeline.evaluate.from_score`` and the S11 C re-score in
``pipeline.evaluate.fixed_labels``.
"""
from __future__ import annotations

from .checks import load_records, validate_record, validate_records
from .fields import (COMPONENT_MAX, COMPONENTS, CONSISTENCY_TOLERANCE, EXIT_DETAIL_MAX_CHARS, FIELD_BY_NAME, FIELDS,
                     KINDS, RECORD_FORMAT, SAFETY_PENALTY_POINTS, SCHEMA_PATH, USAGE_FIELDS, Field, PathLike,
                     RecordError, record_schema, write_schema)
from .fixed_labels import fixed_label_submission, fixed_labels_score, fixed_labels_total
from .from_score import record_from_score, scored_work_dir

__all__ = ["RECORD_FORMAT", "FIELDS", "Field", "RecordError", "record_schema", "write_schema", "validate_record",
           "validate_records", "load_records", "record_from_score", "scored_work_dir", "fixed_label_submission",
           "fixed_labels_score", "fixed_labels_total",
           # the declaration's constants, importable from here as before the split
           "COMPONENT_MAX", "COMPONENTS", "CONSISTENCY_TOLERANCE", "EXIT_DETAIL_MAX_CHARS", "FIELD_BY_NAME", "KINDS",
           "PathLike", "SAFETY_PENALTY_POINTS", "SCHEMA_PATH", "USAGE_FIELDS"]
