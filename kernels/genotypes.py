"""Haplotype simulation: a latent Gaussian AR(1) chain along each chromosome,
thresholded at the allele frequency (a Gaussian-copula haplotype model, S1.1)."""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from .numba_util import njit
from .rng import next_normal_pair, seed_state

# s = samples (participants in one block), h = haplotype (2), v = variants


@njit(parallel=True)
def haplotype_chains(key, n_samples, rho, threshold, out):
    """Fill ``out`` (int8 [s, h, v]) with ALT (1) / REF (0) alleles.

    ``rho`` (float64 [v]) is the latent correlation with the previous variant
    (0 at the first variant of a contig, so contigs are independent);
    ``threshold`` (float64 [v]) is Phi^-1(q): the allele is ALT when the latent
    value is below it, so P(ALT) = q exactly.  Row ``s`` draws from the stream
    ``(key, s)``; haplotype 0 then haplotype 1, one normal per variant.
    """
    n_variants = rho.shape[0]
    for s in prange(n_samples):
        state = np.empty(4, dtype=np.uint64)
        seed_state(key, s, state)
        for h in range(2):
            z = 0.0
            spare = 0.0
            have_spare = False
            for v in range(n_variants):
                if have_spare:
                    e = spare
                    have_spare = False
                else:
                    e, spare = next_normal_pair(state)
                    have_spare = True
                r = rho[v]
                if r == 0.0:
                    z = e
                else:
                    z = r * z + math.sqrt(1.0 - r * r) * e
                out[s, h, v] = 1 if z < threshold[v] else 0


def simulate_haplotypes(key, n_samples: int, rho: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Haplotypes of one participant block as int8 [s, 2, v]."""
    out = np.empty((n_samples, 2, rho.shape[0]), dtype=np.int8)
    haplotype_chains(np.uint64(key), n_samples, np.ascontiguousarray(rho, dtype=np.float64),
                     np.ascontiguousarray(threshold, dtype=np.float64), out)
    return out


@njit(parallel=True)
def sample_major_to_variant_major(hap, out):
    """Transpose int8 [s, h, v] haplotypes to the store's int8 [v, s, h] layout in
    cache-sized tiles (a plain strided copy of a 16 MB block is several times slower)."""
    n_s, n_h, n_v = hap.shape
    tile = 256
    for v0 in prange((n_v + tile - 1) // tile):
        vs = v0 * tile
        ve = min(n_v, vs + tile)
        for s0 in range(0, n_s, 64):
            se = min(n_s, s0 + 64)
            for v in range(vs, ve):
                for s in range(s0, se):
                    for h in range(n_h):
                        out[v, s, h] = hap[s, h, v]


def to_variant_major(hap: np.ndarray) -> np.ndarray:
    out = np.empty((hap.shape[2], hap.shape[0], hap.shape[1]), dtype=np.int8)
    sample_major_to_variant_major(np.ascontiguousarray(hap), out)
    return out
