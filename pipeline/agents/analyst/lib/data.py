"""Reading the release: covariates resolved through the data dictionary, clinical
feature groups, outcomes and the nuisance design used for adjustment.

Nothing here knows anything about the world beyond what the release documents:
covariates are found by their UK Biobank field descriptions, sentinel codes by the
dictionary's coding column, disease codes by ICD-10 chapter conventions.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd

# Field descriptions (lower case) -> the name used here.  UK Biobank's own wording.
COVARIATE_KEYS = (
    ("sex", ("sex",)),
    ("age", ("age when attended", "age at recruitment", "age")),
    ("bmi", ("body mass index",)),
    ("smoking", ("smoking",)),
    ("activity", ("met minutes", "physical activity")),
    ("centre", ("assessment centre",)),
    ("ancestry", ("ethnic", "ancestry")),
    ("date", ("date of attending",)),
)
# ICD-10 codes of the heart-failure / cardiomyopathy family (the clinical label of the
# disease): I42 and I43 cardiomyopathy, I50 heart failure, I25.5 ischaemic cardiomyopathy,
# I11.0 hypertensive heart disease with heart failure.
HF_CODES = r"^(I42|I43|I50|I25\.5|I11\.0)"


def read_table(release: str, name: str, columns=None) -> pd.DataFrame:
    path = os.path.join(release, name)
    if not os.path.exists(path):
        return pd.DataFrame()
    table = pd.read_parquet(path, columns=columns)
    if table.index.name == "subject_id" or "subject_id" not in table.columns:
        table.index = table.index.astype(str)
    return table


def sentinel_codes(coding: str) -> list:
    """Negative codes the dictionary documents (e.g. '-3 = prefer not to answer')."""
    return [float(m) for m in re.findall(r"(-\d+)\s*=", str(coding))]


def load_covariates(release: str) -> pd.DataFrame:
    """Covariates with readable names; sentinel codes and implausible values as NaN."""
    raw = read_table(release, "covariates.parquet")
    dictionary_path = os.path.join(release, "data_dictionary.tsv")
    dictionary = pd.read_csv(dictionary_path, sep="\t", dtype=str, keep_default_na=False) \
        if os.path.exists(dictionary_path) else pd.DataFrame()
    if "table" in dictionary:
        # A dictionary of every released table: the covariates' own rows first.
        dictionary = pd.concat([dictionary[dictionary["table"] == "covariates"],
                                dictionary[dictionary["table"] != "covariates"]])
    out = pd.DataFrame(index=raw.index)
    used = set()
    for name, keys in COVARIATE_KEYS:
        for _, row in dictionary.iterrows():
            desc = str(row.get("description", "")).lower()
            field = row.get("field_id")
            if field in raw.columns and field not in used and any(k in desc for k in keys):
                column = raw[field]
                if name != "date":
                    column = pd.to_numeric(column, errors="coerce").astype(float)
                    for code in sentinel_codes(str(row.get("coding", "")) + " " + str(row.get("sentinel_codes", ""))):
                        column = column.mask(column == code)
                out[name] = column
                used.add(field)
                break
    for flag in ("imaged", "visit2"):
        if flag in raw.columns:
            out[flag] = raw[flag].astype(bool)
    # Physically impossible values are recording errors, not measurements.
    if "age" in out:
        out["age"] = out["age"].where(out["age"].between(18, 110))
    if "bmi" in out:
        out["bmi"] = out["bmi"].where(out["bmi"].between(10, 80))
    if "activity" in out:
        out["activity"] = out["activity"].where(out["activity"] >= 0)
    return out


def nuisance_design(cov: pd.DataFrame, index, with_centre: bool = False, covariates: bool = True) -> np.ndarray:
    """Adjustment set: age, age^2, sex, BMI, BMI^2, smoking, log activity, ancestry (and centre).

    ``covariates=False`` keeps only the intercept and, with ``with_centre``, the centre.

    Missing values are set to the median with a missingness indicator, so no
    participant is dropped for one missing covariate.  The columns are built on
    the whole cohort and the rows of ``index`` taken, so a sub-cohort's design has
    the same columns as the cohort's.
    """
    rows = cov.index.get_indexer(pd.Index(index))
    cols = [np.ones(len(cov))]

    def numeric(name):
        if name not in cov:
            return None
        v = cov[name].to_numpy(dtype=float)
        miss = ~np.isfinite(v)
        v = np.where(miss, np.nanmedian(v) if np.isfinite(v).any() else 0.0, v)
        return v, miss

    numeric_terms = (("age", True, None), ("bmi", True, None), ("sex", False, None),
                     ("smoking", False, None), ("activity", False, np.log1p))
    for name, squared, transform in numeric_terms if covariates else ():
        got = numeric(name)
        if got is None:
            continue
        v, miss = got
        if transform is not None:
            v = transform(np.clip(v, 0, None))
        z = (v - v.mean()) / (v.std() or 1.0)
        cols.append(z)
        if squared:
            cols.append(z * z)
        if miss.any():
            cols.append(miss.astype(float))
    categorical = (["ancestry"] if covariates else []) + (["centre"] if with_centre else [])
    for name in categorical:
        if name in cov:
            codes = cov[name].fillna(-999).to_numpy()
            levels = pd.Series(codes).value_counts().index.tolist()
            for level in levels[1:]:  # the largest group is the reference
                cols.append((codes == level).astype(float))
    return np.column_stack(cols)[rows]


def residualise(values: np.ndarray, design: np.ndarray) -> np.ndarray:
    """Residuals of each column of ``values`` (NaN kept) after least squares on ``design``."""
    values = np.asarray(values, dtype=float)
    single = values.ndim == 1
    if single:
        values = values[:, None]
    out = np.full_like(values, np.nan)
    for j in range(values.shape[1]):
        ok = np.isfinite(values[:, j])
        if ok.sum() <= design.shape[1] + 2:
            continue
        beta, *_ = np.linalg.lstsq(design[ok], values[ok, j], rcond=None)
        out[ok, j] = values[ok, j] - design[ok] @ beta
    return out[:, 0] if single else out


def winsorise(frame: pd.DataFrame, q: float = 0.001) -> pd.DataFrame:
    """Clip each column to its [q, 1-q] quantiles: a handful of implausible entries must not steer a fit."""
    lo, hi = frame.quantile(q), frame.quantile(1 - q)
    return frame.clip(lo, hi, axis=1)


def ecg_features(release: str, index) -> pd.DataFrame:
    ecg = read_table(release, "ecg_features.parquet")
    if ecg.empty:
        return pd.DataFrame(index=index)
    ecg = ecg.apply(pd.to_numeric, errors="coerce").astype(float).reindex(index)
    return winsorise(ecg)


def ct_features(release: str, index) -> pd.DataFrame:
    ct = read_table(release, "coronary_ct.parquet")
    if ct.empty:
        return pd.DataFrame(index=index)
    ct = ct.apply(pd.to_numeric, errors="coerce").astype(float).reindex(index)
    out = pd.DataFrame(index=index)
    for column in ct.columns:
        if column.startswith("cac"):
            # Agatston scores are zero for many and heavy-tailed for the rest.
            out[column + "_log"] = np.log1p(ct[column].clip(lower=0))
            out[column + "_any"] = (ct[column] > 0).astype(float).where(ct[column].notna())
        else:
            out[column] = ct[column]
    return winsorise(out)


def diagnosis_table(release: str) -> pd.DataFrame:
    dx = read_table(release, "ehr_diagnoses.parquet")
    if dx.empty:
        return dx
    dx = dx.copy()
    dx["subject_id"] = dx["subject_id"].astype(str)
    dx["icd10"] = dx["icd10"].astype(str)
    dx["date"] = pd.to_datetime(dx["date"], errors="coerce")
    return dx


def clinical_features(release: str, cov: pd.DataFrame, index) -> pd.DataFrame:
    """Prevalent diagnoses (ICD-10 3-character groups dated before the assessment) and
    baseline medications (ATC level 5), as 0/1 columns; rare ones dropped."""
    out = pd.DataFrame(index=index)
    dx = diagnosis_table(release)
    if not dx.empty and "date" in cov:
        visit = pd.to_datetime(cov["date"], errors="coerce").reindex(dx["subject_id"]).to_numpy()
        prevalent = dx[dx["date"].to_numpy() <= visit]
        groups = prevalent["icd10"].str.slice(0, 3)
        # The heart-failure family keeps its full code: I25.5 is a cardiomyopathy, I25.1 is not.
        groups = groups.where(~prevalent["icd10"].str.match(HF_CODES), prevalent["icd10"])
        table = pd.crosstab(prevalent["subject_id"], groups).clip(upper=1)
        out = out.join(table.add_prefix("dx_"), how="left")
    meds = read_table(release, "ehr_medications.parquet")
    if not meds.empty:
        table = pd.crosstab(meds["subject_id"].astype(str), meds["atc"].astype(str)).clip(upper=1)
        out = out.join(table.add_prefix("atc_"), how="left")
    out = out.fillna(0.0).astype(float)
    keep = out.mean() >= max(20.0 / max(len(out), 1), 0.002)
    return out.loc[:, keep]


def outcomes(release: str, cov: pd.DataFrame, index, landmark: float = 5.0) -> pd.DataFrame:
    """Per participant: cardiac death, any cardiac event, follow-up, incident heart-failure
    diagnosis, and late events (after ``landmark`` years among those event-free until then).

    ``landmark`` is the repeat assessment's spacing (the data dictionary: about five years).
    """
    out = pd.DataFrame(index=index)
    mort = read_table(release, "mortality.parquet").reindex(index)
    cause = mort.get("cause", pd.Series(index=index, dtype=object)).astype("string").fillna("")
    follow = pd.to_numeric(mort.get("followup_years"), errors="coerce")
    death = pd.to_numeric(mort.get("death"), errors="coerce").fillna(0) > 0
    out["cardiac_death"] = (cause == "cardiac").astype(float)
    out["death"] = death.astype(float)
    out["followup"] = follow
    mace = read_table(release, "mace_events.parquet")
    first_event = pd.Series(np.nan, index=index)
    if not mace.empty:
        mace = mace.assign(subject_id=mace["subject_id"].astype(str))
        first_event = mace.groupby("subject_id")["years_from_baseline"].min().reindex(index)
    event_time = first_event.where(first_event.notna(), follow.where(out["cardiac_death"] > 0))
    out["event"] = event_time.notna().astype(float)
    out["event_time"] = event_time
    # Landmark analysis: the later period, among those alive and event-free at the landmark.
    at_risk = (event_time.isna() | (event_time > landmark)) & ~(death & (follow <= landmark))
    out["late_at_risk"] = at_risk.astype(float)
    out["late_event"] = ((event_time > landmark) & at_risk).astype(float)
    out["early_event"] = (event_time <= landmark).astype(float)
    dx = diagnosis_table(release)
    if not dx.empty and "date" in cov:
        hf = dx[dx["icd10"].str.match(HF_CODES)]
        if not mace.empty:
            # A code recorded on the day of an adverse event is that event's hospital record,
            # not a diagnosis of the chronic disease: the events are analysed separately.
            base = pd.to_datetime(cov["date"], errors="coerce")
            ev_date = base.reindex(mace["subject_id"]).to_numpy() + pd.to_timedelta(
                np.round(mace["years_from_baseline"].to_numpy() * 365.25), unit="D").to_numpy()
            keys = set(zip(mace["subject_id"], pd.to_datetime(ev_date).normalize()))
            same_day = [(s, d.normalize() if pd.notna(d) else d) in keys for s, d in zip(hf["subject_id"], hf["date"])]
            hf = hf[~np.asarray(same_day, dtype=bool)]
        visit = pd.to_datetime(cov["date"], errors="coerce").reindex(hf["subject_id"]).to_numpy()
        years = (hf["date"].to_numpy() - visit) / np.timedelta64(1, "D") / 365.25
        first = pd.Series(years, index=hf["subject_id"].to_numpy()).groupby(level=0).min().reindex(index)
        out["hf_prevalent"] = (first <= 0).astype(float)
        out["hf_incident"] = ((first > 0) & ~(first <= 0)).astype(float)
        out["hf_incident_time"] = first.where(first > 0)
    return out
