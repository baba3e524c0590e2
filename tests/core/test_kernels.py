"""Numba kernels against their slow, obvious twins."""
import numpy as np
from scipy.special import ndtri

from kernels.genotypes import simulate_haplotypes
from kernels.reference.genotypes import haplotype_chains as twin_haplotypes
from kernels.reference.rng import Xoshiro
from kernels.rng import next_double, next_normal_pair, seed_state
from kernels.numba_util import njit


@njit
def _draw(key, row, k):
    state = np.empty(4, dtype=np.uint64)
    seed_state(key, row, state)
    out = np.empty(k)
    for i in range(k):
        out[i] = next_double(state)
    a, b = next_normal_pair(state)
    return out, a, b


def test_rng_matches_pure_python_twin():
    for key, row in [(1, 0), (2**63 + 12345, 7), (987654321, 10**6)]:
        u, a, b = _draw(np.uint64(key), row, 16)
        g = Xoshiro(key, row)
        assert np.array_equal(u, [g.next_double() for _ in range(16)])
        assert (a, b) == g.next_normal_pair()


def test_rng_uniform_and_normal_moments():
    u, _, _ = _draw(np.uint64(5), 3, 200_000)
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / 200_000)


def test_haplotype_kernel_matches_twin_including_odd_lengths():
    rng = np.random.default_rng(0)
    for n_variants in (1, 7, 121):
        rho = np.exp(-rng.exponential(50_000, n_variants) / 110_000)
        rho[0] = 0.0
        if n_variants > 5:
            rho[5] = 0.0  # a contig boundary
        thr = ndtri(rng.uniform(0.04, 0.5, n_variants))
        key = np.uint64(rng.integers(0, 2**63))
        assert np.array_equal(simulate_haplotypes(key, 9, rho, thr), twin_haplotypes(key, 9, rho, thr))


def test_haplotypes_hit_allele_frequency_and_ld():
    n_variants = 400
    rho = np.full(n_variants, 0.9)
    rho[::100] = 0.0
    q = np.full(n_variants, 0.3)
    hap = simulate_haplotypes(np.uint64(42), 4000, rho, ndtri(q))
    assert abs(hap.mean() - 0.3) < 0.01
    h = hap.transpose(2, 0, 1).reshape(n_variants, -1).astype(float)
    r = np.corrcoef(h[10], h[11])[0, 1]
    from pipeline.validation.calibration import expected_haplotype_r

    assert abs(r - expected_haplotype_r(0.3, 0.3, 0.9)) < 0.03
    assert abs(np.corrcoef(h[99], h[100])[0, 1]) < 0.05  # across a contig boundary


def test_ordered_matmul_matches_twin_and_is_alignment_free():
    from kernels.linalg import dot
    from kernels.reference.linalg import matmul_ordered

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((7, 12)), rng.standard_normal((12, 5))
    assert np.array_equal(dot(a, b), matmul_ordered(a, b))
    # an unaligned view of the same values gives the same bits
    buf = np.empty(a.size + 1)
    unaligned = np.frombuffer(buf.data, dtype=np.float64, count=a.size, offset=8).reshape(a.shape)
    unaligned[:] = a
    assert np.array_equal(dot(unaligned, b), dot(a, b))


def test_omics_kernels_match_twins():
    from kernels.omics import mix_transcripts, molecule_bio
    from kernels.reference import omics as twin

    rng = np.random.default_rng(5)
    n, v, p, f = 6, 20, 9, 4
    dosage = rng.integers(0, 3, (n, v)).astype(np.int8)
    q = rng.uniform(0.05, 0.5, v)
    gmean, ginv = 2 * q, 1 / np.sqrt(2 * q * (1 - q))
    cis = rng.integers(0, v, p).astype(np.int64)
    master = np.where(rng.random(p) < 0.4, rng.integers(0, v, p), -1).astype(np.int64)
    coef = rng.uniform(0.1, 0.5, p)
    factors, loadings, resid = rng.standard_normal((n, f)), rng.standard_normal((p, f)), rng.standard_normal((n, p))
    out = np.empty((n, p))
    molecule_bio(dosage, gmean, ginv, cis, coef, master, 0.1, factors, loadings, resid, 0.8, out)
    assert np.array_equal(out, twin.molecule_bio(dosage, gmean, ginv, cis, coef, master, 0.1, factors, loadings, resid, 0.8))
    own, conc, covs, cc = rng.standard_normal((n, p)), rng.uniform(0.2, 0.9, p), rng.standard_normal((n, 3)), rng.standard_normal((p, 3))
    mixed = np.empty((n, p))
    mix_transcripts(out, own, conc, covs, cc, mixed)
    assert np.array_equal(mixed, twin.mix_transcripts(out, own, conc, covs, cc))


def test_variant_major_transpose():
    from kernels.genotypes import to_variant_major

    hap = np.random.default_rng(1).integers(0, 2, (301, 2, 517)).astype(np.int8)
    assert np.array_equal(to_variant_major(hap), np.ascontiguousarray(hap.transpose(2, 0, 1)))
