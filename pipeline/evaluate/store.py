"""The evaluation's output folder (``pipeline.evaluate.runner`` documents it): its file
names and formats, the one error a run stops with, writing a file atomically and appending
rows durably, the lock that lets one runner at a time use a folder, reading evaluation.json,
keeping episodes.jsonl to the current records (``compact``), and the Parquet copy.

One job: the files of ``out=``, read and written safely.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections import Counter
from pathlib import Path
from typing import Optional

from .records import RecordError, validate_record

EVALUATE_FORMAT = "drugtargetworld-evaluate/1"
RUN_FORMAT = "drugtargetworld-evaluate-run/1"
EVALUATION = "evaluation.json"
EPISODES = "episodes.jsonl"
SUPERSEDED = "episodes.superseded.jsonl"
PARQUET = "episodes.parquet"
EPISODE_DIRS = "episodes"
RUNS = "runs.jsonl"
RUNNER_JSON = "runner.json"
LOCK = ".evaluate.lock"
#: Exit reasons that make an episode "failed" (replayed by the next run): not the agent's doing.


class EvaluationError(RuntimeError):
    """The run cannot go on (a world differs from its recorded build, a build failed); one line."""


def cell_key(record: dict) -> tuple:
    """(kind, agent label, world, budget or mode, trial): one episode of the grid."""
    condition = record.get("budget") if record.get("kind") == "biobank" else record.get("mode")
    if isinstance(condition, (int, float)) and not isinstance(condition, bool):
        condition = float(condition)
    return (record.get("kind"), record.get("agent"), record.get("world"), condition, record.get("trial"))


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.wip")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def append_rows(path: Path, rows: list) -> None:
    if not rows:
        return
    with open(path, "a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, allow_nan=False, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def compact(out: Path, plan=None, worlds: Optional[dict] = None) -> tuple[list, Counter]:
    """Keep in episodes.jsonl only the current records; move the others to episodes.superseded.jsonl.

    A row is superseded when it is not a valid record, was played by another harness version,
    by a label of the plan under another agent configuration, on a world of the plan under
    another build, or when a later row holds the same episode (cell).  Without ``plan`` only
    invalid and repeated rows are moved.  A torn final line (a crash mid-append) is dropped.
    Returns (the kept rows in file order, Counter of superseded reasons).
    """
    from ..ledger import JsonlLedger, LedgerError

    path = out / EPISODES
    try:
        ledger = JsonlLedger(path)  # drops a torn tail
    except LedgerError as error:
        raise EvaluationError(f"{path}: {error}; valid: the file pipeline.evaluate wrote (or move it away)") from None
    rows = ledger.rows
    reasons: list = [None] * len(rows)
    for i, row in enumerate(rows):
        try:
            validate_record(row, i)
        except RecordError as error:
            reasons[i] = f"invalid record: {error}"
            continue
        if plan is None:
            continue
        if row.get("harness_version") != plan.harness_version:
            reasons[i] = "another harness version"
        elif row["agent"] in plan.agent_digests and row.get("agent_config_digest") != plan.agent_digests[row["agent"]]:
            reasons[i] = "another agent configuration"
        elif worlds is not None and row["world"] in worlds and \
                row.get("manifest_digest") != worlds[row["world"]]["manifest_digest"]:
            reasons[i] = "another world build"
    last: dict = {}
    for i, row in enumerate(rows):
        if reasons[i] is None:
            key = cell_key(row)
            if key in last:
                reasons[last[key]] = "replaced by a later record of the episode"
            last[key] = i
    moved = [dict(row, superseded_reason=reasons[i]) for i, row in enumerate(rows) if reasons[i] is not None]
    kept = [row for i, row in enumerate(rows) if reasons[i] is None]
    if moved:
        append_rows(out / SUPERSEDED, moved)  # first: a crash in between leaves a copy in both, never in neither
        atomic_write(path, "".join(json.dumps(row, allow_nan=False, default=str) + "\n" for row in kept))
    return kept, Counter(r.split(":")[0] for r in reasons if r is not None)


@contextlib.contextmanager
def locked(out: Path):
    """One runner per output folder at a time."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    handle = open(out / LOCK, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise EvaluationError(f"out={out}: another pipeline.evaluate is running on this folder; valid: wait for it, "
                              "or evaluate into another out=") from None
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise EvaluationError(f"{path}: unreadable ({type(error).__name__}: {error}); valid: the file "
                              "pipeline.evaluate wrote (or move it away)") from None
    return data if isinstance(data, dict) else {}


def read_evaluation(out: Path) -> dict:
    """``<out>/evaluation.json`` (empty when absent), its ``format`` checked: one this version writes."""
    from ..formats import check_format

    path = out / EVALUATION
    doc = read_json(path)
    if doc:
        check_format(doc.get("format"), EVALUATE_FORMAT, path, error=EvaluationError)
    return doc


def write_parquet(records: list, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: list = []
    for r in records:
        columns.extend(k for k in r if k not in columns)
    rows = [{c: r.get(c) for c in columns} for r in records]
    table = pa.Table.from_pylist(rows) if rows else pa.table({})
    tmp = path.with_name(f".{path.name}.wip")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
