"""Twins of ``kernels.omics``: the same sums, element by element, in Python."""
import math

import numpy as np


def molecule_bio(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_coef):
    n_i, n_p = dosage.shape[0], len(cis)
    out = np.zeros((n_i, n_p))
    for i in range(n_i):
        for p in range(n_p):
            v = cis[p]
            x = cis_coef[p] * ((dosage[i, v] - gmean[v]) * ginv[v])
            if master[p] >= 0:
                m = master[p]
                x += trans_coef * ((dosage[i, m] - gmean[m]) * ginv[m])
            s = 0.0
            for f in range(factors.shape[1]):
                s += factors[i, f] * loadings[p, f]
            out[i, p] = x + s + resid_coef * resid[i, p]
    return out


def mix_transcripts(protein_bio, own, concordance, covariates, cov_coef):
    out = np.zeros(protein_bio.shape)
    for i in range(protein_bio.shape[0]):
        for p in range(protein_bio.shape[1]):
            c = concordance[p]
            s = 0.0
            for k in range(covariates.shape[1]):
                s += covariates[i, k] * cov_coef[p, k]
            out[i, p] = c * protein_bio[i, p] + math.sqrt(1.0 - c * c) * own[i, p] + s
    return out


# ---- twins of the row-wise kernels: the numpy expressions the build used before them

def molecule_bio_scaled(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_scale,
                        resid_coef):
    scaled = resid * resid_scale if len(resid_scale) else resid
    return molecule_bio(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, scaled, resid_coef)


def add_covariate_terms(base, x, coef):
    from .linalg import matmul_ordered

    return base + matmul_ordered(x, coef.T)


def transcripts(rng, dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid_coef, protein_bio,
                concordance, covariates, cov_coef):
    resid = rng.standard_normal(protein_bio.shape)
    own = molecule_bio(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_coef)
    return mix_transcripts(protein_bio, own, concordance, covariates, cov_coef)


def pathway_sums(raw, adjust_col, adjust, extra_coef, extra, g_indptr, g_coef, g_values, terms, active, indptr, feeders,
                 coef, late_k, late_coef):
    raw = raw.copy()
    for p in np.flatnonzero(adjust_col >= 0):
        raw[:, p] = raw[:, p] - adjust[:, adjust_col[p]]
    n, M = raw.shape[0], len(active)
    k, late = np.zeros((n, M)), np.zeros((n, M))
    for m in range(M):
        if not active[m]:
            continue
        g0, g1 = g_indptr[m], g_indptr[m + 1]
        km = extra_coef[m] * extra[:, m] + g_coef[g0] * g_values[:, g0] + terms[:, m]
        for t in range(g0 + 1, g1):
            km = km + g_coef[t] * g_values[:, t]
        for j in range(indptr[m], indptr[m + 1]):
            km = km + coef[j] * raw[:, feeders[j]]
        kl = late_k[m] * km
        for j in range(indptr[m], indptr[m + 1]):
            kl = kl + late_coef[j] * raw[:, feeders[j]]
        k[:, m], late[:, m] = km, kl
    return k, late


def add_paths(raw, bio, k, late, followers, path, is_late, loading):
    raw, bio = raw.copy(), bio.copy()
    for j, f in enumerate(followers):
        x = late[:, path[j]] if is_late[j] else k[:, path[j]]
        bio[:, f] += loading[f] * x
        raw[:, f] += loading[f] * x
    return raw, bio


def proteins(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_scale, resid_coef,
             covariates, cov_coef, adjust_col, adjust, extra_coef, extra, g_indptr, g_coef, g_variant, twoq, gsd,
             path_cov, active, indptr, feeders, coef, late_k, late_coef, followers, path, is_late, loading):
    from .linalg import matmul_ordered

    bio = molecule_bio_scaled(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid,
                              resid_scale, resid_coef)
    raw = add_covariate_terms(bio, covariates, cov_coef)
    g_values = (dosage[:, g_variant] - twoq) / gsd
    terms = matmul_ordered(covariates, path_cov.T)
    k, late = pathway_sums(raw, adjust_col, adjust, extra_coef, extra, g_indptr, g_coef, g_values, terms, active, indptr,
                           feeders, coef, late_k, late_coef)
    raw, bio = add_paths(raw, bio, k, late, followers, path, is_late, loading)
    return bio, raw, k, late


def standardise(raw, mean, sd):
    return (raw - mean) / sd


def released_columns(values, rng, n_rows, rows, threshold):
    u = rng.random((n_rows, values.shape[1]))[rows]
    values = values.copy()
    values[u < threshold[:, None]] = np.nan
    return np.ascontiguousarray(values.astype(np.float32).T)
