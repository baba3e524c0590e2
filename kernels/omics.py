"""Molecular layers of one participant block (S1.1), row-parallel and with a
fixed summation order per element (so the bits never depend on threads).

Standardised genotype of variant v: (dosage - 2 q_v) / sqrt(2 q_v (1 - q_v)),
computed on the fly from ``gmean = 2q`` and ``ginv = 1 / sqrt(2q(1-q))``.
"""
from __future__ import annotations

import math

from numba import prange

from .numba_util import njit

# i = participants in the block, v = variants, p = molecules (proteins, transcripts, metabolites), f = factors


@njit(parallel=True)
def molecule_bio(dosage, gmean, ginv, cis, cis_coef, master, trans_coef, factors, loadings, resid, resid_coef, out):
    """out[i, p] = cis_coef[p] g(i, cis[p]) + [master[p] >= 0] trans_coef g(i, master[p])
                   + sum_f factors[i, f] loadings[p, f] + resid_coef resid[i, p]

    dosage int8 [i, v]; gmean, ginv float64 [v]; cis, master int64 [p] (master -1: no trans
    effect); cis_coef float64 [p]; factors float64 [i, f]; loadings float64 [p, f];
    resid float64 [i, p]; out float64 [i, p].
    """
    n_i = dosage.shape[0]
    n_p = cis.shape[0]
    n_f = factors.shape[1]
    for i in prange(n_i):
        for p in range(n_p):
            v = cis[p]
            x = cis_coef[p] * ((dosage[i, v] - gmean[v]) * ginv[v])
            m = master[p]
            if m >= 0:
                x += trans_coef * ((dosage[i, m] - gmean[m]) * ginv[m])
            s = 0.0
            for f in range(n_f):
                s += factors[i, f] * loadings[p, f]
            out[i, p] = x + s + resid_coef * resid[i, p]


@njit(parallel=True)
def mix_transcripts(protein_bio, own, concordance, covariates, cov_coef, out):
    """out[i, p] = c_p protein_bio[i, p] + sqrt(1 - c_p^2) own[i, p] + sum_k covariates[i, k] cov_coef[p, k]."""
    n_i, n_p = protein_bio.shape
    n_k = covariates.shape[1]
    for i in prange(n_i):
        for p in range(n_p):
            c = concordance[p]
            s = 0.0
            for k in range(n_k):
                s += covariates[i, k] * cov_coef[p, k]
            out[i, p] = c * protein_bio[i, p] + math.sqrt(1.0 - c * c) * own[i, p] + s
