"""Benchmark validity over a whole panel at any scale, in one command (issue 29): the tell
scan (``pipeline.audit --tells``, its sealed locus check included), the instrument check
(``pipeline.audit --instruments``) and their pooled reports.

    python scripts/validity_panel.py --scale paper [--out DIR] [--panel paper-v1] [--seeds FILE]
        [--development] [--keep] [--only id,id] [--analysis-jobs N]

Builds each world without pixels (``release=noimaging``; the scans need none) into
``<out>/<world>``, analyses it for both scans, keeps the analyses in ``<out>/.analyses``
and, unless ``--keep``, deletes the world before the next is built, so a paper-scale panel
needs the disk of one world (about 1.6 GB) instead of twenty.  An interrupted run resumes:
a world whose analyses are kept is not rebuilt.  ``--analysis-jobs N`` analyses up to N worlds
at once in processes of their own beside the next build (same reports; each paper-scale
analysis peaks near 15 GiB).  At the end both reports are pooled over
the panel and printed; JSON copies go to ``<out>/tells.json`` and ``<out>/instruments.json``.
Held-out worlds need seeds: ``--seeds`` names a sealed seed file; without it fixed test
seeds derived from the world id are written to ``<out>/test-seeds.yaml`` (those of
``scripts/tells_panel.py`` and ``tests/biobank/test_panel.py``; not the benchmark's sealed seeds).
An instrument finding (a lead variant over the per-world Bonferroni bar) is then
replicated: ``--replicates`` fresh cohorts of the world's unchanged hidden model (its
sealed/world.yaml is kept) measure the variant's z again (scripts/replicate_cohorts.py);
a path of the model shows as a replicate mean beyond 1 and 3 standard errors in the
finding's direction, a sampling extreme of the built cohort as a mean near 0.  Exit
status 1 when the tell scan finds something or a finding replicates.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from pipeline.audit import instruments as inst  # noqa: E402
from pipeline.panel import panel_worlds  # noqa: E402
from pipeline.formats import check_format  # noqa: E402
from pipeline.tells import features  # noqa: E402
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
    for path in (*features.source_files(), REPO / "pipeline/tells/sealed_checks.py",
                 REPO / "pipeline/audit/instruments.py"):
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:20]


#: The version of a kept analysis (``<out>/.analyses/<world>.pkl``).
STORE_FORMAT = "drugtargetworld-validity-analysis/1"


def read_kept(path: Path) -> dict:
    """A kept analysis, its format checked (one kept before the store carried a format reads as it is)."""
    kept = pickle.loads(path.read_bytes())
    if isinstance(kept, dict) and "format" in kept:
        check_format(kept["format"], STORE_FORMAT, path)
    return kept


def sealed_checks(world_dir: Path) -> dict:
    """The tell scan's sealed checks alone (the locus check, the surrogate, T4): no genome scan."""
    from pipeline import bundle
    from pipeline.genotypes_io import load_genotypes
    from pipeline.tells import features
    from pipeline.tells.sealed_checks import WorldTruth, check_instruments, check_surrogate, check_t4

    wt = WorldTruth.load(str(world_dir))
    release = str(world_dir / bundle.RELEASE)
    genotypes = load_genotypes(release, threads=1)
    contig, position = features.variant_positions(release, list(genotypes.columns))
    checks = [check_instruments(str(world_dir), wt, genotypes, contig, position),
              check_surrogate(str(world_dir), wt), check_t4(str(world_dir), wt)]
    return {"world": wt.world_id, "checks": checks}


def analyse(world_dir: Path, store: Path, alpha: float, sealed_only: bool = False) -> dict:
    """Both scans' per-world analyses of one built world, kept in ``store``."""
    path = store / f"{world_dir.name}.pkl"
    digest = manifest_digest(world_dir)
    if path.exists():
        kept = read_kept(path)
        if kept.get("digest") == digest and kept.get("code") == code_digest() and (sealed_only or kept.get("tells")):
            return kept
    t0 = time.monotonic()
    if sealed_only:  # the sealed checks (locus, surrogate, T4) without the role-blind statistics
        res = {"format": STORE_FORMAT, "digest": digest, "code": code_digest(), "tells": None,
               "sealed": sealed_checks(world_dir), "instruments": inst.analyse_world(str(world_dir), alpha)}
    else:
        res = {"format": STORE_FORMAT, "digest": digest, "code": code_digest(),
               "tells": tells.analyse_world_safely(str(world_dir)),
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
    ap.add_argument("--analysis-jobs", type=int, default=1,
                    help="worlds analysed at once in processes of their own, beside the next build (each holds "
                         "about 15 GiB at paper scale, 2,941 proteins x 54,000, so two need a bigger machine than 24 GiB; default 1: one after another)")
    ap.add_argument("--sealed-checks-only", action="store_true",
                    help="the instrument check and the tell scan's sealed checks (locus, surrogate, T4) without the "
                         "role-blind statistics (one genome scan per world instead of five: the paper-scale panel in "
                         "the time of its builds)")
    ap.add_argument("--replicates", type=int, default=10,
                    help="fresh cohorts of a world's model to replicate each instrument finding in (0: none)")
    args = ap.parse_args(argv)
    if args.analysis_jobs < 1:
        ap.error(f"--analysis-jobs: {args.analysis_jobs}; valid: at least 1")
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
    done_by_world, pending = {}, {}
    pool = None
    if args.analysis_jobs > 1:  # analyses are mostly single-threaded numpy: run them beside the next build
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        pool = ProcessPoolExecutor(args.analysis_jobs, mp_context=multiprocessing.get_context("spawn"))

    def finished(wid: str, res: dict) -> None:
        wdir = out / wid
        print(f"[{wid}] analysed in {res['seconds']:.0f} s", flush=True)
        done_by_world[wid] = res
        shutil.copyfile(wdir / "sealed" / "world.yaml", store / f"{wid}.world.yaml")  # the model, for replication
        if not args.keep:
            shutil.rmtree(wdir)

    def drain(below: int) -> None:  # wait until fewer than ``below`` analyses are in flight
        while len(pending) >= below:
            for fut in wait(list(pending), return_when=FIRST_COMPLETED).done:
                finished(pending.pop(fut), fut.result())

    for wid in worlds:
        wdir = out / wid
        kept = store / f"{wid}.pkl"
        res = read_kept(kept) if kept.exists() else None
        if res is not None and not args.sealed_checks_only and not res.get("tells"):
            kept.unlink()  # kept by a --sealed-checks-only run: the whole tell scan needs the world again
            res = None
        if res is not None and not (wdir / "release" / "MANIFEST.json").exists():  # analysed before, world deleted since
            note = "" if res.get("code") == code_digest() else "; by an earlier version of the analysis code"
            print(f"[{wid}] analyses kept from an earlier run (manifests {res['digest']}{note})", flush=True)
            done_by_world[wid] = res
            continue
        if pool is not None:
            drain(args.analysis_jobs)
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
        if pool is None:
            finished(wid, analyse(wdir, store, args.alpha, args.sealed_checks_only))
        else:
            pending[pool.submit(analyse, wdir, store, args.alpha, args.sealed_checks_only)] = wid
    if pool is not None:
        drain(1)
        pool.shutdown()
    results = [done_by_world[w] for w in worlds]  # in panel order, however the analyses finished
    if results and all(r.get("tells") for r in results):
        report = tells.scan([r["tells"] for r in results])
        (out / "tells.json").write_text(json.dumps(tells._json_ready(report), indent=1))
        print(tells.format_report(report))
    else:  # the sealed checks alone, judged as the tell scan judges them (pooled tests included)
        verdicts = tells.sealed_verdicts([r.get("sealed") or r["tells"] for r in results], 0.01)  # a whole scan holds them too
        failed = [c for c in verdicts if not c.get("passed", True)]
        report = {"passed": not failed, "sealed_checks": verdicts}
        (out / "sealed_checks.json").write_text(json.dumps(tells._json_ready(report), indent=1, default=str))
        for c in verdicts:
            print(f"sealed check {c['name']} [{c.get('world', 'pooled')}]: {'passed' if c.get('passed', True) else 'FAILED'}"
                  f"  {c.get('detail', '') if isinstance(c.get('detail'), str) else ''}"
                  + "".join(f"\n    {p}" for p in c.get("problems") or []))
        print(f"tell scan's sealed checks: {len(failed)} failed of {len(verdicts)}")
    per_world = []
    for r in results:  # every over-the-bar lead judged by the current exemption rule (kept analyses too)
        rows = inst.judge(r["instruments"]["over_bar"])
        per_world.append(dict(r["instruments"], over_bar=rows, findings=[x for x in rows if not x["exempt"]]))
    pooled = inst.pooled(per_world, args.alpha)
    findings = [dict(f, world=r["world"]) for r in per_world for f in r["findings"]]
    ireport = {"alpha": args.alpha, "worlds": [{k: v for k, v in r.items() if k != "ordinary_z"} for r in per_world],
               "pooled": pooled, "findings": findings,
               "expected_chance_findings": round(2 * args.alpha * len(per_world), 2),
               "passed": not findings and pooled["passed"]}
    # a finding is a path of the model or a sampling extreme of the built cohort: re-draw the
    # world's participants from its unchanged hidden model (scripts/replicate_cohorts.py)
    paths = []
    if findings and args.replicates:
        from replicate_cohorts import replicate_z

        for f in findings:
            yaml_path = store / f"{f['world']}.world.yaml"
            if not yaml_path.exists():
                f["replication"] = "no world.yaml kept"
                paths.append(f)
                continue
            zl, se_l, zll, se_ll = replicate_z(yaml_path.read_text(), [f["variant"]], args.replicates, str(out))[f["variant"]]
            built = f["z_l"] if abs(f["z_l"]) >= abs(f["z_l_late"]) else f["z_l_late"]
            mean, se = (zl, se_l) if abs(f["z_l"]) >= abs(f["z_l_late"]) else (zll, se_ll)
            along = mean * np.sign(built)  # the replicates' mean in the built cohort's direction
            f["replication"] = {"replicates": args.replicates, "mean_z_l": round(zl, 3), "se_z_l": round(se_l, 3),
                                "mean_z_l_late": round(zll, 3), "se_z_l_late": round(se_ll, 3),
                                "verdict": "path" if along > max(1.0, 3 * se) else "chance"}
            if f["replication"]["verdict"] == "path":
                paths.append(f)
        ireport["paths"] = paths
        ireport["passed_by_replication"] = not paths and pooled["passed"]
    (out / "instruments.json").write_text(json.dumps(ireport, indent=1, default=float))
    print()
    print(inst.format_report(ireport))
    for f in findings:
        rep = f.get("replication")
        if isinstance(rep, dict):
            print(f"  replication of {f['world']} {f['protein']} {f['variant']}: {rep['replicates']} fresh cohorts of the "
                  f"same model give z_L {rep['mean_z_l']:+.2f} +- {rep['se_z_l']:.2f}, z_Llate {rep['mean_z_l_late']:+.2f} "
                  f"+- {rep['se_z_l_late']:.2f}: {rep['verdict']}")
    if findings and args.replicates:
        print(f"instrument check by replication: {len(paths)} of {len(findings)} finding(s) a path of the model "
              f"-> {'PASSED' if ireport['passed_by_replication'] else 'FAILED'}")
    verdict = ireport.get("passed_by_replication", ireport["passed"])
    print(f"\npanel {args.panel} at scale {args.scale}: {len(results)} worlds in {time.monotonic() - t_all:.0f} s; "
          f"{'the tell scan' if not args.sealed_checks_only else 'the tell scan sealed checks'} "
          f"{'PASSED' if report['passed'] else 'FAILED'}, instrument check "
          f"{'PASSED' if ireport['passed'] else 'FAILED'} ({len(findings)} over the per-world bar, "
          f"{ireport['expected_chance_findings']} expected by chance; by replication "
          f"{'PASSED' if verdict else 'FAILED'})")
    return 0 if report["passed"] and verdict else 1


if __name__ == "__main__":
    sys.exit(main())
