"""Where each protein's cis locus sits on the variant map (SPEC section 4): every
protein's own unlinked locus, co-regulated ordinary pairs on one variant, a small share
placed on or near another protein's locus, and the instruments that move L kept apart
from all but the planted T4 partner.  Part of the world model (``pipeline.world``)."""
from __future__ import annotations

import numpy as np

from . import ld

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


def _linked_to(variants, contig, position, af, decay_bp) -> np.ndarray:
    """The given variants and every variant linked to one of them (r^2 > LINK_R2)."""
    nb = ld.neighbourhoods(len(position), ld.linked_pairs(contig, position, af, decay_bp))
    out = set(int(v) for v in variants)
    for v in variants:
        out.update(int(x) for x in nb[int(v)])
    return np.array(sorted(out), dtype=np.int64)


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


def _loci(rng, V, P, n_master, poly_n, role_of, drivers, contig, position, af, decay_bp, t4_causal, t4_partner, t7):
    """Cis variants of every protein (SPEC section 4, cis loci).

    Units are placed in one random order, each on a variant drawn uniformly from those
    linked (r^2 > LINK_R2) to no variant placed before, so a driver's locus is drawn
    exactly as any other protein's.  A unit is one protein, a co-regulated ordinary
    pair (one variant), a driver with its T4 partner, a master-regulator variant or
    G_direct.  Then LINKED_FRACTION of the proteins that may share a locus (ordinary
    ones and the decoys whose instrument moves nothing that matters) go on or next to
    another such protein's locus.  If the genome runs out of unlinked loci, the units
    left over are placed as linked ones too (an instrument that moves L evicts one
    that does not), and ``placement`` records how full the genome was."""
    nb = ld.neighbourhoods(V, ld.linked_pairs(contig, position, af, decay_bp))
    role_set = set(role_of.values())
    ordinary = rng.permutation(np.array([p for p in range(P) if p not in role_set], dtype=np.int64))
    n_pairs = int(round(COREGULATED_FRACTION * P / 2))
    pairs = ordinary[:2 * n_pairs].reshape(-1, 2)
    may_share = np.sort(np.concatenate([ordinary[2 * n_pairs:],
                                        [role_of[k] for k in ("T1", "T2", "T3", "T9", "A9_partner") if k in role_of]]).astype(np.int64))
    n_linked = min(int(round(LINKED_FRACTION * P)), max(0, len(may_share) - 1))
    linked = set(int(p) for p in rng.choice(may_share, size=n_linked, replace=False)) if n_linked else set()

    # units: (kind, proteins); kind "move" for instruments that move L
    units = [("master", ())] * n_master + [("direct", ())]
    for d in drivers:
        units.append(("move", (int(d), int(t4_partner)) if (t4_partner is not None and int(d) == t4_causal) else (int(d),)))
    if t7 is not None:
        units.append(("move", (int(t7),)))
    units += [("share", (int(a), int(m))) for a, m in pairs]
    fixed = set(p for _, ps in units for p in ps)
    units += [("share", (p,)) for p in range(P) if p not in fixed and p not in linked]
    order = rng.permutation(len(units))

    claims = [set() for _ in range(V)]  # groups whose placed variants a variant is linked to (or is)
    free = np.ones(V, dtype=bool)
    variant_of = {}
    overflow = []

    def claim(v, g):
        for x in (v, *nb[v]):
            claims[x].add(g)
            free[x] = False

    for g in order:
        kind, _ = units[g]
        cand = np.flatnonzero(free)
        if cand.size == 0:
            evictable = [h for h in variant_of if units[h][0] == "share" and len(units[h][1]) == 1]
            if kind == "share" or not evictable:
                if kind != "share":
                    raise ConfigError(f"scale.variants: {V} variants hold too few unlinked cis loci for the instruments that move L; "
                                      "valid: more variants")
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
    for item in sorted(linked) + [("unit", g) for g in overflow]:
        if isinstance(item, tuple):
            g = item[1]
        else:
            g = len(units)
            units.append(("share", (item,)))
        a = anchors[int(rng.integers(len(anchors)))]
        va = variant_of[a]
        options = [x for x in (va, *nb[va]) if claims[x] <= {a}]
        v = int(options[int(rng.integers(len(options)))])
        variant_of[g] = v
        claim(v, a)
        placed_linked += 1

    protein_cis = np.full(P, -1, dtype=np.int64)
    for g, v in variant_of.items():
        for p in units[g][1]:
            protein_cis[p] = v
    masters = np.sort([variant_of[g] for g in range(len(units)) if g in variant_of and units[g][0] == "master"]).astype(np.int64)
    direct = next(variant_of[g] for g in variant_of if units[g][0] == "direct")
    # the hard worlds' polygenic background sits on loci no protein's instrument reaches
    spare = np.flatnonzero(free)
    if spare.size == 0:
        spare = np.array([x for x in range(V) if not any(units[h][0] in ("move", "direct") for h in claims[x])])
    polygenic = np.sort(rng.choice(spare, size=min(poly_n, spare.size), replace=False)).astype(np.int64)
    # how full the genome is: loci placed against those placed plus those still placeable
    still = free.copy()
    spare_loci = 0
    for x in np.flatnonzero(free):
        if still[x]:
            spare_loci += 1
            still[x] = False
            still[nb[x]] = False
    placement = {"private_loci": n_private, "linked_placements": placed_linked, "overflow": len(overflow),
                 "coregulated_pairs": int(len(pairs)), "free_variants": int(free.sum()), "spare_loci": spare_loci,
                 "fill": round(n_private / (n_private + spare_loci), 4), "variants": int(V)}
    return masters, protein_cis, int(direct), polygenic, pairs.astype(np.int64), placement
