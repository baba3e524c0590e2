"""Release tables (SPEC section 5) built from the population stage.

Wide tables are pandas DataFrames indexed by ``subject_id``; long tables carry
``subject_id`` as a column.  Column names, order and dtypes are fixed here and
described in ``schemas/release_tables.json``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import seeds, streams
from .modalities import clinical, messy, phenotypes
from .modalities.cohort import surrogate_values
from .modalities.population import ASSESSMENT_START
from .model.constants import ANCESTRY_CODES, CENTRE_CODES

if TYPE_CHECKING:  # annotations only: no import at run time
    from .model.world import World
    from .modalities.cohort import Cohort

MET_MINUTES_PER_HOUR = 240.0  # moderate activity at 4 METs: hours/week -> MET-minutes/week


def _index(world) -> pd.Index:
    return pd.Index(world.subject_ids(), name="subject_id", dtype=object)


def assessment_dates(world: World, pop: dict) -> np.ndarray:
    return ASSESSMENT_START + pop["assessment_day"].astype("timedelta64[D]")


def covariates(world: World, cohort: Cohort, sentinels: dict | None = None) -> pd.DataFrame:
    pop = cohort.pop
    df = pd.DataFrame({
        "p31_i0": pop["sex"].astype(np.int8),
        "p21003_i0": np.round(pop["age"], 1),
        "p21001_i0": np.round(pop["bmi"], 1),
        "p20116_i0": pop["smoking"].astype(np.int8),
        "p22040_i0": np.round(pop["exercise"] * MET_MINUTES_PER_HOUR).astype(np.int32),
        "p54_i0": CENTRE_CODES[pop["centre"]].astype(np.int32),
        "p21000_i0": ANCESTRY_CODES[pop["ancestry"]].astype(np.int8),
        "p53_i0": assessment_dates(world, pop),
        "imaged": cohort.imaged,
        "visit2": cohort.visit2,
    }, index=_index(world))
    if sentinels:
        for col, (rows, codes) in sentinels.items():
            values = df[col].to_numpy(copy=True)
            values[rows] = codes
            df[col] = values
    return df


def covariates_visit2(world: World, cohort: Cohort, v2: dict) -> pd.DataFrame:
    rows = np.flatnonzero(cohort.visit2)
    pop = cohort.pop
    date = assessment_dates(world, pop)[rows] + np.round(cohort.visit2_years[rows] * 365.25).astype("timedelta64[D]")
    return pd.DataFrame({
        "p31_i0": pop["sex"][rows].astype(np.int8),
        "p21003_i2": np.round(pop["age"][rows] + cohort.visit2_years[rows], 1),
        "p21001_i2": np.round(v2["bmi"][rows], 1),
        "p20116_i2": v2["smoking"][rows].astype(np.int8),
        "p22040_i2": np.round(v2["exercise"][rows] * MET_MINUTES_PER_HOUR).astype(np.int32),
        "p54_i2": CENTRE_CODES[pop["centre"][rows]].astype(np.int32),
        "p21000_i0": ANCESTRY_CODES[pop["ancestry"][rows]].astype(np.int8),
        "p53_i2": date,
        "imaged": cohort.imaged[rows],
    }, index=pd.Index(world.subject_ids()[rows], name="subject_id", dtype=object))


def wide(world: World, columns: dict, rows: np.ndarray | None = None) -> pd.DataFrame:
    idx = world.subject_ids()
    if rows is not None:
        idx = idx[rows]
        columns = {k: np.asarray(v)[rows] for k, v in columns.items()}
    return pd.DataFrame(columns, index=pd.Index(idx, name="subject_id", dtype=object))


def mortality(world: World, cohort: Cohort, deaths: dict, visit_date: np.ndarray) -> pd.DataFrame:
    died = deaths["died"]
    dod = visit_date + np.round(np.nan_to_num(deaths["t_death"]) * 365.25).astype("timedelta64[D]")
    dod = np.where(died, dod, np.datetime64("NaT"))
    cause = np.where(died, deaths["cause"], None).astype(object)
    icd = np.where(deaths["cause"] == "cardiac", "I51.9", np.where(died, "C80.9", None)).astype(object)
    return pd.DataFrame({
        "death": died.astype(np.int8),
        "cause": cause,
        "p40001_i0": icd,
        "p40000_i0": dod.astype("datetime64[s]"),
        "followup_years": np.round(deaths["followup"], 3),
    }, index=_index(world))


def long_table(world: World, rows: np.ndarray, columns: dict) -> pd.DataFrame:
    ids = world.subject_ids()
    data = {"subject_id": ids[rows]}
    data.update(columns)
    return pd.DataFrame(data)


def targetability(world: World, rng: np.random.Generator) -> pd.DataFrame:
    """Per-protein druggability attributes.  Drawn independently of every role (in
    protein-identifier order from its own stream), so no row reveals a role."""
    P = world.n_proteins
    loc = np.array(["secreted", "plasma membrane", "cytoplasm", "nucleus", "mitochondrion"], dtype=object)
    tissues = np.array(["broad", "heart", "liver", "kidney", "blood", "brain", "skeletal muscle", "adipose"], dtype=object)
    return pd.DataFrame({
        "localization": loc[rng.choice(len(loc), P, p=[0.35, 0.25, 0.22, 0.13, 0.05])],
        "has_pocket": rng.random(P) < 0.42,
        "paralog_redundancy": rng.poisson(1.2, P).astype(np.int16),
        "genetic_constraint": np.round(np.clip(rng.lognormal(-0.25, 0.55, P), 0.03, 2.0), 3),
        "tissue_specificity": np.round(rng.beta(2.0, 3.0, P), 3),
        "tissue_restriction": tissues[rng.choice(len(tissues), P, p=[0.45, 0.08, 0.1, 0.07, 0.1, 0.08, 0.06, 0.06])],
    }, index=pd.Index(world.protein_ids, name="protein", dtype=object))


def data_dictionary_tsv() -> str:
    """``data_dictionary.tsv``: every released column (see :mod:`pipeline.data_dictionary`)."""
    from .data_dictionary import render_tsv

    return render_tsv()


def clinical_tables(world: World, coh: Cohort, deaths: dict, v2cov: dict, visit_date: np.ndarray) -> dict:
    """Every release table but the molecular ones: {name: DataFrame}."""
    surrogate = surrogate_values(world, coh)
    mace = clinical.mace(world, coh, deaths, surrogate)
    dx = clinical.diagnoses(world, coh, deaths, mace, visit_date)
    meds = clinical.medications(world, coh, dx, visit_date)
    sentinels = messy.covariate_sentinels(world) if world.messy else None
    out = {
        "covariates": covariates(world, coh, sentinels),
        "covariates_visit2": covariates_visit2(world, coh, v2cov),
        "ecg_features": wide(world, phenotypes.ecg(world, coh)),
        "coronary_ct": wide(world, phenotypes.coronary_ct(world, coh)),
        "mortality": mortality(world, coh, deaths, visit_date),
        "mace_events": long_table(world, mace["row"], {"event": mace["event"], "years_from_baseline": mace["years"]}),
        "ehr_diagnoses": long_table(world, dx["row"], {"icd10": dx["icd10"], "date": dx["date"].astype("datetime64[s]")}),
        "ehr_medications": long_table(world, meds["row"], {"atc": meds["atc"], "description": meds["description"]}),
        "targetability": targetability(world, seeds.stream(world.seed, streams.TARGETABILITY)),
    }
    if world.messy:
        for name in ("ecg_features", "coronary_ct"):
            out[name] = messy.corrupt_table(world, name, out[name])
    return out
