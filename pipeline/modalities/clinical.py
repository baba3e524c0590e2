"""Longitudinal clinical records: MACE events, EHR diagnoses (ICD-10 with dates)
and medications (ATC), generated from L, L_late, risk factors and the outcomes.

Every table is a function of the population vectors and named per-block
streams.  Rows are emitted participant by participant in cohort order, so a
table does not depend on chunking.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import blocks, streams
from ..model.constants import CARDIAC_AGE, CARDIAC_BMI, CARDIAC_L, CARDIAC_SMOKING

if TYPE_CHECKING:  # annotations only: no import at run time
    from ..model.world import World
    from .cohort import Cohort

# Archetype-specific cardiomyopathy code.
CARDIOMYOPATHY_CODE = {"dcm": "I42.0", "hcm": "I42.1", "ischemic": "I25.5", "hfpef": "I50.3"}
MACE_TYPES = ("myocardial_infarction", "stroke", "heart_failure_hospitalisation")
# Share of the non-fatal MACE hazard by type and archetype.
MACE_SHARE = {
    "dcm": (0.2, 0.2, 0.6), "hcm": (0.2, 0.25, 0.55), "ischemic": (0.55, 0.2, 0.25), "hfpef": (0.2, 0.25, 0.55),
}
MACE_BASE = 0.010
MACE_ICD = {"myocardial_infarction": "I21.9", "stroke": "I63.9", "heart_failure_hospitalisation": "I50.9"}


def _logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


def _piecewise_time(c1, c2, k, switch, e):
    """Invert H(t) = int_0^t c(s) exp(k s) ds with c = c1 before ``switch`` and c2 after."""
    h_switch = c1 * np.expm1(k * switch) / k
    early = np.log1p(k * e / c1) / k
    late = np.log(np.exp(k * switch) + k * np.maximum(e - h_switch, 0.0) / c2) / k
    return np.where(e < h_switch, early, late)


def mace(world: World, cohort: Cohort, deaths: dict, surrogate: np.ndarray) -> dict:
    """First non-fatal event of each type before death or censoring, plus cardiac death."""
    pop = cohort.pop
    t8 = world.params["bias_params"]["T8"]["hazard"] if world.has("T8") else 0.0
    base = CARDIAC_AGE * cohort.z_age + CARDIAC_SMOKING * pop["smoking"] + CARDIAC_BMI * cohort.z_bmi + t8 * surrogate
    k = CARDIAC_AGE / cohort.age_sd
    switch = float(world.params["visit2_years"])
    share = MACE_SHARE[world.archetype]
    subj, event, years = [], [], []
    times = {}
    for typ, sh in zip(MACE_TYPES, share):
        c1 = MACE_BASE * sh * np.exp(0.85 * CARDIAC_L * cohort.latent + base)
        c2 = MACE_BASE * sh * np.exp(0.85 * CARDIAC_L * cohort.latent_late + base)
        t = _piecewise_time(c1, c2, k, switch, blocks.exponential(world, streams.MACE.format(event=typ)))
        times[typ] = np.where(t < deaths["followup"], t, np.nan)
    card = deaths["cause"] == "cardiac"
    times["cardiac_death"] = np.where(card, deaths["followup"], np.nan)
    for typ in (*MACE_TYPES, "cardiac_death"):
        has = np.flatnonzero(times[typ] == times[typ])
        subj.append(has)
        event.append(np.full(len(has), typ, dtype=object))
        years.append(times[typ][has])
    subj, event, years = np.concatenate(subj), np.concatenate(event), np.round(np.concatenate(years), 3)
    order = np.lexsort((years, subj))  # participant order, then time
    return {"row": subj[order], "event": event[order], "years": years[order], "times": times}


def diagnoses(world: World, cohort: Cohort, deaths: dict, mace_events: dict, visit_date: np.ndarray) -> dict:
    """Prevalent (dated before the assessment) and incident ICD-10 diagnoses."""
    pop = cohort.pop
    L, Ll = cohort.latent, cohort.latent_late
    za, zb = cohort.z_age, cohort.z_bmi
    sex, smk = pop["sex"], pop["smoking"]
    follow = deaths["followup"]
    cm = CARDIOMYOPATHY_CODE[world.archetype]
    # (code, prevalent-probability logit, incident-probability logit over follow-up)
    specs = [
        (cm, -3.0 + 1.5 * L, -3.2 + 1.5 * Ll),
        ("I50.0" if world.archetype != "hfpef" else "I50.9", -3.6 + 1.3 * L, -3.3 + 1.3 * Ll),
        ("I48.9", -3.6 + 0.5 * L + 0.7 * za, -3.4 + 0.5 * Ll + 0.7 * za),
        ("I10", -0.9 + 0.6 * zb + 0.6 * za + 0.1 * L, -2.2 + 0.6 * zb + 0.5 * za),
        ("E11.9", -2.6 + 0.9 * zb + 0.3 * za, -3.3 + 0.9 * zb + 0.3 * za),
        ("E78.5", -1.3 + 0.4 * za + 0.2 * zb, -2.6 + 0.4 * za),
        ("I25.1", -2.8 + 0.8 * za + 0.4 * (sex - 0.48) + 0.3 * smk + (0.8 if world.archetype == "ischemic" else 0.25) * L,
         -3.2 + 0.8 * za + 0.3 * smk + (0.8 if world.archetype == "ischemic" else 0.25) * Ll),
        ("I20.9", -3.4 + 0.6 * za + 0.3 * smk + 0.3 * L, -3.6 + 0.6 * za + 0.3 * Ll),
        ("J44.9", -3.2 + 1.4 * smk + 0.4 * za, -3.8 + 1.4 * smk + 0.4 * za),
    ]
    u = blocks.uniform(world, streams.DIAGNOSES, (len(specs), 4))
    rows, codes, dates = [], [], []
    for k, (code, prev_logit, inc_logit) in enumerate(specs):
        prevalent = u[:, k, 0] < _logistic(prev_logit)
        incident = (~prevalent) & (u[:, k, 1] < _logistic(inc_logit))
        prev_years = -(0.2 + 9.8 * u[:, k, 2])
        inc_years = u[:, k, 3] * follow
        years = np.where(prevalent, prev_years, np.where(incident, inc_years, np.nan))
        has = prevalent | incident
        rows.append(np.flatnonzero(has))
        codes.append(np.full(int(has.sum()), code, dtype=object))
        dates.append(years[has])
    for typ in MACE_TYPES:
        t = mace_events["times"][typ]
        has = t == t
        rows.append(np.flatnonzero(has))
        codes.append(np.full(int(has.sum()), MACE_ICD[typ], dtype=object))
        dates.append(t[has])
    row = np.concatenate(rows)
    code = np.concatenate(codes)
    yrs = np.concatenate(dates)
    order = np.lexsort((code, yrs, row))
    row, code, yrs = row[order], code[order], yrs[order]
    date = visit_date[row] + np.round(yrs * 365.25).astype("timedelta64[D]")
    return {"row": row, "icd10": code, "date": date}


# (ATC code, description, indication logit as a function of the participant's record)
MEDICATIONS = (
    ("C10AA05", "atorvastatin"),
    ("C09AA05", "ramipril"),
    ("C07AB07", "bisoprolol"),
    ("C03CA01", "furosemide"),
    ("A10BA02", "metformin"),
    ("B01AC06", "acetylsalicylic acid"),
    ("B01AF01", "rivaroxaban"),
    ("C08CA01", "amlodipine"),
)


def medications(world: World, cohort: Cohort, dx: dict, visit_date: np.ndarray) -> dict:
    """Current medications at baseline (about 1.5 rows per participant), driven by
    diagnoses made before the assessment and by risk factors."""
    n = world.n
    prevalent = {}
    before = dx["date"] < visit_date[dx["row"]]
    for code in np.unique(dx["icd10"]):
        mask = np.zeros(n, dtype=bool)
        mask[dx["row"][before & (dx["icd10"] == code)]] = True
        prevalent[code] = mask
    cm = CARDIOMYOPATHY_CODE[world.archetype]

    def has(code):
        return prevalent.get(code, np.zeros(n, dtype=bool)).astype(float)

    za = cohort.z_age
    hf = np.maximum(has(cm), has("I50.0") + has("I50.9") + has("I50.3")).clip(0, 1)
    ihd = np.maximum(has("I25.1"), has("I21.9")).clip(0, 1)
    logits = [
        -0.75 + 0.5 * za + 1.5 * has("E78.5") + 1.2 * ihd,
        -1.2 + 1.5 * has("I10") + 1.2 * hf,
        -2.6 + 1.6 * hf + 1.4 * has("I48.9") + 1.0 * ihd,
        -3.4 + 2.2 * hf,
        -3.5 + 4.0 * has("E11.9"),
        -1.8 + 0.3 * za + 1.5 * ihd,
        -3.8 + 3.0 * has("I48.9"),
        -1.8 + 1.3 * has("I10") + 0.2 * za,
    ]
    u = blocks.uniform(world, streams.MEDICATIONS, (len(MEDICATIONS),))
    rows, atc, desc = [], [], []
    for k, ((code, name), logit) in enumerate(zip(MEDICATIONS, logits)):
        on = u[:, k] < _logistic(logit)
        rows.append(np.flatnonzero(on))
        atc.append(np.full(int(on.sum()), code, dtype=object))
        desc.append(np.full(int(on.sum()), name, dtype=object))
    row = np.concatenate(rows)
    atc = np.concatenate(atc)
    desc = np.concatenate(desc)
    order = np.lexsort((atc, row))
    return {"row": row[order], "atc": atc[order], "description": desc[order]}
