"""Proteins, transcripts and metabolites (S1.1) for one participant block.

Ordinary protein p:  z[sqrt(h2_p) G_cis(p) + I_p sqrt(0.01) G_master(p) + F lambda_p
                       + beta_p . (age - 55, sex, BMI - 27, smoking) + 0.8 eps],
with beta_p drawn around the supplement's (0.01, 0.10, 0.02, 0) and, for a protein
that follows a pathway (pipeline.pathways), + 0.50 K_m with lambda_p, beta_p and the
residual fitted so that its totals are an ordinary protein's.
Transcript g (paired with protein p): a concordance-weighted mix of the protein's
biological part and the transcript's own genetic/factor/residual part, plus its
own covariate terms, so r(protein, transcript) is about the concordance c_g
without a fixed transcript-to-protein causal link.
Metabolite m: z[sqrt(h2_m) G_cis(m) + F lambda_m + covariates + 0.8 eps].
Co-regulated pair (a, m) (``world.coregulated``; the T4 pair among them): both are
assays of one abundance with the same cis, trans and factor terms, and of each
residual the share COREGULATED_SHARED is the abundance's (drawn once, the anchor's
column) and the rest the assay's own noise, so each member alone is an ordinary
protein and the two are exchangeable.

z[.] needs population moments, so a block first returns raw values and their
(sum, sum of squares); the release pass recomputes the raw values from the same
streams and standardises them with the combined moments.
"""
from __future__ import annotations

import numpy as np

from .. import leaks, seeds, streams
from ..model.constants import COREGULATED_SHARED, PROTEIN_RESIDUAL, TRANS_EFFECT, VISIT2_FACTOR_CARRY, VISIT2_RESID_CARRY
from ..model.linear import covariate_matrix



def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Matrix product with one fixed summation order, for values that are written.
    BLAS blocks and threads a product differently in a worker and in a client, and
    einsum's SIMD kernels take different paths for aligned and unaligned memory;
    either changes the last bits between processes (kernels.linalg does not)."""
    from kernels.linalg import dot as ordered_dot

    return ordered_dot(a, b)


def kernel_array(a, dtype=np.float64) -> np.ndarray:
    """``a`` as a kernel takes it: C-contiguous, writeable, of ``dtype`` (copied only when it
    is not; arrays unpickled on a worker can be read-only, a type of their own to Numba,
    which would compile every kernel again for them)."""
    a = np.asarray(a)
    if a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, dtype=dtype, order="C", copy=True)


def normals(rng, shape: tuple) -> np.ndarray:
    """``rng.standard_normal(shape)`` (2-D), drawn by a kernel (the same values, faster)."""
    from kernels.omics import fill_normal

    out = np.empty(shape)
    fill_normal(rng, out)
    return out


def haplotypes(world, b: int) -> np.ndarray:
    """int8 [n, 2, variants] for block ``b``."""
    from kernels.genotypes import simulate_haplotypes

    lo, hi = world.block_range(b)
    return simulate_haplotypes(seeds.block_key(world.seed, streams.GENOTYPES, b), hi - lo, world.rho, world.threshold)


def standardised_genotypes(world, dosage: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """(dosage - 2q) / sqrt(2q(1-q)) for the given variant columns, float64 [n, len(columns)]."""
    q = world.af[columns]
    return (dosage[:, columns] - 2.0 * q) / np.sqrt(2.0 * q * (1.0 - q))


def coregulate(world, resid: np.ndarray, noise: np.ndarray, in_place: bool = False) -> np.ndarray:
    """Residuals with each co-regulated pair's shared abundance: member m gets
    sqrt(s) x the anchor's draw + sqrt(1 - s) x its own draw, the anchor the same
    shared draw + sqrt(1 - s) x ``noise`` (one column per pair).  ``in_place``: ``resid``
    may be overwritten (it is, when no protein is both an anchor and a member, nor in
    two pairs: then every column is read before it is written)."""
    pairs = world.coregulated
    if not len(pairs):
        return resid
    a, m = pairs[:, 0], pairs[:, 1]
    shared, own = np.sqrt(COREGULATED_SHARED), np.sqrt(1.0 - COREGULATED_SHARED)
    apart = len(np.unique(pairs)) == pairs.size
    out = resid if in_place and apart else resid.copy()
    out[:, m] = shared * resid[:, a] + own * resid[:, m]
    out[:, a] = shared * resid[:, a] + own * noise
    return out


def covariate_terms(world, pop, age_shift=0.0, bmi=None, proteins=None) -> np.ndarray:
    """Each protein's own covariate terms, float64 [n, proteins] (all proteins by default)."""
    pop = dict(pop, age=pop["age"] + age_shift, bmi=pop["bmi"] if bmi is None else bmi)
    coef = world.protein_cov if proteins is None else world.protein_cov[np.atleast_1d(proteins)]
    return dot(covariate_matrix(pop), coef.T)


def pathway_values(world, raw: np.ndarray, extra: np.ndarray, dosage: np.ndarray, pop: dict,
                   assay_noise: dict | None = None) -> tuple:
    """K_m and K_m_late ([n, M]; zero for a pathway nobody follows) from the feeders' raw
    values: K_m = sum_j coef_j raw_j + L's covariate terms + direct_m G_m [+ its other genotype terms] + extra_m eps_m
    (unit variance) and K_m_late = late_k K_m + sum_j late_coef_j raw_j (pipeline.pathways).
    A co-regulated anchor feeds with its abundance, its raw value less ``assay_noise[p]``
    (its assay's own noise), as L reads the T4 driver's abundance.  The sums run in
    ``kernels.omics.pathway_sums``, feeder by feeder in the pathway's order."""
    from kernels.omics import pathway_sums

    pw = world.pathways
    n, M = raw.shape[0], len(pw.upstream)
    k, late = np.zeros((n, M)), np.zeros((n, M))
    if not M:
        return k, late
    gi, gv, gc = pw.genotype_terms()
    g = standardised_genotypes(world, dosage, gv)
    x = covariate_matrix(pop)
    terms = dot(x, pw.cov_coef.T) if pw.cov_coef is not None and len(pw.cov_coef) else np.zeros((n, M))
    indptr, feeders, coef, late_coef = _pathway_feeders(pw)
    adjust_col = np.full(raw.shape[1], -1, dtype=np.int64)
    noise = list((assay_noise or {}).items())
    for j, (p, _) in enumerate(noise):
        adjust_col[p] = j
    adjust = np.column_stack([v for _, v in noise]) if noise else np.zeros((n, 0))
    pathway_sums(kernel_array(raw), adjust_col, kernel_array(adjust), kernel_array(pw.extra), kernel_array(extra),
                 gi, kernel_array(gc), kernel_array(g), kernel_array(terms), (pw.direct_variant >= 0).astype(np.uint8),
                 indptr, feeders, coef, kernel_array(pw.late_k), late_coef, k, late)
    return k, late


def _pathway_feeders(pw) -> tuple:
    """The pathways' feeders and their coefficients as flat arrays (pathway m's are
    ``indptr[m]:indptr[m + 1]``, in the pathway's order)."""
    sizes = [len(up) for up in pw.upstream]
    for up, c, lc in zip(pw.upstream, pw.coef, pw.late_coef):
        if not len(up) == len(c) == len(lc):
            raise ValueError("pathway feeders and coefficients differ in length")
    indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    flat = (lambda parts, dtype: np.concatenate([np.asarray(x, dtype=dtype) for x in parts]) if sum(sizes)
            else np.zeros(0, dtype))
    return indptr, flat(pw.upstream, np.int64), flat(pw.coef, np.float64), flat(pw.late_coef, np.float64)


def add_pathways(world, raw: np.ndarray, bio: np.ndarray, k: np.ndarray, late: np.ndarray) -> None:
    """Followers of the ordinary pathways (pipeline.pathways) take loading x K_m (baseline
    followers) or loading x K_m_late (late followers); ``bio`` and ``raw`` are updated in place."""
    from kernels.omics import add_paths

    from ..pathways import BASELINE

    pw = world.pathways
    if pw is None or not len(pw.upstream):
        return
    followers = np.flatnonzero(pw.follows >= 0)  # fixed order
    for a in (raw, bio):
        if not (a.flags.c_contiguous and a.flags.writeable):
            raise ValueError("add_pathways updates C-contiguous arrays in place")
    add_paths(raw, bio, kernel_array(k), kernel_array(late), kernel_array(followers, np.int64),
              pw.follows[followers].astype(np.int64), (pw.follower_kind[followers] != BASELINE).astype(np.uint8),
              kernel_array(pw.follower_loading))


def residual_scale(world) -> np.ndarray:
    """Residual SD of each protein's ordinary equation over the kernel's 0.8."""
    pw = world.pathways
    return np.ones(world.n_proteins) if pw is None else pw.residual_sd / PROTEIN_RESIDUAL


class BlockMolecules:
    """Raw (unstandardised) molecular values of one block, visit 1 and visit 2.

    The sums run in ``kernels.omics`` (a fixed order per element); the random parts
    are drawn from the block's named streams (by the kernels, as numpy would)."""

    def __init__(self, world, b: int, pop: dict, dosage: np.ndarray):
        self.world, self.b, self.pop = world, b, pop
        self.dosage = kernel_array(dosage, np.int8)
        n = dosage.shape[0]
        F = world.protein_loadings.shape[1]
        s = world.seed
        q = world.af
        self.gmean = 2.0 * q
        self.ginv = 1.0 / np.sqrt(2.0 * q * (1.0 - q))
        self.factors = normals(seeds.stream(s, streams.FACTORS, b), (n, F))
        self.pair_noise = normals(seeds.stream(s, streams.COREGULATED_RESIDUAL, b), (n, len(world.coregulated)))
        self.protein_resid = coregulate(world, normals(seeds.stream(s, streams.PROTEIN_RESIDUAL, b), (n, world.n_proteins)),
                                        self.pair_noise, in_place=True)
        self.pathway_eps = normals(seeds.stream(s, streams.PATHWAY_RESIDUAL, b), (n, self._n_pathways()))
        # the protein's biological part (everything but the covariate terms), the raw value, and
        # the pathways' values and their followers' shares (kernels.omics.proteins, row by row)
        self.protein_bio, self._raw = np.empty((n, world.n_proteins)), np.empty((n, world.n_proteins))
        self.pathway_k = self.pathway_late = None
        M = self._n_pathways()
        if M:
            self.pathway_k, self.pathway_late = np.empty((n, M)), np.empty((n, M))
        self._proteins(covariate_matrix(pop))

    def _proteins(self, x: np.ndarray) -> None:
        from kernels.omics import proteins

        from ..pathways import BASELINE

        w, n = self.world, self.dosage.shape[0]
        pw, M = w.pathways, self._n_pathways()
        f64 = kernel_array
        i64 = (lambda a: kernel_array(a, np.int64))
        if M:
            noise = list(self.anchor_assay_noise().items())
            adjust_col = np.full(w.n_proteins, -1, dtype=np.int64)
            for j, (p, _) in enumerate(noise):
                adjust_col[p] = j
            adjust = np.column_stack([v for _, v in noise]) if noise else np.zeros((n, 0))
            gi, gv, gc = pw.genotype_terms()
            q = w.af[gv]
            twoq, gsd = 2.0 * q, np.sqrt(2.0 * q * (1.0 - q))  # as standardised_genotypes
            path_cov = pw.cov_coef if pw.cov_coef is not None and len(pw.cov_coef) else np.zeros((M, 4))
            indptr, feeders, coef, late_coef = _pathway_feeders(pw)
            followers = np.flatnonzero(pw.follows >= 0)
            k, late = self.pathway_k, self.pathway_late
            path = (adjust_col, f64(adjust), f64(pw.extra), self.pathway_eps, i64(gi), f64(gc),
                    i64(gv), f64(twoq), f64(gsd), f64(path_cov),
                    (pw.direct_variant >= 0).astype(np.uint8), indptr, feeders, coef, f64(pw.late_k), late_coef,
                    i64(followers), i64(pw.follows[followers]), (pw.follower_kind[followers] != BASELINE).astype(np.uint8),
                    f64(pw.follower_loading))
        else:
            k = late = np.zeros((n, 0))
            none_i, none_f = np.zeros(0, np.int64), np.zeros(0)
            path = (np.full(w.n_proteins, -1, np.int64), np.zeros((n, 0)), none_f, np.zeros((n, 0)), np.zeros(1, np.int64),
                    none_f, none_i, none_f, none_f, np.zeros((0, 4)), np.zeros(0, np.uint8), np.zeros(1, np.int64), none_i, none_f, none_f, none_f,
                    none_i, none_i, np.zeros(0, np.uint8), np.zeros(w.n_proteins))
        proteins(self.dosage, self.gmean, self.ginv, i64(w.protein_cis), f64(np.sqrt(w.protein_h2)), i64(w.protein_master),
                 float(TRANS_EFFECT), self.factors, f64(w.protein_loadings), self.protein_resid, f64(residual_scale(w)),
                 float(PROTEIN_RESIDUAL), f64(x), f64(w.protein_cov), *path, self.protein_bio, self._raw, k, late)

    def anchor_assay_noise(self) -> dict:
        """Each co-regulated anchor's assay noise (what its released value adds to the pair's
        abundance), the T4 driver's excepted (L reads its abundance through the population stage)."""
        return leaks.hook(self.world.leaks, "anchor_assay_noise", BlockMolecules._anchor_assay_noise)(self)

    def _anchor_assay_noise(self) -> dict:
        w = self.world
        if w.pathways is None:
            return {}
        own = PROTEIN_RESIDUAL * np.sqrt(1.0 - COREGULATED_SHARED)
        return {int(a): own * self.pair_noise[:, k] for k, (a, _) in enumerate(w.coregulated) if int(a) != w.roles.t4_causal}

    def _n_pathways(self) -> int:
        pw = self.world.pathways
        return 0 if pw is None else len(pw.upstream)

    def _bio(self, dosage, cis, cis_coef, master, factors, loadings, resid, resid_scale=None):
        """``kernels.omics.molecule_bio`` (the residual ``resid x resid_scale`` per column when given)."""
        from kernels.omics import molecule_bio_scaled

        out = np.empty((dosage.shape[0], len(cis)))
        molecule_bio_scaled(kernel_array(dosage, np.int8), self.gmean, self.ginv, kernel_array(cis, np.int64),
                            kernel_array(cis_coef), kernel_array(master, np.int64), float(TRANS_EFFECT),
                            kernel_array(factors), kernel_array(loadings), kernel_array(resid),
                            np.ones(0) if resid_scale is None else kernel_array(resid_scale), float(PROTEIN_RESIDUAL), out)
        return out

    @staticmethod
    def _with_covariates(base: np.ndarray, x: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """base + dot(x, coef.T) (the ordered product, then the sum), a new array."""
        from kernels.omics import add_covariate_terms

        out = np.empty_like(base)
        add_covariate_terms(kernel_array(base), kernel_array(x), kernel_array(coef), out)
        return out

    def genotypes(self, columns: np.ndarray) -> np.ndarray:
        """Standardised genotypes of the given variant columns, float64 [n, len(columns)]."""
        return standardised_genotypes(self.world, self.dosage, np.asarray(columns))

    def _covariates(self) -> np.ndarray:
        return np.ascontiguousarray(covariate_matrix(self.pop)[:, :3])

    def proteins_raw(self) -> np.ndarray:
        return self._raw

    def t4_abundance_raw(self) -> np.ndarray:
        """The T4 driver's own abundance (what L depends on): its released value
        without its assay's own noise, which its partner's assay does not share."""
        w = self.world
        k = next(i for i, (a, _) in enumerate(w.coregulated) if int(a) == w.roles.t4_causal)
        own = np.sqrt(1.0 - COREGULATED_SHARED)
        p = w.roles.t4_causal
        cov = covariate_terms(w, self.pop, proteins=[p])[:, 0]
        return self.protein_bio[:, p] + cov - PROTEIN_RESIDUAL * own * self.pair_noise[:, k]

    def transcripts_raw(self) -> np.ndarray:
        from kernels.omics import transcript_block

        w, s, b = self.world, self.world.seed, self.b
        out = np.empty_like(self.protein_bio)
        transcript_block(seeds.stream(s, streams.TRANSCRIPT_RESIDUAL, b), self.dosage, self.gmean, self.ginv,
                    kernel_array(w.protein_cis, np.int64), kernel_array(w.transcript_cis),
                    kernel_array(w.transcript_master, np.int64), float(TRANS_EFFECT), self.factors,
                    kernel_array(w.transcript_loadings), float(PROTEIN_RESIDUAL),
                    self.protein_bio, kernel_array(w.transcript_concordance), self._covariates(),
                    kernel_array(w.transcript_cov), out)
        return out

    def metabolites_raw(self) -> np.ndarray:
        w, s, b = self.world, self.world.seed, self.b
        n = self.protein_bio.shape[0]
        resid = normals(seeds.stream(s, streams.METABOLITE_RESIDUAL, b), (n, w.n_metabolites))
        no_trans = np.full(w.n_metabolites, -1, dtype=np.int64)
        bio = self._bio(self.dosage, w.metabolite_cis, np.sqrt(w.metabolite_h2), no_trans, self.factors,
                        w.metabolite_loadings, resid)
        return self._with_covariates(bio, self._covariates(), w.metabolite_cov)

    def proteins_visit2_raw(self, rows: np.ndarray, age_shift: np.ndarray, bmi2: np.ndarray) -> tuple:
        """Ordinary protein equation five years on for the block rows ``rows``:
        genetics fixed, factors and residuals partly renewed, covariates updated.
        Returns the raw values and the visit-2 residual draws (bias equations reuse them)."""
        from kernels.omics import normal_rows

        w, s, b = self.world, self.world.seed, self.b
        n = self.protein_bio.shape[0]
        rows = np.asarray(rows, dtype=np.int64)
        if np.any(np.diff(rows) <= 0):
            raise ValueError("visit-2 rows must be ascending and distinct")
        # Drawn for the whole block so a participant's values do not depend on who else attended
        # (the kernels draw every row and keep the attendees').
        f_new = normals(seeds.stream(s, streams.FACTORS_VISIT2, b), self.factors.shape)
        r_new = np.empty((len(rows), w.n_proteins))
        normal_rows(seeds.stream(s, streams.PROTEIN_RESIDUAL_VISIT2, b), n, rows, r_new)
        noise = normals(seeds.stream(s, streams.COREGULATED_RESIDUAL_VISIT2, b), (n, len(w.coregulated)))
        r_new = coregulate(w, r_new, noise[rows], in_place=True)
        k1 = VISIT2_FACTOR_CARRY
        k2 = np.full(w.n_proteins, VISIT2_RESID_CARRY) if w.pathways is None else w.pathways.visit2_carry
        f2 = k1 * self.factors[rows] + np.sqrt(1 - k1 * k1) * f_new[rows]
        r2 = k2 * self.protein_resid[rows] + np.sqrt(1 - k2 * k2) * r_new
        bio = self._bio(self.dosage[rows], w.protein_cis, np.sqrt(w.protein_h2), w.protein_master, f2,
                        w.protein_loadings, r2, residual_scale(w))
        pop_rows = {k: v[rows] for k, v in self.pop.items()}
        raw = bio + covariate_terms(w, pop_rows, age_shift=age_shift, bmi=bmi2)
        if not self._n_pathways():
            return raw, r2
        leaks.hook(w.leaks, "visit2_followers", BlockMolecules._visit2_followers)(self, rows, raw, bio, age_shift, bmi2, pop_rows)
        return raw, r2

    def _visit2_followers(self, rows: np.ndarray, raw: np.ndarray, bio: np.ndarray, age_shift, bmi2: np.ndarray,
                          pop_rows: dict) -> None:
        """The followers' visit-2 values added to ``raw`` and ``bio`` in place."""
        w, s, b = self.world, self.world.seed, self.b
        pw = w.pathways
        # as the T2 decoy reads L_late and the A9 partner L_late carried on, from baseline
        # values: a baseline follower reads K_m_late, a late follower K_m_late five years
        # on; both with the covariate change their path stands in for (cohort.visit2_specials)
        late = self.pathway_late[rows]
        ahead_new = normals(seeds.stream(s, streams.PATHWAY_AHEAD, b), self.pathway_eps.shape)[rows]
        rho = np.clip(pw.rho, -1.0, 1.0)
        ahead = rho * late + np.sqrt(1.0 - rho * rho) * ahead_new
        change = np.column_stack([np.asarray(age_shift, dtype=np.float64) * np.ones(len(rows)), np.zeros(len(rows)),
                                  bmi2 - self.pop["bmi"][rows], np.zeros(len(rows))])
        base_change = dot(change, pw.cov_change[:, 0, :].T)
        late_change = dot(change, pw.cov_change[:, 1, :].T)
        add_pathways(w, raw, bio, late + base_change, ahead + late_change)


def moments(x: np.ndarray) -> np.ndarray:
    """[2, columns] float64: column sums and sums of squares (combined in block order)."""
    return np.stack([x.sum(axis=0), np.square(x).sum(axis=0)])


def finish_moments(total: np.ndarray, n: int) -> tuple:
    mean = total[0] / n
    var = np.maximum(total[1] / n - mean * mean, 1e-12)
    return mean, np.sqrt(var)
