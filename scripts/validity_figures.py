"""Issue 12's six findings measured over a built panel (or any folder of worlds):

    python scripts/validity_figures.py <panel_dir> [--json out.json]

For each world (``<panel_dir>/<world>/{release,sealed}``) and each role protein it
reports where the role falls among all proteins on the role-blind statistic the issue
found to be a tell, as a two-sided percentile (0 = lowest, 1 = highest); a role is in
the "outer 2 %" when its percentile is below 0.02 or above 0.98.  Then:

1. transcripts: r(protein, its transcript) of the T1 and T2 decoys and the A9 partner;
2. communality: share of a protein's variance in the proteome's top 12 principal
   components, and its covariate signature (R^2 on age, sex and BMI; coefficient on
   sex), for the same three;
3. the A9 driver's lead-variant r^2 (max over all variants of r^2 with the protein);
4. unplanned instruments that move L: proteins other than the planted ones whose cis
   variant (sealed) is shared with or linked (expected r^2 > 0.05) to a driver's cis
   variant, the T7 variant or G_direct; also proteins whose genome-wide significant
   lead variant (release only) is linked to one of those (the T2 decoy and the A9
   partner, which follow disease, counted apart: a driver's variant reaches them via L);
5. T8: correlation of the surrogate with the archetype's own imaging signature of L
   (OLS prediction of L from the eight standardised imaging channels among the
   imaged, sealed) beside L's own, the same from the baseline pipeline's measurements
   of the released pixels when the world has them, and the surrogate's adjusted
   log-hazard z for cardiac death (release);
6. T4: |r| of each member with L, and the z of the coefficient on their difference in
   a joint regression of L on both (plus the same for their transcripts and visit-2
   values against L_late).

Only the release is used for the statistics an analyst would compute; the sealed
truth only says which protein is which and supplies L for figures 5 and 6.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.ld import LINK_R2, expected_haplotype_r  # noqa: E402
from pipeline.validation.core import WorldDir  # noqa: E402
from pipeline.validation.stats import ols, poisson  # noqa: E402

OUTER = 0.02
TRAITS = ("edv", "esv", "wall", "motion", "lag", "t1", "t1_het", "motion_het")


def percentile(values: np.ndarray, j: int) -> float:
    """Mid-rank percentile of values[j] among all finite values (0 lowest, 1 highest)."""
    v = values[np.isfinite(values)]
    x = values[j]
    return float(((v < x).sum() + 0.5 * ((v == x).sum())) / len(v))


def colwise_corr(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Correlation of matching columns, pairwise-complete."""
    ok = np.isfinite(A) & np.isfinite(B)
    out = np.empty(A.shape[1])
    for j in range(A.shape[1]):
        m = ok[:, j]
        out[j] = np.corrcoef(A[m, j], B[m, j])[0, 1]
    return out


def standardised(X: np.ndarray) -> np.ndarray:
    X = np.where(np.isfinite(X), X, np.nanmean(X, axis=0))
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def roles_of(truth: dict, hidden: dict) -> dict:
    r = hidden["roles"]
    out = {f"driver:{p}": p for p in r["drivers"]}
    for b, p in r["decoys"].items():
        out[b] = p
    for k in ("t4_causal", "t4_partner", "a9_causal", "a9_partner", "surrogate"):
        if r.get(k):
            out[k] = r[k]
    return out


def world_figures(d: str) -> dict:
    w = WorldDir(d)
    truth, hid = w.truth, w.hidden
    roles = roles_of(truth, hid)
    prot = w.proteomics
    pids = list(prot.columns)
    P = prot.to_numpy(float)
    tr = w.table("transcriptomics")
    T = tr.to_numpy(float)
    cov = w.covariates
    L = w.latent["latent"].to_numpy()
    Ll = w.latent["latent_late"].to_numpy()
    out = {"world": truth["world_id"], "archetype": truth["archetype"], "roles": {}}
    stats: dict = {}

    # 1. transcript agreement
    stats["transcript_r"] = colwise_corr(P, T)
    # 2. communality and covariate signature
    Z = standardised(P)
    vals, vecs = np.linalg.eigh(Z.T @ Z / len(Z))  # ascending; Z is standardised
    stats["communality"] = (vecs[:, -12:] ** 2 * vals[-12:]).sum(axis=1)
    C = np.column_stack([np.ones(len(cov)), cov["p21003_i0"].to_numpy(float), cov["p31_i0"].to_numpy(float),
                         cov["p21001_i0"].to_numpy(float).clip(15, 55)])
    b = np.linalg.lstsq(C, Z, rcond=None)[0]
    stats["covariate_r2"] = 1.0 - ((Z - C @ b) ** 2).mean(axis=0) / Z.var(axis=0)
    stats["sex_coefficient"] = b[2]
    # 3. lead-variant r^2
    G = w.genotypes
    Gs = standardised(G.to_numpy(np.float32).astype(np.float64))
    R = (Gs.T @ Z) / len(Z)  # variants x proteins
    stats["lead_r2"] = (R ** 2).max(axis=0)
    lead = np.argmax(R ** 2, axis=0)
    # visit-2 stability
    v2 = w.table("proteomics_visit2")
    both = prot.loc[v2.index]
    stats["visit2_r"] = colwise_corr(both.to_numpy(float), v2.to_numpy(float))

    for name, p in roles.items():
        j = pids.index(p)
        out["roles"][name] = {k: percentile(v, j) for k, v in stats.items()}

    # 4. unplanned instruments that move L
    var = w.variants
    vidx = {v: i for i, v in enumerate(var["id"])}
    contig = var["contig"].to_numpy()
    pos = var["position"].to_numpy().astype(float)
    q = np.clip(G.to_numpy(np.float32).mean(axis=0) / 2.0, 1e-4, 1 - 1e-4)
    decay = 1000.0 * float(hid.get("ld_decay_kb", 110.0))
    cis = np.array([vidx[v] for v in hid["protein_cis_variant"]])
    r = hid["roles"]
    movers = [(p, cis[pids.index(p)], r.get("t4_partner") if p == r.get("t4_causal") else None) for p in r["drivers"]]
    if "T7" in r["decoys"]:
        movers.append((r["decoys"]["T7"], cis[pids.index(r["decoys"]["T7"])], None))
    movers.append((None, vidx[hid["direct_variant"]], None))

    def linked_to(variants, m):
        rho = np.where(contig[variants] == contig[m], np.exp(-np.abs(pos[variants] - pos[m]) / decay), 0.0)
        r2 = np.square(expected_haplotype_r(q[variants], np.full(len(variants), q[m]), rho))
        return (r2 > LINK_R2) | (variants == m), r2

    sealed_hits, lead_hits, max_r2 = [], [], []
    n = len(Z)
    z_crit = 5.45  # two-sided Bonferroni at 0.05 over about 300 x 1,000 tests and beyond
    zlead = np.sqrt(stats["lead_r2"] * n / np.maximum(1e-9, 1 - stats["lead_r2"]))
    for owner, m, allowed in movers:
        hit, r2 = linked_to(cis, m)
        for j in np.flatnonzero(hit):
            if pids[j] not in (owner, allowed):
                sealed_hits.append(pids[j])
                max_r2.append(float(r2[j]) if cis[j] != m else 1.0)
        hit_lead, _ = linked_to(lead, m)
        for j in np.flatnonzero(hit_lead & (zlead > z_crit)):
            if pids[j] not in (owner, allowed):
                # the T2 decoy and the A9 partner follow disease, so a driver's variant can
                # lead their scan through L: their planted path, listed in the truth
                through_l = pids[j] in (r["decoys"].get("T2"), r.get("a9_partner"))
                lead_hits.append(pids[j] + (" (via L, planted)" if through_l else ""))
    out["unplanned_sealed"] = sorted(set(sealed_hits))
    out["unplanned_sealed_max_r2"] = max(max_r2) if max_r2 else 0.0
    out["unplanned_lead"] = sorted(set(h for h in lead_hits if "planted" not in h))
    out["lead_via_l"] = sorted(set(h for h in lead_hits if "planted" in h))
    out["cis_placement"] = hid.get("cis_placement")

    # 5. T8
    if r.get("surrogate"):
        hp = pd.read_parquet(os.path.join(w.sealed, "hidden_participants.parquet"))
        im = cov["imaged"].to_numpy(bool)
        X = np.column_stack([hp[f"trait_{t}"].to_numpy() for t in TRAITS if f"trait_{t}" in hp])[im]
        fit = np.linalg.lstsq(np.column_stack([np.ones(im.sum()), X]), L[im], rcond=None)[0]
        S = np.column_stack([np.ones(im.sum()), X]) @ fit
        x8 = prot[r["surrogate"]].to_numpy(float)[im]
        ok = np.isfinite(x8)
        r8 = float(np.corrcoef(x8[ok], S[ok])[0, 1])
        out["t8_signature_r"] = r8
        out["t8_signature_z"] = r8 * np.sqrt(ok.sum() - 2) / np.sqrt(1 - r8 * r8)
        out["L_signature_r"] = float(np.corrcoef(L[im], S)[0, 1])
        feats_path = os.path.join(w.sealed, "imaging_features.parquet")
        if os.path.exists(feats_path):
            # the same from the baseline pipeline's measurements of the released pixels
            # (cross-fitted OLS of L on every measured feature)
            f = pd.read_parquet(feats_path)
            f = f[[k for k in f.columns if f[k].dtype.kind == "f"]]
            rows = cov.index.get_indexer(f.index)
            F = standardised(f.to_numpy(float))
            F = np.column_stack([np.ones(len(F)), F])
            folds = np.arange(len(F)) % 5
            Sp = np.empty(len(F))
            for k in range(5):
                tr_, te = folds != k, folds == k
                Sp[te] = F[te] @ np.linalg.lstsq(F[tr_], L[rows][tr_], rcond=None)[0]
            xp = prot[r["surrogate"]].to_numpy(float)[rows]
            okp = np.isfinite(xp)
            out["t8_pixels_r"] = float(np.corrcoef(xp[okp], Sp[okp])[0, 1])
            out["L_pixels_r"] = float(np.corrcoef(L[rows], Sp)[0, 1])
        mort = w.table("mortality").reindex(cov.index)
        card = (mort["cause"] == "cardiac").to_numpy(float)
        x = prot[r["surrogate"]].to_numpy(float)
        okx = np.isfinite(x)
        Xp = [x, cov["p21003_i0"].to_numpy(float), cov["p31_i0"].to_numpy(float), cov["p21001_i0"].to_numpy(float),
              cov["p20116_i0"].to_numpy(float).clip(0, 1)]
        fitp = poisson(card[okx], mort["followup_years"].to_numpy(float)[okx], [v[okx] for v in Xp],
                       ["P", "age", "sex", "bmi", "smk"])
        out["t8_cardiac_z"] = fitp["P"][0] / fitp["P"][1]

    # 6. T4
    if r.get("t4_partner"):
        d, p = r["t4_causal"], r["t4_partner"]

        def pair_stats(a, b, y):
            ok = np.isfinite(a) & np.isfinite(b)
            f, _, _ = ols(y[ok], [(a + b)[ok], (a - b)[ok]], ["sum", "difference"])
            return {"r_driver": float(np.corrcoef(a[ok], y[ok])[0, 1]), "r_partner": float(np.corrcoef(b[ok], y[ok])[0, 1]),
                    "z_difference": f["difference"][0] / f["difference"][1]}

        out["t4"] = {"proteins": pair_stats(prot[d].to_numpy(float), prot[p].to_numpy(float), L),
                     "transcripts": pair_stats(tr[d.replace("PROT", "TRANS")].to_numpy(float),
                                               tr[p.replace("PROT", "TRANS")].to_numpy(float), L)}
        rows = cov.index.get_indexer(v2.index)
        out["t4"]["visit2"] = pair_stats(v2[d].to_numpy(float), v2[p].to_numpy(float), Ll[rows])
        out["t4"]["missing"] = [int(prot[d].isna().sum()), int(prot[p].isna().sum())]
    return out


def summary(rows: list) -> list:
    lines = []

    def role_stat(kind, stat, side):
        pcts = []
        for w in rows:
            for name, v in w["roles"].items():
                if name == kind or (kind == "driver" and name.startswith("driver:")):
                    pcts.append(v[stat])
        pcts = np.array(pcts)
        if not len(pcts):
            return None
        outer = int(((pcts < OUTER) | (pcts > 1 - OUTER)).sum())
        return f"{kind:<11} {stat:<16} n={len(pcts):>2}  outer 2 %: {outer:>2}  mean percentile {pcts.mean():.2f}  " \
               f"lowest {pcts.min():.3f}  highest {pcts.max():.3f}"

    lines.append("1-3. role percentiles among all proteins (two-sided outer 2 %)")
    for kind in ("T1", "T2", "a9_partner", "T3", "T7", "T9", "t4_causal", "t4_partner", "a9_causal", "surrogate", "driver"):
        for stat in ("transcript_r", "communality", "covariate_r2", "sex_coefficient", "lead_r2", "visit2_r"):
            line = role_stat(kind, stat, "both")
            if line:
                lines.append("  " + line)
    lines.append("4. unplanned instruments that move L (sealed cis variants; release lead variants)")
    for w in rows:
        lines.append(f"  {w['world']:<22} sealed {len(w['unplanned_sealed']):>2} (max r2 {w['unplanned_sealed_max_r2']:.2f})  "
                     f"lead {len(w['unplanned_lead']):>2} (+{len(w.get('lead_via_l', []))} planted via L)  "
                     f"fill {(w.get('cis_placement') or {}).get('fill', '-')}")
    lines.append("5. T8: r(surrogate, archetype's imaging signature of L) vs r(L, signature); cardiac-death z")
    for w in rows:
        if "t8_signature_r" in w:
            lines.append(f"  {w['world']:<22} {w['archetype']:<9} r = {w['t8_signature_r']:+.3f} (z {w['t8_signature_z']:+.1f})  "
                         f"r(L) = {w['L_signature_r']:+.3f}  cardiac z = {w['t8_cardiac_z']:+.1f}"
                         + (f"  pixels: r = {w['t8_pixels_r']:+.3f}, r(L) = {w['L_pixels_r']:+.3f}" if "t8_pixels_r" in w else ""))
    lines.append("6. T4: r with L (driver, partner) and z of the difference in a joint regression")
    for w in rows:
        if "t4" in w:
            t = w["t4"]
            lines.append(f"  {w['world']:<22} " + "  ".join(
                f"{k}: {t[k]['r_driver']:+.3f}/{t[k]['r_partner']:+.3f} z {t[k]['z_difference']:+.1f}"
                for k in ("proteins", "transcripts", "visit2")) + f"  missing {t['missing']}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("panel_dir")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args(argv)
    worlds = sorted(d for d in os.listdir(args.panel_dir) if os.path.isdir(os.path.join(args.panel_dir, d, "sealed")))
    rows = [world_figures(os.path.join(args.panel_dir, d)) for d in worlds]
    print("\n".join(summary(rows)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
