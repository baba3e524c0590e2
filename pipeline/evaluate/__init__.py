"""The evaluation's statistics and report (issue 27): episode records in, every table and the
report out.

    records  one record per episode: the schema (FIELDS, evaluation-record.schema.json),
             validation, record_from_score (from an episode's score.json) and the S11 C
             re-score with fixed labels (fixed_labels_total)
    stats    paired t, exact sign test, paired bootstrap, pooled SD, SEM, noise floor
    tables   report(records): S4, S5, S6, S9, S10, S11 A-C, trials, usage, screening
    render   <out>/report/: report.json, one CSV per table, leaderboard.md, report.html

``report`` needs numpy and scipy only; ``render.render(records, out)`` imports matplotlib
(Agg) when it draws.
"""
from __future__ import annotations

from .records import (RECORD_FORMAT, RecordError, fixed_labels_total, load_records, record_from_score,
                      validate_records)
from .tables import REPORT_FORMAT, report
from . import render  # the module: render.render(records, out) writes <out>/report/

__all__ = ["report", "render", "record_from_score", "fixed_labels_total", "validate_records", "load_records",
           "RecordError", "RECORD_FORMAT", "REPORT_FORMAT"]
