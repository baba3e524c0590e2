"""Molecular layers of one participant block (S1.1), with a fixed order of operations
per element (so the bits never depend on threads, alignment or vector width).

Standardised genotype of variant v: (dosage - 2 q_v) / sqrt(2 q_v (1 - q_v)),
computed on the fly from ``gmean = 2q`` and ``ginv = 1 / sqrt(2q(1-q))``.

Each kernel is the arithmetic of the numpy expression it replaced, operation by
operation (IEEE products and sums, no fused multiply-add, no reordered sum): loops
over participants run outermost and the independent per-molecule work innermost, so
vectorisation runs across molecules and never across a sum.  Random draws come from
the numpy ``Generator`` passed in: Numba's ``standard_normal`` and ``random`` are
numpy's algorithms on the same bit generator, so a kernel drawing row by row consumes
the stream and gets the values ``Generator.standard_normal((n, p))`` would (checked in
tests/core/test_kernels.py), about three times faster and without the whole block's
draws held at once.
"""
from __future__ import annotations

import math

import numpy as np

from .numba_util import njit

# i = participants in the block, v = variants, p = molecules (proteins, transcripts, metabolites), f = factors,
# k = covariates, m = pathways


@njit
def fill_normal(rng, out):
    """out[i, j] = the stream's next standard normal, in C order (``rng.standard_normal(out.shape)``)."""
    n_i, n_j = out.shape
    for i in range(n_i):
        for j in range(n_j):
            out[i, j] = rng.standard_normal()


@njit
def normal_rows(rng, n_rows, rows, out):
    """Rows ``rows`` (ascending) of ``rng.standard_normal((n_rows, out.shape[1]))`` into
    out [len(rows), p]: every row drawn, the others discarded."""
    n_p = out.shape[1]
    j = 0
    for i in range(n_rows):
        if j < rows.shape[0] and rows[j] == i:
            for p in range(n_p):
                out[j, p] = rng.standard_normal()
            j += 1
        else:
            for p in range(n_p):
                rng.standard_normal()


@njit
def _genotype_row(dosage, i, gmean, ginv, g):
    for v in range(g.shape[0]):
        g[v] = (dosage[i, v] - gmean[v]) * ginv[v]


@njit
def _factor_row(factors, i, loadings_t, s):
    """s[p] = sum_f factors[i, f] loadings[p, f], f ascending from 0.0."""
    s[:] = 0.0
    for f in range(loadings_t.shape[0]):
        x = factors[i, f]
        for p in range(s.shape[0]):
            s[p] += x * loadings_t[f, p]


@njit
def molecule_bio(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_coef, out):
    """out[i, p] = cis_coef[p] g(i, cis[p]) + [master[p] >= 0] trans_coef g(i, master[p])
                   + sum_f factors[i, f] loadings[p, f] + resid_coef resid[i, p]

    dosage int8 [i, v]; gmean, ginv float64 [v]; cis, master int64 [p] (master -1: no trans
    effect); cis_coef float64 [p]; factors float64 [i, f]; loadings float64 [p, f];
    resid float64 [i, p]; out float64 [i, p].
    """
    molecule_bio_scaled(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid,
                        np.ones(0), resid_coef, out)


@njit
def molecule_bio_scaled(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_scale,
                        resid_coef, out):
    """``molecule_bio`` with the residual ``resid[i, p] * resid_scale[p]`` (``resid_scale``
    empty: ``resid[i, p]`` itself)."""
    n_i, n_v = dosage.shape
    n_p = cis.shape[0]
    loadings_t = np.ascontiguousarray(loadings.T)
    g = np.empty(n_v)
    s = np.empty(n_p)
    scaled = resid_scale.shape[0] > 0
    for i in range(n_i):
        _genotype_row(dosage, i, gmean, ginv, g)
        _factor_row(factors, i, loadings_t, s)
        for p in range(n_p):
            x = cis_coef[p] * g[cis[p]]
            m = master[p]
            if m >= 0:
                x += trans_coef * g[m]
            r = resid[i, p] * resid_scale[p] if scaled else resid[i, p]
            out[i, p] = x + s[p] + resid_coef * r


@njit
def add_covariate_terms(base, x, coef, out):
    """out[i, p] = base[i, p] + sum_k x[i, k] coef[p, k] (k ascending from 0.0: the ordered
    product ``kernels.linalg.dot(x, coef.T)``, then the sum); out may be base."""
    n_i, n_p = base.shape
    coef_t = np.ascontiguousarray(coef.T)
    s = np.empty(n_p)
    for i in range(n_i):
        _factor_row(x, i, coef_t, s)
        for p in range(n_p):
            out[i, p] = base[i, p] + s[p]


@njit
def transcript_block(rng, dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid_coef,
                protein_bio, concordance, covariates, cov_coef, out):
    """A block's raw transcripts, their residuals drawn here (``rng.standard_normal((i, p))``):
    own[i, p] = ``molecule_bio`` of the transcript's own cis, trans, factor and residual terms,
    out[i, p] = c_p protein_bio[i, p] + sqrt(1 - c_p^2) own[i, p] + sum_k covariates[i, k] cov_coef[p, k]."""
    n_i, n_v = dosage.shape
    n_p = cis.shape[0]
    loadings_t = np.ascontiguousarray(loadings.T)
    cov_t = np.ascontiguousarray(cov_coef.T)
    own_share = np.empty(n_p)
    for p in range(n_p):
        c = concordance[p]
        own_share[p] = math.sqrt(1.0 - c * c)
    g = np.empty(n_v)
    s = np.empty(n_p)
    t = np.empty(n_p)
    r = np.empty(n_p)
    for i in range(n_i):
        for p in range(n_p):
            r[p] = rng.standard_normal()
        _genotype_row(dosage, i, gmean, ginv, g)
        _factor_row(factors, i, loadings_t, s)
        _factor_row(covariates, i, cov_t, t)
        for p in range(n_p):
            x = cis_coef[p] * g[cis[p]]
            m = master[p]
            if m >= 0:
                x += trans_coef * g[m]
            own = x + s[p] + resid_coef * r[p]
            out[i, p] = concordance[p] * protein_bio[i, p] + own_share[p] * own + t[p]


@njit
def mix_transcripts(protein_bio, own, concordance, covariates, cov_coef, out):
    """out[i, p] = c_p protein_bio[i, p] + sqrt(1 - c_p^2) own[i, p] + sum_k covariates[i, k] cov_coef[p, k]."""
    n_i, n_p = protein_bio.shape
    n_k = covariates.shape[1]
    for i in range(n_i):
        for p in range(n_p):
            c = concordance[p]
            s = 0.0
            for k in range(n_k):
                s += covariates[i, k] * cov_coef[p, k]
            out[i, p] = c * protein_bio[i, p] + math.sqrt(1.0 - c * c) * own[i, p] + s


@njit
def _feeder_values(raw, i, adjust_col, adjust, feeders, x):
    """x[j] = raw'[i, feeders[j]]: raw[i, p] - adjust[i, adjust_col[p]] where adjust_col[p] >= 0
    (a co-regulated anchor read as its abundance), raw[i, p] otherwise."""
    for j in range(feeders.shape[0]):
        p = feeders[j]
        a = adjust_col[p]
        x[j] = raw[i, p] - adjust[i, a] if a >= 0 else raw[i, p]


@njit
def _pathway_row(i, x, extra_coef, extra, g_indptr, g_coef, g_values, terms, active, indptr, coef, late_k, late_coef,
                 k_out, late_out):
    """Row i of ``pathway_sums`` from its feeder values x (``_feeder_values``) and its pathways'
    standardised genotypes ``g_values`` (one per genotype term)."""
    for m in range(k_out.shape[1]):
        if not active[m]:
            k_out[i, m] = 0.0
            late_out[i, m] = 0.0
            continue
        g0, g1 = g_indptr[m], g_indptr[m + 1]
        km = extra_coef[m] * extra[i, m] + g_coef[g0] * g_values[g0] + terms[m]
        for t in range(g0 + 1, g1):  # its other variants (T7 worlds' pleiotropic instrument, hard worlds' background)
            km = km + g_coef[t] * g_values[t]
        j0, j1 = indptr[m], indptr[m + 1]
        for j in range(j0, j1):
            km = km + coef[j] * x[j]
        kl = late_k[m] * km
        for j in range(j0, j1):
            kl = kl + late_coef[j] * x[j]
        k_out[i, m] = km
        late_out[i, m] = kl


@njit
def pathway_sums(raw, adjust_col, adjust, extra_coef, extra, g_indptr, g_coef, g_values, terms, active, indptr, feeders,
                 coef, late_k, late_coef, k_out, late_out):
    """Pathway values from the feeders' raw values, pathway by pathway in order:
    K[i, m] = extra_coef[m] extra[i, m] + g_coef[t0] g_values[i, t0] + terms[i, m]
              + sum_t g_coef[t] g_values[i, t]  (t over t0 + 1 .. g_indptr[m + 1], t0 = g_indptr[m]: the
                pathway's own variant G_m first, then any others, in order)
              + sum_j coef[j] raw'[i, feeders[j]]  (j over indptr[m]:indptr[m+1], in order),
    late[i, m] = late_k[m] K[i, m] + sum_j late_coef[j] raw'[i, feeders[j]],
    zero where ``active[m]`` is 0; raw'[i, p] = raw[i, p] - adjust[i, adjust_col[p]] where
    adjust_col[p] >= 0 (an anchor's assay noise), raw[i, p] otherwise."""
    x = np.empty(feeders.shape[0])
    for i in range(raw.shape[0]):
        _feeder_values(raw, i, adjust_col, adjust, feeders, x)
        _pathway_row(i, x, extra_coef, extra, g_indptr, g_coef, g_values[i], terms[i], active, indptr, coef, late_k,
                     late_coef, k_out, late_out)


@njit
def _follower_row(raw, bio, i, k, late, followers, path, is_late, loading):
    for j in range(followers.shape[0]):
        f = followers[j]
        x = loading[f] * (late[i, path[j]] if is_late[j] else k[i, path[j]])
        bio[i, f] += x
        raw[i, f] += x


@njit
def add_paths(raw, bio, k, late, followers, path, is_late, loading):
    """For each follower f (in order): bio[:, f] += loading[f] x (late if is_late[f] else k)[:, path[f]],
    and raw[:, f] likewise (in place)."""
    for i in range(raw.shape[0]):
        _follower_row(raw, bio, i, k, late, followers, path, is_late, loading)


@njit
def proteins(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_scale, resid_coef,
             covariates, cov_coef, adjust_col, adjust, extra_coef, extra, g_indptr, g_coef, g_variant, twoq, gsd,
             path_cov, active, indptr, feeders, coef, late_k, late_coef, followers, path, is_late, loading,
             bio, raw, k_out, late_out):
    """A block's proteins, row by row while the row is in cache: bio = ``molecule_bio_scaled``,
    raw = bio + ``add_covariate_terms``, the pathways ``pathway_sums`` (their genotype terms
    (dosage - twoq[t]) / gsd[t] of variant ``g_variant[t]``, pathway m's t in g_indptr[m]:g_indptr[m + 1]), their covariate terms
    sum_k covariates[i, k] path_cov[m, k]) and the followers ``add_paths`` — each value by
    the same operations as those kernels (and the numpy they replaced) give it."""
    n_i, n_v = dosage.shape
    n_p = cis.shape[0]
    n_m = k_out.shape[1]
    loadings_t = np.ascontiguousarray(loadings.T)
    cov_t = np.ascontiguousarray(cov_coef.T)
    path_cov_t = np.ascontiguousarray(path_cov.T)
    g = np.empty(n_v)
    s = np.empty(n_p)
    t = np.empty(n_p)
    dg = np.empty(g_variant.shape[0])
    terms = np.empty(n_m)
    x = np.empty(feeders.shape[0])
    for i in range(n_i):
        _genotype_row(dosage, i, gmean, ginv, g)
        _factor_row(factors, i, loadings_t, s)
        _factor_row(covariates, i, cov_t, t)
        for p in range(n_p):
            v = cis_coef[p] * g[cis[p]]
            m = master[p]
            if m >= 0:
                v += trans_coef * g[m]
            b = v + s[p] + resid_coef * (resid[i, p] * resid_scale[p])
            bio[i, p] = b
            raw[i, p] = b + t[p]
        if n_m:
            for gt in range(g_variant.shape[0]):
                dg[gt] = (dosage[i, g_variant[gt]] - twoq[gt]) / gsd[gt]
            _factor_row(covariates, i, path_cov_t, terms)
            _feeder_values(raw, i, adjust_col, adjust, feeders, x)
            _pathway_row(i, x, extra_coef, extra, g_indptr, g_coef, dg, terms, active, indptr, coef, late_k, late_coef,
                         k_out, late_out)
            _follower_row(raw, bio, i, k_out, late_out, followers, path, is_late, loading)


@njit
def standardise(raw, mean, sd, out):
    """out[i, p] = (raw[i, p] - mean[p]) / sd[p]."""
    n_i, n_p = raw.shape
    for i in range(n_i):
        for p in range(n_p):
            out[i, p] = (raw[i, p] - mean[p]) / sd[p]


@njit
def released_columns(values, rng, n_rows, rows, threshold, out):
    """The released float32 columns [p, j] of ``values`` [j, p] (rows ``rows`` of the block's
    ``n_rows``): NaN where the block's missingness draw ``rng.random((n_rows, p))[rows[j], p]``
    is below ``threshold[j]``, else the value rounded to float32.  Written 16 rows at a time
    (a column's 16 values are one cache line)."""
    n_p = values.shape[1]
    tile = 16
    u = np.empty((tile, n_p))
    j = 0
    j0 = 0
    for i in range(n_rows):
        if j < rows.shape[0] and rows[j] == i:
            t = j - j0
            for p in range(n_p):
                u[t, p] = rng.random()
            j += 1
        else:
            for p in range(n_p):
                rng.random()
        if j - j0 == tile or (i == n_rows - 1 and j > j0):
            for r in range(j - j0):  # u becomes the released value (NaN where missing)
                t = threshold[j0 + r]
                for p in range(n_p):
                    u[r, p] = np.nan if u[r, p] < t else values[j0 + r, p]
            for p in range(n_p):
                for r in range(j - j0):
                    out[p, j0 + r] = np.float32(u[r, p])
            j0 = j


def warm_up() -> None:
    """Load (or compile) every kernel above on tiny inputs (``pipeline.graph.warmup``)."""
    rng = np.random.Generator(np.random.PCG64(0))
    d = np.zeros((2, 4), dtype=np.int8)
    gm, gi = np.full(4, 0.5), np.ones(4)
    cis, master, coef = np.zeros(3, np.int64), np.full(3, -1, np.int64), np.ones(3)
    out = np.empty((2, 3))
    molecule_bio(d, gm, gi, cis, coef, master, 0.1, np.ones((2, 2)), np.ones((3, 2)), np.ones((2, 3)), 0.8, out)
    molecule_bio_scaled(d, gm, gi, cis, coef, master, 0.1, np.ones((2, 2)), np.ones((3, 2)), np.ones((2, 3)), np.ones(3), 0.8,
                        out)
    mix_transcripts(out, out, np.full(3, 0.5), np.ones((2, 1)), np.ones((3, 1)), np.empty((2, 3)))
    transcript_block(rng, d, gm, gi, cis, coef, master, 0.1, np.ones((2, 2)), np.ones((3, 2)), 0.8, out, np.full(3, 0.5),
                np.ones((2, 3)), np.ones((3, 3)), np.empty((2, 3)))
    add_covariate_terms(out, np.ones((2, 4)), np.ones((3, 4)), np.empty((2, 3)))
    fill_normal(rng, np.empty((2, 3)))
    normal_rows(rng, 2, np.array([1], np.int64), np.empty((1, 3)))
    k, late = np.empty((2, 1)), np.empty((2, 1))
    pathway_sums(out, np.full(3, -1, np.int64), np.zeros((2, 0)), np.ones(1), np.ones((2, 1)), np.array([0, 1], np.int64),
                 np.ones(1), np.ones((2, 1)), np.ones((2, 1)), np.ones(1, np.uint8), np.array([0, 2], np.int64),
                 np.array([0, 1], np.int64), np.ones(2), np.ones(1), np.ones(2), k, late)
    add_paths(out, np.empty((2, 3)), k, late, np.array([2], np.int64), np.zeros(1, np.int64), np.zeros(1, np.uint8),
              np.ones(3))
    proteins(d, gm, gi, cis, coef, master, 0.1, np.ones((2, 2)), np.ones((3, 2)), np.ones((2, 3)), np.ones(3), 0.8,
             np.ones((2, 4)), np.ones((3, 4)), np.full(3, -1, np.int64), np.zeros((2, 0)), np.ones(1), np.ones((2, 1)),
             np.array([0, 1], np.int64), np.ones(1), np.zeros(1, np.int64), np.ones(1), np.ones(1), np.ones((1, 4)), np.ones(1, np.uint8), np.array([0, 2], np.int64),
             np.array([0, 1], np.int64), np.ones(2), np.ones(1), np.ones(2), np.array([2], np.int64), np.zeros(1, np.int64),
             np.zeros(1, np.uint8), np.ones(3), np.empty((2, 3)), np.empty((2, 3)), k, late)
    standardise(out, np.zeros(3), np.ones(3), out)
    released_columns(out, rng, 2, np.arange(2, dtype=np.int64), np.full(2, 0.01), np.empty((3, 2), np.float32))
