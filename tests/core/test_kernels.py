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


def _pcg(seed):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))


def test_kernel_draws_are_numpys_draws():
    """Numba's Generator methods are numpy's algorithms on the same bit generator: a kernel
    drawing row by row gets ``standard_normal``/``random`` values bit for bit, and leaves the
    stream where numpy would (the omics kernels rely on it)."""
    from kernels.omics import fill_normal, normal_rows, released_columns

    for seed, shape in [(1, (300, 7)), (2, (1, 2941)), (3, (0, 5)), (4, (5, 0)), (5, (2000, 600))]:
        ref = _pcg(seed)
        want, after = ref.standard_normal(shape), ref.standard_normal(3)
        got, g = np.empty(shape), _pcg(seed)
        fill_normal(g, got)
        assert np.array_equal(got, want) and np.array_equal(g.standard_normal(3), after)
    rows = np.array([0, 3, 4, 9], dtype=np.int64)
    got, g = np.empty((4, 11)), _pcg(6)
    normal_rows(g, 10, rows, got)
    ref = _pcg(6)
    assert np.array_equal(got, ref.standard_normal((10, 11))[rows]) and g.random() == ref.random()
    values = _pcg(7).standard_normal((4, 11))
    out = np.empty((11, 4), np.float32)
    released_columns(values, _pcg(8), 10, rows, np.full(4, 0.3), out)
    u = _pcg(8).random((10, 11))[rows]
    assert np.array_equal(np.isnan(out), (u < 0.3).T) and np.array_equal(out[~np.isnan(out)], values.T[u.T >= 0.3].astype(np.float32))


def _pathway_inputs(rng, n=37, P=23, M=6, v=40, F=3):
    """A block's inputs with pathways of every kind: inactive ones, anchors read as their
    abundance, baseline and late followers (some of them feeders too)."""
    dosage = rng.integers(0, 3, (n, v)).astype(np.int8)
    q = rng.uniform(0.05, 0.5, v)
    sizes = rng.integers(0, 5, M)
    indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    feeders = rng.integers(0, P, indptr[-1]).astype(np.int64)
    adjust_col = np.full(P, -1, np.int64)
    adjust_col[feeders[:2]] = [0, 1]
    followers = np.sort(rng.choice(P, 7, replace=False)).astype(np.int64)
    g_indptr = np.concatenate([[0], np.cumsum(rng.integers(1, 5, M))]).astype(np.int64)
    g_var = rng.integers(0, v, g_indptr[-1]).astype(np.int64)
    return dict(
        dosage=dosage, gmean=2 * q, ginv=1 / np.sqrt(2 * q * (1 - q)), cis=rng.integers(0, v, P).astype(np.int64),
        cis_coef=rng.uniform(0.1, 0.5, P), master=np.where(rng.random(P) < 0.3, rng.integers(0, v, P), -1).astype(np.int64),
        trans_coef=0.1, factors=rng.standard_normal((n, F)), loadings=rng.standard_normal((P, F)),
        resid=rng.standard_normal((n, P)), resid_scale=rng.uniform(0.5, 1.0, P), resid_coef=0.8,
        covariates=rng.standard_normal((n, 4)), cov_coef=rng.standard_normal((P, 4)), adjust_col=adjust_col,
        adjust=rng.standard_normal((n, 2)), extra_coef=rng.standard_normal(M), extra=rng.standard_normal((n, M)),
        # each pathway's genotype terms: its own variant and, for some, more (a T7 world's pleiotropic
        # instrument, a hard world's polygenic background)
        g_indptr=g_indptr, g_coef=rng.standard_normal(g_indptr[-1]), g_variant=g_var,
        twoq=2 * q[g_var], gsd=np.sqrt(2 * q[g_var] * (1 - q[g_var])), path_cov=rng.standard_normal((M, 4)),
        active=(rng.random(M) < 0.7).astype(np.uint8), indptr=indptr, feeders=feeders,
        coef=rng.standard_normal(indptr[-1]), late_k=rng.standard_normal(M), late_coef=rng.standard_normal(indptr[-1]),
        followers=followers, path=rng.integers(0, M, len(followers)).astype(np.int64),
        is_late=(rng.random(len(followers)) < 0.5).astype(np.uint8), loading=rng.uniform(0.3, 0.6, P))


def test_row_wise_omics_kernels_match_twins():
    from kernels import omics
    from kernels.reference import omics as twin

    for seed in range(4):
        a = _pathway_inputs(np.random.default_rng(seed))
        n, P = a["resid"].shape
        M = len(a["active"])
        bio, raw, k, late = np.empty((n, P)), np.empty((n, P)), np.empty((n, M)), np.empty((n, M))
        omics.proteins(*a.values(), bio, raw, k, late)
        for got, want in zip((bio, raw, k, late), twin.proteins(*a.values())):
            assert np.array_equal(got, want)
        # the pieces on their own
        keys = ("dosage", "gmean", "ginv", "cis", "cis_coef", "master", "trans_coef", "factors", "loadings", "resid",
                "resid_scale", "resid_coef")
        b2 = np.empty((n, P))
        omics.molecule_bio_scaled(*(a[x] for x in keys), b2)
        assert np.array_equal(b2, twin.molecule_bio_scaled(*(a[x] for x in keys)))
        r2 = np.empty((n, P))
        omics.add_covariate_terms(b2, a["covariates"], a["cov_coef"], r2)
        assert np.array_equal(r2, twin.add_covariate_terms(b2, a["covariates"], a["cov_coef"]))
        pk = ("adjust_col", "adjust", "extra_coef", "extra", "g_indptr", "g_coef")
        g = np.random.default_rng(9).standard_normal((n, len(a["g_variant"])))
        terms = np.random.default_rng(10).standard_normal((n, M))
        k2, l2 = np.empty((n, M)), np.empty((n, M))
        rest = (a["active"], a["indptr"], a["feeders"], a["coef"], a["late_k"], a["late_coef"])
        omics.pathway_sums(r2, *(a[x] for x in pk), g, terms, *rest, k2, l2)
        for got, want in zip((k2, l2), twin.pathway_sums(r2, *(a[x] for x in pk), g, terms, *rest)):
            assert np.array_equal(got, want)
        fk = (a["followers"], a["path"], a["is_late"], a["loading"])
        want = twin.add_paths(r2, b2, k2, l2, *fk)
        omics.add_paths(r2, b2, k2, l2, *fk)
        assert np.array_equal(r2, want[0]) and np.array_equal(b2, want[1])
        conc, cc = np.random.default_rng(seed).uniform(0.2, 0.9, P), a["cov_coef"][:, :3].copy()
        tk = keys[:9]
        t_got = np.empty((n, P))
        omics.transcript_block(_pcg(seed), *(a[x] for x in tk), 0.8, bio, conc, a["covariates"][:, :3].copy(), cc, t_got)
        assert np.array_equal(t_got, twin.transcripts(_pcg(seed), *(a[x] for x in tk), 0.8, bio, conc,
                                                      a["covariates"][:, :3].copy(), cc))
        mean, sd = raw.mean(0), raw.std(0)
        s = np.empty_like(raw)
        omics.standardise(raw, mean, sd, s)
        assert np.array_equal(s, twin.standardise(raw, mean, sd))
        rows = np.flatnonzero(np.random.default_rng(seed).random(n) < 0.4).astype(np.int64)
        thr = np.random.default_rng(seed).uniform(0.0, 0.2, len(rows))
        out = np.empty((P, len(rows)), np.float32)
        omics.released_columns(s[rows], _pcg(seed), n, rows, thr, out)
        assert out.tobytes() == twin.released_columns(s[rows], _pcg(seed), n, rows, thr).tobytes()


def test_cycle_radii_is_frame_radii_frame_by_frame():
    """The rendering's all-frames boundary kernel gives the per-frame definition's radii bit for
    bit (same arithmetic, sums in the same order), frame by frame, over a whole cycle."""
    from kernels.mri import LANES
    from kernels.mri_geometry import cycle_radii, frame_radii

    rng = np.random.default_rng(7)
    n_bins, frames = 64, 25
    shapes = [1.0 + 0.2 * rng.random(n_bins) for _ in range(6)]  # motion, wall, ed, rv bump, rv wall bump, fat
    scalars = (310.0, 0.42, 18.0, 6.5, 0.35, 420.0, 0.55, 2.5)  # area_ed .. rv_wall_px
    cs = np.sort(rng.random(frames))
    rk = np.empty((n_bins, 5, (frames + LANES - 1) // LANES * LANES))
    cycle_radii(cs, *scalars, *shapes, rk)
    for f in range(frames):
        want = [np.empty(n_bins) for _ in range(5)]
        frame_radii(cs[f], *scalars, *shapes, *want)
        for b in range(5):
            assert np.array_equal(rk[:, b, f], want[b]), (f, b)
