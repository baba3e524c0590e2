"""Is a variant's association with L a path of the world's model or a sampling extreme?

    python scripts/replicate_cohorts.py <world_dir> --variants rs101347,rs101431 [--replicates 10]

Re-draws the world's participants R times from its own hidden model (the world is sampled
from ``sealed/world.yaml``; each replicate swaps the participant seed for one derived from
the world's seed and the replicate number, so the model's parameters, loci and roles stay
those of the built world) and measures each variant's reduced-form z on L and L_late in
every replicate.  A path the model has shows as a mean z away from 0 (its standard error is
the replicates' SD over sqrt(R)); a sampling extreme of the built cohort (a lead variant
with no path is exactly N(0, 1)) shows as a mean near 0 with an SD near 1.  This is how
``python -m pipeline.audit --instruments`` findings tied to nothing in the model are told
apart (issue 29: "unexplained" associations).  The world's own z is printed beside them.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import bundle, config  # noqa: E402
from pipeline.modalities import cohort as cohort_mod  # noqa: E402
from pipeline.modalities import molecules  # noqa: E402
from pipeline.modalities.population import population_block  # noqa: E402
from pipeline.model.sampler import sample_world  # noqa: E402


def replicate_cohort(world, seed: int, variants: list) -> tuple:
    """(standardised dosages of ``variants`` [n, k], L, L_late) of one fresh cohort of ``world``."""
    world = dataclasses.replace(world, seed=seed)  # the World is frozen: a copy with the participant seed swapped
    tracked = world.tracked_proteins()
    special = np.array(sorted(world.special_proteins().values()), dtype=np.int64)
    cores, dos = [], []
    for b in range(world.n_blocks):
        pop = population_block(world, b)
        hap = molecules.haplotypes(world, b)
        dosage = hap[:, 0, :] + hap[:, 1, :]
        mol = molecules.BlockMolecules(world, b, pop, dosage)
        prot, tr = mol.proteins_raw(), mol.transcripts_raw()
        poly = molecules.dot(molecules.standardised_genotypes(world, dosage, world.polygenic_variants),
                             world.polygenic_effects[:, None])[:, 0]
        cores.append(dict(block=b, pop=pop, tracked_raw=prot[:, tracked], g_cis_tracked=mol.genotypes(world.protein_cis[tracked]),
                          g_direct=molecules.standardised_genotypes(world, dosage, np.array([world.direct_variant]))[:, 0],
                          g_poly=poly, m_prot=molecules.moments(prot), m_tr=molecules.moments(tr),
                          m_met=molecules.moments(mol.metabolites_raw()), special_resid=mol.protein_resid[:, special],
                          special_tr_own=tr[:, special] - world.transcript_concordance[special] * mol.protein_bio[:, special],
                          t4_abundance=mol.t4_abundance_raw() if world.t4_coregulated else None))
        dos.append(dosage[:, variants])
    coh = cohort_mod.assemble(world, cores)
    g = np.concatenate(dos).astype(np.float64)
    sd = g.std(axis=0)
    g = (g - g.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return g, coh.latent, coh.latent_late


def replicate_z(world_yaml: str, variants: list, replicates: int, out: str = ".") -> dict:
    """Reduced-form z of each variant on L and L_late in ``replicates`` fresh cohorts of the
    world recorded in ``world_yaml`` (the text of its sealed/world.yaml): {variant: (mean z_L,
    SE, mean z_Llate, SE)}."""
    resolved = config.from_record(world_yaml, out=out)
    world = sample_world(resolved)
    ids = list(world.variant_id)
    idx = [ids.index(v) for v in variants]
    base = world.seed
    zl, zll = [], []
    for k in range(replicates):
        seed = int.from_bytes(hashlib.sha256(f"{base}/replicate/{k}".encode()).digest()[:16], "little") | (1 << 127)
        g, L, late = replicate_cohort(world, seed, idx)
        zl.append(z_of(g, L))
        zll.append(z_of(g, late))
    zl, zll = np.array(zl), np.array(zll)
    se = lambda a: a.std(axis=0, ddof=1) / np.sqrt(replicates)  # noqa: E731
    return {v: (float(zl[:, j].mean()), float(se(zl)[j]), float(zll[:, j].mean()), float(se(zll)[j]))
            for j, v in enumerate(variants)}


def z_of(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    y = (y - y.mean()) / y.std()
    return g.T @ y / np.sqrt(len(y))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("world_dir")
    ap.add_argument("--variants", required=True, help="comma-separated variant ids")
    ap.add_argument("--replicates", type=int, default=10)
    args = ap.parse_args(argv)
    if args.replicates < 2:
        ap.error(f"--replicates: {args.replicates}; valid: at least 2")
    sealed = os.path.join(args.world_dir, bundle.SEALED)
    text = open(os.path.join(sealed, bundle.WORLD_CONFIG)).read()
    resolved = config.from_record(text, out=os.path.dirname(os.path.abspath(args.world_dir)))
    world = sample_world(resolved)
    ids = list(world.variant_id)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    missing = [v for v in names if v not in ids]
    if missing:
        print(f"error: --variants: {', '.join(missing)} not in the world; valid: its variant ids", file=sys.stderr)
        return 2
    idx = [ids.index(v) for v in names]
    # the built cohort's own z (the release's genotypes, the sealed latent)
    from pipeline.genotypes_io import load_genotypes

    geno = load_genotypes(os.path.join(args.world_dir, bundle.RELEASE), threads=1)
    latent = bundle.read_sealed(sealed, bundle.LATENT).reindex(geno.index)
    g0 = np.array(geno[names], dtype=np.float64)
    g0 = (g0 - g0.mean(axis=0)) / g0.std(axis=0)
    own_l, own_late = z_of(g0, latent["latent"].to_numpy()), z_of(g0, latent["latent_late"].to_numpy())
    base = world.seed
    zl, zll = [], []
    for k in range(args.replicates):
        seed = int.from_bytes(hashlib.sha256(f"{base}/replicate/{k}".encode()).digest()[:16], "little") | (1 << 127)
        g, L, late = replicate_cohort(world, seed, idx)
        zl.append(z_of(g, L))
        zll.append(z_of(g, late))
        print(f"replicate {k + 1}/{args.replicates} done", file=sys.stderr)
    zl, zll = np.array(zl), np.array(zll)
    R = args.replicates
    print(f"{resolved.cfg.world.id}: n = {world.n}, {R} replicate cohorts of the same hidden model")
    print(f"{'variant':<12} {'z_L built':>9} {'mean z_L':>9} {'SE':>6} {'SD':>6} {'z_Llate built':>13} {'mean z_Llate':>12} {'SE':>6}")
    for j, v in enumerate(names):
        print(f"{v:<12} {own_l[j]:>+9.2f} {zl[:, j].mean():>+9.2f} {zl[:, j].std(ddof=1) / np.sqrt(R):>6.2f} "
              f"{zl[:, j].std(ddof=1):>6.2f} {own_late[j]:>+13.2f} {zll[:, j].mean():>+12.2f} {zll[:, j].std(ddof=1) / np.sqrt(R):>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
