"""The test-only leaks' implementations (``pipeline.leaks``: the seam, its hook points and
how a world's ``world.test_leaks`` selects these).  Each restores, at the hook points it
names, one role tell or unplanned trap the generator used to have (issues 12 and 29), so
that the tell scan (tests/biobank/test_tells.py), the validity checks (tests/biobank/test_validity.py) and
the instrument check (tests/biobank/test_instruments.py) can be shown to catch it:

- ``transcripts``: the T1 decoy's separate equation (own residual draw, shortened), which
  its transcript (the ordinary equation's) does not follow;
- ``communality``: the bias equations of the supplement alone (no factors or covariate
  terms, their own residuals, an ordinary protein's carry between visits);
- ``weak_instrument``: the A9 driver alone on a fixed, weakest h2;
- ``cis_sharing``: the pre-issue-12 placement (cis variants drawn with replacement, linkage
  unconstrained except between drivers, no co-regulated pairs);
- ``t8_signs``: the pre-issue-12 T8 imaging loadings, the same in every archetype;
- ``t4_separable``: the T4 pair on one instrument but two abundances;
- ``trans_hubs``: the pre-issue-29 master-regulator hubs, a driver on one with three weak
  ordinary proteins;
- ``weak_ld``: the linkage bound off, an ordinary protein in weak LD with the strongest driver;
- ``pathway_shapes``: the pre-issue-29 pathways (as many baseline followers as follow L,
  no delayed feeder, the covariate share as noise);
- ``visit2_recomputed``: the followers' visit-2 values recomputed from their feeders'.

An implementation is ``impl(default, *args)`` at its hook point (``pipeline.leaks.hook``).
Nothing here runs in a world built for real: ``pipeline.leaks`` imports this module only
when a world's config names a leak.
"""
from __future__ import annotations

import numpy as np

from . import blocks, ld, seeds, streams
from .leaks import register
from .loci import _linked_to, _near
from .model.constants import L_AGE, L_BMI, L_DIRECT, L_SMOKING
from .modalities.cohort import SPECIAL_PATHS, ordinary_residual_sd, special_residual
from .modalities.molecules import VISIT2_RESID_CARRY, add_pathways, pathway_values

#: Proteins following an ordinary pathway in the pre-issue-29 pathways when L has no follower.
FOLLOWERS = (1, 2)
#: The pre-issue-12 T8 imaging loadings, the same in every archetype.
T8_FIXED_LOADINGS = {"edv": -0.20, "esv": -0.30, "wall": 0.15}


# ---------------------------------------------------------------- the world (pipeline.model.sampler)


@register("weak_instrument", "instrument_strengths")
def _fixed_weak_a9(default, rng, w, P, a9_causal):
    main = rng.uniform(*w.cis_h2, P)
    if a9_causal is not None:
        main[a9_causal] = w.bias_params.A9.driver_h2
    return main


@register("trans_hubs", "trans_structure")
def _driver_on_a_hub(default, has_trans, private, hub_of, protein_h2, drivers, delayed, weights, role_of, members,
                     coregulated, linked):
    """No private trans variant; the strongest non-delayed driver on hub 0 with three ordinary
    proteins whose cis instrument is weaker than the hub's trans effect (certain)."""
    private[:] = False
    if not len(drivers):
        return
    k = int(np.argmax(np.where(delayed, -1.0, np.abs(weights))))
    has_trans[drivers[k]], hub_of[drivers[k]] = True, 0
    roles_set = set(role_of.values()) | members | set(int(a) for a, _ in coregulated) | linked
    weak = [p for p in range(len(has_trans)) if p not in roles_set][:3]
    for p in weak:
        has_trans[p], hub_of[p], protein_h2[p] = True, 0, 0.002


@register("cis_sharing", "coregulated_pairs")
def _no_pairs(default, rng, P, role_of):
    return np.empty((0, 2), np.int64), set()


@register("t4_separable", "t4_pair")
def _t4_apart(default, coregulated, t4_shared, t4_causal, t4_partner):
    return coregulated


@register("weak_ld", "linkage_bound")
def _fixed_bound(default, beta, n):
    return float(np.sqrt(ld.LINK_R2)), True


@register("weak_ld", "placed_loci")
def _weak_ld_protein(default, pl, c):
    """An ordinary protein in weak LD with the strongest driver (the pre-issue-29 defect)."""
    default(pl, c)
    if not len(c.drivers):
        return
    strongest = max((e for e in c.effects if e["kind"] == "driver_cis"), key=lambda e: e["beta_l"])["protein"]
    taken = set(c.role_of.values()) | c.members | set(int(a) for a, _ in c.coregulated) | c.linked
    protein = next(p for p in reversed(range(c.P)) if p not in taken)
    taken = set(int(v) for v in pl.protein_cis) | set(int(v) for v in pl.masters) | {int(pl.direct)}
    taken |= set(int(v) for v in pl.polygenic) | set(pl.trans_variant.values())
    weak_ld_leak(protein, int(strongest), pl.protein_cis, c.contig, c.position, c.af, c.rho, c.decay, taken)


@register("cis_sharing", "loci")
def _pre_issue_12_loci(default, c):
    master_variants, protein_cis, direct_variant, polygenic_variants, _, placement = _loci_leaky(
        c.rng, c.V, c.P, c.n_master, c.poly_n, c.drivers, c.position, c.contig, c.t4_causal, c.t4_partner)
    near_mover = np.zeros(c.V, dtype=bool)
    near_mover[_linked_to([int(protein_cis[d]) for d in c.drivers] + [direct_variant], c.contig, c.position, c.af,
                          c.decay)] = True
    pool = np.setdiff1d(np.arange(c.V), np.union1d(_linked_to(list(master_variants), c.contig, c.position, c.af, c.decay),
                                                   protein_cis))

    def pathway_pool(k):
        return c.rng.choice(pool if len(pool) else np.arange(c.V), size=k)

    return master_variants, protein_cis, direct_variant, polygenic_variants, {}, near_mover, placement, pathway_pool


def _loci_leaky(rng, V, P, n_master, poly_n, drivers, position, contig, t4_causal, t4_partner):
    """The pre-issue-12 placement (test_leaks=cis_sharing): cis variants drawn with
    replacement, linkage unconstrained except between drivers."""
    master_variants = np.sort(rng.choice(V, size=n_master, replace=False))
    pool = np.setdiff1d(np.arange(V), master_variants)
    protein_cis = rng.choice(pool, size=P, replace=True).astype(np.int64)
    for k in range(1, len(drivers)):
        while np.any(_near(position, contig, [int(protein_cis[d]) for d in drivers[:k]], 100_000)[protein_cis[drivers[k]]]):
            protein_cis[drivers[k]] = int(rng.choice(pool))
    if t4_partner is not None:
        protein_cis[t4_partner] = protein_cis[t4_causal]
    direct_variant = int(rng.choice(pool))
    polygenic = np.sort(rng.choice(pool, size=min(poly_n, len(pool)), replace=False))
    return master_variants, protein_cis, direct_variant, polygenic, np.empty((0, 2), np.int64), {"mode": "test_leaks=cis_sharing"}


def weak_ld_leak(protein, driver, protein_cis, contig, position, af, rho, decay_bp, taken) -> bool:
    """Test-only (``test_leaks=weak_ld``): the pre-issue-29 defect made certain.  The variant
    next to the driver's cis variant (no locus) is moved to where its expected haplotype r^2
    with it is just under LINK_R2, the old rule's bound, and ``protein`` takes it as its cis
    variant.  Changes ``position``, ``rho`` and ``protein_cis`` in place; False if no
    neighbour is free."""
    vd = int(protein_cis[driver])
    for u, nxt in ((vd + 1, vd + 2), (vd - 1, vd - 2)):
        if not 0 <= u < len(position) or contig[u] != contig[vd] or u in taken:
            continue
        lo, hi = 1.0, 20.0 * decay_bp  # distance with r^2 just under LINK_R2
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            r = float(np.ravel(ld.expected_haplotype_r(np.array([af[vd]]), np.array([af[u]]), np.array([np.exp(-mid / decay_bp)])))[0])
            lo, hi = (mid, hi) if r * r > 0.999 * ld.LINK_R2 else (lo, mid)
        d = int(np.ceil(hi))
        new = position[vd] + d if u > vd else position[vd] - d
        bound_ok = (not 0 <= nxt < len(position) or contig[nxt] != contig[vd]
                    or (new < position[nxt] if u > vd else new > position[nxt]))
        if not bound_ok or new <= 0:
            continue
        position[u] = new
        for k in (u, u + 1):
            if 0 < k < len(position):
                rho[k] = np.exp(-abs(position[k] - position[k - 1]) / decay_bp) if contig[k] == contig[k - 1] else 0.0
        protein_cis[protein] = u
        return True
    return False


# ---------------------------------------------------------------- the pathways (pipeline.pathways)


def followers_range(n_following_l: int) -> tuple:
    """How many proteins follow an ordinary pathway in the pre-issue-29 pathways
    (test_leaks=pathway_shapes): as many as follow L (FOLLOWERS when neither is planted)."""
    return (n_following_l, n_following_l) if n_following_l >= 1 else FOLLOWERS


class _PreIssue29Pathways:
    """Every pathway with as many baseline followers as follow L, no delayed feeder, L's
    residual and loading, its covariate share as noise; a co-regulated anchor read as its
    assay."""

    anchor_abundance = False

    def __init__(self, rng, world, l_terms, *, loading, **_):
        n_l = int("T2" in world.roles.decoys) + int(world.roles.a9_partner is not None)
        self.rng, (self.lo, self.hi) = rng, followers_range(n_l)
        self.residual, self.loading, self.F = world.latent_residual, loading, len(l_terms) - 4

    def shape_of(self, u):
        return 0, int(self.rng.integers(self.lo, self.hi + 1)), 0

    def process(self):
        return self.residual, self.loading

    def terms(self, residual):
        other_var = L_BMI ** 2 + L_DIRECT ** 2 + L_AGE ** 2 + L_SMOKING ** 2 * 0.1  # L's covariate and G_direct terms
        return np.zeros(self.F + 4), residual ** 2 + other_var


@register("pathway_shapes", "pathway_design")
def _pre_issue_29_pathways(default, rng, world, l_terms, **kw):
    return _PreIssue29Pathways(rng, world, l_terms, **kw)


@register("g_m_only", "pathway_design")
def _only_g_m(default, *args, **kw):
    """The pre-fix pathways: each holds only G_m, so in a T7 world L (which holds the T7 decoy's
    instrument too) and in a hard world L (which holds a polygenic background) is the one process
    whose followers carry more variants."""
    design = default(*args, **kw)
    design.t7 = design.poly = 0.0
    return design


@register("pathway_shapes", "anchor_assay_noise")
@register("visit2_recomputed", "anchor_assay_noise")
def _anchor_as_assay(default, block):
    return {}


@register("visit2_recomputed", "visit2_followers")
def _followers_recomputed(default, block, rows, raw, bio, age_shift, bmi2, pop_rows):
    """The followers re-read their feeders' visit-2 values; a pathway's own term renews as a
    residual does."""
    w, s, b = block.world, block.world.seed, block.b
    c = VISIT2_RESID_CARRY
    eps_new = seeds.stream(s, streams.PATHWAY_RESIDUAL_VISIT2, b).standard_normal(block.pathway_eps.shape)
    pop2 = dict(pop_rows, age=pop_rows["age"] + age_shift, bmi=bmi2)
    k2, late2 = pathway_values(w, raw, c * block.pathway_eps[rows] + np.sqrt(1 - c * c) * eps_new[rows],
                               block.dosage[rows], pop2)
    add_pathways(w, raw, bio, k2, late2)


# ---------------------------------------------------------------- the participants (pipeline.modalities)


@register("transcripts", "special_raw")
def _t1_separate_equation(default, world, role, p, ordinary_raw, ordinary_resid, eps, g_cis, path, cov_terms=None):
    """The T1 decoy's separate equation (own residual draw, shortened), which the ordinary
    equation's transcript does not follow."""
    if role != "T1":
        return default(world, role, p, ordinary_raw, ordinary_resid, eps, g_cis, path, cov_terms)
    bias, load_key, _ = SPECIAL_PATHS[role]
    loading = float(world.params["bias_params"][bias][load_key])
    systematic = ordinary_raw - ordinary_residual_sd(world, p) * ordinary_resid
    raw = systematic + np.sqrt(max(special_residual(world, role) ** 2 - loading ** 2, 0.0)) * eps + loading * path
    return raw, (None if cov_terms is None else raw - cov_terms), systematic


@register("communality", "special_raw")
def _supplement_equation(default, world, role, p, ordinary_raw, ordinary_resid, eps, g_cis, path, cov_terms=None):
    """The supplement's equation alone, without factors or covariate terms."""
    bias, load_key, resid_key = SPECIAL_PATHS[role]
    bp = world.params["bias_params"][bias]
    systematic = np.sqrt(world.protein_h2[p]) * g_cis
    raw = float(bp[load_key]) * path + systematic + float(bp[resid_key]) * eps
    return raw, raw, systematic


@register("transcripts", "special_eps")
@register("communality", "special_eps")
def _own_residual_stream(default, world, role, block_resid):
    """The separate draw the original's bias equations had, T1's too."""
    return blocks.normal(world, streams.SPECIAL.format(role=role))


@register("transcripts", "special_transcript")
def _transcript_not_following(default, world, special_tr, p, bio, own, **_):
    """The bias protein's transcript stays the ordinary equation's."""


@register("t1_transcript", "special_transcript")
def _t1_transcript_whole_path(default, world, special_tr, p, bio, own, **_):
    """Before issue 29: every bias protein's transcript c x its whole final value, the T1
    decoy's BMI path included (its agreement with the protein then above an ordinary one's)."""
    return default(world, special_tr, p, bio, own)


@register("communality", "visit2_special_paths")
def _paths_without_covariate_change(default, world, cohort, bmi2, paths):
    """The planted paths without the covariate change they stand in for."""


@register("communality", "visit2_special_carry")
def _ordinary_carry(default, world, role, p, x, y):
    return VISIT2_RESID_CARRY


@register("t8_signs", "t8_loadings")
def _t8_fixed(default, world, archetype):
    scale = float(world.params["bias_params"]["T8"]["imaging"])
    return {k: scale * v for k, v in T8_FIXED_LOADINGS.items()}
