"""Every value validation expects of a world, in one table, each with its source.

The numbers are copied from the documents the generator is judged against, not
imported from the generator: Supplementary Methods S1 (``S1.x``), Supplementary
Table S3 and Supplementary Note S2 (the paper's pixel trace), and SPEC.md (its
section 4 defaults table, for the parameters the seeds leave open).  A wrong
constant in the generator therefore fails validation instead of validating
itself; ``tests/core/test_validation_targets.py`` pins the table to the
supplement's and SPEC's numbers and checks that validation imports no generator
module.

What the table does not hold is what a world sets for itself: its archetype, hard
and messy flags, planted biases, scale and visit-2 fraction come from the
resolved config the world was built with (``sealed/world.yaml``) or its truth,
and its sampled parameters (driver weights, the interaction coefficient, the LD
decay of the linkage bound, the centre shifts) from the sealed hidden model.
The mechanism coefficients are deliberately the documents' and not the world's
config (``world.bias_params``): a world with a mechanism switched off (the
``negative-controls`` world) must fail its check.

The tolerances of the calibration figures (how many standard errors) live in
``pipeline/data/calibration_targets.yaml`` beside the source line each check
reports; this table holds the values those tolerances are around.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType, SimpleNamespace
from typing import Any


@dataclass(frozen=True)
class Target:
    """One expected value and where it is stated."""

    value: Any
    source: str


_SPEC4 = "SPEC section 4 defaults table"

TABLE = MappingProxyType({
    # ---- S1.1 population ---------------------------------------------------------------
    "age_mean": Target(59.147, "S1.1: A ~ TN(59.147, 9.245^2; 45, 84)"),
    "age_sd": Target(9.245, "S1.1: A ~ TN(59.147, 9.245^2; 45, 84)"),
    "age_lower": Target(45.0, "S1.1: A ~ TN(59.147, 9.245^2; 45, 84)"),
    "age_upper": Target(84.0, "S1.1: A ~ TN(59.147, 9.245^2; 45, 84)"),
    "male_fraction": Target(0.4804, "S1.1: S ~ Bernoulli(0.4804)"),
    "sex_sd": Target(0.4996, "S1.1: SD of Bernoulli(0.4804), sqrt(0.4804 x 0.5196) to 4 digits (z(sex) of the traits)"),
    "bmi_centre": Target(28.3006, "S1.1: BMI = clip[28.3006 + 0.05(A - 59.147) + 0.45(S - 0.4804) + r + eps, 15, 55]"),
    "bmi_age_slope": Target(0.05, "S1.1: BMI = clip[28.3006 + 0.05(A - 59.147) + 0.45(S - 0.4804) + r + eps, 15, 55]"),
    "bmi_sex_effect": Target(0.45, "S1.1: BMI = clip[28.3006 + 0.05(A - 59.147) + 0.45(S - 0.4804) + r + eps, 15, 55]"),
    "bmi_residual_sd": Target(5.05, "S1.1: BMI residual standard deviation 5.05"),
    # ---- S1.1 genotypes ----------------------------------------------------------------
    "af_floor": Target(0.034381, "S1.1: q = 0.034381 + (0.5 - 0.034381) Beta(0.734507, 1.064551)"),
    "af_beta_a": Target(0.734507, "S1.1: q = 0.034381 + (0.5 - 0.034381) Beta(0.734507, 1.064551)"),
    "af_beta_b": Target(1.064551, "S1.1: q = 0.034381 + (0.5 - 0.034381) Beta(0.734507, 1.064551)"),
    "ld_decay_kb": Target(110.0, "S1.1: latent correlation exp(-|pos_j - pos_k| / 110 kb)"),
    "link_r2": Target(0.05, "SPEC section 4: no cis variant shared with or linked (r2 > 0.05) to a driver's"),
    # ---- S1.1 molecules ----------------------------------------------------------------
    "protein_age": Target(0.01, "S1.1: protein = z[... + 0.01(A - 55) + 0.10 S + 0.02(BMI - 27) + 0.8 eps]"),
    "protein_sex": Target(0.10, "S1.1: protein = z[... + 0.01(A - 55) + 0.10 S + 0.02(BMI - 27) + 0.8 eps]"),
    "protein_bmi": Target(0.02, "S1.1: protein = z[... + 0.01(A - 55) + 0.10 S + 0.02(BMI - 27) + 0.8 eps]"),
    "protein_residual_sd": Target(0.8, "S1.1: protein = z[... + 0.8 eps]"),
    "protein_trans_variance": Target(0.01, "S1.1: protein = z[... + I_p sqrt(0.01) G_master + ...]"),
    "protein_missingness": Target(0.004146, "S1.1: protein missingness uses the recorded aggregate rate (0.004146)"),
    # ---- S1.2 latent severity ----------------------------------------------------------
    "latent_bmi": Target(0.15, "S1.2: L = z[sum w P + 0.15 z(BMI) + 0.10 smoking + 0.12 G_direct + 0.08 z(A) + eps]"),
    "latent_smoking": Target(0.10, "S1.2: L = z[sum w P + 0.15 z(BMI) + 0.10 smoking + 0.12 G_direct + 0.08 z(A) + eps]"),
    "latent_direct": Target(0.12, "S1.2: L = z[sum w P + 0.15 z(BMI) + 0.10 smoking + 0.12 G_direct + 0.08 z(A) + eps]"),
    "latent_age": Target(0.08, "S1.2: L = z[sum w P + 0.15 z(BMI) + 0.10 smoking + 0.12 G_direct + 0.08 z(A) + eps]"),
    "latent_residual": Target(0.55, "S1.5: latent residual SD 0.55 (0.70 in hard worlds); SPEC section 4"),
    "driver_weight": Target((0.30, 0.45), f"{_SPEC4}: driver weights |w| ~ U(0.30, 0.45), random sign"),
    "hard_saturation": Target(1.6, "S1.2: f(P) = 1.6 tanh(P/1.6)"),
    "hard_residual": Target(0.70, "S1.5: latent residual SD 0.70 in hard worlds; SPEC section 4"),
    "hard_polygenic_sd": Target(0.25, "design value: S1.2 names the polygenic background G_poly without an SD; "
                                      "SPEC leaves it open (config default bias_params.hard.polygenic_sd)"),
    # ---- S1.3 phenotypes and later severity --------------------------------------------
    "late_carry": Target(0.75, "S1.3: L_late = 0.75 L + 0.35 P_D^T w_late"),
    "late_drivers": Target(0.35, "S1.3: L_late = 0.75 L + 0.35 P_D^T w_late"),
    "traits": Target(("edv", "esv", "wall", "motion", "lag", "t1"),
                     "S1.3 loading table columns: EDV, ESV, Wall, Motion, Diastolic lag, Native T1"),
    "archetype_loadings": Target(MappingProxyType({
        "dcm": (0.42, 0.70, -0.28, -0.18, 0.28, 0.15),
        "hcm": (-0.40, -0.12, 0.55, 0.05, 0.42, 0.42),
        "ischemic": (0.22, 0.42, -0.06, -0.46, 0.18, 0.35),
        "hfpef": (0.05, 0.06, 0.30, -0.02, 0.30, 0.95),
    }), "S1.3: principal phenotype loadings alpha_a,k (EDV, ESV, Wall, Motion, Diastolic lag, Native T1)"),
    "texture_loadings": Target(MappingProxyType({
        "dcm": MappingProxyType({"t1_het": 0.15, "motion_het": 0.40}),
        "hcm": MappingProxyType({"t1_het": 0.30, "motion_het": 0.55}),
        "ischemic": MappingProxyType({"t1_het": 0.90, "motion_het": 0.45}),
        "hfpef": MappingProxyType({"t1_het": 0.45, "motion_het": 0.35}),
    }), "design value: SPEC section 4 (observed phenotypes) names the texture channels without loadings; set by "
        "scripts/calibrate_baseline.py so the frozen baseline's b lands in Table S3's archetype ranges"),
    "cardiac_latent": Target(0.70, "S1.4 T8: cardiac hazard 0.006 exp(0.70 L + 0.45 z(A) + 0.35 smoking + 0.15 z(BMI) + 0.40 P_T8)"),
    # ---- S1.4 planted biases -----------------------------------------------------------
    "t1_bmi_loading": Target(0.55, "S1.4 T1: z[0.55 z(BMI) + sqrt(h2) G_cis + 0.8 eps]"),
    "t2_latent_loading": Target(0.50, "S1.4 T2: z[0.50 L + sqrt(h2) G_cis + 0.75 eps]"),
    "t3_age": Target(-0.24, "S1.4 T3: -0.24 z(A) - 0.52 z(BMI) + r + s + 0.55 eta L + 0.55 eta P_sel + 1.35 eps"),
    "t3_bmi": Target(-0.52, "S1.4 T3: -0.24 z(A) - 0.52 z(BMI) + r + s + 0.55 eta L + 0.55 eta P_sel + 1.35 eps"),
    "t3_latent": Target(0.55, "S1.4 T3: -0.24 z(A) - 0.52 z(BMI) + r + s + 0.55 eta L + 0.55 eta P_sel + 1.35 eps"),
    "t3_protein": Target(0.55, "S1.4 T3: -0.24 z(A) - 0.52 z(BMI) + r + s + 0.55 eta L + 0.55 eta P_sel + 1.35 eps"),
    "t3_noise": Target(1.35, "S1.4 T3: -0.24 z(A) - 0.52 z(BMI) + r + s + 0.55 eta L + 0.55 eta P_sel + 1.35 eps"),
    "t3_eta": Target(1.0, f"{_SPEC4}: T3 eta = +1 in the S1.4 selection score"),
    "t6_edv": Target(0.22, "S1.4 T6: z(EDV) <- z(EDV) + 0.22 E"),
    "t6_esv": Target(-0.12, "S1.4 T6: z(ESV) <- z(ESV) - 0.12 E"),
    "t7_direct": Target(0.14, "S1.4 T7: G_cis -> L (0.14)"),
    "t8_hazard": Target(0.40, "S1.4 T8: cardiac hazard ... + 0.40 P_T8"),
    "t8_imaging_c": Target(MappingProxyType({"dcm": 0.381, "hcm": 0.369, "ischemic": 0.321, "hfpef": 0.290}),
                           f"{_SPEC4}, T8 row: delta_k = -c alpha_a,k with c set so the surrogate's correlation with "
                           "the archetype's imaging signature is about DCM's (design values of scripts/calibrate_baseline.py)"),
    "t9_scale": Target(2.2, "S1.4 T9: 2.2 P + 1.1"),
    "t9_offset": Target(1.1, "S1.4 T9: 2.2 P + 1.1"),
    # ---- S1.3 / S1.5 delayed-effect drivers (A9) ---------------------------------------
    "a9_late_ratio": Target((1.15, 1.45), "S1.5: late coefficient 1.15-1.45 times the largest other driver magnitude"),
    "a9_base_fraction": Target((0.04, 0.10), "S1.3: w_base in [0.04, 0.10]; S1.5: baseline coefficient 4-10 % of the late one"),
    "a9_partner_latent": Target(0.50, f"{_SPEC4}, A9 row: partner = z[0.50 L_late + sqrt(h2) G_cis + 0.75 eps]"),
    # ---- Table S3, the paper's anchors and traces --------------------------------------
    "baseline_b": Target(MappingProxyType({"dcm": (0.40, 0.44), "hcm": (0.67, 0.68), "ischemic": (0.71, 0.72),
                                           "hfpef": (0.75, 0.76)}),
                         "S2.5 / Table S3: baselines 0.40-0.44 DCM, 0.67-0.68 HCM, 0.71-0.72 ischemic, 0.75-0.76 HFpEF"),
    "baseline_b_allowance": Target(0.03, "acceptance: b within +-0.03 of Table S3's archetype range at paper scale"),
    "supervised_ceiling": Target(0.85, "SPEC section 4: a supervised phenotype from non-omics data can reach |r| ~ 0.85"),
    "deaths_fraction": Target(0.21843, "paper anchor: 11,795 deaths of 54,000 in standard-03 (Supplementary Note S2)"),
    "cardiac_deaths_fraction": Target(0.13402, "paper anchor: 7,237 cardiac deaths of 54,000 in standard-03 (Supplementary Note S2)"),
    "medication_rows_per_participant": Target(1.528, "paper trace: 82,511 medication rows for 54,000 participants "
                                                     "(Supplementary Note S1)"),
    # (target, tolerance, "relative" | "absolute"): the tolerances are this project's, stated with the figures
    "pixel_trace": Target(MappingProxyType({
        "ed_cavity_area_px": (700.0, 0.12, "relative"),
        "myocardial_area_px": (1600.0, 0.12, "relative"),
        "area_emptying": (0.58, 0.04, "absolute"),
        "t1_mean": (1000.0, 25.0, "absolute"),
        "t1_sd": (105.0, 15.0, "absolute"),
        "t1_p01": (752.0, 50.0, "absolute"),
        "t1_p99": (1243.0, 50.0, "absolute"),
    }), "Supplementary Note S2 pixel trace (T1 percentiles 1 %: 752.08, 99 %: 1243.40)"),
    "measurability_r": Target(0.8, "issue 4: each pixel-measured feature r >= 0.8 with its generating trait"),
})

#: The table's values by name (``V.latent_bmi``).
V = SimpleNamespace(**{name: t.value for name, t in TABLE.items()})


def source(name: str) -> str:
    return TABLE[name].source
