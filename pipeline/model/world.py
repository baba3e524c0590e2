"""The hidden structural causal model of one world as data (SPEC section 4): ``World``,
every world-level parameter (identifiers, the genome map, allele frequencies, instrument
assignments and strengths, factor loadings, roles and every bias parameter), and its
``Roles``.  Both are frozen: the sampler (``pipeline.model.sampler``) builds a World
whole, once, and nothing assigns to it afterwards."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..config_schema import BLOCK_SIZE
from .constants import CONTIGS


@dataclass(frozen=True)
class Roles:
    drivers: np.ndarray  # protein indices
    weights: np.ndarray  # baseline weights w
    weights_late: np.ndarray
    delayed: np.ndarray  # bool per driver
    decoys: dict  # bias -> protein index (T1, T2, T3, T7, T9)
    t4_partner: Optional[int]
    t4_causal: Optional[int]
    a9_partner: Optional[int]
    a9_causal: Optional[int]
    surrogate: Optional[int]
    interaction: Optional[tuple]  # (i, j, coef) protein indices of the two strongest drivers


@dataclass(frozen=True)
class World:
    """All world-level parameters of the hidden model, built whole by ``sample_world``
    (assigning to a field raises ``dataclasses.FrozenInstanceError``)."""

    id: str
    seed: int
    archetype: str
    hard: bool
    messy: bool
    biases: tuple
    n: int
    n_imaged: int
    n_proteins: int
    n_variants: int
    n_metabolites: int
    params: dict  # plain copy of the world config (bias parameters and all)
    # genome
    contig: np.ndarray  # int8 index into CONTIGS, per variant
    position: np.ndarray  # int64
    variant_id: np.ndarray  # object str
    ref: np.ndarray
    alt: np.ndarray
    af: np.ndarray  # ALT allele frequency q
    rho: np.ndarray  # latent AR(1) correlation with the previous variant (0 at a contig start)
    threshold: np.ndarray  # latent threshold: ALT when z < Phi^-1(q)
    # molecules
    protein_cis: np.ndarray  # variant index per protein
    protein_h2: np.ndarray
    protein_master: np.ndarray  # variant index or -1
    protein_loadings: np.ndarray  # [P, F]
    transcript_concordance: np.ndarray  # [P]
    transcript_cis: np.ndarray  # own cis coefficient
    transcript_master: np.ndarray
    transcript_loadings: np.ndarray  # [P, F] own loadings (mixed with the protein's by concordance)
    transcript_cov: np.ndarray  # [P, 3] own covariate coefficients (age, sex, bmi)
    protein_cov: np.ndarray  # [P, 4] covariate coefficients (age - 55, sex, BMI - 27, smoking); pipeline.model.linear
    metabolite_cis: np.ndarray
    metabolite_h2: np.ndarray
    metabolite_loadings: np.ndarray
    metabolite_cov: np.ndarray
    master_variants: np.ndarray
    direct_variant: int
    polygenic_variants: np.ndarray
    polygenic_effects: np.ndarray
    roles: Roles
    # population structure
    centre_p: np.ndarray
    centre_age_shift: np.ndarray
    centre_bmi_shift: np.ndarray
    centre_smoking_logodds: np.ndarray
    centre_ancestry_p: np.ndarray  # [C, A]
    centre_selection: np.ndarray  # r_centre in the imaging-selection score
    ancestry_selection: np.ndarray  # s_ancestry
    t9_centre: Optional[int]
    site_fields: Optional[np.ndarray]  # T5 parameters per imaging site
    oracle_key: str = ""
    leaks: frozenset = frozenset()  # world.test_leaks: test-only, read by the hook points of pipeline.leaks
    coregulated: np.ndarray = field(default_factory=lambda: np.empty((0, 2), np.int64))  # [K, 2] (anchor, member)
    cis_placement: dict = field(default_factory=dict)  # how the cis loci filled the genome (sealed)
    pathways: Optional[object] = None  # pathways.PathwayModel: who feeds and follows which latent process
    extras: dict = field(default_factory=dict)  # "movers": each variant that moves L and its effect (sealed)

    # -- identifiers ---------------------------------------------------------------
    @property
    def subject_width(self) -> int:
        return max(5, len(str(self.n - 1)))

    def subject_ids(self, start: int = 0, stop: Optional[int] = None) -> np.ndarray:
        stop = self.n if stop is None else stop
        w = self.subject_width
        return np.array([f"SUBJ_{i:0{w}d}" for i in range(start, stop)], dtype=object)

    @property
    def protein_ids(self) -> list:
        return [f"PROT_{i:04d}" for i in range(self.n_proteins)]

    @property
    def transcript_ids(self) -> list:
        return [f"TRANS_{i:04d}" for i in range(self.n_proteins)]

    @property
    def metabolite_ids(self) -> list:
        return [f"MET_{i:04d}" for i in range(self.n_metabolites)]

    @property
    def n_blocks(self) -> int:
        return -(-self.n // BLOCK_SIZE)

    def block_range(self, b: int) -> tuple:
        return b * BLOCK_SIZE, min(self.n, (b + 1) * BLOCK_SIZE)

    def has(self, bias: str) -> bool:
        return bias in self.biases

    @property
    def latent_residual(self) -> float:
        return float(self.params["bias_params"]["hard"]["residual"] if self.hard else self.params["latent_residual"])

    @property
    def contig_starts(self) -> np.ndarray:
        """Index of the first variant of each contig, plus n_variants at the end."""
        return np.searchsorted(self.contig, np.arange(len(CONTIGS) + 1)).astype(np.int64)

    @property
    def t4_coregulated(self) -> bool:
        """The T4 pair measures one co-regulated abundance (SPEC T4 row)."""
        r = self.roles
        return r.t4_partner is not None and any(int(a) == r.t4_causal and int(m) == r.t4_partner for a, m in self.coregulated)

    def special_proteins(self) -> dict:
        """Proteins whose abundance does not follow the ordinary equation (role -> index)."""
        r = self.roles
        out = {}
        if "T1" in r.decoys:
            out["T1"] = r.decoys["T1"]
        if "T2" in r.decoys:
            out["T2"] = r.decoys["T2"]
        if r.a9_partner is not None:
            out["A9_partner"] = r.a9_partner
        return out

    def tracked_proteins(self) -> np.ndarray:
        """Proteins whose per-participant values the population stage keeps (roles)."""
        r = self.roles
        idx = list(r.drivers) + list(r.decoys.values())
        for v in (r.t4_partner, r.a9_partner, r.surrogate):
            if v is not None:
                idx.append(v)
        return np.array(sorted(set(int(i) for i in idx)), dtype=np.int64)
