"""Phenotype construction (S2.5, with this project's fix): the submitted phenotype aligned by
subject ID with the sealed latent severity, |r| against the frozen baseline b.

The set correlated over is fixed by the world, not by the agent: the imaged participants
of the evaluation mask, the very set on which b is computed (``pipeline.graph.imaging.
baseline_record``).  A participant of that set without a finite submitted value takes the
mean of the finite submitted values in the set (at least 51 of them, as S2.5 requires),
so leaving a participant out scores exactly like submitting one's mean for them, and r and
b compare the same people.  S2.5 itself correlated over the participants given a value,
which rewards submitting only the tails of one's own phenotype; ``paper_compat`` restores
that rule.  A world built without images has no imaged set (and no b): its whole
evaluation mask is the set.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .notes import Notes, examples, finite_number, short
from .rules import PHENOTYPE_CEILING, PHENOTYPE_GAP_EPS, PHENOTYPE_MIN_FINITE, POINTS_PHENOTYPE


def _phenotype_column(phenotype: pd.DataFrame, notes: Notes) -> tuple[pd.Series | None, str]:
    """(values indexed by subject ID, status); None when the table cannot be aligned."""
    table = phenotype
    if "subject_id" not in table.columns and table.index.name == "subject_id":
        table = table.reset_index()
    columns = list(table.columns)
    if "subject_id" in columns:
        id_position = columns.index("subject_id")
    elif columns:
        # A pandas to_csv with the index kept writes the IDs first under an empty or
        # 'Unnamed: 0' header; reading the first column as IDs scores that file too.
        id_position = 0
        notes.warn(f"phenotype: no 'subject_id' column; first column {str(columns[0])!r} read as subject IDs")
    else:
        return None, "no columns"
    if table.columns.duplicated().any():
        notes.warn("phenotype: repeated column names; columns taken by position")
    data_positions = [i for i in range(len(columns)) if i != id_position]
    if not data_positions:
        return None, "no data column besides the subject IDs"
    if len(data_positions) > 1:
        notes.warn(
            f"phenotype: {len(data_positions)} data columns; the first ({str(columns[data_positions[0]])!r}) is scored"
        )
    ids = table.iloc[:, id_position]
    values = table.iloc[:, data_positions[0]]

    ids = pd.Series([_subject_id(v) for v in ids.tolist()], dtype=object)
    missing_id = ids.isna().to_numpy()
    if missing_id.any():
        notes.warn(f"phenotype: {int(missing_id.sum())} row(s) without a subject ID ignored")
    ids = ids[~missing_id]
    if ids.duplicated().any():
        duplicated = ids[ids.duplicated()].unique().tolist()
        return None, f"duplicate subject IDs ({len(duplicated)}, e.g. {examples(duplicated)}); zero credit"

    numeric = _to_float(values)[~missing_id]
    non_numeric = int(np.isnan(numeric).sum())
    if non_numeric:
        notes.warn(f"phenotype: {non_numeric} value(s) missing or not numeric")
    return pd.Series(numeric, index=pd.Index(ids.tolist(), dtype=object)), "ok"


def _subject_id(value: Any) -> str | None:
    try:
        if pd.isna(value) is True:  # None, NaN, pd.NA, NaT; list-likes return arrays and fall through
            return None
    except (TypeError, ValueError):
        pass
    text = short(value).strip() if not isinstance(value, str) else value.strip()
    return text or None


def _to_float(values: pd.Series) -> np.ndarray:
    try:
        numeric = pd.to_numeric(values, errors="coerce")
        return np.asarray(numeric, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        out = np.full(len(values), np.nan)
        for i, value in enumerate(values.tolist()):
            try:
                out[i] = float(value) if not isinstance(value, bool) else np.nan
            except (TypeError, ValueError, OverflowError):
                pass
        return out


def _abs_correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    # Rescale before centring so values near the float limit cannot overflow to inf.
    x = x / np.max(np.abs(x))
    y = y / np.max(np.abs(y))
    x = x - x.mean()
    y = y - y.mean()
    denominator = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    if not denominator or not math.isfinite(denominator):
        return None
    r = abs(float(np.dot(x, y)) / denominator)
    return min(r, 1.0) if math.isfinite(r) else None


def _baseline(baseline_b: Any) -> float | None:
    if not finite_number(baseline_b):
        return None
    try:
        return float(baseline_b)
    except OverflowError:
        return None


def score_phenotype(phenotype: Any, latent: Any, eval_mask: Any, baseline_b: Any, notes: Notes, *,
                    imaged: Any = None, paper_compat: bool = False) -> tuple[float, dict]:
    """Points for the phenotype and the details.  ``imaged`` is a boolean array aligned with
    ``latent`` (the world's imaged participants) or None when the world has no images."""
    b = _baseline(baseline_b)
    detail: dict[str, Any] = {"r": None, "n": 0, "b": b, "branch": None, "status": None,
                              "rule": "paper_compat: S2.5, the participants given a finite value" if paper_compat
                              else "the imaged participants of the eval mask (b's set), missing values take the mean"}

    def zero(status: str) -> tuple[float, dict]:
        detail["status"] = status
        detail["branch"] = "invalid"
        return 0.0, detail

    if phenotype is None:
        return zero("no phenotype file (absent or unreadable); zero credit")
    if not isinstance(phenotype, pd.DataFrame):
        return zero("phenotype is not a table; zero credit")
    if not isinstance(latent, pd.Series) or len(latent) == 0:
        notes.warn("sealed bundle: latent severity unavailable; phenotype cannot be scored")
        return zero("sealed latent unavailable; zero credit")
    try:
        mask = np.asarray(eval_mask).astype(bool).ravel()
    except (TypeError, ValueError):
        mask = None
    if mask is None or mask.shape[0] != len(latent):
        notes.warn("sealed bundle: eval_mask missing or not aligned with latent.parquet; phenotype cannot be scored")
        return zero("sealed eval_mask unusable; zero credit")

    values, status = _phenotype_column(phenotype, notes)
    if values is None:
        return zero(status)

    latent_ids = pd.Index([str(v) for v in latent.index.tolist()], dtype=object)
    latent_values = np.asarray(pd.to_numeric(latent, errors="coerce"), dtype=np.float64)
    submitted = np.asarray(values.reindex(latent_ids), dtype=np.float64)
    detail["eval_mask_size"] = int(mask.sum())
    if paper_compat:
        keep = mask & np.isfinite(submitted) & np.isfinite(latent_values)
        n = int(keep.sum())
        detail["n"] = n
        if n < PHENOTYPE_MIN_FINITE:
            return zero(f"{n} finite value(s) on the evaluation mask; at least {PHENOTYPE_MIN_FINITE} required")
        x, y = submitted[keep], latent_values[keep]
    else:
        if imaged is not None:
            scoring = mask & np.asarray(imaged, dtype=bool) & np.isfinite(latent_values)
            detail["set"] = "imaged participants of the eval mask"
        else:
            scoring = mask & np.isfinite(latent_values)
            detail["set"] = "the eval mask (this world has no images, hence no imaged set)"
        x = submitted[scoring]
        finite = np.isfinite(x)
        n_finite = int(finite.sum())
        detail.update(n=n_finite, n_set=int(scoring.sum()), n_imputed=int(scoring.sum()) - n_finite)
        if n_finite < PHENOTYPE_MIN_FINITE:
            return zero(f"{n_finite} finite value(s) among the {int(scoring.sum())} participants scored; "
                        f"at least {PHENOTYPE_MIN_FINITE} required")
        with np.errstate(all="ignore"):
            fill = float(np.mean(x[finite] / np.max(np.abs(x[finite])))) * float(np.max(np.abs(x[finite])))
        if not math.isfinite(fill):
            fill = float(np.median(x[finite]))
        x = np.where(finite, x, fill)
        y = latent_values[scoring]
        if detail["n_imputed"]:
            notes.interpret(f"phenotype: {detail['n_imputed']} participant(s) of the scored set without a finite "
                            "value took the mean of the submitted values")
    if np.all(x == x[0]):
        return zero("submitted phenotype has zero variance on the evaluation mask")
    with np.errstate(all="ignore"):
        r = _abs_correlation(x, y)
    if r is None:
        return zero("correlation undefined (latent has zero variance on the mask)")
    detail["r"] = r
    detail["status"] = "scored"

    if b is None:
        detail["branch"] = "fallback: 10*min(r/0.85, 1) (no finite built_in_correlation)"
        return POINTS_PHENOTYPE * min(r / PHENOTYPE_CEILING, 1.0), detail
    gap = PHENOTYPE_CEILING - b
    if gap <= PHENOTYPE_GAP_EPS:
        detail["branch"] = "gap: 0.85 - b <= 1e-6, 10 points iff r > b"
        return (POINTS_PHENOTYPE if r > b else 0.0), detail
    detail["branch"] = "baseline: 10*clip((r - b)/(0.85 - b), 0, 1)"
    return POINTS_PHENOTYPE * min(max((r - b) / gap, 0.0), 1.0), detail
