"""The evaluation's scheduling (``pipeline.evaluate.runner``): the jobs ordered longest
expected first, each given its episode folder, played on the cluster with at most as many
in flight as the workers have threads and at most ``max_concurrent`` of one agent, each
record appended to episodes.jsonl as it arrives, and the progress lines.

One job: the episodes in flight, from the first submitted to the last record.
"""
from __future__ import annotations

import contextlib
import math
import secrets
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .store import EPISODE_DIRS, EVALUATE_FORMAT, EvaluationError
from .task import Job, _one_line, _safe, crash_record, play_episode
from .worlds import WorldChanged

#: Seconds between progress lines when no episode finishes.
HEARTBEAT_S = 60.0
#: Seconds of the reference agents' episodes at small scale (the order matters: longest first keeps
#: the workers busy to the end); agents not listed (model-backed, external) are assumed longest.
EXPECTED_S = {"null": 1.9, "correlation": 2.8, "truth": 3.1, "cis_mr": 7.8, "mr_knockdown": 9.0, "analyst": 24.0,
              "tells": 36.0, "random": 2.0, "labels_only": 2.5, "pose_al": 40.0, "invariant_al": 50.0}
UNKNOWN_S = 1000.0


def _slots(executor) -> int:
    if getattr(executor, "kind", None) != "dask":
        return 1
    workers = executor.client.scheduler_info().get("workers", {})
    return max(1, sum(int(w.get("nthreads", 1) or 1) for w in workers.values()))


def ignore_interrupts() -> None:
    """Run on the workers of the command's own local cluster: Ctrl-C reaches the whole process
    group, and the runner, not each worker, answers it (cancels, closes the cluster, exit 130)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _fmt_s(seconds: Optional[float]) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


@dataclass
class Progress:
    total: int
    log: Any
    enabled: bool = True
    done: int = 0
    failed: int = 0
    running: int = 0
    started: float = field(default_factory=time.monotonic)
    last: float = field(default_factory=time.monotonic)

    def line(self, note: str = "") -> None:
        self.last = time.monotonic()
        if not self.enabled:
            return
        elapsed = self.last - self.started
        eta = None
        if self.done:
            eta = elapsed / self.done * (self.total - self.done)
        self.log(f"evaluate: {self.done}/{self.total} episodes done, {self.running} running, {self.failed} failed; "
                 f"elapsed {_fmt_s(elapsed)}, ETA {_fmt_s(eta) if self.done < self.total else '0s'}"
                 + (f"  [{note}]" if note else ""))


def schedule(jobs: list, plan, executor, ledger_path: Path, progress: Progress) -> list:
    """Play ``jobs`` on the executor; append each record to the ledger as it arrives.  Returns
    the records of this run.  Raises EvaluationError (a world changed under a worker) after
    cancelling what is in flight; KeyboardInterrupt cancels too and propagates."""
    from ..ledger import JsonlLedger

    limits = {e.label: e.max_concurrent for e in plan.agents}
    ledger = JsonlLedger(ledger_path)
    pending = list(jobs)
    inflight: dict = {}  # future -> Job
    per_agent: Counter = Counter()
    records: list = []
    notes: list = []

    def handle(job: Job, record: dict) -> None:
        ledger.append(record)  # durable before anything else happens
        records.append(record)
        progress.done += 1
        progress.failed += record.get("status") == "failed"
        note = f"{job.describe()}: {record.get('total', 0):.1f}"
        if record.get("status") == "failed":
            note += f" FAILED ({record.get('failure')})"
        notes.append(note)

    def report_notes() -> None:
        progress.running = len(inflight)
        for note in notes:
            progress.line(note)
        notes.clear()

    if getattr(executor, "kind", None) != "dask":
        for job in pending:
            progress.running = 1
            record = _run_sync(executor, job)
            handle(job, record)
            progress.running = 0
            report_notes()
        return records

    from distributed import wait

    def refill() -> None:
        slots = _slots(executor)
        i = 0
        while i < len(pending) and len(inflight) < slots:
            job = pending[i]
            limit = limits.get(job.agent)
            if limit is not None and per_agent[job.agent] >= limit:
                i += 1
                continue
            pending.pop(i)
            future = executor.submit(play_episode, job.as_dict(), key="episode")
            inflight[future] = job
            per_agent[job.agent] += 1

    try:
        refill()
        while inflight:
            try:
                done, _ = wait(list(inflight), timeout=HEARTBEAT_S, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            if not done:
                progress.line("still playing")
                continue
            finished, changed = [], None
            for future in done:
                job = inflight.pop(future)
                per_agent[job.agent] -= 1
                try:
                    record = future.result()
                except WorldChanged as error:
                    changed = changed or error
                    continue
                except Exception as error:  # the task itself failed (a worker died, ...): recorded as failed
                    record = _failed_task(job, error)
                future.release()
                finished.append((job, record))
            try:
                if changed is None:
                    refill()  # the freed slots first (the records are in hand), then the ledger
            finally:
                for job, record in finished:
                    handle(job, record)
                report_notes()
            if changed is not None:
                raise EvaluationError(str(changed))
    except BaseException:
        with contextlib.suppress(Exception):
            executor.client.cancel(list(inflight))
        raise
    return records


def _run_sync(executor, job: Job) -> dict:
    try:
        return executor.submit(play_episode, job.as_dict(), key="episode").result()
    except WorldChanged as error:
        raise EvaluationError(str(error)) from None
    except Exception as error:
        return _failed_task(job, error)


def _failed_task(job: Job, error: BaseException) -> dict:
    failure = _one_line(f"task: {type(error).__name__}: {error}")
    record = crash_record(job.as_dict(), failure)
    now = round(time.time(), 3)
    record.update(status="failed", failure=failure, agent_name=job.agent_name,
                  world_config_digest=job.world_config_digest, evaluate_format=EVALUATE_FORMAT, task_s=None,
                  play_s=None, record_s=None, started_at=None, finished_at=now, worker=None, cores=None)
    return record


def _order(jobs: list, history: list) -> list:
    """Longest expected episodes first: from earlier records of the same label when there are
    some, else the reference agents' relative durations."""
    seen: dict = defaultdict(list)
    for row in history:
        if isinstance(row.get("wall_s"), (int, float)):
            seen[row.get("agent")].append(float(row["wall_s"]))
    for job in jobs:
        past = seen.get(job.agent)
        base = (sum(past) / len(past)) if past else EXPECTED_S.get(job.agent_name, UNKNOWN_S)
        budget = float(job.condition) if job.kind == "biobank" else 0.0
        job.expected_s = base * (1.0 + budget / 1e7)
    return sorted(jobs, key=lambda j: -j.expected_s)


def _episode_dir(out: Path, job: Job) -> str:
    cond = str(int(job.condition)) if job.kind == "biobank" else job.condition
    name = f"{_safe(job.agent, 40)}-{_safe(cond, 20)}-t{job.trial}-{secrets.token_hex(4)}"
    return str(out / EPISODE_DIRS / name)
