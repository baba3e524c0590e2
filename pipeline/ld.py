"""Linkage between variants of the genotype model (S1.1): two haplotype alleles
are thresholded latent normals whose correlation is exp(-|dpos| / decay) on one
chromosome, so the expected r between two variants follows from their allele
frequencies and distance alone.  The generator uses it to keep instruments that
move L unlinked from other proteins' cis variants; validation uses it to check
LD by distance and the same constraint."""
from __future__ import annotations

import numpy as np
from scipy import special

#: Two variants are linked when their expected haplotype r^2 exceeds this (SPEC section 4).
LINK_R2 = 0.05


def bivariate_normal_cdf(h, k, rho):
    """Phi2(h, k; rho), vectorised through Owen's T function."""
    h, k, rho = (np.atleast_1d(x).astype(float) for x in np.broadcast_arrays(h, k, rho))
    out = np.empty(h.shape)
    s = np.sqrt(1.0 - rho * rho)
    zero = (h == 0) & (k == 0)
    # Owen's formula divides by h and k; Phi2 is continuous, so a threshold of exactly 0
    # (an allele frequency of exactly one half) is moved off zero by a negligible amount
    # (T(h, a) tends to +-1/4 as h -> 0, which a literal h = 0 would lose)
    h = np.where((h == 0) & ~zero, 1e-12, h)
    k = np.where((k == 0) & ~zero, 1e-12, k)
    ph, pk = special.ndtr(h), special.ndtr(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        ah = (k - rho * h) / (h * s)
        ak = (h - rho * k) / (k * s)
    th = np.where(zero, 0.0, special.owens_t(h, np.nan_to_num(ah)))
    tk = np.where(zero, 0.0, special.owens_t(k, np.nan_to_num(ak)))
    delta = np.where(h * k < 0, 0.5, 0.0)
    out[:] = 0.5 * (ph + pk) - th - tk - delta
    # exact special cases
    out[zero] = 0.25 + np.arcsin(rho[zero]) / (2 * np.pi)
    indep = rho == 0
    out[indep] = ph[indep] * pk[indep]
    return out if out.size != 1 else out.reshape(np.shape(out))


def expected_haplotype_r(q1, q2, rho):
    """Correlation of two ALT indicators thresholded from latent normals with correlation rho."""
    t1, t2 = special.ndtri(q1), special.ndtri(q2)
    p11 = bivariate_normal_cdf(t1, t2, rho)
    return (p11 - q1 * q2) / np.sqrt(q1 * (1 - q1) * q2 * (1 - q2))


def linked_pairs(contig: np.ndarray, position: np.ndarray, af: np.ndarray, decay_bp: float,
                 r2_min: float = LINK_R2) -> tuple:
    """All pairs (i < j) of variants with expected r^2 > ``r2_min``, as two index arrays
    and their r^2.  The indicator correlation never exceeds the latent one, so only
    pairs with exp(-d / decay) > sqrt(r2_min) need the exact computation; variants
    are sorted by position within a contig, so the scan stops at the first offset
    with no such pair."""
    n = len(position)
    rho_min = np.sqrt(r2_min)
    out_i, out_j, out_r2 = [], [], []
    k = 1
    while k < n:
        i = np.arange(n - k)
        j = i + k
        rho = np.where(contig[i] == contig[j], np.exp(-np.abs(position[j] - position[i]) / decay_bp), 0.0)
        near = rho > rho_min
        if not near.any():
            break
        i, j, rho = i[near], j[near], rho[near]
        r2 = np.square(expected_haplotype_r(af[i], af[j], rho))
        keep = r2 > r2_min
        out_i.append(i[keep])
        out_j.append(j[keep])
        out_r2.append(r2[keep])
        k += 1
    if not out_i:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_r2)


def neighbourhoods(n: int, pairs: tuple) -> list:
    """Per variant, the sorted indices of the variants linked to it (itself excluded)."""
    i, j, _ = pairs
    both_i = np.concatenate([i, j])
    both_j = np.concatenate([j, i])
    order = np.lexsort((both_j, both_i))
    both_i, both_j = both_i[order], both_j[order]
    starts = np.searchsorted(both_i, np.arange(n + 1))
    return [both_j[starts[v]:starts[v + 1]] for v in range(n)]
