"""The per-group role-blind statistics (``pipeline.tells.features`` assembles them): the
correlation structure (communality, partial correlations, principal-component membership,
agreement with another omics layer), the covariates' and groups' effects, the second
visit, a flag's association, the change between visits, and targetability.

One job: one statistic group each, from the views of ``pipeline.tells.views``.  Every
function is self-contained (imports inside; the helpers it calls are the library's other
functions): the exploit agent emits their source (``features.library_source``).
"""
from __future__ import annotations

from .views import residualise, standardise_columns, standardise_within, top_component_share


def communality_statistics(adjusted, ks=(3, 12, 24), ridge=0.01):
    """Correlation structure of covariate-adjusted, standardised proteins."""
    import numpy as np

    n, p = adjusted.shape
    out = {f"pc{k}": v for k, v in top_component_share(adjusted, tuple(ks)).items()}
    c = adjusted.T @ adjusted / n
    off = c.copy()
    np.fill_diagonal(off, 0.0)
    out["max_abs_r"] = np.abs(off).max(axis=1)
    out["mean_r2"] = (off ** 2).sum(axis=1) / max(p - 1, 1)
    # the same without the protein's closest one (a co-regulated twin, if it has one)
    out["mean_r2_rest"] = ((off ** 2).sum(axis=1) - (off ** 2).max(axis=1)) / max(p - 2, 1)
    out["n_r_above_0.1"] = (np.abs(off) > 0.1).sum(axis=1).astype(np.float64)
    inverse = np.linalg.inv(c + ridge * np.eye(p))
    out["multiple_r2"] = 1.0 - 1.0 / (np.diag(inverse) * (1.0 + ridge))
    return out


def partial_statistics(adjusted, ridge=0.01):
    """The partial-correlation graph of the covariate-adjusted proteins (a ridge-regularised
    inverse of their correlation matrix): each protein's largest and second |partial|, its
    degree (partials beyond 4 standard errors), the sum of its squared partials, and its
    nearest neighbour's (the strongest partner's) largest partial and degree, and whether
    the two are each other's strongest.  Returns (statistics, strongest partner index)."""
    import numpy as np

    n, p = adjusted.shape
    c = adjusted.T @ adjusted / n
    omega = np.linalg.inv(c + ridge * np.eye(p))
    d = np.sqrt(np.diag(omega))
    partial = -omega / np.outer(d, d)
    np.fill_diagonal(partial, 0.0)
    a = np.abs(partial)
    partner = a.argmax(axis=1)
    top2 = np.sort(a, axis=1)[:, -2:] if p > 1 else np.zeros((p, 2))
    degree = (a * np.sqrt(n) > 4.0).sum(axis=1).astype(np.float64)
    out = {"max_abs": top2[:, -1], "second_abs": top2[:, 0], "degree": degree, "sum_sq": (partial ** 2).sum(axis=1),
           "partner_max_abs": top2[partner, -1], "partner_degree": degree[partner],
           "mutual": (partner[partner] == np.arange(p)).astype(np.float64)}
    return out, partner


def pc_membership(adjusted, k=24):
    """Which of the top ``k`` principal components of the covariate-adjusted proteome a
    protein belongs to: the component carrying most of its variance, that component's
    rank and its effective number of proteins (inverse participation ratio: a pair that
    takes a component of its own has about 2), and the share of the protein's variance in
    top components that fewer than 10 proteins carry."""
    import numpy as np

    n, p = adjusted.shape
    cov = adjusted.T @ adjusted / n
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1][:min(k, p)]
    values, vectors = np.clip(values[order], 0.0, None), vectors[:, order]
    total = np.diag(cov)
    total = np.where(total > 0, total, 1.0)
    share = values[None, :] * vectors ** 2 / total[:, None]  # [protein, component]
    size = 1.0 / np.maximum((vectors ** 4).sum(axis=0), 1e-12)
    main = share.argmax(axis=1)
    return {"main_rank": (main + 1).astype(np.float64), "main_size": size[main], "main_share": share[np.arange(p), main],
            "small_components_share": (share * (size < 10.0)[None, :]).sum(axis=1)}


def cross_omics_statistics(adjusted, other, prefix, pcs=20):
    """How much of each protein the other assay (transcripts or metabolites) explains:
    the strongest single correlation and the share in the other assay's top components."""
    import numpy as np

    n = adjusted.shape[0]
    c = adjusted.T @ other / n
    out = {f"{prefix}_max_abs_r": np.abs(c).max(axis=1)}
    values, vectors = np.linalg.eigh(other.T @ other / n)
    order = np.argsort(values)[::-1][:min(pcs, len(values))]
    values, vectors = np.clip(values[order], 1e-12, None), vectors[:, order]
    scores = vectors.T @ c.T  # [component, protein]: covariance of each component's scores with the protein
    explained = (scores ** 2 / values[:, None]).sum(axis=0)
    out[f"{prefix}_pc{len(order)}_r2"] = explained / np.maximum((adjusted ** 2).mean(axis=0), 1e-12)
    return out


def covariate_statistics(values, design, main):
    """Coefficients of each (standardised) protein on the measured covariates, and what they explain."""
    import numpy as np

    n = values.shape[0]
    beta = np.linalg.pinv(design) @ values
    resid = values - design @ beta
    names = list(main)
    out = {name: beta[1 + i] for i, name in enumerate(names)}
    total = (values - values.mean(axis=0)) ** 2
    out["r2"] = 1.0 - (resid ** 2).sum(axis=0) / np.maximum(total.sum(axis=0), 1e-12)
    coefs = np.vstack([beta[1 + i] for i in range(len(names))])
    centre = np.median(coefs, axis=1, keepdims=True)
    spread = 1.4826 * np.median(np.abs(coefs - centre), axis=1, keepdims=True)
    spread[spread == 0] = 1.0
    dist = ((coefs - centre) / spread) ** 2
    out["distance"] = np.sqrt(dist.sum(axis=0))
    no_bmi = [i for i, name in enumerate(names) if name != "bmi"]
    out["distance_without_bmi"] = np.sqrt(dist[no_bmi].sum(axis=0))
    squares = np.column_stack([main["age"] ** 2, main["bmi"] ** 2])
    beta2 = np.linalg.pinv(np.column_stack([design, squares - squares.mean(axis=0)])) @ values
    out["age_squared"] = beta2[-2]
    out["bmi_squared"] = beta2[-1]
    male = main["sex"] > 0
    var_m = resid[male].var(axis=0)
    var_f = resid[~male].var(axis=0)
    out["log_variance_ratio_sex"] = np.log(np.maximum(var_m, 1e-12) / np.maximum(var_f, 1e-12))
    sq = resid ** 2
    sq = (sq - sq.mean(axis=0)) / np.maximum(sq.std(axis=0), 1e-12)
    out["variance_trend_age"] = sq.T @ ((main["age"] - main["age"].mean()) / main["age"].std()) / n
    return out


def group_statistics(values, groups):
    """Centre heterogeneity of each column: F of means (one-way ANOVA) and of spreads (Brown-Forsythe)."""
    import numpy as np

    labels = np.unique(groups)
    n, k = values.shape[0], len(labels)
    rows_of = [np.flatnonzero(groups == g) for g in labels]

    def anova(x):
        grand = x.mean(axis=0)
        between = np.zeros(x.shape[1])
        within = np.zeros(x.shape[1])
        for rows in rows_of:
            part = x[rows]
            mean = part.mean(axis=0)
            between += len(rows) * (mean - grand) ** 2
            within += ((part - mean) ** 2).sum(axis=0)
        return (between / max(k - 1, 1)) / np.maximum(within / max(n - k, 1), 1e-12)

    out = {"centre_mean_F": np.empty(values.shape[1]), "centre_spread_F": np.empty(values.shape[1])}
    for start in range(0, values.shape[1], 256):  # columns in blocks, each on its own
        sl = slice(start, start + 256)
        b = np.asarray(values[:, sl], dtype=np.float64)
        spread = np.empty(b.shape)
        for rows in rows_of:
            spread[rows] = np.abs(b[rows] - np.median(b[rows], axis=0))
        out["centre_mean_F"][sl] = anova(b)
        out["centre_spread_F"][sl] = anova(spread)
    return out


def visit2_statistics(baseline, visit2, centre):
    """Baseline-to-visit-2 behaviour on the attendees: correlation, mean change, SD ratio.

    ``baseline``/``visit2`` are the released values of the same participants
    (rows aligned).  The site view rescales both visits by the baseline moments
    of the attendees within each centre (a fixed per-site scale cancels); the
    raw view uses the values as released.
    """
    import numpy as np

    def summary(a, b):
        ok = np.isfinite(a) & np.isfinite(b)
        count = np.maximum(ok.sum(axis=0), 2)
        a0, b0 = np.where(ok, a, 0.0), np.where(ok, b, 0.0)
        ma, mb = a0.sum(axis=0) / count, b0.sum(axis=0) / count
        da, db = np.where(ok, a - ma, 0.0), np.where(ok, b - mb, 0.0)
        va, vb = (da ** 2).sum(axis=0) / count, (db ** 2).sum(axis=0) / count
        r = (da * db).sum(axis=0) / count / np.sqrt(np.maximum(va * vb, 1e-24))
        return r, mb - ma, np.sqrt(vb / np.maximum(va, 1e-24))

    out = {}
    out["r_raw"], out["mean_change_raw"], out["sd_ratio_raw"] = summary(baseline, visit2)
    a, b = baseline.copy(), visit2.copy()
    for g in np.unique(centre):
        rows = centre == g
        m = np.nanmean(baseline[rows], axis=0)
        s = np.nanstd(baseline[rows], axis=0)
        s[~np.isfinite(s) | (s == 0)] = 1.0
        a[rows] = (baseline[rows] - m) / s
        b[rows] = (visit2[rows] - m) / s
    out["r"], out["mean_change"], out["sd_ratio"] = summary(a, b)
    return out


def flag_association(adjusted, flag, design):
    """Covariate-adjusted association of each protein with a released 0/1 flag (the imaging
    participation flag): the correlation of the adjusted protein with the flag's residual
    on the covariates, as a z (r sqrt(n))."""
    import numpy as np

    f = np.asarray(flag, dtype=np.float64)
    resid = residualise(f[:, None], design)[:, 0]
    sd = resid.std()
    if not sd > 0:
        return np.zeros(adjusted.shape[1])
    resid = (resid - resid.mean()) / sd
    n = adjusted.shape[0]
    return (adjusted * resid[:, None]).sum(axis=0) / np.sqrt(n)


def change_statistics(base, later, partner, bmi_change, centre):
    """Visit-to-visit change coherence on the attendees: each protein's change (visit 2 less
    baseline, both on the baseline's scale) correlated with its strongest baseline partner's
    change (``partner``: index per protein), the largest |correlation| of its change with any
    other protein's change, and the correlation of its change with the change in BMI."""
    import numpy as np

    def z(x):
        x = np.where(np.isfinite(x), x, np.nanmean(np.where(np.isfinite(x), x, np.nan), axis=0))
        return standardise_columns(np.nan_to_num(x))

    a = standardise_within(base, centre)
    b = later.copy()
    for g in np.unique(centre):
        rows = centre == g
        m = np.nanmean(base[rows], axis=0)
        s = np.nanstd(base[rows], axis=0)
        s[~np.isfinite(s) | (s == 0)] = 1.0
        b[rows] = (later[rows] - m) / s
    delta = z(b - np.where(np.isfinite(a), a, 0.0))
    n = delta.shape[0]
    cc = delta.T @ delta / n
    out = {"change_partner_r": cc[np.arange(cc.shape[0]), partner]}
    np.fill_diagonal(cc, 0.0)
    out["change_max_abs_r"] = np.abs(cc).max(axis=1)
    bc = np.asarray(bmi_change, dtype=np.float64)
    ok = np.isfinite(bc)
    if ok.sum() > 2 and bc[ok].std() > 0:
        bz = np.where(ok, (bc - bc[ok].mean()) / bc[ok].std(), 0.0)
        out["change_bmi_r"] = (delta * bz[:, None]).mean(axis=0)
    return out


def targetability_statistics(targetability, proteins):
    """Targetability columns per protein: numeric columns as they are, categorical ones as
    the frequency of the protein's category (rare categories rank low)."""
    import numpy as np
    import pandas as pd

    table = targetability.reindex(proteins)
    out = {}
    for column in table.columns:
        values = table[column]
        if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
            out[column] = np.array(values, dtype=np.float64)
        else:
            frequency = values.map(values.value_counts(normalize=True))
            out[f"{column}_frequency"] = np.array(frequency, dtype=np.float64)
    return out
