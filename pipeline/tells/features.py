"""Role-blind per-protein statistics of one release: what an analyst can compute
about each protein without ever looking at disease, outcomes, imaging or the
latent severity (SPEC section 3).

``protein_statistics(release, genotypes)`` returns one row per protein and one
column per statistic, named ``group.name``.  The same functions serve the tell
scan (``pipeline.tells.scan``, many worlds, sealed roles known) and the exploit
agent (``pipeline.agents.tells``, one release inside the sandbox): the agent
emits their source with ``inspect.getsource``, so every function here is
self-contained (imports inside, no module-level names, helpers passed in the
emitted library) and reads only the release.

Three views of the proteins are used:

* *site-normalised* values (each protein standardised within each assessment
  centre): the default view.  A per-site unit or scale problem (T9's planted
  signal) disappears in it, so every other statistic of the T9 decoy is
  compared fairly;
* *raw* values (cohort-standardised, as released): shape and centre statistics
  and a few raw twins of the default ones, which T9's site scale moves by
  design (exempt for T9 in the scan);
* *adjusted* values: site-normalised values with the measured covariates
  (age, sex, BMI, smoking, activity, centre, ancestry) regressed out, for the
  correlation structure (communality, transcript agreement beyond covariates).

Genetics: each protein's lead variant is found by the analyst's own scan (the
variant with the largest |r| with the protein over all variants); the release
carries no cis annotation.  Variant positions come from the genotype Zarr store
(or the VCF when the store is absent).
"""
from __future__ import annotations

import inspect

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


def genotype_matrix(genotypes, subjects):
    """Standardised dosages (float32, missing calls at the mean) for ``subjects``, and allele frequencies."""
    import numpy as np

    g = genotypes.reindex(subjects)
    calls = g.to_numpy()
    out = np.empty(calls.shape, dtype=np.float32)
    q = np.empty(calls.shape[1], dtype=np.float32)
    for start in range(0, calls.shape[1], 512):  # in blocks of variants, each on its own
        sl = slice(start, start + 512)
        d = np.array(calls[:, sl], dtype=np.float32)
        d[~np.isfinite(d) | (d < 0)] = np.nan
        qb = np.nanmean(d, axis=0) / 2.0
        d = np.where(np.isfinite(d), d, 2.0 * qb)
        sd = d.std(axis=0)
        sd[sd == 0] = 1.0
        out[:, sl] = ((d - d.mean(axis=0)) / sd).astype(np.float32)
        q[sl] = qb
    return out, q, np.asarray(g.columns)


def lead_scan(gz, x, step=512):
    """Per column of ``x`` (standardised): the variant with the largest |r| and that r."""
    import numpy as np

    n = gz.shape[0]
    xf = np.asarray(x, dtype=np.float32)
    best = np.full(xf.shape[1], -1.0)
    lead = np.zeros(xf.shape[1], dtype=np.int64)
    lead_r = np.zeros(xf.shape[1])
    for start in range(0, gz.shape[1], step):
        r = gz[:, start:start + step].T @ xf / n
        idx = np.abs(r).argmax(axis=0)
        val = r[idx, np.arange(r.shape[1])]
        better = np.abs(val) > best
        best[better] = np.abs(val[better])
        lead[better] = start + idx[better]
        lead_r[better] = val[better]
    return lead, lead_r


def variant_positions(release, variant_ids):
    """(contig label, position) per variant in ``variant_ids`` order, from the genotype Zarr store or the VCF."""
    import gzip
    import os

    import numpy as np

    store = os.path.join(release, "genotypes.zarr")
    try:
        import zarr

        root = zarr.open_group(store, mode="r", zarr_format=2)
        ids = [str(v) for v in root["variant_id"][:].tolist()]
        contig_names = [str(v) for v in root["contig_id"][:].tolist()]
        contig = np.array([contig_names[int(i)] for i in root["variant_contig"][:]], dtype=object)
        position = np.asarray(root["variant_position"][:], dtype=np.int64)
    except Exception:  # no store (or no zarr): read the VCF's first columns
        ids, contig, position = [], [], []
        with gzip.open(os.path.join(release, "genotypes.vcf.gz"), "rt") as handle:
            for line in handle:
                if line.startswith("#"):
                    continue
                chrom, pos, vid = line.split("\t", 3)[:3]
                ids.append(vid)
                contig.append(chrom)
                position.append(int(pos))
        contig, position = np.array(contig, dtype=object), np.array(position, dtype=np.int64)
    where = {v: i for i, v in enumerate(ids)}
    index = np.array([where[str(v)] for v in variant_ids])
    return contig[index], position[index]


def instrument_statistics(gz, q, contig, position, x, window_bp=100_000):
    """Lead-variant statistics of every column of ``x`` (standardised proteins).

    Strength (r^2, F, count of genome-wide significant variants), a second
    signal on another chromosome and after conditioning on the lead, the lead's
    allele frequency and local variant density, and the sharing of loci with
    other proteins: identical leads, leads within ``window_bp``, the strongest
    LD with another protein's lead and how many other proteins the lead itself
    moves.  Sharing counts only proteins whose lead is genome-wide significant.
    """
    import numpy as np

    n, p = x.shape
    lead, lead_r = lead_scan(gz, x)
    r2 = lead_r ** 2
    threshold = 5.45 / np.sqrt(n)  # |r| of a genome-wide significant association (p = 5e-8)
    out = {"lead_r2": r2, "lead_F": r2 * (n - 2) / np.clip(1 - r2, 1e-12, None)}
    maf = np.minimum(q, 1 - q)
    out["lead_maf"] = maf[lead]
    count = np.zeros(p)
    other_chrom = np.zeros(p)
    trans_variant = np.zeros(p, dtype=np.int64)
    variant_hits = np.zeros(gz.shape[1])  # proteins each variant moves genome-wide significantly
    xf = np.asarray(x, dtype=np.float32)
    for start in range(0, gz.shape[1], 512):
        r = gz[:, start:start + 512].T @ xf / n
        hit = np.abs(r) > threshold
        count += hit.sum(axis=0)
        variant_hits[start:start + r.shape[0]] = hit.sum(axis=1)
        same = contig[start:start + 512][:, None] == contig[lead][None, :]
        r2o = np.where(same, 0.0, r ** 2)
        best = r2o.argmax(axis=0)
        val = r2o[best, np.arange(p)]
        better = val > other_chrom
        other_chrom[better] = val[better]
        trans_variant[better] = start + best[better]
    out["n_significant_variants"] = count
    out["trans_r2"] = other_chrom
    # the strongest trans signal: a hub many proteins share, or a variant of the protein's own
    trans_significant = other_chrom > threshold ** 2
    hub_size = np.where(trans_significant, variant_hits[trans_variant], 0.0)
    out["trans_hub_size"] = hub_size
    out["trans_private_r2"] = np.where(trans_significant & (hub_size <= 2), other_chrom, 0.0)
    out["trans_shared_r2"] = np.where(trans_significant & (hub_size > 2), other_chrom, 0.0)
    out["lead_is_hub"] = (variant_hits[lead] > 2).astype(np.float64)
    g_lead = gz[:, lead].astype(np.float64)
    beta = (g_lead * x).sum(axis=0) / n
    conditioned = standardise_columns(x - g_lead * beta)
    _, cond_r = lead_scan(gz, conditioned)
    out["conditional_r2"] = cond_r ** 2
    out["locus_density"] = np.array([int(((contig == contig[v]) & (np.abs(position - position[v]) <= window_bp)).sum())
                                     for v in lead])
    significant = np.abs(lead_r) > threshold
    ld = (g_lead.T @ g_lead / n) ** 2
    np.fill_diagonal(ld, 0.0)
    others = np.where(significant[None, :], ld, 0.0)
    same_lead = (lead[:, None] == lead[None, :]) & significant[None, :]
    np.fill_diagonal(same_lead, False)
    near = ((contig[lead][:, None] == contig[lead][None, :])
            & (np.abs(position[lead][:, None] - position[lead][None, :]) <= window_bp) & significant[None, :])
    np.fill_diagonal(near, False)
    out["share_same_lead"] = same_lead.sum(axis=1).astype(np.float64)
    out["share_window"] = near.sum(axis=1).astype(np.float64)
    out["max_ld_other_lead"] = others.max(axis=1)
    out["n_linked_leads"] = (others > 0.05).sum(axis=1).astype(np.float64)
    lead_effects = g_lead.T @ np.asarray(x, dtype=np.float64) / n  # [lead of protein i, protein j]
    hits = np.abs(lead_effects) > threshold
    np.fill_diagonal(hits, False)
    out["lead_moves_proteins"] = hits.sum(axis=1).astype(np.float64)
    # locus isolation: other proteins' (significant) lead variants near one's own
    lc, lp = contig[lead], position[lead].astype(np.float64)
    same_contig = (lc[:, None] == lc[None, :]) & significant[None, :] & (lead[:, None] != lead[None, :])
    np.fill_diagonal(same_contig, False)
    dist = np.where(same_contig, np.abs(lp[:, None] - lp[None, :]), np.inf)
    for label, w in (("250kb", 250_000), ("1mb", 1_000_000), ("3mb", 3_000_000)):
        out[f"leads_within_{label}"] = (dist <= w).sum(axis=1).astype(np.float64)
    out["nearest_lead_kb"] = np.minimum(dist.min(axis=1), 1e9) / 1000.0
    return out, lead, lead_r


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


def protein_statistics(release, genotypes, max_subjects=None):
    """One row per protein (index: protein id), one column per role-blind statistic."""
    import os
    import re

    import numpy as np
    import pandas as pd

    read = lambda name: pd.read_parquet(os.path.join(release, name))  # noqa: E731
    covariates = read("covariates.parquet")
    covariates.index = covariates.index.astype(str)
    proteins = read("proteomics.parquet")
    proteins.index = proteins.index.astype(str)
    subjects = covariates.index.intersection(proteins.index)
    if max_subjects is not None and len(subjects) > max_subjects:
        subjects = subjects[:max_subjects]
    covariates = covariates.loc[subjects]
    ids = [str(c) for c in proteins.columns]
    raw = np.array(proteins.loc[subjects], dtype=np.float64)
    del proteins
    design, main, centre = covariate_design(covariates)
    n, p = raw.shape
    stats = {}

    # --- views of the proteins
    site = standardise_within(raw, centre)
    cohort = standardise_columns(raw)
    adjusted = standardise_columns(residualise(site, design))

    # --- transcripts (paired TRANS_n <-> PROT_n)
    transcripts = read("transcriptomics.parquet")
    transcripts.index = transcripts.index.astype(str)
    names = [re.sub(r"^PROT_", "TRANS_", c) for c in ids]
    traw = np.array(transcripts.reindex(index=subjects, columns=names), dtype=np.float64)
    del transcripts
    tsite = standardise_within(traw, centre)
    tadjusted = standardise_columns(residualise(tsite, design))
    stats["transcript.r"] = (site * tsite).mean(axis=0)
    stats["transcript.r_raw"] = (cohort * standardise_columns(traw)).mean(axis=0)
    stats["transcript.r_adjusted"] = (adjusted * tadjusted).mean(axis=0)
    ranks = lambda x: standardise_columns(np.argsort(np.argsort(x, axis=0), axis=0).astype(np.float64))  # noqa: E731
    rank_r = np.empty(p)
    for start in range(0, p, 256):  # in column blocks (each column on its own)
        sl = slice(start, start + 256)
        rank_r[sl] = (ranks(site[:, sl]) * ranks(tsite[:, sl])).mean(axis=0)
    stats["transcript.rank_minus_linear_r"] = rank_r - stats["transcript.r"]
    cross = adjusted.T @ tadjusted / n
    np.fill_diagonal(cross, 0.0)
    stats["transcript.best_other_abs_r"] = np.abs(cross).max(axis=1)
    stats["transcript.pc12"] = top_component_share(tadjusted, 12)
    for name, values in covariate_statistics(tsite, design, main).items():
        if name in ("age", "sex", "bmi", "smoking", "r2"):
            stats[f"transcript.covariate_{name}"] = values
    t_missing = ~np.isfinite(traw)
    stats["transcript.missing_rate"] = t_missing.mean(axis=0)
    del traw
    tsite = tsite.astype(np.float32)  # kept for the transcripts' own genotype scan (float32 there anyway)

    # --- correlation structure and other assays
    for name, values in communality_statistics(adjusted).items():
        stats[f"communality.{name}"] = values
    partial, partner = partial_statistics(adjusted)
    for name, values in partial.items():
        stats[f"partial.{name}"] = values
    for name, values in pc_membership(adjusted).items():
        stats[f"pcs.{name}"] = values
    if "imaged" in covariates.columns:
        imaged = np.array(pd.to_numeric(covariates["imaged"], errors="coerce"), dtype=np.float64)
        stats["imaging.flag_z"] = flag_association(adjusted, np.nan_to_num(imaged), design)
    stats["communality.raw_pc12"] = top_component_share(cohort, 12)
    for name, values in cross_omics_statistics(adjusted, tadjusted, "transcriptome").items():
        stats[f"communality.{name}"] = values
    try:
        metabolites = read("metabolomics.parquet")
        metabolites.index = metabolites.index.astype(str)
        mraw = np.array(metabolites.reindex(subjects), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            mlog = np.log(np.where(mraw > 0, mraw, np.nan))  # concentrations are log-normal
        madjusted = standardise_columns(residualise(standardise_within(mlog, centre), design))
        for name, values in cross_omics_statistics(adjusted, madjusted, "metabolome", pcs=10).items():
            stats[f"communality.{name}"] = values
    except FileNotFoundError:
        pass

    # --- covariate signature (site view) and centre heterogeneity (raw view)
    for name, values in covariate_statistics(site, design, main).items():
        stats[f"covariates.{name}"] = values
    for name, values in group_statistics(cohort, centre).items():
        stats[f"covariates.{name}_raw"] = values
    if "p21000_i0" in covariates.columns:
        ancestry = covariates["p21000_i0"].astype(str).to_numpy()
        stats["covariates.ancestry_mean_F"] = group_statistics(site, ancestry)["centre_mean_F"]
    if "p53_i0" in covariates.columns:
        day = np.array(pd.to_datetime(covariates["p53_i0"], errors="coerce").astype("int64"), dtype=np.float64)
        stats["covariates.assessment_date_r"] = (site * standardise_columns(day[:, None])).mean(axis=0)

    # --- distribution shape
    for name, values in shape_statistics(site).items():
        stats[f"shape.{name}"] = values
    for name, values in shape_statistics(cohort).items():
        stats[f"shape.{name}_raw"] = values
    del cohort
    finite = np.isfinite(raw)
    stats["shape.unique_fraction"] = np.array([len(np.unique(raw[finite[:, j], j])) / max(finite[:, j].sum(), 1)
                                               for j in range(p)])

    # --- missingness
    missing = ~finite
    stats["missing.rate"] = missing.mean(axis=0)
    zb = main["bmi"]
    n_missing = missing.sum(axis=0)
    mean_missing = (missing * zb[:, None]).sum(axis=0) / np.maximum(n_missing, 1)
    mean_present = (~missing * zb[:, None]).sum(axis=0) / np.maximum(n - n_missing, 1)
    se = np.sqrt(1.0 / np.maximum(n_missing, 1) + 1.0 / np.maximum(n - n_missing, 1))
    stats["missing.bmi_shift_z"] = np.where(n_missing >= 2, (mean_missing - mean_present) / se, 0.0)
    stats["missing.with_transcript"] = ((missing & t_missing).sum(axis=0) / np.maximum(n_missing, 1))

    # --- visit 2
    try:
        v2 = read("proteomics_visit2.parquet")
        v2.index = v2.index.astype(str)
        attendees = v2.index.intersection(subjects)
        rows = pd.Index(subjects).get_indexer(attendees)
        base2 = raw[rows]
        later = np.array(v2.loc[attendees, ids], dtype=np.float64)
        for name, values in visit2_statistics(base2, later, centre[rows]).items():
            stats[f"visit2.{name}"] = values

        def adjusted_view(x):  # residuals on the attendees' baseline covariates (gaps at the mean)
            x = np.where(np.isfinite(x), x, np.nanmean(np.where(np.isfinite(x), x, np.nan), axis=0))
            return residualise(np.nan_to_num(x), design[rows])

        stats["visit2.r_adjusted"] = visit2_statistics(adjusted_view(base2), adjusted_view(later), centre[rows])["r"]
        stats["visit2.missing_rate"] = (~np.isfinite(later)).mean(axis=0)
        bmi_change = np.full(len(attendees), np.nan)
        try:
            cov2 = read("covariates_visit2.parquet")
            cov2.index = cov2.index.astype(str)
            if "p21001_i0" in cov2.columns or "p21001_i2" in cov2.columns:
                col = "p21001_i2" if "p21001_i2" in cov2.columns else "p21001_i0"
                b2 = np.array(pd.to_numeric(cov2.reindex(attendees)[col], errors="coerce"), dtype=np.float64)
                b1 = np.array(pd.to_numeric(covariates.loc[attendees, "p21001_i0"], errors="coerce"), dtype=np.float64)
                b1[b1 < 0], b2[b2 < 0] = np.nan, np.nan
                bmi_change = b2 - b1
        except FileNotFoundError:
            pass
        for name, values in change_statistics(base2, later, partner, bmi_change, centre[rows]).items():
            stats[f"visit2.{name}"] = values
    except FileNotFoundError:
        pass

    # --- genetics: the analyst's own lead-variant scan
    del adjusted, tadjusted
    gz, q, variant_ids = genotype_matrix(genotypes, subjects)
    contig, position = variant_positions(release, variant_ids)
    inst, lead, lead_r = instrument_statistics(gz, q, contig, position, site)
    for name, values in inst.items():
        stats[f"instrument.{name}"] = values
    tlead, tlead_r = lead_scan(gz, tsite)
    stats["transcript.lead_r2"] = tlead_r ** 2
    stats["transcript.protein_lead_r2"] = np.array([float(np.mean(gz[:, v].astype(np.float64) * tsite[:, j]))
                                                     for j, v in enumerate(lead)]) ** 2

    # --- targetability and identifiers
    try:
        for name, values in targetability_statistics(read("targetability.parquet"), ids).items():
            stats[f"targetability.{name}"] = values
    except FileNotFoundError:
        pass
    stats["order.id_number"] = np.array([float(re.sub(r"\D", "", c) or 0) for c in ids])
    stats["order.column"] = np.arange(p, dtype=np.float64)

    table = pd.DataFrame(stats, index=pd.Index(ids, name="protein"))
    table["instrument.lead_variant"] = np.asarray(variant_ids)[lead]
    return table


LIBRARY = (standardise_columns, standardise_within, residualise, covariate_design, top_component_share,
           shape_statistics, genotype_matrix, lead_scan, variant_positions, instrument_statistics,
           communality_statistics, partial_statistics, pc_membership, cross_omics_statistics, covariate_statistics,
           group_statistics, visit2_statistics, flag_association, change_statistics, targetability_statistics,
           protein_statistics)


def library_source() -> str:
    """The statistics as source code, for an agent to emit into the sandbox."""
    return "\n\n".join(inspect.getsource(f) for f in LIBRARY)
