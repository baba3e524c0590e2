"""The phenotype scoring rule before and after the security issue's fix, on recorded episodes.

    python scripts/phenotype_rule.py [--world standard-01] [--scale tiny] [--out /tmp/dtw-phenotype-rule]
        [--agents correlation,cis_mr,mr_knockdown,analyst] [--budget 450000] [--reuse]

Builds the world with images (b needs pixels), plays one isolated episode per agent, and
re-scores each episode's WORK offline three ways:

* ``paper_compat`` (S2.5: the participants given a finite value),
* the default (the imaged participants of the eval mask, missing values at the mean of the
  submitted ones: b's own set),
* both again with only the tails of the agent's own phenotype submitted (its lowest and
  highest ``--tail`` fraction), the attack S2.5's rule rewards.

Prints one Markdown table (phenotype points and r) and writes it with the raw figures to
``<out>/phenotype_rule.json``.  The figures in docs/differences.md ("Differences from the paper") come from
this script.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from pipeline import config  # noqa: E402
from pipeline.agents import create_agent  # noqa: E402
from pipeline.build import build  # noqa: E402
from pipeline.harness import run_episode  # noqa: E402
from pipeline.score import score_episode  # noqa: E402


def tails_only(phenotype: pd.DataFrame, fraction: float) -> pd.DataFrame:
    values = pd.to_numeric(phenotype["phenotype"], errors="coerce")
    low, high = values.quantile(fraction), values.quantile(1 - fraction)
    return phenotype[(values <= low) | (values >= high)]


def rescore(sealed: Path, work: Path, ledger: Path, phenotype: pd.DataFrame | None) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "work"
        copy.mkdir()
        if (work / "submission.json").is_file():
            shutil.copyfile(work / "submission.json", copy / "submission.json")
        if phenotype is not None:
            phenotype.to_csv(copy / "phenotype.csv", index=False)
        for rule, compat in (("paper", True), ("fixed", False)):
            result = score_episode(sealed, copy, ledger, paper_compat=compat)
            detail = result["details"]["phenotype_construction"]
            out[rule] = {"points": result["phenotype_construction"], "r": detail["r"], "n": detail["n"]}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default="standard-01")
    parser.add_argument("--scale", default="tiny")
    parser.add_argument("--out", default="/tmp/dtw-phenotype-rule")
    parser.add_argument("--agents", default="correlation,cis_mr,mr_knockdown,analyst")
    parser.add_argument("--budget", type=int, default=450_000)
    parser.add_argument("--tail", type=float, default=0.1)
    parser.add_argument("--reuse", action="store_true", help="reuse the world and episodes already under --out")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    world = out / "worlds" / args.world
    if not (args.reuse and (world / "release" / "MANIFEST.json").is_file()):
        build(config.load([f"world={args.world}", f"scale={args.scale}", f"out={out / 'worlds'}", "cluster=sync",
                           "cluster.progress=false"]), progress=False)
    sealed = world / "sealed"
    rows = []
    for name in args.agents.split(","):
        episode = out / "episodes" / name
        if not (args.reuse and (episode / "score.json").is_file()):
            run_episode(world, create_agent(name), budget=args.budget, agent_name=name, out=episode, overwrite=True)
        work, ledger = episode / "work", episode / "ledger.jsonl"
        phenotype = pd.read_csv(work / "phenotype.csv") if (work / "phenotype.csv").is_file() else None
        whole = rescore(sealed, work, ledger, phenotype)
        tails = rescore(sealed, work, ledger, tails_only(phenotype, args.tail)) if phenotype is not None else None
        rows.append({"agent": name, "whole": whole, "tails": tails})
    b = json.loads((sealed / "phenotype_baseline.json").read_text())["built_in_correlation"]
    lines = [f"{args.world} ({args.scale}), b = {b:.3f}; phenotype points (|r|): S2.5's rule (paper_compat) | the "
             f"fixed rule; then with only the {args.tail:.0%} tails of the agent's own phenotype submitted", "",
             "| agent | S2.5, whole | fixed, whole | S2.5, tails only | fixed, tails only |", "|---|---|---|---|---|"]

    def cell(x):
        if x is None:
            return "-"
        return f"{x['points']:.2f} (r {x['r']:.3f}, n {x['n']})" if x["r"] is not None else \
            f"{x['points']:.2f} (n {x['n']} finite: fewer than 51)"

    for row in rows:
        w, t = row["whole"], row["tails"] or {}
        lines.append(f"| {row['agent']} | {cell(w['paper'])} | {cell(w['fixed'])} | {cell(t.get('paper'))} | "
                     f"{cell(t.get('fixed'))} |")
    text = "\n".join(lines)
    print(text)
    (out / "phenotype_rule.json").write_text(json.dumps({"b": b, "rows": rows, "table": text}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
