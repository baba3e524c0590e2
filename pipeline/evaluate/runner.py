"""The evaluation runner: agents x worlds x budgets (or modes) x trials as episodes on one
Dask cluster, resumable, then the report (``python -m pipeline.evaluate``; issue 27).

    from pipeline.evaluate import settings, runner
    plan = settings.prepare(["panel=paper-v1", "scale=small", "agents=[null,cis_mr]", "out=./evaluation"])
    summary = runner.run(plan, executor)        # executor: pipeline.graph.executor.make_executor(...)

Output folder (``out=``)::

    evaluation.json            the worlds (kind, archetype, world-determining config digest, release and sealed
                               manifest SHA-256 and their digest), the agents (name, options, configuration
                               digest, max_concurrent), the harness version and the grid
    episodes.jsonl             one record per finished episode (pipeline.evaluate.records, plus the runner's
                               fields below), appended as each episode finishes and fsynced
    episodes.superseded.jsonl  records no longer current (another agent configuration, world build or harness
                               version; a failed episode replayed), moved here, never deleted
    episodes.parquet           the records of episodes.jsonl as one Parquet table
    episodes/<label>-<budget or mode>-t<trial>-<random>/   each episode's folder (work/, ledger, transcript,
                               score.json); named without the world, as the harness names its folders
    runs.jsonl                 one summary per run (timings, episodes played, the runner's overhead)
    report/                    pipeline.evaluate.render.render(records, out): report.json, one CSV per table,
                               leaderboard.md, report.html; and runner.json (this run's summary)

Each episode is one task on the cluster (``play_episode``, task key ``episode-<random>``: no
world id in any task name the dashboard shows).  At most as many tasks are in flight as the
workers have threads, and at most ``max_concurrent`` of one agent, so the dashboard's
running tasks are the episodes being played.  Longer episodes are started first.

Resumption: an episode is kept when its record is in episodes.jsonl and it finished on the
same world build (``manifest_digest``), the same agent configuration (``agent_config_digest``)
and the same harness version (``harness_version``: the transcript format and the package
version), and did not fail; every other cell of the grid is played.  A failed episode — the
task raised, the runner crashed, the endpoint failed (``transport_failure``) or the sandbox
never ran the agent's code — is recorded with ``status="failed"`` and its ``failure``, scored
as the harness scored it (a crash scores zero), counted in the tables (S10), and replayed by
the next run.  A world whose build differs from the one recorded in evaluation.json — rebuilt
here or seen by a worker — stops the run with a one-line error naming it.

The runner's fields of a record (beside pipeline.evaluate.records.FIELDS): ``status``
("ok" or "failed"), ``failure`` (why, or null), ``agent_name`` (what the label runs),
``world_config_digest``, ``task_s`` (the task's wall on the worker), ``play_s`` (the episode),
``record_s`` (the record and the S11 C re-score), ``started_at`` and ``finished_at`` (Unix
seconds on the worker), ``worker`` (host:pid), ``cores`` (the cores the episode was pinned to,
with ``cores_per_worker``), ``evaluate_format``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import socket
import sys
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .. import bundle
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
FAILED_EXITS = ("runner_crash", "transport_failure", "sandbox_failure")
FAILURE_MAX_CHARS = 2000
#: Seconds between progress lines when no episode finishes.
HEARTBEAT_S = 60.0
#: Seconds of the reference agents' episodes at small scale (the order matters: longest first keeps
#: the workers busy to the end); agents not listed (model-backed, external) are assumed longest.
EXPECTED_S = {"null": 1.9, "correlation": 2.8, "truth": 3.1, "cis_mr": 7.8, "mr_knockdown": 9.0, "analyst": 24.0,
              "tells": 36.0, "random": 2.0, "labels_only": 2.5, "pose_al": 40.0, "invariant_al": 50.0}
UNKNOWN_S = 1000.0


class EvaluationError(RuntimeError):
    """The run cannot go on (a world differs from its recorded build, a build failed); one line."""


class WorldChanged(Exception):
    """Raised in a task: the world a worker sees is not the build the evaluation recorded."""

    def __init__(self, world: str, found: str, expected: str, where: str):
        super().__init__(world, found, expected, where)
        self.world, self.found, self.expected, self.where = world, found, expected, where

    def __str__(self) -> str:
        return (f"world {self.world}: the build {self.where} sees has manifest digest {self.found[:12]}..., not the "
                f"{self.expected[:12]}... this evaluation recorded")


# ----------------------------------------------------------------------------- worlds


def manifest_digests(world_dir: os.PathLike | str) -> dict:
    """SHA-256 of the world's release and sealed MANIFEST.json and the world's digest over both."""
    world = Path(world_dir)
    out = {}
    for name in (bundle.RELEASE, bundle.SEALED):
        path = world / name / bundle.MANIFEST
        out[f"{name}_manifest_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    both = f"{out['release_manifest_sha256']}\n{out['sealed_manifest_sha256']}"
    out["manifest_digest"] = hashlib.sha256(both.encode()).hexdigest()
    return out


def verify_world(world_dir: os.PathLike | str) -> list:
    """Problems of a world's release and sealed bundles against their manifests (empty: intact)."""
    world = Path(world_dir)
    return bundle.verify(world / bundle.RELEASE, bundle.RELEASE) + bundle.verify(world / bundle.SEALED, bundle.SEALED)


def prepare_worlds(plan, executor, recorded: dict, log) -> tuple[dict, dict]:
    """Verify the worlds present, build (on the cluster) those absent or damaged, and check every
    world's build against the one ``recorded`` (evaluation.json's worlds).  Returns
    (world id -> its entry for evaluation.json, timings)."""
    from concurrent.futures import ThreadPoolExecutor

    from .settings import read_build_record

    t0 = time.monotonic()
    present = [w for w in plan.worlds if w.present]
    with ThreadPoolExecutor(max_workers=4) as pool:
        problems = dict(zip([w.id for w in present], pool.map(lambda w: verify_world(w.dir), present)))
    verify_s = time.monotonic() - t0
    to_build = [w for w in plan.worlds if not w.present]
    for w in present:
        if problems[w.id]:
            log(f"world {w.id}: {problems[w.id][0]} ({len(problems[w.id])} problem(s)); rebuilding it")
            to_build.append(w)
    build_s = 0.0
    if to_build:
        from ..panel import Plan as BuildPlan
        from ..panel import execute

        t1 = time.monotonic()
        log(f"building {len(to_build)} world(s): {', '.join(w.id for w in to_build)}")
        rows = execute(BuildPlan("evaluation", [w.resolved for w in to_build], plan.jobs), executor)
        for row in rows:
            if not row["complete"]:
                raise EvaluationError(f"world {row['world']}: the build did not complete ({row['error']})")
        for w in to_build:
            bad = verify_world(w.dir)
            if bad:
                raise EvaluationError(f"world {w.id}: the build does not verify against its manifest ({bad[0]})")
        build_s = time.monotonic() - t1
    entries = {}
    for w in plan.worlds:
        record = read_build_record(Path(w.dir)) or {}
        if record.get("config_sha256") != w.config_digest:
            raise EvaluationError(f"world {w.id}: {w.dir} holds a build of another configuration than this "
                                  "evaluation's; valid: worlds_out=<another folder>")
        digests = manifest_digests(w.dir)
        old = (recorded.get(w.id) or {}).get("manifest_digest")
        if old is not None and old != digests["manifest_digest"]:
            raise EvaluationError(
                f"world {w.id}: its build (manifest digest {digests['manifest_digest'][:12]}...) differs from the one "
                f"this evaluation recorded ({old[:12]}...) in {Path(plan.out) / EVALUATION}; valid: restore that build "
                "(the same generator version, configuration and seed) or evaluate into another out=")
        entries[w.id] = {"kind": w.kind, "archetype": w.archetype, "dir": w.dir, "scale": record.get("scale"),
                         "config_sha256": w.config_digest, "generator_version": record.get("generator_version"),
                         **digests}
    return entries, {"verify_s": verify_s, "build_s": build_s, "worlds_built": [w.id for w in to_build]}


# ----------------------------------------------------------------------------- cells and records


def cell_key(record: dict) -> tuple:
    """(kind, agent label, world, budget or mode, trial): one episode of the grid."""
    condition = record.get("budget") if record.get("kind") == "biobank" else record.get("mode")
    if isinstance(condition, (int, float)) and not isinstance(condition, bool):
        condition = float(condition)
    return (record.get("kind"), record.get("agent"), record.get("world"), condition, record.get("trial"))


@dataclass
class Job:
    """One episode to play (what the task receives, as a plain dict)."""

    world: str
    kind: str
    archetype: Optional[str]
    world_dir: str
    manifest_digest: str
    world_config_digest: str
    condition: Any  #: budget (float) or mode
    trial: int
    agent: str  #: the label
    agent_name: str
    options: dict
    agent_config_digest: str
    harness_version: str
    turns: Optional[int]
    timeout: Optional[float]
    isolation: Optional[str]
    paper_compat: bool
    episode_dir: str = ""
    expected_s: float = 0.0
    cores_per_worker: Optional[int] = None

    @property
    def key(self) -> tuple:
        return (self.kind, self.agent, self.world, self.condition, self.trial)

    def describe(self) -> str:
        cond = f"${self.condition:,.0f}" if self.kind == "biobank" else self.condition
        return f"{self.agent} on {self.world} at {cond}, trial {self.trial}"

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _safe(text: str, n: int) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", str(text))[:n] or "x"


def grid(plan, worlds: dict) -> list:
    """Every episode of the plan, in the plan's order (worlds, conditions, trials, agents)."""
    jobs = []
    for w in plan.worlds:
        for condition in plan.conditions(w):
            for trial in range(plan.trials):
                for entry in plan.agents:
                    jobs.append(Job(
                        world=w.id, kind=w.kind, archetype=w.archetype, world_dir=w.dir,
                        manifest_digest=worlds[w.id]["manifest_digest"], world_config_digest=w.config_digest,
                        condition=condition, trial=trial, agent=entry.label, agent_name=entry.name,
                        options=entry.options, agent_config_digest=plan.agent_digests[entry.label],
                        harness_version=plan.harness_version, turns=plan.turns, timeout=plan.timeout,
                        isolation=plan.isolation, paper_compat=plan.paper_compat,
                        cores_per_worker=plan.cores_per_worker))
    return jobs


def pin_cores(count: int, available=None) -> list:
    """Pin the calling thread (a worker's task thread; the episode's sandbox inherits it) to
    ``count`` cores of its own among ``available`` (default: all): worker i of a local cluster
    gets cores i*count ... (wrapping), so N workers x count cores do not oversubscribe the
    machine.  Returns the cores."""
    index = 0
    try:
        from distributed import get_worker

        name = get_worker().name
        index = int(name) if str(name).isdigit() else 0
    except (ImportError, ValueError):
        pass
    every = sorted(available) if available else list(range(os.cpu_count() or 1))
    cores = sorted({every[(index * count + k) % len(every)] for k in range(count)})
    os.sched_setaffinity(0, cores)
    return cores


def crash_record(job: dict, failure: str) -> dict:
    """The record of an episode that produced no score (the task failed): zero on every
    component, as the harness scores a runner crash (S2.4), exit reason ``runner_crash``."""
    from .records import COMPONENTS, RECORD_FORMAT

    record = {"record_format": RECORD_FORMAT, "world": job["world"], "kind": job["kind"],
              "archetype": job["archetype"], "agent": job["agent"], "agent_config_digest": job["agent_config_digest"],
              "manifest_digest": job["manifest_digest"], "harness_version": job["harness_version"],
              "trial": job["trial"], "total": 0.0, "exit_reason": "runner_crash", "exit_detail": failure,
              "episode_dir": job.get("episode_dir") or None}
    if job["kind"] == "biobank":
        record.update({c: 0.0 for c in COMPONENTS}, budget=float(job["condition"]), safety_penalty=0.0,
                      total_unclipped=0.0, fixed_labels_total=0.0)
    else:
        record.update(mode=job["condition"], score=0.0, submissions=0, labels_used=0)
    return validate_record(record)


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= FAILURE_MAX_CHARS else text[:FAILURE_MAX_CHARS] + " [cut]"


def _last_line(text: Any) -> str:
    lines = [line for line in str(text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no detail"


def play_episode(job: dict) -> dict:
    """The task: play one episode (``pipeline.harness.core.run_episode``) on a worker and return
    its record, the S11 C fixed-label re-score included (computed here, beside the world).

    Raises :class:`WorldChanged` when the world's manifests are not the recorded build; any
    other failure is returned as a record with ``status="failed"``."""
    started = time.time()
    m0 = time.monotonic()
    where = f"{socket.gethostname()}:{os.getpid()}"
    before = os.sched_getaffinity(0) if job.get("cores_per_worker") else None
    cores = pin_cores(int(job["cores_per_worker"]), before) if before is not None else None
    try:
        return _play(job, started, m0, where, cores)
    finally:
        if before is not None:  # the worker's thread as it was, for whatever task comes next
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, before)


def _play(job: dict, started: float, m0: float, where: str, cores: Optional[list]) -> dict:
    world_dir = Path(job["world_dir"])
    found = manifest_digests(world_dir)["manifest_digest"]
    if found != job["manifest_digest"]:
        raise WorldChanged(job["world"], found, job["manifest_digest"], f"worker {where}")
    from ..agents import registry
    from ..harness.core import run_episode
    from .records import record_from_score

    failure, score, record, made = None, None, None, None
    play_s = 0.0
    biobank = job["kind"] == "biobank"
    try:
        made = registry.create(job["kind"], job["agent_name"], job["options"], sealed_dir=world_dir / bundle.SEALED)
        # Only the project's own agents may run with auto or off (settings.prepare refuses the rest).
        isolation = (job["isolation"] or "auto") if made.reference else "require"
        options: dict = {"agent_name": job["agent"], "out": job["episode_dir"], "overwrite": True,
                         "isolation": isolation, "max_turns": job["turns"], "timeout": job["timeout"]}
        if biobank:
            budget = float(job["condition"])
            options.update(budget=int(budget) if budget.is_integer() else budget, paper_compat=job["paper_compat"])
        else:
            options["mode"] = job["condition"]
        m1 = time.monotonic()
        try:
            score = run_episode(world_dir, made.agent, **options)
        finally:
            play_s = time.monotonic() - m1
    except Exception as error:  # the episode never produced a score: recorded as failed
        failure = _one_line(f"{type(error).__name__}: {error}")
        close = getattr(getattr(made, "agent", None), "close", None)  # a sandboxed policy's process
        if callable(close):
            with contextlib.suppress(Exception):
                close()
    m2 = time.monotonic()
    if score is not None:
        try:
            record = record_from_score(
                score, world=job["world"], kind=job["kind"], archetype=job["archetype"], agent=job["agent"],
                budget=float(job["condition"]) if biobank else None, trial=job["trial"],
                mode=None if biobank else job["condition"], sealed_dir=world_dir / bundle.SEALED if biobank else None,
                agent_config_digest=job["agent_config_digest"], manifest_digest=job["manifest_digest"],
                harness_version=job["harness_version"])
        except Exception as error:  # RecordError, or the re-score failing: recorded as failed
            failure = _one_line(f"record: {type(error).__name__}: {error}")
            record = None
    if record is None:
        record = crash_record(job, failure or "no score")
    if failure is None and record.get("exit_reason") in FAILED_EXITS:
        failure = _one_line(f"{record['exit_reason']}: {_last_line(record.get('exit_detail'))}")
    record.update(
        status="failed" if failure else "ok", failure=failure, agent_name=job["agent_name"],
        world_config_digest=job["world_config_digest"], evaluate_format=EVALUATE_FORMAT,
        task_s=round(time.monotonic() - m0, 3), play_s=round(play_s, 3), record_s=round(time.monotonic() - m2, 3),
        started_at=round(started, 3), finished_at=round(time.time(), 3), worker=where, cores=cores)
    return record


# ----------------------------------------------------------------------------- the ledger


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.wip")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _append_rows(path: Path, rows: list) -> None:
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
        _append_rows(out / SUPERSEDED, moved)  # first: a crash in between leaves a copy in both, never in neither
        _atomic_write(path, "".join(json.dumps(row, allow_nan=False, default=str) + "\n" for row in kept))
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


# ----------------------------------------------------------------------------- scheduling


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


# ----------------------------------------------------------------------------- the run


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


def _process_start() -> float:
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:
        return time.time()


def run(plan, executor, *, log=None, started: Optional[float] = None, fresh_executor=None) -> dict:
    """Run a checked plan (``settings.prepare``) on ``executor`` and write the report.

    ``fresh_executor`` (a callable returning a new executor) is called when this run built
    worlds: the build's task names carry the world ids (``pipeline.graph``), and a scheduler
    keeps recent task names for its dashboard, so the episodes get a scheduler that never saw
    them (the command passes it for a local cluster; a shared scheduler keeps its history).

    Returns the run's summary (also ``<out>/report/runner.json`` and a line of ``<out>/runs.jsonl``):
    episodes in the grid, kept, played, failed and not played, timings, and the runner's
    overhead: ``1 - sum(episode task walls) / (slots x wall)`` with the wall of the whole run
    less the world builds (``overhead_fraction``), and the same with the episodes' own walls
    (``overhead_fraction_play``: the record and S11 C re-score counted as overhead).
    """
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    t_start = time.monotonic()
    wall_start = time.time() if started is None else started
    out = Path(plan.out)
    with locked(out):
        evaluation = read_json(out / EVALUATION)
        recorded = evaluation.get("worlds") if isinstance(evaluation.get("worlds"), dict) else {}
        worlds, world_times = prepare_worlds(plan, executor, recorded, log)
        if world_times["worlds_built"] and fresh_executor is not None:
            executor = fresh_executor()
        t_worlds = time.monotonic()
        agents_doc = dict(evaluation.get("agents") or {})
        agents_doc.update({e.label: {**e.public(), "config_digest": plan.agent_digests[e.label]} for e in plan.agents})
        doc = {"format": EVALUATE_FORMAT, "harness_version": plan.harness_version,
               "worlds": {**recorded, **worlds}, "agents": agents_doc,
               "grid": {"worlds": [w.id for w in plan.worlds], "agents": [e.label for e in plan.agents],
                        "budgets": plan.budgets, "modes": plan.modes, "trials": plan.trials,
                        "turns": plan.turns, "timeout": plan.timeout, "isolation": plan.isolation,
                        "paper_compat": plan.paper_compat}}
        _atomic_write(out / EVALUATION, json.dumps(doc, indent=2, sort_keys=True) + "\n")

        kept, superseded = compact(out, plan, worlds)
        history = kept + _read_rows(out / SUPERSEDED)
        done_keys = {cell_key(r) for r in kept if r.get("status") != "failed"}
        jobs = grid(plan, worlds)
        todo = [j for j in jobs if j.key not in done_keys]
        todo_keys = {j.key for j in todo}
        replays = sum(1 for r in kept if r.get("status") == "failed" and cell_key(r) in todo_keys)
        todo = _order(todo, history)
        limit = plan.max_episodes
        to_play, left = (todo, []) if limit is None else (todo[:limit], todo[limit:])
        for job in to_play:
            job.episode_dir = _episode_dir(out, job)
        (out / EPISODE_DIRS).mkdir(parents=True, exist_ok=True)
        referenced = {str(r.get("episode_dir")) for r in history}
        orphans = sorted(p.name for p in (out / EPISODE_DIRS).iterdir()
                         if p.is_dir() and str(p) not in referenced and not p.name.startswith("."))
        if orphans:
            log(f"evaluate: {len(orphans)} folder(s) under {out / EPISODE_DIRS} belong to episodes an earlier run did "
                "not finish (no record names them); they are kept, and safe to delete")
        slots = _slots(executor)
        shape = [f"{len(plan.agents)} agent(s)", f"{len(plan.worlds)} world(s)"]
        shape += [f"{len(plan.budgets)} budget(s)"] if plan.budgets else []
        shape += [f"{len(plan.modes)} mode(s)"] if plan.modes else []
        log(f"evaluate: {len(jobs)} episodes in the grid ({' x '.join(shape)} x {plan.trials} trial(s)); "
            f"{len(jobs) - len(todo)} kept from earlier runs"
            + (f" ({sum(superseded.values())} superseded: "
               + ", ".join(f"{n} {r}" for r, n in sorted(superseded.items())) + ")" if superseded else "")
            + f"; playing {len(to_play)}" + (f" ({replays} failed earlier)" if replays else "")
            + (f", {len(left)} left for a later run (max_episodes={limit})" if left else "")
            + f" on {slots} worker slot(s)")
        progress = Progress(total=len(to_play), log=log, enabled=plan.progress)
        t_episodes = time.monotonic()
        played = schedule(to_play, plan, executor, out / EPISODES, progress) if to_play else []
        episodes_s = time.monotonic() - t_episodes

        t_report = time.monotonic()
        records, _ = compact(out)  # a replayed failure's earlier record moves out
        grid_keys = {j.key for j in jobs}
        failed_now = [r for r in records if r.get("status") == "failed" and cell_key(r) in grid_keys]
        rendered, checks = None, []
        if records:
            from . import render
            from .tables import report as make_report

            rep = make_report(records)
            rendered = render.render(records, out, report=rep)
            write_parquet(records, out / PARQUET)
            checks = reference_checks(rep, records)
        report_s = time.monotonic() - t_report

        wall = time.monotonic() - t_start
        process_wall = time.time() - wall_start
        task_sum = sum(float(r["task_s"]) for r in played if isinstance(r.get("task_s"), (int, float)))
        play_sum = sum(float(r["play_s"]) for r in played if isinstance(r.get("play_s"), (int, float)))
        record_sum = sum(float(r["record_s"]) for r in played if isinstance(r.get("record_s"), (int, float)))
        used = max(1, min(slots, len(played))) if played else slots
        net = process_wall - world_times["build_s"]
        summary = {
            "format": RUN_FORMAT, "out": str(out), "harness_version": plan.harness_version,
            "grid": {"episodes": len(jobs), "worlds": len(plan.worlds), "agents": [e.label for e in plan.agents],
                     "budgets": plan.budgets, "modes": plan.modes, "trials": plan.trials},
            "episodes": {"kept": len(jobs) - len(todo), "played": len(played),
                         "ok": sum(1 for r in played if r.get("status") == "ok"),
                         "failed": sum(1 for r in played if r.get("status") == "failed"),
                         "not_played": len(left), "failed_in_records": len(failed_now),
                         "superseded": dict(superseded), "records": len(records),
                         "unfinished_folders": len(orphans)},
            "cluster": {"kind": getattr(executor, "kind", None), "slots": slots,
                        "cores_per_worker": plan.cores_per_worker},
            "timings": {"process_wall_s": round(process_wall, 3), "run_wall_s": round(wall, 3),
                        "before_run_s": round(process_wall - wall, 3),
                        "worlds_verify_s": round(world_times["verify_s"], 3),
                        "worlds_build_s": round(world_times["build_s"], 3),
                        "worlds_total_s": round(t_worlds - t_start, 3), "episodes_s": round(episodes_s, 3),
                        "report_s": round(report_s, 3)},
            "worlds_built": world_times["worlds_built"],
            "episode_sums": {"task_s": round(task_sum, 3), "play_s": round(play_sum, 3),
                             "record_s": round(record_sum, 3)},
            "episodes_per_hour": (len(played) / episodes_s * 3600.0) if played and episodes_s > 0 else None,
            "overhead": {
                "definition": "1 - sum(task_s) / (slots_used x (process wall - world builds)); _play: with play_s",
                "slots_used": used, "net_wall_s": round(net, 3),
                "overhead_s": round(net - task_sum / used, 3) if played else None,
                "overhead_fraction": (1.0 - task_sum / (used * net)) if played and net > 0 else None,
                "overhead_fraction_play": (1.0 - play_sum / (used * net)) if played and net > 0 else None,
                "episodes_phase_fraction": (1.0 - task_sum / (used * episodes_s)) if played and episodes_s > 0
                else None},
            "reference_checks": checks,
            "report": str(rendered["dir"]) if rendered else None,
        }
        _append_rows(out / RUNS, [summary])
        if rendered:
            _atomic_write(Path(rendered["dir"]) / RUNNER_JSON, json.dumps(summary, indent=2) + "\n")
        return summary


def evaluate(overrides: list, executor=None, *, log=None) -> dict:
    """The Python face of ``python -m pipeline.evaluate``: prepare ``overrides`` (the command's
    key=value list), run them on ``executor`` (default: the plan's own cluster, started here
    and closed after) and return the run's summary.  Raises ``ConfigError`` for bad input and
    :class:`EvaluationError` when a world differs from its recorded build."""
    from ..graph.executor import make_executor
    from .settings import prepare

    plan = prepare(list(overrides))
    own = executor is None
    if own:
        executor = make_executor(plan.cluster, processes=True, announce=plan.progress)
    try:
        return run(plan, executor, log=log)
    finally:
        if own:
            executor.close()


def _read_rows(path: Path) -> list:
    from ..ledger import read_rows

    try:
        return read_rows(path)
    except (OSError, Exception):
        return []


#: The reference ordering the project promises (scripts/reference_agents.py: TRUTH_MIN, MARGIN).
TRUTH_MIN = 90.0
MARGIN = 3.0


def reference_checks(rep: dict, records: list) -> list:
    """The reference ordering checks of ``scripts/reference_agents.py`` on the report's means,
    for the reference agents present under their own names: truth >= 90, mr_knockdown >=
    cis_mr + 3, cis_mr >= correlation + 3 (means over every episode) and tells <= null + 3 at
    each budget.  Informational: they never change the exit status."""
    bio = rep.get("biobank")
    if not bio:
        return []
    names: dict = defaultdict(set)
    for r in records:
        names[r.get("agent")].add(r.get("agent_name", r.get("agent")))
    means = {row["agent"]: row["mean"] for row in bio["leaderboard"]}

    def ref(name: str) -> bool:
        return name in means and names.get(name) == {name}

    checks = []
    if ref("truth"):
        checks.append({"check": f"truth >= {TRUTH_MIN:g}", "a": means["truth"], "b": None,
                       "pass": means["truth"] >= TRUTH_MIN})
    for better, worse in (("mr_knockdown", "cis_mr"), ("cis_mr", "correlation")):
        if ref(better) and ref(worse):
            checks.append({"check": f"{better} >= {worse} + {MARGIN:g}", "a": means[better], "b": means[worse],
                           "pass": means[better] >= means[worse] + MARGIN})
    if ref("tells") and ref("null"):
        per = {(row["agent"], row["budget"]): row["mean"] for row in bio["tables"]["s6_budgets"]}
        for budget in bio["budgets"]:
            t, n = per.get(("tells", budget)), per.get(("null", budget))
            if t is not None and n is not None:
                checks.append({"check": f"tells <= null + {MARGIN:g} at ${budget:,.0f}", "a": t, "b": n,
                               "pass": t <= n + MARGIN})
    return checks


def summary_lines(summary: dict) -> list:
    """The run's summary as the lines the command prints on stderr."""
    e, t, o = summary["episodes"], summary["timings"], summary["overhead"]
    lines = [f"evaluate: {e['played']} episode(s) played ({e['ok']} ok, {e['failed']} failed), {e['kept']} kept, "
             f"{e['not_played']} not played; {e['records']} record(s) in episodes.jsonl"]
    eph = summary.get("episodes_per_hour")
    lines.append(f"evaluate: wall {t['process_wall_s']:.1f} s (worlds {t['worlds_total_s']:.1f} s of which builds "
                 f"{t['worlds_build_s']:.1f} s, episodes {t['episodes_s']:.1f} s, report {t['report_s']:.1f} s) on "
                 f"{summary['cluster']['slots']} slot(s)" + (f"; {eph:.0f} episodes/hour" if eph else ""))
    if o.get("overhead_fraction") is not None:
        lines.append(f"evaluate: runner overhead {100 * o['overhead_fraction']:.1f} % of the wall beyond the episode "
                     f"tasks ({100 * o['overhead_fraction_play']:.1f} % counting records and S11 C re-scores as "
                     "overhead)")
    checks = summary.get("reference_checks") or []
    if checks:
        lines.append("evaluate: reference ordering (scripts/reference_agents.py): " + "; ".join(
            f"{c['check']}: {c['a']:.2f}" + (f" vs {c['b']:.2f}" if c["b"] is not None else "")
            + (" PASS" if c["pass"] else " FAIL") for c in checks))
    if e["failed_in_records"]:
        lines.append(f"evaluate: {e['failed_in_records']} failed episode(s) in the records (status=failed); run the "
                     "same command again to replay them")
    if e["not_played"]:
        lines.append(f"evaluate: {e['not_played']} episode(s) not played yet; run the same command again to go on")
    if summary.get("report"):
        lines.append(f"evaluate: report in {summary['report']}")
    return lines


__all__ = ["EvaluationError", "Job", "WorldChanged", "compact", "crash_record", "evaluate", "grid", "manifest_digests",
           "play_episode", "prepare_worlds", "run", "summary_lines", "verify_world"]
