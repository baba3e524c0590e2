"""Unlisted instruments that move L through weak LD, and how visible they are at a scale.

SPEC section 4 keeps every protein's cis variant unlinked (expected haplotype r^2 <= 0.05) from
a variant that moves L (a driver's cis variant, G_direct, the T7 decoy's cis variant), except
the planted T4 partner.  A link below that threshold still passes a share r of the moving
variant's effect on L to the protein's instrument; with n participants the instrument's
expected reduced-form z on L is about beta * |r| * sqrt(n), so an ordinary protein can show a
significant MR estimate that no trap in the truth accounts for.  This lists, per world, the
ordinary proteins whose expected z exceeds ``--z`` (from the hidden model alone: no build).

    python scripts/ld_leakage_scan.py --scale paper standard-01 null-01 ...

beta: a driver's cis variant moves L by |w| sqrt(h2) (its protein's weight and instrument
strength), G_direct by the L equation's coefficient, the T7 decoy's by its direct term; all in
L's raw units, which the standardisation of L leaves within a few percent at the defaults.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import config  # noqa: E402
from pipeline.ld import LINK_R2, expected_haplotype_r  # noqa: E402
from pipeline.modalities.cohort import L_DIRECT  # noqa: E402
from pipeline.world import sample_world  # noqa: E402


def moving_variants(world, params) -> list:
    """(variant, effect on L, what, proteins allowed to carry it)."""
    roles = world.roles
    out = []
    for d, w in zip(roles.drivers, roles.weights):
        allowed = {int(d)}
        if roles.t4_causal is not None and int(d) == roles.t4_causal and roles.t4_partner is not None:
            allowed.add(int(roles.t4_partner))
        out.append((int(world.protein_cis[d]), abs(float(w)) * math.sqrt(float(world.protein_h2[d])),
                    f"driver PROT_{int(d):04d}", allowed))
    out.append((int(world.direct_variant), L_DIRECT, "G_direct", set()))
    if "T7" in roles.decoys:
        t7 = int(roles.decoys["T7"])
        out.append((int(world.protein_cis[t7]), float(params["bias_params"]["T7"]["direct"]), f"T7 PROT_{t7:04d}", {t7}))
    return out


def scan(world_id: str, scale: str, z_min: float, extra: list) -> list:
    resolved = config.load([f"world={world_id}", f"scale={scale}", *extra])
    world = sample_world(resolved)
    decay = 1000.0 * float(resolved.cfg.world.ld_decay_kb)
    hits = []
    for m, beta, what, allowed in moving_variants(world, world.params):
        for p in range(world.n_proteins):
            j = int(world.protein_cis[p])
            if p in allowed or world.contig[j] != world.contig[m]:
                continue
            rho = 1.0 if j == m else math.exp(-abs(int(world.position[j]) - int(world.position[m])) / decay)
            r = 1.0 if j == m else float(np.ravel(expected_haplotype_r(float(world.af[j]), float(world.af[m]), rho))[0])
            z = beta * abs(r) * math.sqrt(world.n)
            if z > z_min:
                hits.append({"protein": f"PROT_{p:04d}", "via": what, "r2": r * r,
                             "kb": abs(int(world.position[j]) - int(world.position[m])) / 1000.0, "z": z})
    return sorted(hits, key=lambda h: -h["z"]), world.n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("worlds", nargs="+")
    parser.add_argument("--scale", default="paper")
    parser.add_argument("--z", type=float, default=3.0, help="report links whose expected z exceeds this")
    parser.add_argument("--set", action="append", default=[], help="extra config override (repeatable)")
    args = parser.parse_args(argv)
    print(f"{'world':<22} {'n':>6}  protein    via                  r2      kb      expected z   (links r2 <= {LINK_R2})")
    for wid in args.worlds:
        hits, n = scan(wid, args.scale, args.z, args.set)
        if not hits:
            print(f"{wid:<22} {n:>6}  -")
        for h in hits:
            print(f"{wid:<22} {n:>6}  {h['protein']}  {h['via']:<19} {h['r2']:.4f}  {h['kb']:6.1f}  {h['z']:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
