"""The sampler of the hidden model: ``sample_world`` draws one world's World (every
world-level parameter, ``pipeline.model.world``) once from its resolved config and seed
(Supplementary Methods S1; SPEC section 4).

Participant-level values are generated block by block in ``pipeline.modalities`` from
these parameters and named random streams.  The sampler itself draws the world's first
population blocks (``pipeline.modalities.population``): the covariates' moments measured
on them standardise the linkage bound and the pathways' coefficients, and it hands them
to both (the population is a function of the world seed alone).
"""
from __future__ import annotations

import types
from typing import Optional

import numpy as np

from .. import ld, leaks, linkage, pathways, seeds, streams
from ..config import Resolved
from ..loci import pairs_and_linked, place
from ..modalities.population import population_block
from .constants import (AF_A, AF_B, AF_FLOOR, ANCESTRY_BASE_P, ANCESTRY_CODES, AGE_SD, CHROM_LENGTHS, CLUSTER_FRACTION,
                        CLUSTER_GAP_BP, L_AGE, L_BMI, LD_DECAY_BP, VISIT2_FACTOR_CARRY, VISIT2_RESID_CARRY)
from .linear import COVARIATE_MEAN, COVARIATE_SD, covariate_matrix
from .world import Roles, World

#: Blocks of the world's own population used to measure the covariates' covariance.
MOMENT_BLOCKS = 8


class _Draft(types.SimpleNamespace):
    """The world-level parameters drawn so far, read by what is drawn next (the population
    blocks behind the covariate moments, the linkage bound, the pathways) before the World
    is built whole; with the World's own accessors those steps read."""

    n_blocks = World.n_blocks
    block_range = World.block_range
    has = World.has
    latent_residual = World.latent_residual
    t4_coregulated = World.t4_coregulated


def covariate_moments(world) -> tuple:
    """Mean and covariance of X (``pipeline.model.linear.covariate_matrix``) over the world's
    first blocks (elementwise sums: the same bits in every process)."""
    x = np.concatenate([covariate_matrix(population_block(world, b)) for b in range(min(world.n_blocks, MOMENT_BLOCKS))])
    mean = x.mean(axis=0)
    c = x - mean
    cov = np.array([[float(np.mean(c[:, i] * c[:, j])) for j in range(4)] for i in range(4)])
    return mean, cov


# ------------------------------------------------------------------------- sampling


def _genome(rng, n_variants, af_beta=(AF_A, AF_B), ld_decay_bp=LD_DECAY_BP, far_gap_min_bp=0.0):
    """Variant positions (a mixture of short gaps within clusters of linked variants and
    far gaps between them, at least ``far_gap_min_bp`` where the chromosome has room),
    allele frequencies, the latent chain's correlations and thresholds."""
    share = CHROM_LENGTHS / CHROM_LENGTHS.sum()
    counts = np.maximum(1, np.floor(share * n_variants).astype(int))
    # hand out the remainder to the largest fractional parts (deterministic order)
    rem = n_variants - counts.sum()
    order = np.argsort(-(share * n_variants - np.floor(share * n_variants)), kind="stable")
    counts[order[:rem]] += 1
    contig, position = [], []
    for c, (k, length) in enumerate(zip(counts, CHROM_LENGTHS)):
        mean_far = max((0.9 * length / k - CLUSTER_FRACTION * CLUSTER_GAP_BP) / (1 - CLUSTER_FRACTION), 2 * CLUSTER_GAP_BP)
        clustered = rng.random(k) < CLUSTER_FRACTION
        # far gaps: a shifted exponential with the same mean, so clusters are at least
        # far_gap_min apart (the linkage bound then fits a locus per cluster; issue 29)
        shift = min(float(far_gap_min_bp), 0.9 * mean_far)
        gaps = np.where(clustered, rng.exponential(CLUSTER_GAP_BP, k), shift + rng.exponential(mean_far - shift, k))
        gaps = np.maximum(gaps, 1.0)
        start = rng.uniform(0.01, 0.03) * length
        pos = start + np.cumsum(gaps) - gaps[0]
        if pos[-1] > 0.99 * length:  # keep inside the chromosome, preserving relative spacing
            pos = start + (pos - start) * (0.99 * length - start) / (pos[-1] - start)
        pos = np.round(pos).astype(np.int64)
        pos = np.maximum.accumulate(pos + np.arange(k))  # strictly increasing
        contig.append(np.full(k, c, dtype=np.int8))
        position.append(pos)
    contig = np.concatenate(contig)
    position = np.concatenate(position)
    af = AF_FLOOR + (0.5 - AF_FLOOR) * rng.beta(af_beta[0], af_beta[1], n_variants)
    from scipy.special import ndtri  # scipy on first use: importing the model stays light

    threshold = ndtri(af)
    rho = np.zeros(n_variants)
    same = contig[1:] == contig[:-1]
    rho[1:] = np.where(same, np.exp(-np.abs(np.diff(position)) / ld_decay_bp), 0.0)
    bases = np.array(list("ACGT"))
    ref_i = rng.integers(0, 4, n_variants)
    alt_i = (ref_i + rng.integers(1, 4, n_variants)) % 4
    variant_id = np.array([f"rs{100000 + i}" for i in range(n_variants)], dtype=object)
    return contig, position, variant_id, bases[ref_i].astype(object), bases[alt_i].astype(object), af, rho, threshold


def _instrument_strengths(rng, w, P: int, a9_causal: Optional[int]) -> np.ndarray:
    """h2 per protein from a two-component mixture: most proteins U(cis_h2), a common
    weak component U(cis_h2_weak) that the A9 driver always draws from, so a weak
    instrument marks nothing (SPEC table: cis instrument strength)."""
    main = rng.uniform(*w.cis_h2, P)
    weak = rng.uniform(*w.cis_h2_weak, P)
    is_weak = rng.random(P) < w.cis_h2_weak_fraction
    if a9_causal is not None:
        is_weak[a9_causal] = True
    return np.where(is_weak, weak, main)


def _t4_pair(coregulated: np.ndarray, t4_shared: bool, t4_causal, t4_partner) -> np.ndarray:
    """The co-regulated pairs with the T4 pair among them where T4 shares its instrument:
    the two measure one abundance (SPEC T4 row)."""
    if not t4_shared:
        return coregulated
    return np.vstack([coregulated, [[t4_causal, t4_partner]]]).astype(np.int64)


def _private_drivers(has_trans, private, hub_of, protein_h2, drivers, *_) -> None:
    """A driver's trans effect is always private (issue 29): no other protein's instrument
    is then a variant that moves L through it.  Changes ``private`` in place."""
    private[drivers] = True


def _linkage_bound(beta: float, n: int) -> tuple:
    """(r_max, False): the linkage bound at this n (pipeline.linkage), never above the fixed
    rule's; the flag (the bound switched off) goes into the sealed placement record."""
    return min(float(np.sqrt(ld.LINK_R2)), linkage.r_bound(beta, n)), False


def _place_loci(c: types.SimpleNamespace) -> tuple:
    """Every instrument locus under the linkage bound (``pipeline.loci.place``): (master
    variants, protein_cis, direct variant, polygenic variants, {protein: private trans
    variant}, near-mover mask, the placement record, pathway_pool(k))."""
    effects = c.effects
    pl = place(c.rng, c.V, c.P, c.role_of, c.drivers, c.contig, c.position, c.af, c.decay, c.t4_causal, c.t4_partner,
               c.t7, c.pairs, c.linked, c.n_master, c.trans_units, [int(d) for d in c.drivers],
               np.array([max(e["beta_l"], e["beta_late"]) for e in effects if e["kind"] == "polygenic"]), c.r_max, c.n)
    leaks.hook(c.leaks, "placed_loci", _placed)(pl, c)
    return (pl.masters, pl.protein_cis, pl.direct, pl.polygenic, pl.trans_variant, pl.near_mover, pl.stats,
            pl.pathway_pool)


def _placed(pl, c) -> None:
    """After the placement: nothing to change."""


def sample_world(resolved: Resolved) -> World:
    """The World of ``resolved``'s world config and seed, built whole (and frozen): each part
    is drawn from its own named stream, what later draws read kept in a draft until then."""
    cfg = resolved.cfg
    w, s = cfg.world, cfg.scale
    from omegaconf import OmegaConf

    params = OmegaConf.to_container(w, resolve=True)
    seed = resolved.seed
    biases = tuple(b for b in ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9", "A9") if b in w.biases)
    P, V, M = int(s.proteins), int(s.variants), int(s.metabolites)

    contig, position, variant_id, ref, alt, af, rho, threshold = _genome(seeds.stream(seed, streams.GENOME), V, tuple(w.af_beta),
                                                                         1000.0 * float(w.ld_decay_kb), 1000.0 * float(w.far_gap_min_kb))

    # ---- roles on random identifiers -------------------------------------------------
    # roles_salt re-deals the roles over identifiers while every other draw stays the
    # same: the leak audit builds a world twice this way and compares non-data bytes.
    rrng = seeds.stream(seed, streams.ROLES_SALTED.format(salt=w.roles_salt) if w.roles_salt else streams.ROLES)
    n_drivers = int(w.n_drivers)
    role_names = [f"driver{i}" for i in range(n_drivers)]
    role_names += [b for b in ("T1", "T2", "T3", "T7", "T9") if b in biases]
    if "T4" in biases:
        role_names.append("T4_partner")
    if "A9" in biases:
        role_names.append("A9_partner")
    if "T8" in biases:
        role_names.append("T8")
    picked = rrng.choice(P, size=len(role_names), replace=False)
    role_of = dict(zip(role_names, (int(x) for x in picked)))
    drivers = np.array([role_of[f"driver{i}"] for i in range(n_drivers)], dtype=np.int64)
    lo, hi = w.driver_weight
    mags = rrng.uniform(lo, hi, n_drivers)
    signs = np.where(rrng.random(n_drivers) < 0.5, -1.0, 1.0)
    weights = mags * signs
    weights_late = weights.copy()
    delayed = np.zeros(n_drivers, dtype=bool)
    a9_causal = a9_partner = None
    if "A9" in biases:
        # The delayed driver is driver 0 (its identifier is random already).
        k = 0
        others = np.abs(np.delete(weights, k))
        ratio = rrng.uniform(*w.bias_params.A9.late_ratio)
        frac = rrng.uniform(*w.bias_params.A9.base_fraction)
        sign = -1.0 if rrng.random() < 0.5 else 1.0
        weights_late[k] = sign * ratio * others.max()
        weights[k] = frac * weights_late[k]
        delayed[k] = True
        a9_causal = int(drivers[k])
        a9_partner = role_of["A9_partner"]
    t4_causal = t4_partner = None
    if "T4" in biases:
        # The T4 causal member is a non-delayed driver.
        k = 1 if (delayed[0] and n_drivers > 1) else 0
        t4_causal = int(drivers[k])
        t4_partner = role_of["T4_partner"]
    decoys = {b: role_of[b] for b in ("T1", "T2", "T3", "T7", "T9") if b in biases}
    surrogate = role_of.get("T8")
    interaction = None
    if w.hard and n_drivers >= 2:
        strongest = np.argsort(-np.abs(weights), kind="stable")[:2]
        coef = w.bias_params.hard.interaction * float(np.min(np.abs(weights[strongest])))
        interaction = (int(drivers[strongest[0]]), int(drivers[strongest[1]]), coef)
    roles = Roles(drivers, weights, weights_late, delayed, decoys, t4_partner, t4_causal, a9_partner, a9_causal, surrogate, interaction)

    # ---- instrument strengths, trans effects, molecular structure (all loci-free) -----
    leakset = frozenset(str(x) for x in w.test_leaks)  # test-only (pipeline.leaks): empty in every real world
    irng = seeds.stream(seed, streams.INSTRUMENTS)
    n_master = max(2, int(round(V / 800)))
    poly_n = min(int(w.bias_params.hard.polygenic_variants), max(1, V // 4)) if w.hard else 0
    t4_shared = t4_partner is not None and bool(w.bias_params.T4.shared)
    protein_h2 = leaks.hook(leakset, "instrument_strengths", _instrument_strengths)(
        seeds.stream(seed, streams.INSTRUMENT_STRENGTH), w, P, a9_causal)
    # trans effects (S1.1: about 20 % of proteins): from a shared master-regulator hub, or from
    # a private trans variant of the protein's own; a driver's is always private, so that no
    # other protein's instrument is a variant that moves L through it (issue 29), and private
    # ones are common among ordinary proteins too (``world.trans_private_fraction``)
    trng = seeds.stream(seed, streams.TRANS)
    has_trans = trng.random(P) < w.trans_fraction
    private = trng.random(P) < w.trans_private_fraction
    hub_of = trng.integers(0, n_master, P)
    mrng = seeds.stream(seed, streams.MOLECULES)
    F = int(w.n_factors)
    protein_loadings = mrng.normal(0.0, w.factor_loading_sd, (P, F))
    # heterogeneous covariate terms around the supplement's (pipeline.model.linear), own stream
    protein_cov = COVARIATE_MEAN + COVARIATE_SD * seeds.stream(seed, streams.PROTEIN_COVARIATES).standard_normal((P, 4))
    polygenic_effects = irng.standard_normal(poly_n) if poly_n else np.empty(0)
    coregulated, linked = leaks.hook(leakset, "coregulated_pairs", pairs_and_linked)(irng, P, role_of)
    pairs = coregulated
    coregulated = leaks.hook(leakset, "t4_pair", _t4_pair)(coregulated, t4_shared, t4_causal, t4_partner)
    members = set(int(m) for _, m in coregulated)
    leaks.hook(leakset, "trans_structure", _private_drivers)(
        has_trans, private, hub_of, protein_h2, drivers, delayed, weights, role_of, members, coregulated, linked)
    for a, m in coregulated:  # two assays of one abundance
        has_trans[m], private[m], hub_of[m] = has_trans[a], private[a], hub_of[a]
        protein_h2[m] = protein_h2[a]
        protein_loadings[m] = protein_loadings[a]
        protein_cov[m] = protein_cov[a]

    # ---- centres and ancestry --------------------------------------------------------
    crng = seeds.stream(seed, streams.CENTRES)
    C = int(w.n_centres)
    centre_p = crng.dirichlet(np.full(C, 20.0))
    # Centre composition differs (so centre is associated with L), centred on zero so
    # the cohort's marginals stay those of S1.1.
    centre_age_shift = crng.normal(0.0, 2.0, C)
    centre_age_shift -= centre_p @ centre_age_shift
    centre_bmi_shift = crng.normal(0.0, 0.9, C)
    centre_bmi_shift -= centre_p @ centre_bmi_shift
    centre_smoking_logodds = crng.normal(0.0, 0.3, C)
    centre_ancestry_p = np.vstack([crng.dirichlet(ANCESTRY_BASE_P * 60.0) for _ in range(C)])
    centre_selection = crng.normal(0.0, 0.35, C)
    ancestry_selection = np.concatenate([[0.0], crng.normal(-0.2, 0.3, len(ANCESTRY_CODES) - 1)])
    t9_centre = None
    if "T9" in biases:
        # The unit-mixing site is a centre whose composition gives it a clearly higher
        # mean L (older, heavier, more smokers), so its unit offset makes the decoy
        # look associated with disease in a pooled analysis.  The others are
        # re-centred so the cohort's marginals stay those of S1.1.
        expected_l = L_BMI * centre_bmi_shift / 5.3 + L_AGE * centre_age_shift / AGE_SD
        t9_centre = int(np.argmax(expected_l))
        t9p = w.bias_params.T9
        for arr, extra in ((centre_age_shift, t9p.site_age_shift), (centre_bmi_shift, t9p.site_bmi_shift),
                           (centre_smoking_logodds, t9p.site_smoking_logodds)):
            arr[t9_centre] += extra
            others = np.arange(C) != t9_centre
            arr[others] -= (centre_p @ arr) / centre_p[others].sum()

    site_fields = None
    if "T5" in biases:
        from ..imaging.site_fields import sample_site_fields

        site_fields = sample_site_fields(seeds.stream(seed, streams.T5_SITES), C,
                                         amplitude=float(w.bias_params.T5.amplitude), n_terms=int(w.bias_params.T5.n_terms))

    # 128 bits as 32 hex digits, leading zeros kept (hex() dropped them and the
    # oracle then refused a key shorter than a seed, e.g. hard-03's)
    oracle_key = "0x" + format(int.from_bytes(seeds.seed_sequence(seed, streams.ORACLE_KEY_SEED).generate_state(4, dtype=np.uint32).tobytes(), "little"), "032x")

    draft = _Draft(
        id=str(w.id), seed=seed, archetype=str(w.archetype), hard=bool(w.hard), messy=bool(w.messy), biases=biases,
        n=int(s.participants), n_imaged=int(s.imaged), n_proteins=P, n_variants=V, n_metabolites=M, params=params,
        contig=contig, position=position, variant_id=variant_id, ref=ref, alt=alt, af=af, rho=rho, threshold=threshold,
        protein_h2=protein_h2, protein_master=np.where(has_trans, 0, -1).astype(np.int64),
        protein_loadings=protein_loadings, protein_cov=protein_cov, polygenic_effects=polygenic_effects, roles=roles,
        centre_p=centre_p, centre_age_shift=centre_age_shift, centre_bmi_shift=centre_bmi_shift,
        centre_smoking_logodds=centre_smoking_logodds, centre_ancestry_p=centre_ancestry_p,
        centre_selection=centre_selection, ancestry_selection=ancestry_selection, t9_centre=t9_centre,
        site_fields=site_fields, oracle_key=oracle_key, leaks=leakset, coregulated=np.asarray(coregulated, np.int64).reshape(-1, 2),
    )

    # ---- the linkage bound: how far apart instrument loci must be at this n (pipeline.linkage)
    _, cov_x = covariate_moments(draft)
    effects = linkage.mover_effects(draft, linkage.latent_model(draft, cov_x), polygenic_effects)
    beta = linkage.beta_max(effects)
    r_max, bound_off = leaks.hook(leakset, "linkage_bound", _linkage_bound)(beta, draft.n)

    # ---- loci --------------------------------------------------------------------------
    decay = 1000.0 * float(w.ld_decay_kb)
    trans_units = [int(p) for p in range(P) if has_trans[p] and private[p] and p not in members]
    loci = types.SimpleNamespace(rng=irng, V=V, P=P, n=draft.n, role_of=role_of, drivers=drivers, contig=contig,
                                 position=position, af=af, rho=rho, decay=decay, t4_causal=t4_causal,
                                 t4_partner=t4_partner if t4_shared else None, t7=decoys.get("T7"), pairs=pairs,
                                 linked=linked, members=members, coregulated=coregulated, n_master=n_master,
                                 poly_n=poly_n, trans_units=trans_units, effects=effects, r_max=r_max, leaks=leakset)
    master_variants, protein_cis, direct_variant, polygenic_variants, trans_variant, near_mover, placement, pathway_pool = (
        leaks.hook(leakset, "loci", _place_loci)(loci))
    protein_master = np.full(P, -1, dtype=np.int64)
    for p in range(P):
        if has_trans[p]:
            protein_master[p] = trans_variant.get(p, int(master_variants[hub_of[p]]))
    for a, m in coregulated:
        protein_master[m] = protein_master[a]
    for e in effects:  # each moving variant and its effect, for the sealed record and the checks
        p = e.get("protein")
        e["variant"] = {"driver_cis": lambda: int(protein_cis[p]), "driver_trans": lambda: int(protein_master[p]),
                        "T7_cis": lambda: int(protein_cis[p]), "direct": lambda: int(direct_variant),
                        "polygenic": lambda: int(polygenic_variants[e["index"]]) if e.get("index", 0) < len(polygenic_variants) else -1
                        }[e["kind"]]()
    effects = [e for e in effects if e["variant"] >= 0]
    placement["linkage"] = {"n": int(draft.n), "beta_max": round(float(beta), 6), "z_pair": linkage.Z_PAIR,
                            "r_max": round(float(r_max), 6), "weak_ld_leak": bound_off}
    draft.protein_master = protein_master  # the pathways read the final trans structure
    l_moving = [int(protein_cis[d]) for d in drivers] + [int(direct_variant)]
    if "T7" in decoys:
        l_moving.append(int(protein_cis[decoys["T7"]]))

    # ---- the rest of the molecular structure (world/molecules, after the loadings) ------
    c_lo, c_hi = w.concordance
    transcript_concordance = mrng.uniform(c_lo, c_hi, P)
    transcript_cis = np.sqrt(mrng.uniform(*w.cis_h2, P))
    transcript_master = np.where(mrng.random(P) < w.trans_fraction, mrng.choice(master_variants, size=P), -1).astype(np.int64)
    transcript_loadings = mrng.normal(0.0, w.factor_loading_sd, (P, F))
    transcript_cov = np.column_stack([
        mrng.normal(0.01, 0.005, P), mrng.normal(0.08, 0.04, P), mrng.normal(0.015, 0.01, P)
    ])
    # metabolites' instruments stay off the reach of the variants that move L (no unplanned instrument)
    metabolite_pool = np.flatnonzero(~near_mover)
    metabolite_cis = mrng.choice(metabolite_pool, size=M, replace=True)
    metabolite_h2 = mrng.uniform(0.01, 0.10, M)
    for a, m in coregulated:
        # two assays of one abundance: their transcripts are alike in distribution too
        for arr in (transcript_concordance, transcript_cis, transcript_master, transcript_loadings, transcript_cov):
            arr[m] = arr[a]
    metabolite_loadings = mrng.normal(0.0, 0.25, (M, F))
    metabolite_cov = np.column_stack([mrng.normal(0.01, 0.01, M), mrng.normal(0.1, 0.1, M), mrng.normal(0.03, 0.02, M)])

    bp = w.bias_params
    # the followers' loadings and covariate terms are fitted to their paths (the draws stay in
    # pathway_model.total_loadings)
    pathway_model, protein_loadings, protein_cov = pathways.build(
        draft, seeds.stream(seed, streams.PATHWAYS), tuple(w.pathway_weight), float(bp.T1.bmi_loading),
        float(bp.T2.latent_loading), float(bp.A9.partner_latent), VISIT2_RESID_CARRY, VISIT2_FACTOR_CARRY, pathway_pool,
        cov_x, absent_rate=float(w.pathway_absent_rate), residual_range=tuple(w.pathway_residual),
        loading_range=tuple(w.pathway_loading), late_followers=tuple(int(x) for x in w.pathway_late_followers),
        late_ratio=tuple(bp.A9.late_ratio), base_fraction=tuple(bp.A9.base_fraction), protein_cis=protein_cis)
    fields = {k: v for k, v in vars(draft).items() if k not in ("protein_loadings", "protein_cov")}
    return World(**fields, protein_cis=protein_cis, protein_loadings=protein_loadings, protein_cov=protein_cov,
                 transcript_concordance=transcript_concordance, transcript_cis=transcript_cis,
                 transcript_master=transcript_master, transcript_loadings=transcript_loadings, transcript_cov=transcript_cov,
                 metabolite_cis=metabolite_cis, metabolite_h2=metabolite_h2, metabolite_loadings=metabolite_loadings,
                 metabolite_cov=metabolite_cov, master_variants=master_variants, direct_variant=int(direct_variant),
                 polygenic_variants=polygenic_variants, cis_placement=placement, pathways=pathway_model,
                 extras={"movers": effects})
