"""Every reference agent of each kind on given built worlds: one score table, to compare two
versions of the harness (the agents issue's "same scores before and after").

    python scripts/agent_parity.py --world <biobank world dir> --world <screening world dir>
        [--out /tmp/dtw-parity] [--json-out table.json] [--compare other.json]

Biobank worlds: every reference agent (and the tells exploit) at the three budgets; screening
worlds: the four reference strategies in the unrestricted mode.  Prints a Markdown table of
totals; with ``--compare`` also the earlier table's totals and the differences, exit status 1
when any differs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import kinds  # noqa: E402


def episodes(world: Path) -> list[tuple[str, dict]]:
    """(label, options) of every reference episode on ``world``."""
    kind = kinds.for_world(world)
    if kind is kinds.BIOBANK:
        from pipeline.agents import REFERENCE_AGENTS

        return [(f"{a}@{b}", {"agent": a, "budget": b}) for a in (*REFERENCE_AGENTS, "analyst", "tells")
                for b in (0, 450_000, 2_000_000)]
    return [(name, {"agent": name}) for name in ("random", "labels_only", "invariant_al", "pose_al")]


def play(world: Path, label: str, options: dict, out: Path) -> float:
    from pipeline.harness import run_episode

    kind = kinds.for_world(world)
    if kind is kinds.BIOBANK:
        from pipeline.agents import REGISTRY, create_agent

        agent = create_agent(options["agent"], sealed_dir=world / "sealed" if REGISTRY[options["agent"]].privileged
                             else None)
    else:
        from pipeline.screening.agents import create_agent

        agent = create_agent(options["agent"])
    extra = {"budget": options["budget"]} if "budget" in options else {"mode": "unrestricted"}
    if kind is kinds.BIOBANK:
        result = run_episode(world, agent, agent_name=options["agent"], out=out / world.name / label, overwrite=True,
                             **extra)
    else:
        from pipeline.screening.episode import run_episode as run_screening

        result = run_screening(world, agent, agent_name=options["agent"], out=out / world.name / label,
                               overwrite=True, **extra)
    return float(result["total"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", action="append", required=True)
    parser.add_argument("--out", default="/tmp/dtw-parity")
    parser.add_argument("--json-out")
    parser.add_argument("--compare")
    args = parser.parse_args(argv)
    out = Path(args.out)
    table: dict = {}
    for world in map(lambda w: Path(w).resolve(), args.world):
        for label, options in episodes(world):
            table[f"{world.name}/{label}"] = play(world, label, options, out)
            print(f"{world.name}/{label}: {table[f'{world.name}/{label}']:.2f}", file=sys.stderr, flush=True)
    earlier = json.loads(Path(args.compare).read_text()) if args.compare else None
    head = "| episode | total |" + (" before | difference |" if earlier else "")
    print(head)
    print("|---|---|" + ("---|---|" if earlier else ""))
    differ = 0
    for key, value in table.items():
        line = f"| {key} | {value:.2f} |"
        if earlier is not None:
            before = earlier.get(key)
            diff = None if before is None else value - before
            differ += diff is None or abs(diff) > 1e-9
            line += f" {'-' if before is None else f'{before:.2f}'} | {'-' if diff is None else f'{diff:+.2f}'} |"
        print(line)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(table, indent=1, sort_keys=True))
    if earlier is not None:
        print(f"\n{len(table) - differ} of {len(table)} episodes score the same", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
