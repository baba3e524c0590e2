"""Calibrate the generator's imaging texture loadings to the FROZEN baseline phenotype.

The environment's baseline (``pipeline.imaging.measure.baseline_score``) is fixed and
archetype-agnostic.  The paper's built-in correlations b differ by archetype
(DCM 0.40-0.44, HCM 0.67-0.68, ischemic 0.71-0.72, HFpEF 0.75-0.76; Table S3), and
S1.3's six principal loadings alone do not reach them, so the generator carries two
texture channels the images express (myocardial T1 heterogeneity, regional wall-motion
heterogeneity) whose loadings on L are tuned here, per archetype, until the frozen
baseline's |corr(baseline, L)| lands in range.  The pipeline is never tuned.

    python scripts/calibrate_baseline.py [--n 3000] [--search]

Without --search it reports b for the loadings committed in
``pipeline/modalities/phenotypes.py`` (TEXTURE_LOADINGS).  With --search it grid-searches
each archetype's two loadings and prints the best.  Each evaluation simulates a cohort
with the world model's own trait equations, renders it with the release renderer and
measures it with the release baseline pipeline.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.config import BiasParams, dataclass_defaults  # noqa: E402
from pipeline.imaging.measure import baseline_score, measure_subjects  # noqa: E402
from pipeline.imaging.render import render_subjects, sample_site_fields  # noqa: E402
from pipeline.modalities import phenotypes  # noqa: E402

TARGETS = {"dcm": (0.40, 0.44), "hcm": (0.67, 0.68), "ischemic": (0.71, 0.72), "hfpef": (0.75, 0.76)}


def fake_world(archetype: str, n: int, seed: int = 2026):
    params = {"bias_params": dataclass_defaults(BiasParams)}
    w = types.SimpleNamespace(
        archetype=archetype, params=params, seed=(seed << 100) | 12345, n=n, n_blocks=-(-n // 1000),
        roles=types.SimpleNamespace(surrogate=0),
    )
    w.block_range = lambda b: (b * 1000, min(n, (b + 1) * 1000))
    w.has = lambda bias: bias in ("T5", "T6", "T8")
    return w


def simulate(archetype: str, n: int, seed: int = 2026):
    rng = np.random.default_rng(seed)
    world = fake_world(archetype, n, seed)
    # imaged participants are younger and leaner (selection on -0.24 z(A) - 0.52 z(BMI))
    z_age = rng.standard_normal(n) - 0.25
    z_bmi = rng.standard_normal(n) - 0.45
    L = 0.15 * z_bmi + 0.08 * z_age + np.sqrt(1 - 0.15 ** 2 - 0.08 ** 2) * rng.standard_normal(n)
    cohort = types.SimpleNamespace(
        latent=L, z_age=z_age, z_bmi=z_bmi, z_exercise=rng.standard_normal(n),
        pop={"sex": (rng.random(n) < 0.48).astype(np.int8)}, proteins={0: rng.standard_normal(n)},
    )
    return world, cohort


def render_measure(archetype: str, n: int, seed: int = 2026):
    """Render and measure a simulated imaged cohort with the committed loadings;
    returns (features, z-traits, L)."""
    world, cohort = simulate(archetype, n, seed)
    z = phenotypes.trait_z(world, cohort, cohort.latent, 1)
    traits = phenotypes.traits_clinical(world, z, "traits")
    traits["site"] = np.arange(n) % 10
    traits["noise_key"] = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    fields = sample_site_fields(np.random.default_rng(seed), 10)
    feats = {}
    for s in range(0, n, 250):
        sl = slice(s, s + 250)
        cine, t1 = render_subjects({k: np.asarray(v)[sl] for k, v in traits.items()}, fields)
        f = measure_subjects(cine, t1)
        for k, v in f.items():
            feats.setdefault(k, []).append(v)
    feats = {k: np.concatenate(v) for k, v in feats.items()}
    return feats, z, cohort.latent


def reweighted(feats, z, L, old: dict, new: dict, seed: int = 7):
    """Features as if the texture channels had loadings ``new`` instead of ``old``:
    each texture trait's standardised value is rebuilt as a L + sqrt(1 - a^2) e with
    the same independent part e, and the measured feature moves along its observed
    (linear) response to the trait.  Exact for linear responses; the script's final
    report re-renders with the chosen loadings to confirm."""
    out = dict(feats)
    for trait, feat in (("t1_het", "t1_heterogeneity_ms"), ("motion_het", "motion_heterogeneity")):
        a0, a1 = old[trait], new[trait]
        e = (z[trait] - a0 * L) / np.sqrt(max(1e-9, 1 - a0 * a0))
        z_new = a1 * L + np.sqrt(max(0.0, 1 - a1 * a1)) * e
        slope = np.polyfit(z[trait], np.nan_to_num(feats[feat], nan=np.nanmean(feats[feat])), 1)[0]
        out[feat] = feats[feat] + slope * (z_new - z[trait])
    return out


def scores(feats, L) -> dict:
    n = len(L)
    score = baseline_score(feats)
    X = np.column_stack([np.nan_to_num((v - np.nanmean(v)) / np.nanstd(v)) for k, v in feats.items() if k != "qc_ok"])
    folds = np.arange(n) % 5
    pred = np.empty(n)
    for k in range(5):
        tr, te = folds != k, folds == k
        beta = np.linalg.lstsq(np.column_stack([np.ones(tr.sum()), X[tr]]), L[tr], rcond=None)[0]
        pred[te] = np.column_stack([np.ones(te.sum()), X[te]]) @ beta
    return {"b": abs(np.corrcoef(score, L)[0, 1]), "imaging_ceiling": abs(np.corrcoef(pred, L)[0, 1])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--search", action="store_true")
    ap.add_argument("--archetypes", default="dcm,hcm,ischemic,hfpef")
    args = ap.parse_args()
    print(f"{'archetype':<10} {'t1_het':>7} {'motion_het':>10} {'b':>7} {'target':>12} {'imaging ceiling':>16}")
    for a in args.archetypes.split(","):
        base = dict(phenotypes.TEXTURE_LOADINGS[a])
        feats, z, L = render_measure(a, args.n)
        lo, hi = TARGETS[a]
        res = scores(feats, L)
        print(f"{a:<10} {base['t1_het']:>7.2f} {base['motion_het']:>10.2f} {res['b']:>7.3f} {lo:>5.2f}-{hi:<5.2f} "
              f"{res['imaging_ceiling']:>16.3f}  (rendered)")
        if args.search:
            best = None
            for t1h, mh in itertools.product(np.round(np.arange(0.0, 0.96, 0.05), 2), np.round(np.arange(0.0, 0.96, 0.05), 2)):
                r = scores(reweighted(feats, z, L, base, {"t1_het": t1h, "motion_het": mh}), L)
                # closest to the target's midpoint; ties broken toward the most balanced, smallest texture loadings
                key = (round(abs(r["b"] - (lo + hi) / 2), 3), max(t1h, mh), t1h + mh)
                if best is None or key < best[0]:
                    best = (key, t1h, mh, r)
            _, t1h, mh, r = best
            print(f"{a:<10} {t1h:>7.2f} {mh:>10.2f} {r['b']:>7.3f} {lo:>5.2f}-{hi:<5.2f} {r['imaging_ceiling']:>16.3f}  (search)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
