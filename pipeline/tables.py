"""Release tables (SPEC section 5) built from the population stage.

Wide tables are pandas DataFrames indexed by ``subject_id``; long tables carry
``subject_id`` as a column.  Column names, order and dtypes are fixed here and
described in ``schemas/release_tables.json``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .modalities.population import ASSESSMENT_START
from .world import ANCESTRY_CODES, CENTRE_CODES

MET_MINUTES_PER_HOUR = 240.0  # moderate activity at 4 METs: hours/week -> MET-minutes/week


def _index(world) -> pd.Index:
    return pd.Index(world.subject_ids(), name="subject_id", dtype=object)


def assessment_dates(world, pop) -> np.ndarray:
    return ASSESSMENT_START + pop["assessment_day"].astype("timedelta64[D]")


def covariates(world, cohort, sentinels: dict | None = None) -> pd.DataFrame:
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


def covariates_visit2(world, cohort, v2: dict) -> pd.DataFrame:
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


def wide(world, columns: dict, rows: np.ndarray | None = None) -> pd.DataFrame:
    idx = world.subject_ids()
    if rows is not None:
        idx = idx[rows]
        columns = {k: np.asarray(v)[rows] for k, v in columns.items()}
    return pd.DataFrame(columns, index=pd.Index(idx, name="subject_id", dtype=object))


def mortality(world, cohort, deaths: dict, visit_date: np.ndarray) -> pd.DataFrame:
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


def long_table(world, rows: np.ndarray, columns: dict) -> pd.DataFrame:
    ids = world.subject_ids()
    data = {"subject_id": ids[rows]}
    data.update(columns)
    return pd.DataFrame(data)


def targetability(world, rng) -> pd.DataFrame:
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
