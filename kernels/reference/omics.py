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
