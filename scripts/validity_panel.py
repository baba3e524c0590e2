"""Benchmark validity over a whole panel at any scale, in one command (issue 29): the tell
scan (``pipeline.audit --tells``, its sealed locus check included), the instrument check
(``pipeline.audit --instruments``) and their pooled reports.

    python scripts/validity_panel.py --scale paper [--out DIR] [--panel paper-v1] [--seeds FILE]
        [--development] [--keep] [--only id,id]

Builds each world without pixels (``release=noimaging``; the scans need none) into
``<out>/<world>``, analyses it for both scans, keeps the analyses in ``<out>/.analyses``
and, unless ``--keep``, deletes the world before the next is built, so a paper-scale panel
needs the disk of one world (about 1.6 GB) instead of twenty.  An interrupted run resumes:
a world whose analyses are kept is not rebuilt.  At the end both reports are pooled over
the panel and printed; JSON copies go to ``<out>/tells.json`` and ``<out>/instruments.json``.
Held-out worlds need seeds: ``--seeds`` names a sealed seed file; without it fixed test
seeds derived from the world id are written to ``<out>/test-seeds.yaml`` (those of
``scripts/tells_panel.py`` and ``tests/test_panel.py``; not the benchmark's sealed seeds).
Exit status 1 when either scan finds something.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.audit import instruments as inst  # noqa: E402
from pipeline.panel import panel_worlds  # noqa: E402
from pipeline.tells import scan as tells  # noqa: E402


def test_seed(world: str) -> str:
    return hex(int(hashlib.sha256(f"test-panel/{world}".encode()).hexdigest()[:32], 16) | 1 << 127)


def manifest_digest(world_dir: Path) -> str:
    h = hashlib.sha256()
    for part in ("release/MANIFEST.json", "sealed/MANIFEST.json"):
        h.update((world_dir / part).read_bytes())
    return h.hexdigest()[:20]


def code_digest() -> str:
    """Changes with the per-world analysis code (the statistics, the sealed checks, the instrument check)."""
    h = hashlib.sha256()
    for module in ("pipeline/tells/features.py", "pipeline/tells/sealed_checks.py", "pipeline/audit/instruments.py"):
        h.update((REPO / module).read_bytes())
    return h.hexdigest()[:20]


def analyse(world_dir: Path, store: Path, alpha: float) -> dict:
    """Both scans' per-world analyses of one built world, kept in ``store``."""
    path = store / f"{world_dir.name}.pkl"
    digest = manifest_digest(world_dir)
    if path.exists():
        kept = pickle.loads(path.read_bytes())
        if kept.get("digest") == digest and kept.get("code") == code_digest():
            return kept
    t0 = time.monotonic()
    res = {"digest": digest, "code": code_digest(), "tells": tells.analyse_world_safely(str(world_dir)),
           "instruments": inst.analyse_world(str(world_dir), alpha)}
    res["seconds"] = round(time.monotonic() - t0, 1)
    tmp = path.with_suffix(".wip")
    tmp.write_bytes(pickle.dumps(res, protocol=5))
    tmp.rename(path)
    return res


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="paper")
    ap.add_argument("--out", default=None, help="default ./worlds-validity/<scale>")
    ap.add_argument("--panel", default="paper-v1")
    ap.add_argument("--seeds", help="sealed seed file for held-out worlds (default: fixed test seeds)")
    ap.add_argument("--development", action="store_true", help="only the panel's development worlds")
    ap.add_argument("--only", help="comma-separated world ids (default: the whole panel)")
    ap.add_argument("--keep", action="store_true", help="keep each built world (default: delete it once analysed)")
    ap.add_argument("--alpha", type=float, default=0.05, help="the instrument check's level per world and outcome")
    ap.add_argument("--workers", type=int, default=2, help="build workers")
    args = ap.parse_args(argv)
    out = Path(args.out or f"worlds-validity/{args.scale}").resolve()
    store = out / ".analyses"
    store.mkdir(parents=True, exist_ok=True)
    worlds = panel_worlds(args.panel)
    if args.development:
        worlds = [w for w in worlds if not w.startswith("heldout")]
    if args.only:
        keep = set(args.only.split(","))
        worlds = [w for w in worlds if w in keep]
    seeds = args.seeds
    if seeds is None:
        seeds = str(out / "test-seeds.yaml")
        Path(seeds).write_text(yaml.safe_dump({w: test_seed(w) for w in panel_worlds(args.panel) if w.startswith("heldout")}))
    t_all = time.monotonic()
    results = []
    for wid in worlds:
        wdir = out / wid
        kept = store / f"{wid}.pkl"
        if kept.exists() and not (wdir / "release" / "MANIFEST.json").exists():
            res = pickle.loads(kept.read_bytes())  # analysed before, world deleted since
            note = "" if res.get("code") == code_digest() else "; by an earlier version of the analysis code"
            print(f"[{wid}] analyses kept from an earlier run (manifests {res['digest']}{note})", flush=True)
            results.append(res)
            continue
        if not (wdir / "release" / "MANIFEST.json").exists():
            t0 = time.monotonic()
            cmd = [sys.executable, "-m", "pipeline.build", f"world={wid}", f"scale={args.scale}", f"out={out}",
                   f"seeds={seeds}", "release=noimaging", "cluster.progress=false", "cluster.dashboard_address=null",
                   f"cluster.n_workers={args.workers}"]
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"[{wid}] build FAILED:\n{done.stdout[-2000:]}{done.stderr[-2000:]}", flush=True)
                return 2
            print(f"[{wid}] built in {time.monotonic() - t0:.0f} s", flush=True)
        res = analyse(wdir, store, args.alpha)
        print(f"[{wid}] analysed in {res['seconds']:.0f} s", flush=True)
        results.append(res)
        if not args.keep:
            shutil.rmtree(wdir)
    report = tells.scan([r["tells"] for r in results])
    (out / "tells.json").write_text(json.dumps(tells._json_ready(report), indent=1))
    print(tells.format_report(report))
    per_world = [r["instruments"] for r in results]
    pooled = inst.pooled(per_world, args.alpha)
    findings = [dict(f, world=r["world"]) for r in per_world for f in r["findings"]]
    ireport = {"alpha": args.alpha, "worlds": [{k: v for k, v in r.items() if k != "ordinary_z"} for r in per_world],
               "pooled": pooled, "findings": findings,
               "expected_chance_findings": round(2 * args.alpha * len(per_world), 2),
               "passed": not findings and pooled["passed"]}
    (out / "instruments.json").write_text(json.dumps(ireport, indent=1, default=float))
    print()
    print(inst.format_report(ireport))
    print(f"\npanel {args.panel} at scale {args.scale}: {len(results)} worlds in {time.monotonic() - t_all:.0f} s; "
          f"tell scan {'PASSED' if report['passed'] else 'FAILED'}, instrument check {'PASSED' if ireport['passed'] else 'FAILED'}")
    return 0 if report["passed"] and ireport["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
