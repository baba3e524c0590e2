"""A disease-severity phenotype as the latent factor the modalities share.

Each modality (ECG, coronary CT, the clinical record, cardiac MRI) measures
severity with its own, independent errors, after the measured covariates that
shape a measurement without being disease (age, sex, body size, smoking,
exercise, ancestry; for MRI also the acquisition site) are regressed out.  So:

1. Within each modality, the combination of its features that best predicts the
   *other* modalities (cross-fitted ridge regressions, iterated to a fixed point:
   generalised canonical correlation).  A modality's own errors cannot steer its
   weights because the target never contains them.  Features no other modality
   echoes (exercise remodelling, a marker that alters the images only) get no
   weight.
2. The modality scores follow a one-factor model s_g = a_g L + u_g.  Loadings and
   error variances come from the scores' covariances (triads) in the whole
   cohort; MRI exists only for a selected sub-cohort, so its loading is put on
   the population scale with the factor variance and mean of that sub-cohort,
   estimated from the other modalities there (selection on the factor leaves
   loadings and error variances unchanged: Pearson-Lawley).
3. Each participant's phenotype is the factor's conditional mean given the
   modalities they have: sum_g (a_g / psi_g) s_g / (1 + sum_g a_g^2 / psi_g).

The same weights applied to the unadjusted features give a crude score, the
severity a naive analysis would use (confounders included), for the
confounding checks.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data import nuisance_design, residualise


def standardise_columns(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    mean = np.nanmean(values, axis=0)
    sd = np.nanstd(values, axis=0)
    sd[~np.isfinite(sd) | (sd == 0)] = 1.0
    out = (values - mean) / sd
    out[~np.isfinite(out)] = 0.0
    return out


def ridge_fit(X: np.ndarray, y: np.ndarray, penalty: float) -> np.ndarray:
    p = X.shape[1]
    return np.linalg.solve(X.T @ X + penalty * np.eye(p), X.T @ y)


def crossfit(X: np.ndarray, y: np.ndarray, folds: np.ndarray, penalty: float):
    """Out-of-fold predictions and the full-data coefficients."""
    pred = np.zeros(len(y))
    for k in np.unique(folds):
        train = folds != k
        beta = ridge_fit(X[train], y[train], penalty)
        pred[~train] = X[~train] @ beta
    return pred, ridge_fit(X, y, penalty)


def _z(v: np.ndarray) -> np.ndarray:
    v = v - v.mean()
    s = v.std()
    return v / s if s > 0 else v


def group_scores(groups: dict, n_iter: int = 12, penalty_frac: float = 0.01, seed_folds: int = 5):
    """Iterated leave-one-group-out regressions: dict name -> (score, coefficients)."""
    names = list(groups)
    n = next(iter(groups.values())).shape[0]
    folds = np.arange(n) % seed_folds
    penalty = penalty_frac * n
    # Start from each group's first principal component, signed to agree with the others.
    scores = {}
    for g in names:
        X = groups[g]
        _, _, vt = np.linalg.svd(X[: min(n, 20000)], full_matrices=False)
        scores[g] = _z(X @ vt[0])
    for g in names[1:]:
        if np.corrcoef(scores[g], scores[names[0]])[0, 1] < 0:
            scores[g] = -scores[g]
    coefs = {}
    for it in range(n_iter):
        last = it == n_iter - 1
        new = {}
        for g in names:
            target = _z(sum(scores[h] for h in names if h != g))
            if last:
                pred, beta = crossfit(groups[g], target, folds, penalty)
            else:
                beta = ridge_fit(groups[g], target, penalty)
                pred = groups[g] @ beta
            sd = pred.std() or 1.0
            new[g] = (pred - pred.mean()) / sd
            coefs[g] = beta / sd
        scores = new
    return scores, coefs


def one_factor(cov: np.ndarray):
    """Loadings a and unique variances psi of standardised scores from their covariance (triads)."""
    k = cov.shape[0]
    a = np.zeros(k)
    for g in range(k):
        ests = []
        for h in range(k):
            for m in range(h + 1, k):
                if g in (h, m) or cov[h, m] <= 0:
                    continue
                value = cov[g, h] * cov[g, m] / cov[h, m]
                if value > 0:
                    ests.append(value)
        a[g] = np.sqrt(np.median(ests)) if ests else 0.0
    a = np.clip(a, 0.0, 0.99)
    psi = np.clip(np.diag(cov) - a ** 2, 1e-3, None)
    return a, psi


def modality_groups(ecg: pd.DataFrame, ct: pd.DataFrame, clinical: pd.DataFrame) -> dict:
    """Measurement groups whose errors are independent of each other's.

    Every ECG measure is its own measurement, except QRS duration and bundle branch
    block (a block is read off the QRS complex); coronary calcium (score and its
    presence) and stenosis (per vessel and the maximum) are one reading each; the
    clinical record (diagnoses and the medications prescribed for them) is one.
    """
    groups = {}
    rest = list(ecg.columns)
    if "qrs" in rest and "lbbb" in rest:
        groups["ecg qrs/lbbb"] = ecg[["qrs", "lbbb"]]
        rest = [c for c in rest if c not in ("qrs", "lbbb")]
    for c in rest:
        groups[f"ecg {c}"] = ecg[[c]]
    calcium = [c for c in ct.columns if c.startswith("cac")]
    stenosis = [c for c in ct.columns if c not in calcium]
    if calcium:
        groups["ct calcium"] = ct[calcium]
    if stenosis:
        groups["ct stenosis"] = ct[stenosis]
    if clinical.shape[1]:
        groups["clinical record"] = clinical
    return groups


def build_phenotype(cov: pd.DataFrame, modalities: dict, imaging: pd.DataFrame | None) -> dict:
    """The phenotype and its parts.

    ``modalities``: name -> DataFrame of features indexed like ``cov`` (whole cohort).
    ``imaging``: DataFrame of MRI features for the imaged participants (or None).
    Returns a dict with Series ``phenotype``, ``crude``, ``nonimaging``, ``imaging_score``
    and the model summary ``model``.
    """
    index = cov.index
    D = nuisance_design(cov, index)
    groups, crude_groups, keep = {}, {}, {}
    for name, frame in modalities.items():
        frame = frame.reindex(index)
        if frame.shape[1] == 0:
            continue
        values = frame.to_numpy(dtype=float)
        observed = np.isfinite(values).mean(axis=1) >= 0.5
        keep[name] = observed
        groups[name] = standardise_columns(residualise(values, D))
        crude_groups[name] = standardise_columns(values)
    names = list(groups)
    scores, coefs = group_scores(groups)
    S = np.column_stack([scores[g] for g in names])
    C = np.cov(S, rowvar=False)
    a, psi = one_factor(C)
    model = {"groups": {g: {"loading": float(a[i]), "unique": float(psi[i])} for i, g in enumerate(names)}}

    def combine(score_list, loads, uniques, present):
        num = np.zeros(len(index))
        den = np.ones(len(index))
        for s, l, u, m in zip(score_list, loads, uniques, present):
            num += np.where(m, (l / u) * s, 0.0)
            den += np.where(m, l * l / u, 0.0)
        return num / den

    present = [keep[g] for g in names]
    nonimaging = combine([scores[g] for g in names], a, psi, present)
    crude_scores = [crude_groups[g] @ coefs[g] for g in names]
    crude_scores = [s - s.mean() for s in crude_scores]
    crude = combine(crude_scores, a, psi, present)
    phenotype = nonimaging.copy()
    imaging_score = pd.Series(np.nan, index=index)
    if imaging is not None and len(imaging) > 50:
        img = imaging.reindex(index[cov["imaged"].to_numpy()] if "imaged" in cov else imaging.index)
        img = img.loc[img.notna().mean(axis=1) > 0.5]
        img_index = img.index
        rows = index.get_indexer(img_index)
        Di = nuisance_design(cov, img_index, with_centre=True)
        Xi = img.to_numpy(dtype=float)
        fill = np.nanmedian(Xi, axis=0)
        Xf = np.where(np.isfinite(Xi), Xi, fill)
        B_res = np.linalg.lstsq(Di, Xf, rcond=None)[0]
        R = Xf - Di @ B_res
        r_sd = R.std(axis=0)
        r_sd[r_sd == 0] = 1.0
        Xi_res = R / r_sd
        target = _z(nonimaging[rows])
        folds = np.arange(len(rows)) % 5
        s_im, beta_im = crossfit(Xi_res, target, folds, 0.01 * len(rows))
        s_im = s_im - s_im.mean()
        # Factor variance and mean in the imaged sub-cohort, from the other modalities there.
        sub = np.column_stack([scores[g][rows] for g in names])
        v_terms, m_terms, w_terms = [], [], []
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                if a[i] > 0.05 and a[j] > 0.05:
                    v_terms.append(np.cov(sub[:, i], sub[:, j])[0, 1] / (a[i] * a[j]))
            if a[i] > 0.05:
                m_terms.append(sub[:, i].mean() / a[i])
                w_terms.append(a[i] ** 2 / psi[i])
        v_sub = float(np.median(v_terms)) if v_terms else 1.0
        v_sub = min(max(v_sub, 0.05), 2.0)
        mu_sub = float(np.average(m_terms, weights=w_terms)) if m_terms else 0.0
        a_im_terms = [np.cov(s_im, sub[:, i])[0, 1] / (a[i] * v_sub) for i in range(len(names)) if a[i] > 0.05]
        a_im = max(float(np.mean(a_im_terms)), 1e-3) if a_im_terms else 1e-3
        psi_im = max(float(s_im.var() - a_im ** 2 * v_sub), 1e-3 * s_im.var())
        s_im_pop = s_im + a_im * mu_sub  # on the population's origin
        imaging_score.iloc[rows] = s_im_pop
        add_num = (a_im / psi_im) * s_im_pop
        add_den = a_im ** 2 / psi_im
        num = nonimaging[rows] * (1 + sum(np.where(present[i][rows], a[i] ** 2 / psi[i], 0) for i in range(len(names))))
        den = 1 + sum(np.where(present[i][rows], a[i] ** 2 / psi[i], 0) for i in range(len(names)))
        phenotype[rows] = (num + add_num) / (den + add_den)
        # The crude score's MRI part: adjusted for site only (the scanner is an artefact, not a confounder).
        Xi_site = standardise_columns(residualise(Xi, nuisance_design(cov, img_index, with_centre=True,
                                                                       covariates=False)))
        crude_im = Xi_site @ beta_im
        crude_im = crude_im - crude_im.mean() + a_im * mu_sub
        cnum = crude[rows] * den + (a_im / psi_im) * crude_im
        crude[rows] = cnum / (den + add_den)
        model["imaging_transform"] = {"fill": fill, "B": B_res, "sd": r_sd, "beta": beta_im,
                                      "shift": float(a_im * mu_sub - (Xi_res @ beta_im).mean())}
        model["imaging"] = {"loading": a_im, "unique": psi_im, "subcohort_factor_var": v_sub,
                            "subcohort_factor_mean": mu_sub, "n": int(len(rows)),
                            "features": list(img.columns), "coef": beta_im.tolist()}
    return {
        "phenotype": pd.Series(phenotype, index=index),
        "crude": pd.Series(crude, index=index),
        "nonimaging": pd.Series(nonimaging, index=index),
        "imaging_score": imaging_score,
        "group_scores": pd.DataFrame(scores, index=index),
        "model": model,
    }


def score_imaging(model: dict, features: pd.DataFrame, cov: pd.DataFrame) -> pd.Series:
    """The MRI score of ``features`` (e.g. the repeat scans) on the baseline score's scale:
    the baseline's covariate adjustment (with each participant's baseline covariates),
    standardisation and weights."""
    t = model["imaging_transform"]
    cols = model["imaging"]["features"]
    X = features.reindex(columns=cols).to_numpy(dtype=float)
    X = np.where(np.isfinite(X), X, t["fill"])
    D = nuisance_design(cov, features.index, with_centre=True)
    if D.shape[1] != t["B"].shape[0]:
        return pd.Series(np.nan, index=features.index)
    return pd.Series(((X - D @ t["B"]) / t["sd"]) @ t["beta"] + t["shift"], index=features.index)
