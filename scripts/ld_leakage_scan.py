"""Instruments that get an effect on L through LD, and how visible it is at a scale.

A variant that moves L (a driver's cis or trans variant, G_direct, the T7 decoy's cis
variant, a polygenic-background variant) passes a share r of its effect to every variant in
LD with it; with n participants a protein whose instrument is such a variant shows an
expected reduced-form z on L of about beta |r| sqrt(n).  The generator's linkage bound
(``pipeline.linkage``, issue 29) keeps that below 1 for every protein's cis and trans
variant but the truth's own, at the world's n.  This lists, per world, the proteins whose
expected z exceeds ``--z`` (from the hidden model alone: no build), and the largest one.

    python scripts/ld_leakage_scan.py --scale paper standard-01 null-01 ...
    python scripts/ld_leakage_scan.py --scale paper --panel paper-v1 --seeds <file>
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import config, linkage  # noqa: E402
from pipeline.model.sampler import sample_world  # noqa: E402


def scan(world_id: str, scale: str, z_min: float, extra: list) -> tuple:
    world = sample_world(config.load([f"world={world_id}", f"scale={scale}", *extra]))
    r = world.roles
    exempt = set(int(d) for d in r.drivers) | {x for x in (r.t4_partner, r.decoys.get("T7")) if x is not None}
    hits, worst = [], 0.0
    for e in linkage.instrument_exposure(world):
        if e["protein"] in exempt:
            continue
        for which in ("cis", "trans"):
            z, via = e[which]
            worst = max(worst, z)
            if z > z_min:
                hits.append({"protein": f"PROT_{e['protein']:04d}", "instrument": which, "via": via, "z": z})
    return sorted(hits, key=lambda h: -h["z"]), world.n, worst


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("worlds", nargs="*")
    parser.add_argument("--scale", default="paper")
    parser.add_argument("--panel", help="scan every world of this panel")
    parser.add_argument("--seeds", help="sealed seed file for held-out worlds")
    parser.add_argument("--z", type=float, default=1.0, help="report instruments whose expected z exceeds this")
    parser.add_argument("--set", action="append", default=[], help="extra config override (repeatable)")
    args = parser.parse_args(argv)
    worlds = list(args.worlds)
    if args.panel:
        from pipeline.panel import panel_worlds

        worlds += panel_worlds(args.panel)
    extra = args.set + ([f"seeds={args.seeds}"] if args.seeds else [])
    print(f"{'world':<22} {'n':>6}  largest expected z of a non-exempt instrument; proteins above {args.z:g}")
    bad = 0
    for wid in worlds:
        hits, n, worst = scan(wid, args.scale, args.z, extra)
        print(f"{wid:<22} {n:>6}  {worst:.3f}" + ("" if not hits else f"  {len(hits)}: " + ", ".join(
            f"{h['protein']} {h['instrument']} via {h['via']} (z {h['z']:.2f})" for h in hits[:6])))
        bad += bool(hits)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
