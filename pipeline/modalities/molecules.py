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


def haplotypes(world, b: int) -> np.ndarray:
    """int8 [n, 2, variants] for block ``b``."""
    from kernels.genotypes import simulate_haplotypes

    lo, hi = world.block_range(b)
    return simulate_haplotypes(seeds.block_key(world.seed, streams.GENOTYPES, b), hi - lo, world.rho, world.threshold)


def standardised_genotypes(world, dosage: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """(dosage - 2q) / sqrt(2q(1-q)) for the given variant columns, float64 [n, len(columns)]."""
    q = world.af[columns]
    return (dosage[:, columns] - 2.0 * q) / np.sqrt(2.0 * q * (1.0 - q))


def coregulate(world, resid: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Residuals with each co-regulated pair's shared abundance: member m gets
    sqrt(s) x the anchor's draw + sqrt(1 - s) x its own draw, the anchor the same
    shared draw + sqrt(1 - s) x ``noise`` (one column per pair)."""
    pairs = world.coregulated
    if not len(pairs):
        return resid
    a, m = pairs[:, 0], pairs[:, 1]
    shared, own = np.sqrt(COREGULATED_SHARED), np.sqrt(1.0 - COREGULATED_SHARED)
    out = resid.copy()
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
    values: K_m = sum_j coef_j raw_j + L's covariate terms + direct_m G_m + extra_m eps_m
    (unit variance) and K_m_late = late_k K_m + sum_j late_coef_j raw_j (pipeline.pathways).
    A co-regulated anchor feeds with its abundance, its raw value less ``assay_noise[p]``
    (its assay's own noise), as L reads the T4 driver's abundance."""
    pw = world.pathways
    if assay_noise:
        raw = raw.copy()
        for p, noise in assay_noise.items():
            raw[:, p] = raw[:, p] - noise
    n, M = raw.shape[0], len(pw.upstream)
    k, late = np.zeros((n, M)), np.zeros((n, M))
    if not M:
        return k, late
    g = standardised_genotypes(world, dosage, np.maximum(pw.direct_variant, 0))
    x = covariate_matrix(pop)
    terms = dot(x, pw.cov_coef.T) if pw.cov_coef is not None and len(pw.cov_coef) else np.zeros((n, M))
    for m, (up, coef) in enumerate(zip(pw.upstream, pw.coef)):
        if pw.direct_variant[m] < 0:
            continue
        km = pw.extra[m] * extra[:, m] + pw.direct[m] * g[:, m] + terms[:, m]
        for p, c in zip(up, coef):  # fixed order: the same bits in every process
            km = km + c * raw[:, p]
        kl = pw.late_k[m] * km
        for p, c in zip(up, pw.late_coef[m]):
            kl = kl + c * raw[:, p]
        k[:, m], late[:, m] = km, kl
    return k, late


def add_pathways(world, raw: np.ndarray, bio: np.ndarray, k: np.ndarray, late: np.ndarray) -> None:
    """Followers of the ordinary pathways (pipeline.pathways) take loading x K_m (baseline
    followers) or loading x K_m_late (late followers); ``bio`` and ``raw`` are updated in place."""
    from ..pathways import BASELINE

    pw = world.pathways
    if pw is None or not len(pw.upstream):
        return
    for f in np.flatnonzero(pw.follows >= 0):  # fixed order
        m = int(pw.follows[f])
        path = k[:, m] if pw.follower_kind[f] == BASELINE else late[:, m]
        bio[:, f] += pw.follower_loading[f] * path
        raw[:, f] += pw.follower_loading[f] * path


def residual_scale(world) -> np.ndarray:
    """Residual SD of each protein's ordinary equation over the kernel's 0.8."""
    pw = world.pathways
    return np.ones(world.n_proteins) if pw is None else pw.residual_sd / PROTEIN_RESIDUAL


class BlockMolecules:
    """Raw (unstandardised) molecular values of one block, visit 1 and visit 2.

    The sums run in ``kernels.omics`` (row-parallel, fixed order per element);
    the random parts are drawn here from the block's named streams."""

    def __init__(self, world, b: int, pop: dict, dosage: np.ndarray):
        self.world, self.b, self.pop = world, b, pop
        self.dosage = np.ascontiguousarray(dosage, dtype=np.int8)
        n = dosage.shape[0]
        F = world.protein_loadings.shape[1]
        s = world.seed
        q = world.af
        self.gmean = 2.0 * q
        self.ginv = 1.0 / np.sqrt(2.0 * q * (1.0 - q))
        self.factors = seeds.stream(s, streams.FACTORS, b).standard_normal((n, F))
        self.protein_resid = seeds.stream(s, streams.PROTEIN_RESIDUAL, b).standard_normal((n, world.n_proteins))
        self.pair_noise = seeds.stream(s, streams.COREGULATED_RESIDUAL, b).standard_normal((n, len(world.coregulated)))
        self.protein_resid = coregulate(world, self.protein_resid, self.pair_noise)
        # the protein's biological part (everything but the covariate terms)
        self.protein_bio = self._bio(self.dosage, world.protein_cis, np.sqrt(world.protein_h2), world.protein_master,
                                     self.factors, world.protein_loadings, self.protein_resid * residual_scale(world))
        self.cov = covariate_terms(world, pop)
        self.pathway_eps = seeds.stream(s, streams.PATHWAY_RESIDUAL, b).standard_normal((n, self._n_pathways()))
        self._raw = self.protein_bio + self.cov
        self.pathway_k = self.pathway_late = None
        if self._n_pathways():
            self.pathway_k, self.pathway_late = pathway_values(world, self._raw, self.pathway_eps, self.dosage, pop,
                                                               self.anchor_assay_noise())
            add_pathways(world, self._raw, self.protein_bio, self.pathway_k, self.pathway_late)

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

    def _bio(self, dosage, cis, cis_coef, master, factors, loadings, resid):
        from kernels.omics import molecule_bio

        out = np.empty((dosage.shape[0], len(cis)))
        molecule_bio(dosage, self.gmean, self.ginv, np.ascontiguousarray(cis, dtype=np.int64),
                     np.ascontiguousarray(cis_coef, dtype=np.float64), np.ascontiguousarray(master, dtype=np.int64),
                     float(TRANS_EFFECT), np.ascontiguousarray(factors), np.ascontiguousarray(loadings),
                     np.ascontiguousarray(resid), float(PROTEIN_RESIDUAL), out)
        return out

    def genotypes(self, columns: np.ndarray) -> np.ndarray:
        """Standardised genotypes of the given variant columns, float64 [n, len(columns)]."""
        return standardised_genotypes(self.world, self.dosage, np.asarray(columns))

    def _covariates(self) -> np.ndarray:
        return covariate_matrix(self.pop)[:, :3]

    def proteins_raw(self) -> np.ndarray:
        return self._raw

    def t4_abundance_raw(self) -> np.ndarray:
        """The T4 driver's own abundance (what L depends on): its released value
        without its assay's own noise, which its partner's assay does not share."""
        w = self.world
        k = next(i for i, (a, _) in enumerate(w.coregulated) if int(a) == w.roles.t4_causal)
        own = np.sqrt(1.0 - COREGULATED_SHARED)
        p = w.roles.t4_causal
        return self.protein_bio[:, p] + self.cov[:, p] - PROTEIN_RESIDUAL * own * self.pair_noise[:, k]

    def transcripts_raw(self) -> np.ndarray:
        from kernels.omics import mix_transcripts

        w, s, b = self.world, self.world.seed, self.b
        n = self.protein_bio.shape[0]
        resid = seeds.stream(s, streams.TRANSCRIPT_RESIDUAL, b).standard_normal((n, w.n_proteins))
        own = self._bio(self.dosage, w.protein_cis, w.transcript_cis, w.transcript_master, self.factors,
                        w.transcript_loadings, resid)
        out = np.empty_like(own)
        mix_transcripts(self.protein_bio, own, np.ascontiguousarray(w.transcript_concordance), self._covariates(),
                        np.ascontiguousarray(w.transcript_cov), out)
        return out

    def metabolites_raw(self) -> np.ndarray:
        w, s, b = self.world, self.world.seed, self.b
        n = self.protein_bio.shape[0]
        resid = seeds.stream(s, streams.METABOLITE_RESIDUAL, b).standard_normal((n, w.n_metabolites))
        no_trans = np.full(w.n_metabolites, -1, dtype=np.int64)
        bio = self._bio(self.dosage, w.metabolite_cis, np.sqrt(w.metabolite_h2), no_trans, self.factors,
                        w.metabolite_loadings, resid)
        return bio + dot(self._covariates(), w.metabolite_cov.T)

    def proteins_visit2_raw(self, rows: np.ndarray, age_shift: np.ndarray, bmi2: np.ndarray) -> tuple:
        """Ordinary protein equation five years on for the block rows ``rows``:
        genetics fixed, factors and residuals partly renewed, covariates updated.
        Returns the raw values and the visit-2 residual draws (bias equations reuse them)."""
        w, s, b = self.world, self.world.seed, self.b
        n = self.protein_bio.shape[0]
        # Drawn for the whole block so a participant's values do not depend on who else attended.
        f_new = seeds.stream(s, streams.FACTORS_VISIT2, b).standard_normal(self.factors.shape)
        r_new = seeds.stream(s, streams.PROTEIN_RESIDUAL_VISIT2, b).standard_normal((n, w.n_proteins))
        r_new = coregulate(w, r_new, seeds.stream(s, streams.COREGULATED_RESIDUAL_VISIT2, b).standard_normal((n, len(w.coregulated))))
        k1 = VISIT2_FACTOR_CARRY
        k2 = np.full(w.n_proteins, VISIT2_RESID_CARRY) if w.pathways is None else w.pathways.visit2_carry
        f2 = k1 * self.factors[rows] + np.sqrt(1 - k1 * k1) * f_new[rows]
        r2 = k2 * self.protein_resid[rows] + np.sqrt(1 - k2 * k2) * r_new[rows]
        bio = self._bio(self.dosage[rows], w.protein_cis, np.sqrt(w.protein_h2), w.protein_master, f2,
                        w.protein_loadings, r2 * residual_scale(w))
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
        ahead_new = seeds.stream(s, streams.PATHWAY_AHEAD, b).standard_normal(self.pathway_eps.shape)[rows]
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
