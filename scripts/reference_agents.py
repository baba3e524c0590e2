"""Score table of the reference agents: every agent x budget on a few worlds.

    python scripts/reference_agents.py [--scale small] [--out /tmp/dtw-reference] [--jobs 2]
        [--world "world=standard-01 world.id=x ..."]... [--panel paper-v1 [--development]] [--seeds FILE]
        [--agents null,truth,...,tells] [--budgets 0,450000,2000000] [--release noimaging] [--reuse]
        [--isolation auto|require|off]

Builds each world (``--world`` takes the overrides of ``python -m
pipeline.build``, repeatable; ``--panel`` takes a panel's worlds instead, with
``--development`` only those that carry a seed in the repository, i.e. the 12
development worlds of paper-v1; the default is four worlds with ambiguous pairs:
all-biases, standard-01, standard-02 and an HCM variant of standard-01 with
its own seed), runs one isolated episode per agent, budget and world, and
prints the table with per-agent means.  It then checks the reference
ordering the project promises - mean truth >= 90, mr_knockdown >= cis_mr + 3,
cis_mr >= correlation + 3, and the role-blind exploit tells <= null + 3 (each
budget separately: it must gain nothing from leaks) over all worlds - and that
every score decomposes (five components + safety penalty = total_unclipped,
total = that clipped to 0-100).  Exit status 1 when a check fails.  Results are
also written to ``<out>/reference_scores.json``.

The benchmark-validity table (issue 12; docs/results/reference-agents.md) is

    python scripts/reference_agents.py --panel paper-v1 --development --scale small
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.agents import REFERENCE_AGENTS, create_agent  # noqa: E402
from pipeline.harness.episode import BUDGETS, run_episode  # noqa: E402
from pipeline.score import COMPONENT_KEYS  # noqa: E402

DEFAULT_WORLDS = (
    "world=all-biases",
    "world=standard-01",
    "world=standard-02",
    "world=standard-01 world.id=ref-hcm world.seed=0xdfd7f37b0bef498bbb364087b74822dc world.archetype=hcm",
)
MARGIN = 3.0
TRUTH_MIN = 90.0
#: The exploit agent of issue 12 runs beside the reference agents; it is not one of them.
DEFAULT_AGENTS = (*REFERENCE_AGENTS, "tells")


def build_world(spec: str, scale: str, out: Path, release: str, reuse: bool, seeds: str | None = None) -> Path:
    from pipeline import config
    from pipeline.build import build

    overrides = [*shlex.split(spec), f"scale={scale}", f"out={out}", "cluster=sync", "cluster.progress=false",
                 f"release={release}", *([f"seeds={seeds}"] if seeds else [])]
    resolved = config.load(overrides)
    world_dir = out / resolved.cfg.world.id
    if reuse and (world_dir / "release" / "MANIFEST.json").exists() and (world_dir / "sealed" / "truth.json").exists():
        return world_dir
    build(resolved, progress=False)
    return world_dir


def panel_specs(panel: str, development: bool) -> list[str]:
    import yaml

    from pipeline.config import CONF_DIR
    from pipeline.panel import panel_worlds

    worlds = panel_worlds(panel)
    if development:
        worlds = [w for w in worlds if (yaml.safe_load((CONF_DIR / "world" / f"{w}.yaml").read_text()) or {}).get("seed")]
    return [f"world={w}" for w in worlds]


def run_one(job: tuple) -> dict:
    world_dir, agent_name, budget, episodes, isolation = job
    sealed = Path(world_dir) / "sealed"
    agent = create_agent(agent_name, sealed_dir=sealed if agent_name == "truth" else None)
    out = Path(episodes) / Path(world_dir).name / f"{agent_name}-{budget}"
    start = time.monotonic()
    result = run_episode(world_dir, agent, budget=budget, agent_name=agent_name, out=out, overwrite=True,
                         isolation=isolation)
    return {
        "world": Path(world_dir).name, "agent": agent_name, "budget": budget,
        **{k: result[k] for k in (*COMPONENT_KEYS, "safety_penalty", "total", "total_unclipped")},
        "isolated": result["isolated"], "exit_reason": result["episode"]["exit_reason"],
        "turns": result["episode"]["turns_used"], "spent": result["episode"]["spent"],
        "seconds": round(time.monotonic() - start, 1),
    }


def decomposes(row: dict) -> bool:
    unclipped = sum(row[k] for k in COMPONENT_KEYS) + row["safety_penalty"]
    return abs(unclipped - row["total_unclipped"]) < 1e-9 and abs(min(max(unclipped, 0), 100) - row["total"]) < 1e-9


def table(rows: list[dict], worlds: list[str], agents: list[str], budgets: list[int]) -> str:
    head = f"{'agent':<13}{'budget':>9}" + "".join(f"{w[:14]:>15}" for w in worlds) + f"{'mean':>9}"
    lines = [head, "-" * len(head)]
    index = {(r["agent"], r["budget"], r["world"]): r for r in rows}
    for agent in agents:
        for budget in budgets:
            cells = [index.get((agent, budget, w)) for w in worlds]
            totals = [c["total"] for c in cells if c]
            mean = sum(totals) / len(totals) if totals else float("nan")
            lines.append(f"{agent:<13}{budget:>9}" + "".join(f"{c['total']:>15.2f}" if c else f"{'-':>15}" for c in cells)
                         + f"{mean:>9.2f}")
    return "\n".join(lines)


def agent_means(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r["agent"], []).append(r["total"])
    return {a: sum(v) / len(v) for a, v in out.items()}


def budget_means(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault((r["agent"], r["budget"]), []).append(r["total"])
    return {k: sum(v) / len(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="small")
    parser.add_argument("--out", default="/tmp/dtw-reference")
    parser.add_argument("--world", action="append", help="build overrides of one world (repeatable)")
    parser.add_argument("--panel", help="take the worlds of this panel (conf/panel/<id>.yaml) instead of --world")
    parser.add_argument("--development", action="store_true", help="with --panel: only worlds with a seed in the repo")
    parser.add_argument("--seeds", help="sealed seed file for held-out worlds")
    parser.add_argument("--isolation", default="auto", choices=("auto", "require", "off"))
    parser.add_argument("--agents", default=",".join(DEFAULT_AGENTS))
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--release", default="noimaging", help="release config group (default: noimaging)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--reuse", action="store_true", help="reuse worlds already built under --out")
    args = parser.parse_args(argv)

    out = Path(args.out).resolve()
    worlds_root, episodes = out / "worlds", out / "episodes"
    agents = [a for a in args.agents.split(",") if a]
    budgets = [int(b) for b in args.budgets.split(",") if b]
    t0 = time.monotonic()
    specs = panel_specs(args.panel, args.development) if args.panel else (args.world or DEFAULT_WORLDS)
    world_dirs = [build_world(spec, args.scale, worlds_root, args.release, args.reuse, args.seeds) for spec in specs]
    build_s = time.monotonic() - t0
    jobs = [(str(w), a, b, str(episodes), args.isolation) for w in world_dirs for a in agents for b in budgets]
    t1 = time.monotonic()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(run_one, jobs))
    run_s = time.monotonic() - t1

    names = [w.name for w in world_dirs]
    print(f"scale={args.scale} release={args.release} worlds={', '.join(names)}")
    print(f"built in {build_s:.0f} s; {len(rows)} episodes in {run_s:.0f} s on {args.jobs} worker(s)")
    print(table(rows, names, agents, budgets))
    means = agent_means(rows)
    print("\nmean over worlds and budgets: " + ", ".join(f"{a} {means[a]:.2f}" for a in agents if a in means))

    failures = []
    if not all(r["isolated"] for r in rows):
        print("NOTE: some episodes ran without isolation")
    bad = [r for r in rows if not decomposes(r)]
    if bad:
        failures.append(f"{len(bad)} score(s) do not decompose into their components")
    if "truth" in means:
        ok = means["truth"] >= TRUTH_MIN
        print(f"check truth >= {TRUTH_MIN:g}: {means['truth']:.2f} {'PASS' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"truth = {means['truth']:.2f} < {TRUTH_MIN}")
    for better, worse in (("mr_knockdown", "cis_mr"), ("cis_mr", "correlation")):
        if better in means and worse in means:
            gap = means[better] - means[worse]
            ok = gap >= MARGIN
            print(f"check {better} >= {worse} + {MARGIN:g}: {means[better]:.2f} vs {means[worse]:.2f} "
                  f"(gap {gap:+.2f}) {'PASS' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{better} - {worse} = {gap:.2f} < {MARGIN}")
    if "tells" in means and "null" in means:
        by_budget = budget_means(rows)
        for budget in budgets:
            t, n = by_budget.get(("tells", budget)), by_budget.get(("null", budget))
            if t is None or n is None:
                continue
            ok = t <= n + MARGIN
            print(f"check tells <= null + {MARGIN:g} at budget {budget}: {t:.2f} vs {n:.2f} (gap {t - n:+.2f}) "
                  f"{'PASS' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"tells - null = {t - n:.2f} > {MARGIN} at budget {budget}: roles leak")
    out.mkdir(parents=True, exist_ok=True)
    (out / "reference_scores.json").write_text(json.dumps(
        {"scale": args.scale, "release": args.release, "worlds": names, "rows": rows, "means": means,
         "failures": failures}, indent=2))
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
