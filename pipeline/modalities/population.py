"""Population (S1.1): age, sex, BMI, exercise, smoking, assessment centre,
ancestry group and assessment date for one participant block."""
from __future__ import annotations

import numpy as np

from .. import blocks, seeds, streams
from ..model.constants import AGE_HI, AGE_LO, AGE_MEAN, AGE_SD, BMI_CENTRE, BMI_RESID_SD, MALE_P, SMOKING_PREVALENCE
from ..model.world import World

ASSESSMENT_START = np.datetime64("2006-03-13")
ASSESSMENT_SPAN_DAYS = 4 * 365
# Ancestry-group effects on BMI (part of the participant background r_i).
ANCESTRY_BMI = np.array([0.0, 0.3, -1.2, 1.4, -2.5, 0.2])


def _truncated_normal(rng, mean, sd, lo, hi):
    out = rng.normal(mean, sd)
    bad = (out < lo) | (out > hi)
    while bad.any():
        out[bad] = rng.normal(mean[bad], sd)
        bad = (out < lo) | (out > hi)
    return out


def population_block(world: World, b: int) -> dict:
    lo, hi = world.block_range(b)
    n = hi - lo
    rng = seeds.stream(world.seed, streams.POPULATION, b)
    centre = rng.choice(len(world.centre_p), size=n, p=world.centre_p)
    sex = (rng.random(n) < MALE_P).astype(np.int8)
    age = _truncated_normal(rng, AGE_MEAN + world.centre_age_shift[centre], AGE_SD, AGE_LO, AGE_HI)
    cum = np.cumsum(world.centre_ancestry_p[centre], axis=1)
    ancestry = (rng.random(n)[:, None] > cum).sum(axis=1).clip(0, cum.shape[1] - 1)
    background = world.centre_bmi_shift[centre] + ANCESTRY_BMI[ancestry]
    bmi = np.clip(BMI_CENTRE + 0.05 * (age - AGE_MEAN) + 0.45 * (sex - MALE_P) + background
                  + rng.normal(0.0, BMI_RESID_SD, n), 15.0, 55.0)
    exercise = np.clip(rng.gamma(2.0, 1.8, n) - 0.06 * (bmi - 27.0), 0.0, 20.0)
    logit = np.log(SMOKING_PREVALENCE / (1 - SMOKING_PREVALENCE)) + world.centre_smoking_logodds[centre] - 0.02 * (age - AGE_MEAN)
    smoking = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int8)
    day = rng.integers(0, ASSESSMENT_SPAN_DAYS, n)
    return {
        "age": age, "sex": sex, "bmi": bmi, "exercise": exercise, "smoking": smoking,
        "centre": centre.astype(np.int8), "ancestry": ancestry.astype(np.int8), "assessment_day": day.astype(np.int32),
    }


def visit2_covariates(world: World, pop: dict) -> dict:
    """The covariates at the repeat assessment: BMI and exercise drift, some smokers quit."""
    e = blocks.normal(world, streams.VISIT2_COVARIATES, (3,))
    return {
        "bmi": np.clip(pop["bmi"] + 0.4 + 1.2 * e[:, 0], 15.0, 55.0),
        "smoking": (pop["smoking"] == 1) & (blocks.uniform(world, streams.VISIT2_QUIT) > 0.3),
        "exercise": np.clip(pop["exercise"] * np.exp(0.35 * e[:, 1]), 0.0, 20.0),
    }
