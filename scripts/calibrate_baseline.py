"""Calibrate the generator's imaging texture loadings and the harmful surrogate's imaging
effect to the FROZEN baseline phenotype.

The environment's baseline (``pipeline.imaging.measure.baseline_score``) is fixed and
archetype-agnostic.  The paper's built-in correlations b differ by archetype
(DCM 0.40-0.44, HCM 0.67-0.68, ischemic 0.71-0.72, HFpEF 0.75-0.76; Table S3), and
S1.3's six principal loadings alone do not reach them, so the generator carries two
texture channels the images express (myocardial T1 heterogeneity, regional wall-motion
heterogeneity) whose loadings on L are tuned here, per archetype, until the frozen
baseline's |corr(baseline, L)| lands in range.  The pipeline is never tuned.

The T8 surrogate moves every channel against the archetype's disease direction,
delta_k = -c_a alpha_a,k (SPEC T8 row).  c_a is set so that the surrogate's correlation
with the archetype's imaging signature of L (the cross-fitted OLS of L on every measured
feature, signed by its direction of disease) is T8_TARGET in every archetype: what the
pre-issue-12 DCM-fixed loadings gave in DCM (--reference measures it with
test_leaks=t8_signs: -0.27).  SPEC's "about what it is in DCM today (about -0.2)" only
holds for that signature: on the frozen baseline score itself the fixed loadings gave
0.00 in DCM (its wall-thickness term cancels the cavity terms), and the new effect gives
-c_a b_a there (reported as "T8 r").

    python scripts/calibrate_baseline.py [--n 3000] [--search] [--reference]

Without --search it reports b and the surrogate's signed correlation for the constants
committed in ``pipeline/modalities/phenotypes.py`` (TEXTURE_LOADINGS, T8_IMAGING_C).
With --search it searches each archetype's two texture loadings and c_a jointly and
prints the best; each candidate is evaluated on the rendered cohort moved along the
features' fitted linear response to the traits, and the script's report re-renders
with the committed constants to confirm.  Each evaluation simulates a cohort with the
world model's own trait equations, renders it with the release renderer and measures
it with the release baseline pipeline.
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
from pipeline.imaging.render import render_subjects  # noqa: E402
from pipeline.imaging.site_fields import sample_site_fields  # noqa: E402
from pipeline.modalities import phenotypes  # noqa: E402

T8_TARGET = -0.27  # the surrogate's signed r with the imaging signature of L in DCM, pre-issue-12 (--reference: -0.266)
TARGETS = {"dcm": (0.40, 0.44), "hcm": (0.67, 0.68), "ischemic": (0.71, 0.72), "hfpef": (0.75, 0.76)}


def fake_world(archetype: str, n: int, seed: int = 2026, leaks: tuple = ()):
    params = {"bias_params": dataclass_defaults(BiasParams)}
    w = types.SimpleNamespace(
        archetype=archetype, params=params, seed=(seed << 100) | 12345, n=n, n_blocks=-(-n // 1000),
        roles=types.SimpleNamespace(surrogate=0),
    )
    w.block_range = lambda b: (b * 1000, min(n, (b + 1) * 1000))
    w.has = lambda bias: bias in ("T5", "T6", "T8")
    w.leaky = lambda name: name in leaks
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


def render_measure(archetype: str, n: int, seed: int = 2026, leaks: tuple = ()):
    """Render and measure a simulated imaged cohort with the committed constants;
    returns (features, z-traits, simulated cohort)."""
    world, cohort = simulate(archetype, n, seed)
    world.leaky = lambda name: name in leaks
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
    return feats, z, cohort


CHANNELS = list(phenotypes.TRAITS) + ["t1_het", "motion_het"]


def channel_terms(archetype: str, texture: dict, c: float, cohort) -> dict:
    """Per channel of ``phenotypes.trait_z``: (loading on L, loading on P_T8, SD of the
    independent part, the other terms' values), for texture loadings and c."""
    alpha = dict(zip(phenotypes.TRAITS, phenotypes.ARCHETYPE_LOADINGS[archetype]), **texture)
    t6 = dataclass_defaults(BiasParams)["T6"]
    sex_z = (cohort.pop["sex"] - 0.4804) / 0.4996
    out = {}
    for k in CHANNELS:
        terms = [alpha[k], -c * alpha[k]]
        rest = 0.0 * cohort.latent
        if k in phenotypes.BODY_LOADINGS:
            terms += [phenotypes.BODY_LOADINGS[k], phenotypes.SEX_LOADINGS[k], phenotypes.AGE_LOADINGS[k]]
            rest = rest + (phenotypes.BODY_LOADINGS[k] * cohort.z_bmi + phenotypes.SEX_LOADINGS[k] * sex_z
                           + phenotypes.AGE_LOADINGS[k] * cohort.z_age)
        if k in ("edv", "esv"):
            terms.append(t6[k])
            rest = rest + t6[k] * cohort.z_exercise
        out[k] = (alpha[k], -c * alpha[k], float(np.sqrt(max(0.05, 1.0 - sum(t * t for t in terms)))), rest)
    return out


class Linearised:
    """The rendered cohort's features moved along their fitted linear response to the
    eight standardised channels, for other texture loadings and surrogate effects
    (exact for linear responses; the report re-renders to confirm)."""

    def __init__(self, feats, z, cohort, archetype, texture, c):
        self.feats, self.cohort, self.archetype = feats, cohort, archetype
        self.L, self.p8 = cohort.latent, cohort.proteins[0]
        self.Z = np.column_stack([z[k] for k in CHANNELS])
        old = channel_terms(archetype, texture, c, cohort)
        self.eps = np.column_stack([(z[k] - old[k][0] * self.L - old[k][1] * self.p8 - old[k][3]) / old[k][2] for k in CHANNELS])
        X = np.column_stack([np.ones(len(self.L)), self.Z])
        self.slopes = {}
        for name, v in feats.items():
            if name == "qc_ok":
                continue
            ok = np.isfinite(v)
            self.slopes[name] = np.linalg.lstsq(X[ok], v[ok], rcond=None)[0][1:]

    def features(self, texture: dict, c: float) -> dict:
        new = channel_terms(self.archetype, texture, c, self.cohort)
        cols = [a * self.L + d * self.p8 + u * self.eps[:, j] + rest for j, (a, d, u, rest) in enumerate(new[k] for k in CHANNELS)]
        dz = np.column_stack(cols) - self.Z
        out = dict(self.feats)
        for name, slope in self.slopes.items():
            out[name] = self.feats[name] + dz @ slope
        return out


def scores(feats, L, p8=None, ceiling: bool = True) -> dict:
    n = len(L)
    score = baseline_score(feats)
    r_l = np.corrcoef(score, L)[0, 1]
    out = {"b": abs(r_l)}
    if p8 is not None:
        # the surrogate against the score's own direction of disease: negative = looks protective
        out["t8"] = float(np.corrcoef(score, p8)[0, 1] * np.sign(r_l))
    if ceiling:
        X = np.column_stack([np.nan_to_num((v - np.nanmean(v)) / np.nanstd(v)) for k, v in feats.items() if k != "qc_ok"])
        folds = np.arange(n) % 5
        pred = np.empty(n)
        for k in range(5):
            tr, te = folds != k, folds == k
            beta = np.linalg.lstsq(np.column_stack([np.ones(tr.sum()), X[tr]]), L[tr], rcond=None)[0]
            pred[te] = np.column_stack([np.ones(te.sum()), X[te]]) @ beta
        out["imaging_ceiling"] = abs(np.corrcoef(pred, L)[0, 1])
        if p8 is not None:
            out["t8_signature"] = float(np.corrcoef(pred, p8)[0, 1] * np.sign(np.corrcoef(pred, L)[0, 1]))
    return out


def t8_reference(n: int) -> dict:
    """The surrogate's signed correlations in DCM under the pre-issue-12 DCM-fixed
    loadings (test_leaks=t8_signs)."""
    feats, _, cohort = render_measure("dcm", n, leaks=("t8_signs",))
    return scores(feats, cohort.latent, cohort.proteins[0])


def solve_c(lin: Linearised, texture: dict, target: float) -> tuple:
    """c with the surrogate's signed correlation with the imaging signature of L at
    ``target`` (bisection; it falls with c)."""
    lo, hi = 0.0, 1.5
    for _ in range(16):
        mid = (lo + hi) / 2
        r = scores(lin.features(texture, mid), lin.L, lin.p8)
        lo, hi = (mid, hi) if r["t8_signature"] > target else (lo, mid)
    c = round((lo + hi) / 2, 3)
    return c, scores(lin.features(texture, c), lin.L, lin.p8)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--search", action="store_true")
    ap.add_argument("--archetypes", default="dcm,hcm,ischemic,hfpef")
    ap.add_argument("--reference", action="store_true", help="also measure the pre-issue-12 DCM-fixed surrogate loadings in DCM")
    args = ap.parse_args()
    target = T8_TARGET
    if args.reference:
        ref = t8_reference(args.n)
        print(f"reference, DCM with the pre-issue-12 fixed surrogate loadings: signed r(P_T8, baseline score) = {ref['t8']:+.3f}, "
              f"signed r(P_T8, imaging signature of L) = {ref['t8_signature']:+.3f}")
    print(f"{'archetype':<10} {'t1_het':>7} {'motion_het':>10} {'c':>6} {'b':>7} {'target':>12} {'T8 r':>7} {'imaging ceiling':>16}"
          f" {'T8 r signature':>15}")
    for a in args.archetypes.split(","):
        base = dict(phenotypes.TEXTURE_LOADINGS[a])
        c0 = phenotypes.T8_IMAGING_C[a]
        feats, z, cohort = render_measure(a, args.n)
        lo, hi = TARGETS[a]
        res = scores(feats, cohort.latent, cohort.proteins[0])
        print(f"{a:<10} {base['t1_het']:>7.2f} {base['motion_het']:>10.2f} {c0:>6.3f} {res['b']:>7.3f} {lo:>5.2f}-{hi:<5.2f} "
              f"{res['t8']:>+7.3f} {res['imaging_ceiling']:>16.3f} {res['t8_signature']:>+15.3f}  (rendered)")
        if args.search:
            lin = Linearised(feats, z, cohort, a, base, c0)
            best = None
            grid = np.round(np.arange(0.0, 0.96, 0.05), 2)
            c_fixed, _ = solve_c(lin, base, target)
            for t1h, mh in itertools.product(grid, grid):
                tex = {"t1_het": float(t1h), "motion_het": float(mh)}
                r = scores(lin.features(tex, c_fixed), lin.L, lin.p8, ceiling=False)
                # closest to the target's midpoint; ties broken toward the most balanced, smallest texture loadings
                key = (round(abs(r["b"] - (lo + hi) / 2), 3), max(t1h, mh), t1h + mh)
                if best is None or key < best[0]:
                    best = (key, t1h, mh)
            _, t1h, mh = best
            # c for the chosen texture loadings (the signature barely moves with them)
            c, r = solve_c(lin, {"t1_het": float(t1h), "motion_het": float(mh)}, target)
            best = (None, t1h, mh, c, r)
            _, t1h, mh, c, r = best
            print(f"{a:<10} {t1h:>7.2f} {mh:>10.2f} {c:>6.3f} {r['b']:>7.3f} {lo:>5.2f}-{hi:<5.2f} {r['t8']:>+7.3f} "
                  f"{r['imaging_ceiling']:>16.3f} {r['t8_signature']:>+15.3f}  (search)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
