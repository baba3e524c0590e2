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

This module is the run (``run``, ``evaluate``) and its summary; the output folder's files
are ``pipeline.evaluate.store``, the worlds ``pipeline.evaluate.worlds``, one episode's task
``pipeline.evaluate.task`` and the scheduling ``pipeline.evaluate.schedule`` (their names
are importable from here too).
"""
from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Optional

from .schedule import (EXPECTED_S, HEARTBEAT_S, UNKNOWN_S, Progress, _episode_dir, _order, _slots, ignore_interrupts,
                       schedule)
from .store import (EPISODE_DIRS, EPISODES, EVALUATE_FORMAT, EVALUATION, LOCK, PARQUET, RUN_FORMAT, RUNNER_JSON, RUNS,
                    SUPERSEDED, EvaluationError, append_rows, atomic_write, cell_key, compact, locked, read_evaluation,
                    read_json, write_parquet)
from .task import FAILED_EXITS, FAILURE_MAX_CHARS, Job, crash_record, grid, pin_cores, play_episode
from .worlds import WorldChanged, manifest_digests, prepare_worlds, verify_world


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
        evaluation = read_evaluation(out)
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
        atomic_write(out / EVALUATION, json.dumps(doc, indent=2, sort_keys=True) + "\n")

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
        append_rows(out / RUNS, [summary])
        if rendered:
            atomic_write(Path(rendered["dir"]) / RUNNER_JSON, json.dumps(summary, indent=2) + "\n")
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



__all__ = ["EPISODE_DIRS", "EPISODES", "EVALUATE_FORMAT", "EVALUATION", "EXPECTED_S", "EvaluationError", "FAILED_EXITS",
           "FAILURE_MAX_CHARS", "HEARTBEAT_S", "Job", "LOCK", "PARQUET", "Progress", "RUN_FORMAT", "RUNNER_JSON",
           "RUNS", "SUPERSEDED", "UNKNOWN_S", "WorldChanged", "cell_key", "compact", "crash_record", "evaluate", "grid",
           "ignore_interrupts", "locked", "manifest_digests", "pin_cores", "play_episode", "prepare_worlds",
           "read_evaluation", "read_json", "run", "schedule", "summary_lines", "verify_world", "write_parquet"]
