"""Where each protein's cis locus, each trans variant and each variant that moves L sits on
the variant map (SPEC section 4; issues 12 and 29): every protein's own locus, co-regulated
ordinary pairs on one variant, a small share placed on or near another protein's locus,
and every instrument locus kept at expected haplotype r below the cohort's linkage bound
(``pipeline.linkage``) from every other, whatever its role.  Part of the world model
(``pipeline.model.sampler`` calls ``place``)."""
from __future__ import annotations

import numpy as np

from . import ld
from .config import ConfigError

# Cis loci: shares of proteins in co-regulated ordinary pairs (59 pairs at paper scale)
# and placed on or in LD with another protein's locus.
COREGULATED_FRACTION = 0.04
LINKED_FRACTION = 0.01


def _near(position, contig, idx, window_bp):
    """Variants within ``window_bp`` of any variant in ``idx`` (same contig)."""
    mask = np.zeros(len(position), dtype=bool)
    for i in idx:
        mask |= (contig == contig[i]) & (np.abs(position - position[i]) <= window_bp)
    return mask


def _linked_to(variants, contig, position, af, decay_bp, r2_min: float = ld.LINK_R2) -> np.ndarray:
    """The given variants and every variant linked to one of them (r^2 > ``r2_min``)."""
    nb = ld.neighbourhoods(len(position), ld.linked_pairs(contig, position, af, decay_bp, r2_min=r2_min))
    out = set(int(v) for v in variants)
    for v in variants:
        out.update(int(x) for x in nb[int(v)])
    return np.array(sorted(out), dtype=np.int64)


def pairs_and_linked(rng, P: int, role_of: dict) -> tuple:
    """The co-regulated ordinary pairs (two assays of one abundance on one variant) and the
    proteins that will sit on or next to another protein's locus (``LINKED_FRACTION`` of
    those that may share: ordinary ones and the decoys whose instrument moves nothing that
    matters).  Returns (pairs [K, 2], linked set)."""
    role_set = set(role_of.values())
    ordinary = rng.permutation(np.array([p for p in range(P) if p not in role_set], dtype=np.int64))
    n_pairs = int(round(COREGULATED_FRACTION * P / 2))
    pairs = ordinary[:2 * n_pairs].reshape(-1, 2)
    may_share = np.sort(np.concatenate([ordinary[2 * n_pairs:],
                                        [role_of[k] for k in ("T1", "T2", "T3", "T9", "A9_partner") if k in role_of]]).astype(np.int64))
    n_linked = min(int(round(LINKED_FRACTION * P)), max(0, len(may_share) - 1))
    linked = set(int(p) for p in rng.choice(may_share, size=n_linked, replace=False)) if n_linked else set()
    return pairs.astype(np.int64), linked


class Placement:
    """Loci of one world, placed unit by unit (``place``)."""

    def __init__(self, masters, protein_cis, direct, trans_variant, polygenic, near_mover, free, stats, pathway_pool):
        self.masters = masters  # [n_master] hub variants
        self.protein_cis = protein_cis  # [P]
        self.direct = direct  # G_direct
        self.trans_variant = trans_variant  # {protein: private trans variant}
        self.polygenic = polygenic
        self.near_mover = near_mover  # [V] bool: within the bound of a variant that moves L
        self.free = free  # [V] bool: claimed by no locus
        self.stats = stats
        self.pathway_pool = pathway_pool  # callable k -> k variants for the pathways' own variants


def place(rng, V, P, role_of, drivers, contig, position, af, decay_bp, t4_causal, t4_partner, t7, pairs, linked,
          n_master, private_trans, driver_trans, poly_beta, r_max, n) -> Placement:
    """Cis, trans and direct loci of every protein (SPEC section 4; issues 12 and 29).

    Units are placed in one random order, each on a variant drawn uniformly from those at
    expected haplotype r below ``r_max`` (the cohort's linkage bound, never looser than
    r^2 = LINK_R2) to every variant placed before, so a driver's locus is drawn exactly as
    any other protein's and is as isolated.  A unit is one protein, a co-regulated
    ordinary pair (one variant), a driver with its T4 partner, a master-regulator hub,
    G_direct or a private trans variant (a protein's own master regulator; every
    driver's, and ``private_trans`` of the others').  Then LINKED_FRACTION of the
    proteins that may share a locus go on or next to another such protein's locus (r^2 >
    LINK_R2, within the reach no other locus claims).  The hard worlds' polygenic
    background takes variants no locus claims; so do the pathways' own variants
    (``pathway_pool``), away from every variant that moves L.  If the genome runs out of
    free loci, the units left over are placed as linked ones (an instrument that moves L
    evicts one that does not; a private trans variant falls back to a hub), and ``stats``
    records it with how full the genome was."""
    claim_r2 = min(float(r_max) ** 2, ld.LINK_R2)
    from .linkage import Z_PAIR

    r_max_beta = Z_PAIR / (float(r_max) * np.sqrt(n))  # the effect on L the bound is drawn for (beta_max)
    nb = ld.neighbourhoods(V, ld.linked_pairs(contig, position, af, decay_bp, r2_min=claim_r2))
    nb_link = nb if claim_r2 >= ld.LINK_R2 else ld.neighbourhoods(V, ld.linked_pairs(contig, position, af, decay_bp))
    private_trans = [int(p) for p in private_trans]
    driver_trans = set(int(p) for p in driver_trans)

    # units: (kind, proteins); kind "move" for instruments that move L
    units = [("master", ())] * n_master + [("direct", ())]
    for d in drivers:
        units.append(("move", (int(d), int(t4_partner)) if (t4_partner is not None and int(d) == t4_causal) else (int(d),)))
    if t7 is not None:
        units.append(("move", (int(t7),)))
    units += [("share", (int(a), int(m))) for a, m in pairs]
    fixed = set(p for _, ps in units for p in ps)
    units += [("share", (p,)) for p in range(P) if p not in fixed and p not in linked]
    units += [("trans", (p,)) for p in private_trans]
    order = rng.permutation(len(units))

    def critical(g):
        kind, ps = units[g]
        return kind in ("move", "direct") or (kind == "trans" and ps[0] in driver_trans)

    claims = [set() for _ in range(V)]  # groups whose placed variants a variant is linked to (or is)
    free = np.ones(V, dtype=bool)
    variant_of = {}
    overflow = []

    def claim(v, g):
        for x in (v, *nb[v]):
            claims[x].add(g)
            free[x] = False

    for g in order:
        cand = np.flatnonzero(free)
        if cand.size == 0:
            evictable = [h for h in variant_of if not critical(h) and units[h][0] in ("share", "trans")
                         and (units[h][0] == "trans" or len(units[h][1]) == 1)]
            if not critical(g) or not evictable:
                if critical(g):
                    raise ConfigError(f"scale.variants: {V} variants hold too few free loci for the instruments that move L "
                                      f"at the linkage bound r < {r_max:.4f}; valid: more variants")
                overflow.append(g)
                continue
            h = evictable[int(rng.integers(len(evictable)))]  # an instrument that moves L takes a locus that does not
            v = variant_of.pop(h)
            for x in (v, *nb[v]):
                claims[x].discard(h)
            overflow.append(h)
        else:
            v = int(cand[rng.integers(cand.size)])
        variant_of[g] = v
        claim(v, g)
    n_private = len(variant_of)

    # proteins on or next to another locus: a placed unit that may share is the anchor
    anchors = sorted(h for h in variant_of if units[h][0] == "share")
    placed_linked = 0
    trans_fallback = []
    for item in sorted(linked) + [("unit", g) for g in overflow]:
        if isinstance(item, tuple):
            g = item[1]
            if units[g][0] == "trans":  # an ordinary protein's private trans variant with no room: a hub instead
                trans_fallback.append(units[g][1][0])
                continue
        else:
            g = len(units)
            units.append(("share", (item,)))
        a = anchors[int(rng.integers(len(anchors)))]
        va = variant_of[a]
        options = [x for x in (va, *nb_link[va]) if claims[x] <= {a}]
        v = int(options[int(rng.integers(len(options)))])
        variant_of[g] = v
        claim(v, a)
        placed_linked += 1

    protein_cis = np.full(P, -1, dtype=np.int64)
    trans_variant = {}
    for g, v in variant_of.items():
        kind, ps = units[g]
        if kind == "trans":
            trans_variant[ps[0]] = v
        else:
            for p in ps:
                protein_cis[p] = v
    masters = np.sort([variant_of[g] for g in range(len(units)) if g in variant_of and units[g][0] == "master"]).astype(np.int64)
    direct = next(variant_of[g] for g in variant_of if units[g][0] == "direct")

    # the hard worlds' polygenic background sits on variants no locus claims; where there are
    # too few (tiny scale), next to loci whose instrument it moves by expected z below Z_PAIR
    # together (each background variant's own effect is small), whatever the locus's role
    stats_out = {}
    polygenic = _place_polygenic(rng, V, poly_beta, free, claims, variant_of, nb, contig, position, af, decay_bp, n, stats_out)
    # every variant's expected z on L through LD from the variants that move L (a locus that
    # moves L counted at beta_max): the pathways' own variants and metabolites' instruments
    # keep it below Z_PAIR
    movers = [{"variant": v, "beta_l": float(r_max_beta), "beta_late": 0.0} for g, v in variant_of.items() if critical(g)]
    movers += [{"variant": int(v), "beta_l": float(b), "beta_late": 0.0} for v, b in zip(polygenic, poly_beta)]
    mover_z = _mover_z(V, movers, contig, position, af, decay_bp, n)
    near_mover = mover_z > Z_PAIR_LIMIT
    for g, v in variant_of.items():
        if critical(g):
            near_mover[v] = True
    near_mover[polygenic] = True
    # how full the genome is: loci placed against those placed plus those still placeable
    still = free.copy()
    spare_loci = 0
    for x in np.flatnonzero(free):
        if still[x]:
            spare_loci += 1
            still[x] = False
            still[nb[x]] = False
    kinds = {}
    for g in variant_of:
        kinds[units[g][0]] = kinds.get(units[g][0], 0) + 1
    stats = {"private_loci": n_private, "linked_placements": placed_linked, "overflow": len(overflow),
             "coregulated_pairs": int(len(pairs)), "free_variants": int(free.sum()), "spare_loci": spare_loci,
             "fill": round(n_private / (n_private + spare_loci), 4), "variants": int(V),
             "units": {k: int(v) for k, v in sorted(kinds.items())}, "private_trans": len(trans_variant),
             "private_trans_fallback": len(trans_fallback), "linkage_r_max": round(float(r_max), 6),
             "claim_r2": round(float(claim_r2), 8), **stats_out}
    loci = np.zeros(V, dtype=bool)
    loci[list(set(int(v) for v in variant_of.values()))] = True
    ordinary_only = np.array([bool(claims[x]) and not any(critical(g) for g in claims[x]) for x in range(V)])
    base = ~near_mover & ~loci
    base[polygenic] = False

    def pathway_pool(k: int) -> np.ndarray:
        """k variants for the pathways' own variants (as G_direct: never a locus, expected z on
        L through LD below Z_PAIR): variants no locus claims, unlinked to each other first,
        then any no locus claims, then ones near a locus that does not move L, then a
        variant another pathway uses too."""
        chosen, tier = [], [0, 0, 0, 0]
        blocked = np.zeros(V, dtype=bool)
        tiers = (base & free, base & ordinary_only)
        first = np.flatnonzero(tiers[0])
        first = first[rng.permutation(first.size)]
        for x in first:
            if len(chosen) >= k:
                break
            if not blocked[x]:
                chosen.append(int(x))
                blocked[x] = True
                blocked[nb[x]] = True
                tier[0] += 1
        for t, mask in ((1, tiers[0]), (2, tiers[1])):
            rest = np.flatnonzero(mask & ~np.isin(np.arange(V), chosen))
            rest = rest[rng.permutation(rest.size)]
            for x in rest:
                if len(chosen) >= k:
                    break
                chosen.append(int(x))
                tier[t] += 1
        while len(chosen) < k:
            if not chosen:
                raise ConfigError(f"scale.variants: {V} variants leave none free for the pathways' own variants; "
                                  "valid: more variants")
            chosen.append(int(chosen[int(rng.integers(len(chosen)))]))
            tier[3] += 1
        stats["pathway_variants"] = {"isolated": tier[0], "near_another": tier[1], "near_a_locus": tier[2], "shared": tier[3]}
        return np.array(chosen, dtype=np.int64)

    # where L's polygenic background was drawn from: each pathway's own background is drawn there too
    pathway_pool.free_variants = np.flatnonzero(free)
    return Placement(masters, protein_cis, int(direct), trans_variant, polygenic, near_mover, free, stats, pathway_pool)


#: What "near a variant that moves L" means for the pathways' variants and metabolites' instruments.
Z_PAIR_LIMIT = 0.5


def _mover_z(V, movers, contig, position, af, decay_bp, n) -> np.ndarray:
    """Expected z on L through LD at every variant from ``movers`` (dicts variant, beta_l)."""
    from .linkage import model_r

    out = np.zeros(V)
    sqrt_n = float(np.sqrt(n))
    arrays = (contig, position, af)
    reach = 20.0 * decay_bp
    for m in movers:
        v = int(m["variant"])
        idx = np.flatnonzero((contig == contig[v]) & (np.abs(position - position[v]) <= reach))
        out[idx] += m["beta_l"] * np.abs(model_r(arrays, idx, np.full(idx.size, v), decay_bp)) * sqrt_n
    return out


def _place_polygenic(rng, V, beta, free, claims, variant_of, nb, contig, position, af, decay_bp, n, stats) -> np.ndarray:
    """Variants of the polygenic background, in the order of their effects ``beta`` on L per SD
    of genotype: free variants first; the rest on variants that are no locus, where every locus whose reach
    they are in keeps its expected z on L through LD below Z_PAIR in total."""
    from .linkage import Z_PAIR, model_r

    k = len(beta)
    if not k:
        return np.empty(0, np.int64)
    spare = np.flatnonzero(free)
    order = rng.permutation(k)
    out = np.full(k, -1, dtype=np.int64)
    take = min(k, spare.size)
    if take < k:
        # not every one fits on a free variant: the largest effects take the free ones, and the
        # rest go next to loci smallest-budget-first from the largest down (a small effect fits
        # where a large one cannot); when all fit, which effect sits where is immaterial
        order = np.argsort(-np.abs(np.asarray(beta, dtype=np.float64)), kind="stable")
    out[order[:take]] = rng.choice(spare, size=take, replace=False)
    stats["polygenic_near_loci"] = int(k - take)
    if take == k:
        return out
    loci = set(int(v) for v in variant_of.values())
    budget = {}
    used = set(int(x) for x in out if x >= 0)
    cand = np.array([x for x in range(V) if not free[x] and x not in loci and x not in used], dtype=np.int64)
    cand = cand[rng.permutation(cand.size)]
    sqrt_n = float(np.sqrt(n))
    arrays = (contig, position, af)
    for i in order[take:]:
        placed = False
        for x in cand:
            x = int(x)
            if x in used:
                continue
            groups = [g for g in claims[x]]
            z = {g: abs(float(model_r(arrays, np.array([x]), np.array([variant_of[g]]), decay_bp)[0])) * beta[i] * sqrt_n
                 for g in groups if g in variant_of}
            if all(budget.get(g, 0.0) + zg <= Z_PAIR for g, zg in z.items()):
                for g, zg in z.items():
                    budget[g] = budget.get(g, 0.0) + zg
                out[i] = x
                used.add(x)
                placed = True
                break
        if not placed:
            raise ConfigError(f"scale.variants: {V} variants have no room for polygenic variant {int(i) + 1} of {k} within the "
                              f"linkage bound; valid: more variants or fewer world.bias_params.hard.polygenic_variants")
    return out
