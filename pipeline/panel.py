"""Build every world of a panel on one cluster:

    python -m pipeline.panel panel=paper-v1 [scale=tiny] [out=./worlds] [cluster=local|sync|address]
                             [cluster.address=tcp://host:8786] [seeds=<path or URL>] [jobs=4]
                             [panel.worlds=[standard-01,null-01]] [--verify-and-remove=world|pixels]

A Hydra app (``conf/panel_config.yaml``; ``--help``, ``--cfg job`` and the other
flags as for ``pipeline.build``).  All worlds are composed, validated and
checked against the machine before any compute (held-out worlds need ``seeds=``).
Their tasks share one scheduler: world builds are driven concurrently from
``jobs`` client threads, so the cluster interleaves every world's blocks, images
and VCF chunks.  Progress is printed per world and stage; the final table says
which worlds are complete (their release manifest is present and verifies) and
which are not.

``--verify-and-remove=world`` (or ``=pixels``) is for a disk smaller than the panel:
as soon as a world is built its release and sealed bundle are verified against their
manifests (every file's size and SHA-256), the verdict kept for the table, and then
the whole world (``world``) or its image folders (``pixels``: ``imaging/``,
``imaging_visit2/`` and their Zarr forms; the rest stays, its manifest still listing
the images) are removed before the next world starts.  The disk then needs room for
``jobs`` worlds at once (plus, for ``pixels``, every world's other files), which the
machine check counts instead of the whole panel.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import config, preflight
from .build import build
from .manifest import MANIFEST
from .outputs import Output

PANEL_KEYS = ("panel", "jobs")
#: ``--verify-and-remove`` modes: what goes once a world is verified.
REMOVE_MODES = ("world", "pixels")
PIXEL_FOLDERS = ("imaging", "imaging_visit2", "imaging.zarr", "imaging_visit2.zarr")
REMOVE_FLAG = "--verify-and-remove"


@dataclass
class Plan:
    """A panel checked and ready to build."""

    panel_id: str
    worlds: list  # [config.Resolved]
    jobs: int
    remove: str | None = None  #: a REMOVE_MODES value: verify each world, then remove it (or its pixels)


def panel_worlds(panel_id: str) -> list:
    return config.validate_panel(config.compose([f"panel={panel_id}"], config_name="panel_config"))


def world_overrides(overrides: list) -> list:
    """The overrides every world of the panel gets: all but the panel's own."""
    rest = []
    for ov, parsed in zip(overrides, config.parse_overrides(overrides)):
        key = parsed.key_or_group
        if key.split(".")[0] in PANEL_KEYS:
            continue
        if key.split(".")[0] == "world":
            raise config.ConfigError(f"{key}: a panel build takes its worlds from the panel; valid: panel=<id> or "
                                     "panel.worlds=[...], with scale, cluster, release, out, seeds")
        rest.append(ov)
    return rest


#: The ``--verify-and-remove`` mode of this command line (``main`` takes the flag off argv).
_REMOVE: list = [None]


def prepare(overrides: list, remove: str | None = None) -> Plan:
    """Compose the panel, then compose, validate and check every world before any compute."""
    rest = world_overrides(overrides)
    cfg = config.compose(overrides, config_name="panel_config")
    worlds = config.validate_panel(cfg)
    resolved = [config.load([f"world={w}", *rest]) for w in worlds]
    jobs = int(cfg.jobs)
    return Plan(str(cfg.panel.id), resolved, jobs, remove if remove is not None else _REMOVE[0])


def check(plans: list, machine: bool = True) -> None:
    """The command's checks (``pipeline.build``'s, for every world of every panel)."""
    for plan in plans:
        for resolved in plan.worlds:
            preflight.check_command(resolved)
    if machine:
        for plan in plans:
            check_machine(plan)


def check_machine(plan: Plan) -> None:
    concurrent = min(plan.jobs, len(plan.worlds))
    if plan.remove is None:
        preflight.check_all(plan.worlds, concurrent=concurrent)
        return
    # verify-and-remove: at most ``concurrent`` whole worlds exist at once (the largest ones),
    # plus, when only the pixels go, what every world keeps
    est = [preflight.check(r, concurrent=concurrent, scheduler=(i == 0), disk=False) for i, r in enumerate(plan.worlds)]
    need: dict = {}
    for r, e in zip(plan.worlds, est):
        need.setdefault(str(r.cfg.out), []).append((e.output, _kept_bytes(r, e) if plan.remove == "pixels" else 0))
    for url, sizes in need.items():
        whole = sorted((o for o, _ in sizes), reverse=True)[:concurrent]
        preflight.check_disk(url, int(sum(whole) + sum(k for _, k in sizes)))


def _kept_bytes(resolved, est) -> int:
    """What a world keeps on disk once its pixels are removed (the estimate without images)."""
    cfg = resolved.cfg
    scans = 0 if cfg.release.imaging == "none" else int(cfg.scale.imaged) * (
        1 + (float(cfg.world.visit2_fraction) if cfg.release.visit2_imaging else 0))
    return max(0, int(est.output - preflight.OUT_PER_SCAN * scans))


def verify_and_remove(resolved, mode: str) -> dict:
    """Verify a built world's release and sealed bundle against their manifests, then
    remove the world (``world``) or its image folders (``pixels``); returns the verdict."""
    from .manifest import verify

    out = Output(resolved.cfg.out, resolved.cfg.world.id)
    t = time.perf_counter()
    st = status(resolved)
    problems = list(st["problems"])
    if st["complete"]:
        problems += verify(out, out.sealed)
    seconds = time.perf_counter() - t
    if mode == "world":
        out.rm(out.root)
    elif mode == "pixels":
        for folder in PIXEL_FOLDERS:
            out.rm(f"{out.release}/{folder}")
    return {"complete": st["complete"] and not problems, "problems": problems[:3], "verify_seconds": seconds,
            "removed": mode}


def resolve_panel(panel_id: str, overrides: list) -> list:
    """Compose and validate every world before any compute."""
    return prepare([f"panel={panel_id}", *overrides]).worlds


def status(resolved) -> dict:
    from .manifest import verify

    out = Output(resolved.cfg.out, resolved.cfg.world.id)
    complete = out.exists(f"{out.release}/{MANIFEST}") and out.exists(f"{out.sealed}/{MANIFEST}")
    problems = verify(out, out.release) if complete else ["no release manifest: incomplete"]
    return {"complete": complete and not problems, "problems": problems[:3]}


def run(panel_id: str, overrides: list, jobs: int = 4, executor=None, remove: str | None = None) -> list:
    plan = prepare([f"panel={panel_id}", f"jobs={jobs}", *overrides], remove=remove)
    check_machine(plan)  # the Python API: memory:// is fine within one process
    return execute(plan, executor)


def execute(plan: Plan, executor=None) -> list:
    """Build a checked panel; returns one row per world (see print_table)."""
    from .graph.executor import log, make_executor

    panel_id, worlds, jobs = plan.panel_id, plan.worlds, plan.jobs
    cluster_cfg = worlds[0].cfg.cluster
    own = executor is None
    if own:
        executor = make_executor(cluster_cfg, announce=bool(cluster_cfg.progress))
    results = {}
    lock = threading.Lock()
    t0 = time.perf_counter()

    def one(resolved):
        wid = resolved.cfg.world.id
        try:
            # live terminal lines would interleave between concurrent worlds: plain lines
            summary = build(resolved, executor=executor, progress=bool(resolved.cfg.cluster.progress), live=False)
            verdict = verify_and_remove(resolved, plan.remove) if plan.remove else None
            with lock:
                results[wid] = {"ok": True, **summary, "verdict": verdict}
        except Exception as exc:  # a world's failure is reported in the table; the others go on
            with lock:
                results[wid] = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            log(f"[{wid}] FAILED: {type(exc).__name__}: {exc}")

    try:
        # jobs threads drive builds concurrently on one scheduler (sync runs them in turn)
        width = 1 if executor.kind == "sync" else jobs
        with ThreadPoolExecutor(max_workers=width) as pool:
            list(pool.map(one, worlds))
    finally:
        if own:
            executor.close()
    rows = []
    for resolved in worlds:
        wid = resolved.cfg.world.id
        res = results.get(wid, {"ok": False, "error": "not run"})
        st = res.get("verdict") or status(resolved)
        rows.append({
            "world": wid, "complete": st["complete"], "files": res.get("files"), "mb": (res.get("bytes") or 0) / 1e6,
            "seconds": res.get("seconds"), "error": res.get("error") or "; ".join(st["problems"]),
        })
        if st.get("removed"):
            rows[-1].update(verify_seconds=st["verify_seconds"], removed=st["removed"])
    how = f" (each verified, then its {'pixels' if plan.remove == 'pixels' else 'files'} removed)" if plan.remove else ""
    log(f"panel {panel_id}: {sum(r['complete'] for r in rows)}/{len(rows)} worlds complete in {time.perf_counter() - t0:.1f}s{how}")
    return rows


def print_table(rows: list, stream=sys.stdout) -> None:
    head = f"{'world':<22} {'status':<11} {'files':>6} {'MB':>9} {'seconds':>8}  note"
    print(head, file=stream)
    print("-" * len(head), file=stream)
    for r in rows:
        st = "complete" if r["complete"] else "INCOMPLETE"
        files = "-" if r["files"] is None else str(r["files"])
        secs = "-" if r["seconds"] is None else f"{r['seconds']:.1f}"
        note = r["error"] or ""
        if r.get("removed"):
            note = (f"verified in {r['verify_seconds']:.1f}s, {'removed' if r['removed'] == 'world' else 'pixels removed'}"
                    + (f"; {note}" if note else ""))
        print(f"{r['world']:<22} {st:<11} {files:>6} {r['mb']:>9.1f} {secs:>8}  {note}", file=stream)


def _task(cfg) -> int:
    """One panel from Hydra's composed config (the task function of the app)."""
    from . import cli

    plan = prepare(cli.task_overrides())
    progress = bool(plan.worlds[0].cfg.cluster.progress)
    executor = cli.SESSION.executor_for(plan.worlds[0].cfg.cluster, processes=True, announce=progress)
    rows = execute(plan, executor)
    print_table(rows)
    return 0 if all(r["complete"] for r in rows) else 1


def main(argv=None) -> int:
    """``python -m pipeline.panel`` as a Hydra app (see ``pipeline.cli``)."""
    from . import cli

    argv = list(sys.argv[1:] if argv is None else argv)
    keep = []
    for a in argv:
        if a == REMOVE_FLAG or a.startswith(REMOVE_FLAG + "="):
            mode = a.partition("=")[2] or "world"
            if mode not in REMOVE_MODES:
                return cli.fail(f"{REMOVE_FLAG}: {mode!r}; valid: {REMOVE_FLAG}=world (verify each world, then remove it) "
                                f"or {REMOVE_FLAG}=pixels (verify, then remove its images)")
            _REMOVE[0] = mode
        else:
            keep.append(a)
    try:
        return cli.run(cli.App("pipeline.panel", "panel_config", prepare, check, _task), keep)
    finally:
        _REMOVE[0] = None


if __name__ == "__main__":
    sys.exit(main())
