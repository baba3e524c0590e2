"""The views of the proteins the role-blind statistics (``pipeline.tells.features``) use,
and their simplest statistics: columns standardised over the cohort or within groups
(the site-normalised view), residuals on a design, the measured covariates as a design
(the adjusted view), the share of the top principal components, and the distribution's
shape.

One job: the views and the shape.  Every function is self-contained (imports inside; the
helpers it calls are the library's other functions): the exploit agent emits their source
(``features.library_source``).
"""
from __future__ import annotations


def standardise_columns(values):
    """Column z-scores over the finite entries; missing entries become 0 (the mean).
    Columns are processed in blocks (each column on its own, so the values do not depend
    on the blocks), which keeps the temporaries of a paper-scale proteome small."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    flat = x.ndim == 1
    x = x.reshape(-1, 1) if flat else x
    out = np.empty(x.shape)
    for start in range(0, x.shape[1], 256):
        b = np.array(x[:, start:start + 256])
        finite = np.isfinite(b)
        count = np.maximum(finite.sum(axis=0), 1)
        mean = np.where(finite, b, 0.0).sum(axis=0) / count
        centred = np.where(finite, b - mean, 0.0)
        sd = np.sqrt((centred ** 2).sum(axis=0) / count)
        sd[~np.isfinite(sd) | (sd == 0)] = 1.0
        out[:, start:start + 256] = centred / sd
    return out[:, 0] if flat else out


def standardise_within(values, groups):
    """Column z-scores within each group (site normalisation); missing entries become 0."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    out = np.empty(x.shape)
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        out[rows] = standardise_columns(x[rows])
    out[~np.isfinite(x)] = np.nan
    return standardise_columns(out)


def residualise(y, design):
    """Least-squares residuals of every column of ``y`` on ``design`` (through a QR
    factorisation of the design: the fit is the projection on its column space)."""
    import numpy as np

    q, r = np.linalg.qr(np.asarray(design, dtype=np.float64))
    keep = np.abs(np.diag(r)) > 1e-10 * max(float(np.abs(np.diag(r)).max()), 1e-300)
    q = q[:, keep]
    y = np.asarray(y, dtype=np.float64)
    out = np.empty(y.shape)
    for start in range(0, y.shape[1], 512):
        b = y[:, start:start + 512]
        out[:, start:start + 512] = b - q @ (q.T @ b)
    return out


def covariate_design(covariates):
    """(design matrix, named main-effect columns, centre labels) from covariates.parquet.

    Sentinel codes (negative values: -1 do not know, -3 prefer not to answer) are
    not measurements and take the mean.  Main effects: z(age), sex, z(BMI),
    smoking, z(activity); centre and ancestry enter as indicator columns.
    """
    import numpy as np
    import pandas as pd

    def numeric(name):
        if name not in covariates.columns:
            return np.zeros(len(covariates))
        v = np.array(pd.to_numeric(covariates[name], errors="coerce"), dtype=np.float64)
        v[v < 0] = np.nan
        v[~np.isfinite(v)] = np.nanmean(v) if np.isfinite(v).any() else 0.0
        return v

    def z(v):
        sd = v.std()
        return (v - v.mean()) / (sd if sd > 0 else 1.0)

    main = {
        "age": z(numeric("p21003_i0")),
        "sex": numeric("p31_i0") - numeric("p31_i0").mean(),
        "bmi": z(numeric("p21001_i0")),
        "smoking": numeric("p20116_i0") - numeric("p20116_i0").mean(),
        "activity": z(numeric("p22040_i0")),
    }
    centre = (covariates["p54_i0"].astype(str).to_numpy() if "p54_i0" in covariates.columns
              else np.zeros(len(covariates), dtype=str))
    columns = [np.ones(len(covariates))] + list(main.values())
    for name in ("p54_i0", "p21000_i0"):
        if name in covariates.columns:
            labels = covariates[name].astype(str).to_numpy()
            for level in np.unique(labels)[1:]:
                columns.append((labels == level).astype(np.float64))
    return np.column_stack(columns), main, centre


def top_component_share(x, k):
    """Share of each (standardised) column's variance in the top ``k`` principal components
    (``k`` an int or a tuple of ints; a tuple gives a dict by k)."""
    import numpy as np

    n = x.shape[0]
    cov = x.T @ x / n
    values, vectors = np.linalg.eigh(cov)  # ascending
    order = np.argsort(values)[::-1]
    values, vectors = np.clip(values[order], 0.0, None), vectors[:, order]
    total = np.diag(cov)
    total = np.where(total > 0, total, 1.0)
    contrib = values[None, :] * vectors ** 2  # [column, component]
    ks = (k,) if isinstance(k, int) else tuple(k)
    out = {kk: contrib[:, :min(kk, len(values))].sum(axis=1) / total for kk in ks}
    return out[k] if isinstance(k, int) else out


def shape_statistics(x):
    """Skewness, excess kurtosis, bimodality coefficient, largest |z|, tail/IQR ratio, per column
    (columns in blocks, each on its own)."""
    import numpy as np

    n, p = x.shape
    out = {k: np.empty(p) for k in ("skew", "kurtosis", "bimodality", "max_abs_z", "tail_ratio")}
    for start in range(0, p, 256):
        sl = slice(start, min(p, start + 256))
        b = np.array(x[:, sl], dtype=np.float64)
        m = b - b.mean(axis=0)
        sd = np.sqrt((m ** 2).mean(axis=0))
        sd[sd == 0] = 1.0
        zs = m / sd
        skew = (zs ** 3).mean(axis=0)
        kurt = (zs ** 4).mean(axis=0) - 3.0
        out["skew"][sl] = skew
        out["kurtosis"][sl] = kurt
        # Sarle's bimodality coefficient (above 5/9 suggests two modes).
        out["bimodality"][sl] = (skew ** 2 + 1.0) / (kurt + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3)))
        out["max_abs_z"][sl] = np.abs(zs).max(axis=0)
        q = np.quantile(b, [0.01, 0.25, 0.75, 0.99], axis=0)
        iqr = q[2] - q[1]
        out["tail_ratio"][sl] = (q[3] - q[0]) / np.where(iqr > 0, iqr, 1.0)
    return out
