"""Findings on released values, with the sealed truth in hand: no column reproduces the
latent severity or the evaluation mask; role molecules are missing, summarised,
standardised and located like ordinary ones; role proteins' targetability rows are
drawn like everyone else's.

Two of them look at what a reader sees of the data without modelling it:

* ``column_summaries``: a role molecule column must follow its table's scale
  convention (proteins and transcripts are standardised within the cohort; a
  column is tested for whether it could have been standardised before its
  missing values went missing) and must not be an outlier in the Parquet footer
  statistics (min/max, robust z above ``SUMMARY_Z_MAX``).
* ``cis_locus_sharing``: role proteins must share their cis locus with another
  protein (within ``LOCUS_WINDOW_BP``) as often as ordinary proteins do, since
  an analyst maps lead variants from the released genotypes.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from .. import bundle
from .findings import ALPHA, Finding, limit
from .release_files import (MOLECULE_ID, PER_PARTICIPANT_DIRS, TARGETABILITY, Release, column_batches,
                            numeric_float, strings)
from .secrets import Secrets

#: Correlation with L, L_late or the eval mask at or above this reproduces it.
LATENT_R_MAX = 0.99
#: A role column whose summary lies this many robust SDs from the others' stands out.
SUMMARY_Z_MAX = 8.0
#: Two proteins whose cis variants lie this close share a locus, as an analyst would see it.
LOCUS_WINDOW_BP = 100_000


def _abs_corr(X: np.ndarray, y: np.ndarray, min_n: int = 20) -> np.ndarray:
    """|Pearson r| of each column of X with y over rows where both are finite."""
    M = np.isfinite(X) & np.isfinite(y)[:, None]
    n = M.sum(axis=0)
    nn = np.maximum(n, 1)
    Xz = np.where(M, X, 0.0)
    Yz = np.where(M, y[:, None], 0.0)
    Xc = np.where(M, X - (Xz.sum(axis=0) / nn), 0.0)
    Yc = np.where(M, y[:, None] - (Yz.sum(axis=0) / nn), 0.0)
    sxx, syy = (Xc * Xc).sum(axis=0), (Yc * Yc).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs((Xc * Yc).sum(axis=0) / np.sqrt(sxx * syy))
    r[(n < min_n) | ~(sxx > 1e-12 * np.maximum(n, 1)) | ~(syy > 0)] = np.nan
    return r


def _ranks(X: np.ndarray) -> np.ndarray:
    return pd.DataFrame(X).rank(method="average").to_numpy(dtype=np.float64)


def check_latent(rel: Release, secrets: Secrets) -> Finding:
    """No released number reproduces L, L_late or the eval mask (Pearson or Spearman)."""
    if secrets.latent is None:
        return Finding("latent_values", False, f"{bundle.SEALED} {bundle.LATENT} unavailable: cannot check")
    lat = secrets.latent
    index = pd.Index(lat.index.astype(str))
    targets = {"L": lat["latent"].to_numpy(float), "L_late": lat["latent_late"].to_numpy(float)}
    if secrets.eval_mask is not None:
        targets["eval_mask"] = secrets.eval_mask.astype(float)
    ranked = {k: pd.Series(v).rank().to_numpy(float) for k, v in targets.items()}
    problems, best = [], {k: (0.0, "") for k in targets}
    n_cols = 0

    def judge(label_cols: list, X: np.ndarray, rows: np.ndarray) -> None:
        nonlocal n_cols
        n_cols += X.shape[1]
        Xr = _ranks(X)
        for k in targets:
            y, yr = targets[k][rows], ranked[k][rows]
            r = np.fmax(_abs_corr(X, y), _abs_corr(Xr, yr))
            for j in np.flatnonzero(r >= LATENT_R_MAX):
                problems.append(f"{label_cols[j]}: |r| = {r[j]:.4f} with {k}")
            if np.isfinite(r).any():
                j = int(np.nanargmax(r))
                if r[j] > best[k][0]:
                    best[k] = (float(r[j]), label_cols[j])

    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        if info.subject_key is None:
            continue
        ids = pq.read_table(info.path, columns=["subject_id"]).column("subject_id").to_pylist()
        where = index.get_indexer(ids)
        keep = where >= 0
        rows = where[keep]
        long = "subject_id" not in info.index_columns
        cols = [c for c in info.columns if c != "subject_id" and not c.startswith("__index_level_")]
        for batch in column_batches(info.path, cols):
            arrays, labels = [], []
            for name in batch.column_names:
                x = numeric_float(batch.column(name))
                if x is not None:
                    arrays.append(x[keep])
                    labels.append(f"{r}:{name}")
            if arrays:
                judge(labels, np.column_stack(arrays), rows)
        # Who appears in a table, and how often, is itself a released per-participant number.
        counts = np.bincount(rows, minlength=len(index)).astype(float)
        if long or len(rows) < len(index):
            judge([f"{r}:[rows per participant]"], counts[:, None], np.arange(len(index)))
    if secrets.eval_mask is not None:
        for folder in PER_PARTICIPANT_DIRS:
            names = [e.rel for e in rel.files if e.rel.startswith(folder + "/") and e.rel.endswith(".npz")]
            if names:
                have = np.zeros(len(index))
                where = index.get_indexer([n.rsplit("/", 1)[1][:-4] for n in names])
                have[where[where >= 0]] = 1.0
                judge([f"{folder}/ [has file]"], have[:, None], np.arange(len(index)))
    detail = f"{n_cols} released numeric columns; max |r|: " + ", ".join(
        f"{k} {v[0]:.3f} ({v[1]})" for k, v in best.items())
    return Finding("latent_values", not problems, detail, limit(problems))


def _binom_two_sided(k: int, n: int, p: float) -> float:
    from scipy.special import bdtr, bdtrc

    lo = bdtr(k, n, p)
    hi = bdtrc(k - 1, n, p) if k > 0 else 1.0
    return float(min(1.0, 2.0 * min(lo, hi)))


def _mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value (normal approximation with tie correction)."""
    from scipy.special import ndtr

    x = np.concatenate([a, b])
    ranks = pd.Series(x).rank(method="average").to_numpy()
    n1, n2 = len(a), len(b)
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, t = np.unique(x, return_counts=True)
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - (t ** 3 - t).sum() / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / np.sqrt(var)
    return float(min(1.0, 2 * ndtr(-max(z, 0.0))))


def check_missingness(rel: Release, secrets: Secrets) -> Finding:
    """Per-molecule missing counts: role molecules within the binomial range of the
    others, and no molecule-level heterogeneity beyond binomial dispersion (missingness
    may depend on the participant, as in messy worlds, not on the molecule)."""
    from scipy.special import chdtrc

    problems, notes = [], []
    role_ids = secrets.role_ids
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        mols = [c for c in info.value_columns if MOLECULE_ID.match(c) and not c.startswith("MET_")]
        if not mols:
            continue
        n = info.md.num_rows
        counts, row_missing = [], np.zeros(n)
        for batch in column_batches(info.path, mols):
            for name in batch.column_names:
                x = numeric_float(batch.column(name))
                miss = ~np.isfinite(x)
                counts.append(int(miss.sum()))
                row_missing += miss
        counts = np.array(counts)
        is_role = np.array([c in role_ids for c in mols])
        if n == 0 or (~is_role).sum() < 2:
            continue
        p = counts[~is_role].sum() / (n * (~is_role).sum())
        if p <= 0:
            if counts[is_role].any():
                problems.append(f"{r}: only role molecules have missing values")
            continue
        alpha = ALPHA / max(1, is_role.sum())
        for c, k in zip(np.array(mols)[is_role], counts[is_role]):
            pv = _binom_two_sided(int(k), n, p)
            if pv < alpha:
                problems.append(f"{r}: {c} ({role_ids[c]}) has {k} missing of {n} (others {p:.4%}; p = {pv:.2g})")
        var = n * p * (1 - p)
        d = float(((counts - counts.mean()) ** 2).sum() / var)
        pd_ = float(chdtrc(len(counts) - 1, d))
        if pd_ < ALPHA:
            problems.append(f"{r}: per-molecule missing counts are over-dispersed (dispersion {d:.0f} on "
                            f"{len(counts) - 1} df, p = {pd_:.2g}): missingness depends on the molecule")
        per_row = row_missing.var() / max(row_missing.mean() * (1 - p), 1e-12)
        notes.append(f"{r}: {p:.3%} missing, molecule dispersion p = {pd_:.2g}, participant dispersion index {per_row:.2f}")
    return Finding("missingness_by_role", not problems, "; ".join(notes) or "no molecular tables", limit(problems))


def _robust_z(x: np.ndarray) -> np.ndarray:
    med = np.nanmedian(x)
    scale = 1.4826 * np.nanmedian(np.abs(x - med))
    if not scale > 0:
        scale = np.nanstd(x)
    return (x - med) / max(scale, 1e-12)


def _could_be_standardised(x_obs: np.ndarray, n: int) -> bool:
    """Whether a column with these observed values could have been standardised to
    mean 0 and SD 1 (ddof 0) over all ``n`` rows before ``n - len(x_obs)`` values went
    missing: the missing values, no more extreme than the observed ones, must be
    able to make up the observed sum and sum of squares."""
    k = n - x_obs.size
    if x_obs.size == 0:
        return True
    m = float(np.abs(x_obs).max())
    s1, s2 = float(x_obs.sum()), float(np.square(x_obs).sum())
    tol = 1e-4 * n
    return abs(s1) <= k * m + tol and n - k * m * m - tol <= s2 <= n + tol


def check_column_summaries(rel: Release, secrets: Secrets) -> Finding:
    """Role molecule columns do not stand out in what a reader sees without any
    modelling: the Parquet footer statistics (min and max: metadata) and whether
    the column follows its table's scale convention (the data dictionary says
    proteins and transcripts are standardised within the cohort)."""
    problems, notes = [], []
    role_ids = secrets.role_ids
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        mols = [c for c in info.value_columns if MOLECULE_ID.match(c)]
        is_role = np.array([c in role_ids for c in mols])
        if not is_role.any():
            continue
        n = info.md.num_rows
        where = {info.md.schema.column(i).path: i for i in range(info.md.num_columns)}
        footer = {k: np.full(len(mols), np.nan) for k in ("min", "max")}
        for j, c in enumerate(mols):
            lo, hi = [], []
            for g in range(info.md.num_row_groups):
                st = info.md.row_group(g).column(where[c]).statistics
                if st is not None and st.has_min_max:
                    lo.append(st.min)
                    hi.append(st.max)
            if lo:
                footer["min"][j], footer["max"][j] = min(lo), max(hi)
        worst = (0.0, "")
        for stat, values in footer.items():
            if np.isfinite(values).sum() < 10:
                continue
            z = _robust_z(values)
            for k in np.flatnonzero(is_role & (np.abs(z) > SUMMARY_Z_MAX)):
                problems.append(f"{r}: footer statistics: {mols[k]} ({role_ids[mols[k]]}) {stat} {values[k]:.4g} "
                                f"is an outlier (robust z {z[k]:.1f}; median of the columns {np.nanmedian(values):.4g})")
            zr = np.abs(z[is_role])
            if np.isfinite(zr).any() and np.nanmax(zr) > worst[0]:
                worst = (float(np.nanmax(zr)), f"{mols[int(np.flatnonzero(is_role)[np.nanargmax(zr)])]} {stat}")
        standard = np.zeros(len(mols), dtype=bool)
        j = 0
        for batch in column_batches(info.path, mols):
            for name in batch.column_names:
                x = numeric_float(batch.column(name))
                standard[j] = _could_be_standardised(x[np.isfinite(x)], n)
                j += 1
        share = standard[~is_role].mean() if (~is_role).any() else 0.0
        if share >= 0.9:
            for k in np.flatnonzero(is_role & ~standard):
                problems.append(f"{r}: {mols[k]} ({role_ids[mols[k]]}) is not standardised within the cohort, "
                                f"unlike {share:.0%} of the ordinary columns")
        notes.append(f"{r}: {share:.0%} of ordinary columns standardised; largest role footer |robust z| "
                     f"{worst[0]:.1f} ({worst[1]})")
    return Finding("column_summaries", not problems, "; ".join(notes) or "no role columns", limit(problems))


def check_cis_locus_sharing(rel: Release, secrets: Secrets) -> Finding:
    """Role proteins share their cis locus with other proteins as often as ordinary
    proteins do.  An analyst maps each protein's lead variant from the released
    genotypes; if roles alone sat on private loci, a private locus would mark a role."""
    from scipy.special import bdtr

    root = bundle.GENOTYPE_STORE
    if root not in rel.roots:
        return Finding("cis_locus_sharing", True, "no genotype store released: loci are not reachable")
    cis = secrets.hidden.get("protein_cis_variant") or []
    if len(cis) != len(secrets.proteins) or not cis:
        return Finding("cis_locus_sharing", False, f"{bundle.SEALED} {bundle.HIDDEN_MODEL} lacks protein_cis_variant: cannot check")
    import zarr

    g = zarr.open_group(rel.abs(root), mode="r", zarr_format=2)
    index = {v: i for i, v in enumerate(strings(g["variant_id"]))}
    where = np.array([index.get(v, -1) for v in cis])
    if (where < 0).any():
        return Finding("cis_locus_sharing", False, "a protein's cis variant is not among the released variants")
    contig = np.asarray(g["variant_contig"][...]).astype(np.int64)[where]
    position = np.asarray(g["variant_position"][...]).astype(np.int64)[where]
    order = np.lexsort((position, contig))
    close = (np.diff(contig[order]) == 0) & (np.diff(position[order]) <= LOCUS_WINDOW_BP)
    shared = np.zeros(len(cis), dtype=bool)
    shared[order[1:][close]] = True
    shared[order[:-1][close]] = True
    is_role = np.array([p in secrets.roles for p in secrets.proteins])
    n_role, k = int(is_role.sum()), int(shared[is_role].sum())
    p_ord = float(shared[~is_role].mean()) if (~is_role).any() else 0.0
    if n_role == 0:
        return Finding("cis_locus_sharing", True, "no role proteins")
    pv = min(1.0, 2.0 * min(float(bdtr(k, n_role, p_ord)), float(1.0 - bdtr(k - 1, n_role, p_ord)) if k else 1.0))
    detail = (f"{p_ord:.0%} of ordinary proteins share a cis locus (within {LOCUS_WINDOW_BP // 1000} kb) with another "
              f"protein; {k} of {n_role} role proteins do (binomial p = {pv:.2g})")
    problems = [] if pv >= ALPHA else [
        f"role proteins on private loci: {sorted(p for p, sh, r in zip(secrets.proteins, shared, is_role) if r and not sh)}"]
    return Finding("cis_locus_sharing", not problems, detail, problems)


def check_targetability(rel: Release, secrets: Secrets) -> Finding:
    """Role proteins' targetability rows are drawn like everyone else's."""
    path = rel.abs(TARGETABILITY)
    if not os.path.exists(path):
        return Finding("targetability_rows", False, f"{TARGETABILITY} is missing")
    df = pd.read_parquet(path)
    roles = [p for p in df.index if p in secrets.roles]
    if len(roles) != len(secrets.roles):
        return Finding("targetability_rows", False,
                       f"{len(secrets.roles) - len(roles)} role protein(s) have no targetability row")
    is_role = df.index.isin(roles)
    problems, notes = [], []
    alpha = ALPHA / max(1, df.shape[1])
    rng = np.random.default_rng(0)
    for col in df.columns:
        a, b = df.loc[is_role, col], df.loc[~is_role, col]
        if a.isna().any() != b.isna().any() and a.isna().mean() > b.isna().mean():
            problems.append(f"{col}: role rows have missing values the others lack")
        numeric = pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]) and df[col].nunique() > 10
        if numeric:
            pv = _mann_whitney_p(a.dropna().to_numpy(float), b.dropna().to_numpy(float))
            notes.append(f"{col} U-test p = {pv:.2g}")
        else:
            values = df[col].astype(str)
            # Null: role rows are a random subset of all rows, so the expected
            # category frequencies are the pooled ones.
            pooled = values.value_counts(normalize=True)
            obs = a.astype(str).value_counts().reindex(pooled.index, fill_value=0)
            freq = pooled.to_numpy()
            only_roles = obs.index[(obs.to_numpy() > 0) & ~obs.index.isin(b.astype(str).unique())]
            if len(only_roles):
                # A rare value can land only on role rows by chance: the probability that
                # all c of its rows are among the k role rows is C(k, c) / C(n, c).
                c = int(obs[only_roles].sum())
                p_only = math.comb(len(a), c) / math.comb(len(df), c)
                notes.append(f"{col} values only on role rows {list(only_roles)}: p = {p_only:.2g}")
                if p_only < alpha:
                    problems.append(f"{col}: values {list(only_roles)} occur only among role proteins (p = {p_only:.2g})")
                    continue
            k = len(a)
            exp = freq * k
            stat = float(((obs.to_numpy() - exp) ** 2 / np.where(exp > 0, exp, 1)).sum())
            sims = rng.multinomial(k, freq, size=4000)
            sim_stat = ((sims - exp) ** 2 / np.where(exp > 0, exp, 1)).sum(axis=1)
            pv = float((1 + (sim_stat >= stat - 1e-12).sum()) / (1 + len(sim_stat)))
            notes.append(f"{col} chi-square p = {pv:.2g}")
        if pv < alpha:
            problems.append(f"{col}: role proteins' values differ from the others' (p = {pv:.2g})")
    return Finding("targetability_rows", not problems, f"{len(roles)} role rows vs {(~is_role).sum()}: " + "; ".join(notes),
                   problems)
