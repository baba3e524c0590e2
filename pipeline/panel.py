"""Build every world of a panel on one cluster:

    python -m pipeline.panel panel=paper-v1 [scale=tiny] [out=./worlds] [cluster=local|sync|address]
                             [cluster.address=tcp://host:8786] [seeds=<path or URL>] [jobs=4]

All worlds are validated before any compute (held-out worlds need ``seeds=``).
Their tasks share one scheduler: world builds are driven concurrently from
``jobs`` client threads, so the cluster interleaves every world's blocks, images
and VCF chunks.  Progress is printed per world and stage; the final table says
which worlds are complete (their release manifest is present and verifies) and
which are not.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import yaml

from . import config
from .build import build
from .executor import log, make_executor
from .manifest import MANIFEST
from .outputs import Output

PANEL_KEYS = ("panel", "jobs")


def panel_worlds(panel_id: str) -> list:
    path = config.CONF_DIR / "panel" / f"{panel_id}.yaml"
    if not path.exists():
        raise config.ConfigError(f"panel: unknown panel {panel_id!r}; valid: {', '.join(config.group_options('panel'))}")
    doc = yaml.safe_load(path.read_text()) or {}
    worlds = doc.get("worlds") or []
    if not worlds or not all(isinstance(w, str) for w in worlds):
        raise config.ConfigError(f"panel: {path.name} has no list of world ids under 'worlds'")
    return worlds


def parse_args(argv: list) -> tuple:
    panel_id, jobs, rest = "paper-v1", 4, []
    for a in argv:
        key, sep, value = a.partition("=")
        if key == "panel" and sep:
            panel_id = value
        elif key == "jobs" and sep:
            try:
                jobs = int(value)
            except ValueError:
                raise config.ConfigError(f"jobs: {value!r} is not an integer; valid: integer >= 1") from None
            if jobs < 1:
                raise config.ConfigError(f"jobs: {jobs} is out of range; valid: integer >= 1")
        elif key.startswith("world"):
            raise config.ConfigError(f"{key}: a panel build takes its worlds from the panel file; valid: panel=<id>, scale, out, cluster, release, seeds")
        else:
            rest.append(a)
    return panel_id, jobs, rest


def resolve_panel(panel_id: str, overrides: list) -> list:
    """Compose and validate every world before any compute."""
    return [config.load([f"world={w}", *overrides]) for w in panel_worlds(panel_id)]


def status(resolved) -> dict:
    from .manifest import verify

    out = Output(resolved.cfg.out, resolved.cfg.world.id)
    complete = out.exists(f"{out.release}/{MANIFEST}") and out.exists(f"{out.sealed}/{MANIFEST}")
    problems = verify(out, out.release) if complete else ["no release manifest: incomplete"]
    return {"complete": complete and not problems, "problems": problems[:3]}


def run(panel_id: str, overrides: list, jobs: int = 4, executor=None) -> list:
    worlds = resolve_panel(panel_id, overrides)
    cluster_cfg = worlds[0].cfg.cluster
    own = executor is None
    if own:
        executor = make_executor(cluster_cfg)
    results = {}
    lock = threading.Lock()
    t0 = time.perf_counter()

    def one(resolved):
        wid = resolved.cfg.world.id
        try:
            summary = build(resolved, executor=executor, progress=bool(resolved.cfg.cluster.progress))
            with lock:
                results[wid] = {"ok": True, **summary}
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
        st = status(resolved)
        rows.append({
            "world": wid, "complete": st["complete"], "files": res.get("files"), "mb": (res.get("bytes") or 0) / 1e6,
            "seconds": res.get("seconds"), "error": res.get("error") or "; ".join(st["problems"]),
        })
    log(f"panel {panel_id}: {sum(r['complete'] for r in rows)}/{len(rows)} worlds complete in {time.perf_counter() - t0:.1f}s")
    return rows


def print_table(rows: list, stream=sys.stdout) -> None:
    head = f"{'world':<22} {'status':<11} {'files':>6} {'MB':>9} {'seconds':>8}  note"
    print(head, file=stream)
    print("-" * len(head), file=stream)
    for r in rows:
        st = "complete" if r["complete"] else "INCOMPLETE"
        files = "-" if r["files"] is None else str(r["files"])
        secs = "-" if r["seconds"] is None else f"{r['seconds']:.1f}"
        print(f"{r['world']:<22} {st:<11} {files:>6} {r['mb']:>9.1f} {secs:>8}  {r['error'] or ''}", file=stream)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    try:
        panel_id, jobs, overrides = parse_args(argv)
        rows = run(panel_id, overrides, jobs)
    except config.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_table(rows)
    return 0 if all(r["complete"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
