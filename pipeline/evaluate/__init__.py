"""The evaluation's statistics and report (issue 27): episode records in, every table and the
report out.

    records  one record per episode: the schema (FIELDS, evaluation-record.schema.json),
             validation, record_from_score (from an episode's score.json) and the S11 C
             re-score with fixed labels (fixed_labels_total); the one address of fields
             (the declaration), checks, from_score and fixed_labels
    stats    paired t, exact sign test, paired bootstrap, pooled SD, SEM, noise floor
    tables   report(records): S4, S5, S6, S9, S10, S11 A-C, trials, usage, screening
    render   <out>/report/: report.json, one CSV per table, leaderboard.md, report.html
    settings the config of ``python -m pipeline.evaluate`` and its checked plan
    runner   the episodes on the Dask cluster, resumable: episodes.jsonl, the report; on
             store (the output folder's files), worlds, task (one episode) and schedule
    command  the Hydra app (``python -m pipeline.evaluate``, ``dtw-evaluate``)

``report`` needs numpy and scipy only; ``render.render(records, out)`` imports matplotlib
(Agg) when it draws.  ``evaluate(overrides, executor=None)`` (the runner, imported on first
use) runs an evaluation from the command's key=value overrides and returns its summary.
"""
from __future__ import annotations

from .records import (RECORD_FORMAT, RecordError, fixed_labels_total, load_records, record_from_score,
                      validate_records)
from .tables import REPORT_FORMAT, report
from . import render  # the module: render.render(records, out) writes <out>/report/


def __getattr__(name: str):
    # The runner and its config load on first use: the tables alone need neither.
    if name in ("evaluate", "runner", "settings", "command"):
        import importlib

        module = importlib.import_module(f"{__name__}.{'runner' if name == 'evaluate' else name}")
        return module.evaluate if name == "evaluate" else module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["evaluate", "report", "render", "record_from_score", "fixed_labels_total", "validate_records", "load_records",
           "RecordError", "RECORD_FORMAT", "REPORT_FORMAT"]
