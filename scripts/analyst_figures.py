"""The analyst reference agent over a set of worlds and the three budgets: scores, components,
a figure and a per-world account of the points it lost.

    python scripts/analyst_figures.py --panel dev --scale small --out /work/tmp/analyst/fig-small
    python scripts/analyst_figures.py --panel archetypes --scale paper --out /work/tmp/analyst/fig-paper
    python scripts/analyst_figures.py --world "world=standard-01 world.seed=0x..." --scale small --out ...

Worlds are built one at a time (with pixels: the analyst segments the MRI itself),
played at budgets 0, 450,000 and 2,000,000, and deleted afterwards unless --keep
(a paper-scale world with images is ~16 GB); replay mode deletes only the pixels, keeping
the rest for --refresh.  Results accumulate in
``<out>/analyst_scores.json`` (a rerun skips finished episodes); the figure is
``<out>/analyst_scores.png`` and the text report ``<out>/analyst_report.md``.

Two modes:

* ``--mode harness`` (default): every (world, budget) is a real episode through the
  harness (sandbox, 30 turns of 300 s), each segmenting every scan again.
* ``--mode replay``: the same library code played in-process by a minimal stand-in
  for the harness (the oracle answers requests between turns, charged at the
  prompt's prices; the scorer reads the stand-in's ledger).  Everything before the
  analyst's evidence step is budget-free, so the scans are segmented once per world,
  in the 2,000,000 episode, and the 450,000 and 0 episodes resume from a copy of
  that work folder at the evidence step.  The world's pixels are then deleted and
  its tables and the work folders kept (``<out>/worlds``, ``<out>/replay``), so
  ``--refresh`` replays every world again from the phenotype step after a change
  to the analysis (no pixels needed).  No sandbox and no turn clock: it measures
  the policy's decisions, not its fit to the harness's limits, which the harness
  mode (and the analyst's tests) check.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.agents import create_agent  # noqa: E402
from pipeline.harness.episode import BUDGETS, run_episode  # noqa: E402
from pipeline.score import COMPONENT_KEYS  # noqa: E402

DEV = ("standard-01", "standard-02", "standard-03", "standard-04", "standard-05", "hard-01", "hard-02", "hard-03",
       "hard-04", "hard-messy-01", "high-concordance-01", "null-01")
SHORT = {"target_identification": "target", "causal_confidence": "confidence", "bias_identification": "bias",
         "intervention_direction": "direction", "phenotype_construction": "phenotype"}
MAX = {"target_identification": 30, "causal_confidence": 25, "bias_identification": 15,
       "intervention_direction": 20, "phenotype_construction": 10}


def archetype_worlds(out: Path) -> list[str]:
    """One development world per archetype (the first in panel order) and the null world.

    The development panel has no ischemic world (both are held out): an archetype without
    one is played on its first held-out configuration with a fresh random seed, drawn once
    and kept in ``<out>/fresh_seeds.json`` so that a rerun plays the same world.
    """
    import secrets

    from pipeline import config

    seen, out_specs = set(), []
    for wid in DEV:
        cfg = config.load([f"world={wid}", "scale=tiny"]).cfg.world
        if int(cfg.n_drivers) == 0:
            continue
        if cfg.archetype not in seen:
            seen.add(cfg.archetype)
            out_specs.append(f"world={wid}")
    seeds_path = out / "fresh_seeds.json"
    seeds = json.loads(seeds_path.read_text()) if seeds_path.exists() else {}
    for arch in ("dcm", "hcm", "ischemic", "hfpef"):
        if arch not in seen:
            seeds.setdefault(arch, "0x" + secrets.token_hex(16))
            out_specs.append(f"world=heldout-{arch}-01 world.id=fresh-{arch} world.seed={seeds[arch]}")
    seeds_path.write_text(json.dumps(seeds, indent=1))
    return out_specs + ["world=null-01"]


def build(spec: str, scale: str, root: Path) -> Path:
    from pipeline import config
    from pipeline.build import build as build_world

    overrides = [*shlex.split(spec), f"scale={scale}", f"out={root}", "cluster=local", "cluster.progress=false"]
    resolved = config.load(overrides)
    world_dir = root / resolved.cfg.world.id
    if not ((world_dir / "release" / "MANIFEST.json").exists() and (world_dir / "sealed" / "truth.json").exists()):
        build_world(resolved, progress=False)
    return world_dir


def account(result: dict) -> list[str]:
    """Where the points went, in the scorer's own terms."""
    d = result["details"]
    lines = []
    t = d["target_identification"]
    if d.get("null_world"):
        lines.append(str(t.get("rule")))
    else:
        if t.get("missed"):
            lines.append(f"missed drivers {t['missed']}")
        if t.get("false_positives"):
            lines.append(f"false nominations {t['false_positives']}")
    for pair in d.get("pairs", []):
        if pair["credit"] < 25:
            lines.append(f"{pair['kind']} pair ({pair['causal']}, {pair['partner']}): {pair['route']} -> {pair['credit']:.1f}")
    b = d["bias_identification"]
    if b.get("scored_decoys") and (b.get("recall") or 0) < 1:
        lines.append(f"decoys rejected {b['correct']}/{b['scored_decoys']} (correct: {b['correct_proteins']})")
    if b.get("wrong"):
        lines.append(f"wrong rejections {b['wrong']}")
    for prot, v in d["intervention_direction"].get("drivers", {}).items():
        if v["credit"] < 1:
            lines.append(f"direction {prot}: {v.get('submitted')} ({v.get('why', '')}) -> {v['credit']}")
    ph = d["phenotype_construction"]
    if ph.get("r") is not None:
        lines.append(f"phenotype r {ph['r']:.3f} vs baseline b {ph['b']:.3f}")
    if result["safety_penalty"]:
        lines.append(f"SAFETY PENALTY {result['safety_penalty']}")
    return lines


def figure(rows: list, out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    budgets = sorted({r["budget"] for r in rows})
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    bottom = np.zeros(len(budgets))
    colors = ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974")
    for key, color in zip(COMPONENT_KEYS, colors):
        means = np.array([np.mean([r[key] for r in rows if r["budget"] == b]) for b in budgets])
        ax.bar(range(len(budgets)), means, bottom=bottom, color=color, label=f"{SHORT[key]} (/{MAX[key]})")
        bottom += means
    totals = [np.mean([r["total"] for r in rows if r["budget"] == b]) for b in budgets]
    for i, t in enumerate(totals):
        ax.text(i, t + 1, f"{t:.1f}", ha="center")
    ax.set_xticks(range(len(budgets)), [f"${b:,}" for b in budgets])
    ax.set_ylabel("mean score over worlds")
    ax.set_ylim(0, 105)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panel", choices=("dev", "archetypes", "none"), default="dev")
    parser.add_argument("--world", action="append", default=[], help="build overrides of one more world (repeatable)")
    parser.add_argument("--scale", default="small")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--out", required=True)
    parser.add_argument("--keep", action="store_true",
                        help="keep the built worlds whole, pixels included (about 16 GB a paper-scale world); "
                             "without it harness mode deletes each world and replay mode deletes only its pixels, "
                             "which --refresh does not need")
    parser.add_argument("--mode", choices=("harness", "replay"), default="harness")
    parser.add_argument("--refresh", action="store_true",
                        help="replay mode: replay every kept world again from the phenotype step")
    args = parser.parse_args(argv)
    if args.mode == "replay":
        return replay_main(args)

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    panels = {"dev": lambda: [f"world={w}" for w in DEV], "archetypes": lambda: archetype_worlds(out), "none": list}
    specs = panels[args.panel]() + args.world
    budgets = [int(b) for b in args.budgets.split(",") if b]
    store = out / "analyst_scores.json"
    rows = json.loads(store.read_text())["rows"] if store.exists() else []
    done = {(r["spec"], r["budget"]) for r in rows}
    for spec in specs:
        if all((spec, b) in done for b in budgets):
            continue
        t0 = time.monotonic()
        world_dir = build(spec, args.scale, out / "worlds")
        built_s = time.monotonic() - t0
        for budget in budgets:
            if (spec, budget) in done:
                continue
            t1 = time.monotonic()
            result = run_episode(world_dir, create_agent("analyst"), budget=budget, agent_name="analyst",
                                 out=out / "episodes" / f"{world_dir.name}-{budget}", overwrite=True)
            truth = json.loads((world_dir / "sealed" / "truth.json").read_text())
            row = {"spec": spec, "world": world_dir.name, "archetype": truth["archetype"], "budget": budget,
                   **{k: result[k] for k in (*COMPONENT_KEYS, "safety_penalty", "total")},
                   "exit_reason": result["episode"]["exit_reason"], "turns": result["episode"]["turns_used"],
                   "spent": result["episode"]["spent"], "isolated": result["isolated"],
                   "seconds": round(time.monotonic() - t1, 1), "build_seconds": round(built_s, 1),
                   "account": account(result)}
            rows.append(row)
            store.write_text(json.dumps({"scale": args.scale, "rows": rows}, indent=1))
            print(f"{world_dir.name:<22} {budget:>9} total {row['total']:6.2f}  "
                  + "  ".join(f"{SHORT[k]} {row[k]:.1f}" for k in COMPONENT_KEYS)
                  + f"  safety {row['safety_penalty']:.0f}  ({row['turns']} turns, {row['seconds']:.0f} s)", flush=True)
        if not args.keep:
            shutil.rmtree(world_dir, ignore_errors=True)
    report(rows, budgets, out, args.scale)
    return 0


# ----------------------------------------------------------------------------- replay mode


def replay_episode(world_dir: Path, work: Path, budget: int, start: str | None = None, max_turns: int = 30) -> dict:
    """Play the analyst's library in-process against ``world_dir`` with ``work`` as WORK.

    ``start``: resume a copied work folder at this task (earlier tasks' results kept).
    The stand-in harness delivers requested experiments before the next turn, refuses
    what the budget cannot cover, keeps a ledger and scores with ``pipeline.score``.
    """
    import importlib

    from pipeline.agents.analyst import LIB_DIR
    from pipeline.genotypes_io import load_genotypes
    from pipeline.oracle import load_oracle, run_experiment
    from pipeline.score import score_episode

    sys.path.insert(0, str(LIB_DIR.parent))
    tasks = importlib.import_module("lib.tasks")
    release = world_dir / "release"
    state_path = work / "analyst" / "state.json"
    if start is not None:
        state = json.loads(state_path.read_text())
        state["done"] = [t for t in state["done"] if t in tasks.TASKS[:tasks.TASKS.index(start)]]
        for key in ("requested", "pending"):
            state.pop(key, None)
        state_path.write_text(json.dumps(state))
        shutil.rmtree(work / "experiments", ignore_errors=True)
        for name in ("submission.json", "evidence.csv", "report.md"):
            (work / name).unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    oracle = load_oracle(world_dir / "sealed")
    costs = {kind: float(value) for kind, value in oracle.costs.items()}
    queue, submitted, ledger = [], [False], []
    left = float(budget)
    for turn in range(1, max_turns + 1):
        tasks.run_turn(RELEASE=str(release), IMAGING=str(release / "imaging"), WORK=str(work),
                       OUT_CSV=str(work / "phenotype.csv"), load_genotypes=lambda: load_genotypes(str(release)),
                       request_experiment=lambda kind, prot: queue.append((kind, prot)),
                       submit=lambda: submitted.__setitem__(0, True), budget_remaining=left,
                       turns_remaining=max_turns + 1 - turn, costs=costs, time_limit=1e9)
        for kind, prot in queue:
            cost = float(costs[kind])
            if cost > left or any(r["protein"] == prot and r["kind"] == kind for r in ledger):
                continue
            left -= cost
            payload = run_experiment(oracle, kind, prot)
            (work / "experiments").mkdir(exist_ok=True)
            (work / "experiments" / f"{prot}.{kind}.json").write_text(json.dumps(payload))
            ledger.append({"seq": len(ledger), "turn": turn, "kind": kind, "protein": prot, "status": "delivered",
                           "cost": cost})
        queue.clear()
        if submitted[0]:
            break
    ledger_path = work.parent / f"{work.name}.ledger.jsonl"
    ledger_path.write_text("".join(json.dumps(r) + "\n" for r in ledger))
    result = score_episode(world_dir / "sealed", work, ledger_path)
    result["episode"] = {"exit_reason": "submitted" if submitted[0] else "turn_limit", "turns_used": turn,
                         "spent": budget - left}
    result["isolated"] = False
    return result


def replay_main(args) -> int:
    import contextlib

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    panels = {"dev": lambda: [f"world={w}" for w in DEV], "archetypes": lambda: archetype_worlds(out), "none": list}
    specs = panels[args.panel]() + args.world
    budgets = sorted((int(b) for b in args.budgets.split(",") if b), reverse=True)
    (out / "replay").mkdir(exist_ok=True)
    store = out / "analyst_scores.json"
    rows = json.loads(store.read_text())["rows"] if store.exists() and not args.refresh else []
    done = {(r["spec"], r["budget"]) for r in rows}
    for spec in specs:
        if all((spec, b) in done for b in budgets):
            continue
        t0 = time.monotonic()
        world_dir = build(spec, args.scale, out / "worlds") if not args.refresh else _kept_world(spec, args.scale, out)
        built_s = time.monotonic() - t0
        first = out / "replay" / f"{world_dir.name}-{budgets[0]}"
        for i, budget in enumerate(budgets):
            t1 = time.monotonic()
            work = out / "replay" / f"{world_dir.name}-{budget}"
            if i == 0:
                start = "phenotype" if args.refresh else None
                if start is None:
                    shutil.rmtree(work, ignore_errors=True)
            else:
                shutil.rmtree(work, ignore_errors=True)
                shutil.copytree(first, work, ignore=shutil.ignore_patterns("experiments"))
                start = "evidence"
            with open(out / "replay" / f"{world_dir.name}-{budget}.log", "w") as log, contextlib.redirect_stdout(log):
                result = replay_episode(world_dir, work, budget, start)
            rows.append(_row(spec, world_dir, budget, result, time.monotonic() - t1, built_s))
            store.write_text(json.dumps({"scale": args.scale, "mode": "replay", "rows": rows}, indent=1))
            _print_row(rows[-1])
        if not args.keep:
            for folder in ("imaging", "imaging_visit2"):
                shutil.rmtree(world_dir / "release" / folder, ignore_errors=True)
    report(rows, sorted(budgets), out, args.scale)
    return 0


def _kept_world(spec: str, scale: str, out: Path) -> Path:
    from pipeline import config

    resolved = config.load([*shlex.split(spec), f"scale={scale}"])
    return out / "worlds" / resolved.cfg.world.id


def _row(spec, world_dir: Path, budget: int, result: dict, seconds: float, built_s: float) -> dict:
    truth = json.loads((world_dir / "sealed" / "truth.json").read_text())
    return {"spec": spec, "world": world_dir.name, "archetype": truth["archetype"], "budget": budget,
            **{k: result[k] for k in (*COMPONENT_KEYS, "safety_penalty", "total")},
            "exit_reason": result["episode"]["exit_reason"], "turns": result["episode"]["turns_used"],
            "spent": result["episode"]["spent"], "isolated": result["isolated"],
            "seconds": round(seconds, 1), "build_seconds": round(built_s, 1), "account": account(result)}


def _print_row(row: dict) -> None:
    print(f"{row['world']:<22} {row['budget']:>9} total {row['total']:6.2f}  "
          + "  ".join(f"{SHORT[k]} {row[k]:.1f}" for k in COMPONENT_KEYS)
          + f"  safety {row['safety_penalty']:.0f}  ({row['turns']} turns, {row['seconds']:.0f} s)", flush=True)


def report(rows, budgets, out: Path, scale: str) -> None:
    import numpy as np

    lines = [f"# analyst, scale={scale}", "", "| world | archetype | " + " | ".join(f"${b:,}" for b in budgets) + " |",
             "|---|---|" + "---|" * len(budgets)]
    worlds = list(dict.fromkeys(r["world"] for r in rows))
    index = {(r["world"], r["budget"]): r for r in rows}
    for w in worlds:
        arche = next(r["archetype"] for r in rows if r["world"] == w)
        lines.append(f"| {w} | {arche} | " + " | ".join(f"{index[w, b]['total']:.1f}" if (w, b) in index else "-"
                                                      for b in budgets) + " |")
    lines.append("| **mean** | | " + " | ".join(
        f"**{np.mean([r['total'] for r in rows if r['budget'] == b]):.1f}**" for b in budgets) + " |")
    lines += ["", "Mean components per budget:", "", "| budget | " + " | ".join(SHORT[k] for k in COMPONENT_KEYS)
              + " | safety | total |", "|---|" + "---|" * (len(COMPONENT_KEYS) + 2)]
    for b in budgets:
        sel = [r for r in rows if r["budget"] == b]
        lines.append(f"| ${b:,} | " + " | ".join(f"{np.mean([r[k] for r in sel]):.2f}" for k in COMPONENT_KEYS)
                     + f" | {np.mean([r['safety_penalty'] for r in sel]):.2f} | {np.mean([r['total'] for r in sel]):.2f} |")
    lines += ["", "Where points were lost:", ""]
    for r in rows:
        if r["account"]:
            lines.append(f"- {r['world']} ${r['budget']:,} ({r['total']:.1f}): " + "; ".join(r["account"]))
    (out / "analyst_report.md").write_text("\n".join(lines) + "\n")
    figure(rows, out / "analyst_scores.png", f"analyst, {scale} scale, {len(worlds)} worlds")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
