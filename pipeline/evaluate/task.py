"""One episode of an evaluation as a task (``pipeline.evaluate.runner``): the grid of jobs
(agents x worlds x budgets or modes x trials), the task a worker runs (``play_episode``:
the world's build checked, the agent made and played, its record and S11 C re-score),
the record of an episode that produced no score, and the worker's cores.

One job: what a worker does with one job, and the job itself.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .. import bundle
from .records import validate_record
from .store import EVALUATE_FORMAT
from .worlds import WorldChanged, manifest_digests

#: Exit reasons that make an episode "failed" (replayed by the next run): not the agent's doing.
FAILED_EXITS = ("runner_crash", "transport_failure", "sandbox_failure")
FAILURE_MAX_CHARS = 2000


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
