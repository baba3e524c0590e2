"""Which molecule sits in each library row, and how its SMILES, atoms and bonds are spliced.

Row ``i`` of a library of N draws its route (amide, Suzuki-amide, ...) from
the route weights on the named stream ``screening/route`` of its 1,000-row
block.  Its molecule is the ``k``-th of that route, where ``k`` counts earlier
rows of the same route, and the ``k``-th molecule of a route is element
``feistel(k)`` of the route's combinatorial space (the product of its synthon
pools), a keyed permutation: molecules are distinct by construction, their
order is unrelated to their structure, and no row depends on how rows are
grouped into tasks.  Everything here is plain numpy on the client (the plan
for 1,000,000 rows takes about a second); per-molecule strings and atom tables
are built inside the tasks (:func:`splice`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .. import seeds
from .config import BLOCK_SIZE
from .fragments import ROUTES, RULE_INDEX, RULES, SynthonTable
from .streams import CONFORMER, ROUTE, SPACE

_TOKEN = re.compile(r"(\[[^\]]*\]|%\d\d|\d|.)")

# --------------------------------------------------------------------------- a keyed permutation


def _mix(x: np.ndarray, key: np.uint64) -> np.ndarray:
    """A 64-bit mixing function (splitmix64's finaliser) of x ^ key, vectorised."""
    with np.errstate(over="ignore"):
        z = (x ^ key) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def feistel(values: np.ndarray, domain: int, keys: np.ndarray) -> np.ndarray:
    """A keyed bijection of [0, domain) applied to ``values`` (balanced Feistel
    network on the smallest even bit width covering the domain, with cycle
    walking back into the domain)."""
    bits = max(2, int(domain - 1).bit_length())
    bits += bits % 2
    half = bits // 2
    mask = np.uint64((1 << half) - 1)
    x = np.asarray(values, dtype=np.uint64).copy()
    todo = np.ones(x.shape, dtype=bool)
    while True:
        left, right = x[todo] >> np.uint64(half), x[todo] & mask
        for k in keys:
            left, right = right, left ^ (_mix(right, np.uint64(k)) & mask)
        x[todo] = (left << np.uint64(half)) | right
        todo = x >= np.uint64(domain)
        if not todo.any():
            return x.astype(np.int64)


# --------------------------------------------------------------------------- the plan


@dataclass
class Plan:
    """The library's composition: per row the route and the synthon of each slot."""

    route: np.ndarray  # int8 [n]
    synthon: np.ndarray  # int32 [n, 3]; -1 = slot unused

    def rows(self, lo: int, hi: int) -> "Plan":
        return Plan(self.route[lo:hi], self.synthon[lo:hi])


def route_pools(table: SynthonTable) -> list[list[np.ndarray]]:
    """For each route, the synthon ids available to each of its slots."""
    by = table.by_variant()
    pools = []
    for route in ROUTES:
        if len(route.rules) == 1:
            names = [f"parent:{route.rules[0]}", f"child:{route.rules[0]}"]
        else:
            names = [f"parent:{route.rules[0]}", f"linker:{route.rules[0]}:{route.rules[1]}", f"child:{route.rules[1]}"]
        pools.append([by[n] for n in names])
    return pools


def space_sizes(table: SynthonTable) -> list[int]:
    return [int(np.prod([len(p) for p in pools])) for pools in route_pools(table)]


def plan(seed: int, n: int, table: SynthonTable) -> Plan:
    """Route and synthons of every row of an ``n``-row library (deterministic in seed and n)."""
    weights = np.array([r.weight for r in ROUTES])
    cum = np.cumsum(weights / weights.sum())
    route = np.empty(n, dtype=np.int8)
    for b in range((n + BLOCK_SIZE - 1) // BLOCK_SIZE):
        lo, hi = b * BLOCK_SIZE, min(n, (b + 1) * BLOCK_SIZE)
        u = seeds.stream(seed, ROUTE, b).random(hi - lo)
        route[lo:hi] = np.minimum(np.searchsorted(cum, u, side="right"), len(ROUTES) - 1)
    pools = route_pools(table)
    sizes = space_sizes(table)
    synthon = np.full((n, 3), -1, dtype=np.int32)
    for r, pool in enumerate(pools):
        rows = np.flatnonzero(route == r)
        if len(rows) == 0:
            continue
        if len(rows) > sizes[r]:
            raise ValueError(f"world.conformations: {n} rows need {len(rows)} {ROUTES[r].name} molecules but the catalogue "
                             f"holds {sizes[r]}; valid: at most about {int(sizes[r] / ROUTES[r].weight):,} conformations")
        keys = seeds.stream(seed, SPACE.format(route=ROUTES[r].name)).integers(0, 2**63, 6, dtype=np.uint64)
        index = feistel(np.arange(len(rows), dtype=np.uint64), sizes[r], keys)
        # mixed radix: the last slot varies fastest
        for s in range(len(pool) - 1, -1, -1):
            synthon[rows, s] = pool[s][index % len(pool[s])]
            index //= len(pool[s])
    return Plan(route, synthon)


# --------------------------------------------------------------------------- splicing


def _renumber(text: str, depth: int) -> str:
    """Ring-closure digits of a spliced-in synthon moved to their own range (%d1-%d9 at depth d)."""
    if depth == 0:
        return text
    out = []
    for tok in _TOKEN.findall(text):
        if len(tok) == 1 and tok.isdigit():
            out.append(f"%{depth}{tok}")
        elif tok.startswith("%"):
            raise ValueError(f"synthon text {text!r} uses two-digit ring closures; not supported")
        else:
            out.append(tok)
    return "".join(out)


_CACHE: dict = {}


def _texts(table_digest: str, table: SynthonTable) -> list[list[str]]:
    key = ("texts", table_digest)
    if key not in _CACHE:
        _CACHE[key] = [[_renumber(t, d) for t in table.texts] for d in range(3)]
    return _CACHE[key]


def _join(parent_text: str, child_text: str) -> str:
    """Replace the parent's [*:2] dummy by the child's text, bonded by an explicit single bond."""
    pos = parent_text.find("[*:2]")
    if pos < 0:
        raise ValueError(f"synthon text {parent_text!r} has no [*:2] attachment")
    pre = parent_text[:pos]
    if pre.endswith("-"):
        pre = pre[:-1]
    return f"{pre}-{child_text}{parent_text[pos + 5:]}"


@dataclass
class Spliced:
    """The molecules of a task as flat tables in SMILES atom order (m = molecules, a = atoms, b = bonds)."""

    smiles: list  # str [m]
    atom_offset: np.ndarray  # int64 [m+1]
    assembly_index: np.ndarray  # int64 [a]: position of each written atom in assembly order (kernel output)
    z: np.ndarray  # int8 [a]
    charge: np.ndarray  # int8 [a]
    bits: np.ndarray  # uint8 [a]
    logp: np.ndarray  # float64 [a]
    weight: np.ndarray  # float64 [a]
    donor: np.ndarray  # int8 [a]
    acceptor: np.ndarray  # int8 [a]
    bond_offset: np.ndarray  # int64 [m+1]
    bonds: np.ndarray  # int64 [b, 3]: written indices i, j (molecule-local) and order


def splice(table: SynthonTable, synthon: np.ndarray) -> Spliced:
    """SMILES, atoms and bonds of molecules given their slot synthons [m, 3] (filled from the left).

    Written order: each child's text replaces its parent's ``[*:2]``, so a
    parent's atoms before its insertion point come first, then the child's
    (recursively), then the parent's remaining atoms.  Slot k's atom a is
    therefore written at ``before_k + a``, plus the atoms of the slots inside
    it when ``a >= insert_at``: closed forms, so every table below is built
    with whole-array numpy (only the SMILES strings are joined per molecule).
    """
    syn = np.asarray(synthon, dtype=np.int64).reshape(-1, 3)
    m = len(syn)
    valid = syn >= 0
    n_slots = valid.sum(axis=1)
    if m and (not valid[:, 0].all() or (valid[:, 1:] & ~valid[:, :-1]).any()):
        raise ValueError("synthon rows must fill their slots from the left (slot 0 the root)")
    safe = np.where(valid, syn, 0)
    ao = table.atom_offset.astype(np.int64)
    size = np.where(valid, ao[safe + 1] - ao[safe], 0)
    ends = np.cumsum(size, axis=1)
    start = ends - size  # first assembly-order index of each slot
    inner = ends[:, -1:] - ends  # atoms of the slots nested inside slot k
    split = np.where(valid, table.insert_at[safe], 0).astype(np.int64)
    rows = np.arange(m)
    split[rows, n_slots - 1] = size[rows, n_slots - 1]  # the innermost slot is written whole
    parent = valid & (np.arange(3) < (n_slots - 1)[:, None])
    if (split[parent] < 0).any():
        raise ValueError("a parent synthon has no insertion point (insert_at < 0)")
    before = np.cumsum(split, axis=1) - split  # atoms written ahead of slot k's first atom
    n_atoms = ends[:, -1]
    atom_offset = np.concatenate([[0], np.cumsum(n_atoms)]).astype(np.int64)

    # segments: the (molecule, slot) pairs in assembly order
    seg_row, seg_slot = np.nonzero(valid)
    seg_syn = syn[seg_row, seg_slot]
    seg_size = size[seg_row, seg_slot]
    seg_before, seg_split = before[seg_row, seg_slot], split[seg_row, seg_slot]
    seg_inner, seg_start = inner[seg_row, seg_slot], start[seg_row, seg_slot]

    def written(seg: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Molecule-local written index of atom ``a`` (synthon-local) of segment ``seg``."""
        return seg_before[seg] + a + np.where(a >= seg_split[seg], seg_inner[seg], 0)

    seg_of_atom = np.repeat(np.arange(len(seg_syn)), seg_size)
    a = np.arange(len(seg_of_atom)) - np.repeat(np.cumsum(seg_size) - seg_size, seg_size)
    mol_base = atom_offset[seg_row][seg_of_atom]
    assembly_index = np.empty(len(a), dtype=np.int64)
    assembly_index[mol_base + written(seg_of_atom, a)] = mol_base + seg_start[seg_of_atom] + a
    slot_atom = ao[seg_syn][seg_of_atom] + a  # the synthon table's atom, in assembly order
    src = slot_atom[assembly_index]

    # bonds: per slot its synthon's bonds, then (below the root) the bond to its parent
    bo = table.bond_offset.astype(np.int64)
    seg_nb = bo[seg_syn + 1] - bo[seg_syn]
    has_link = seg_slot > 0
    seg_nout = seg_nb + has_link
    seg_out = np.cumsum(seg_nout) - seg_nout
    bonds = np.empty((int(seg_nout.sum()), 3), dtype=np.int64)
    seg_of_bond = np.repeat(np.arange(len(seg_syn)), seg_nb)
    j = np.arange(len(seg_of_bond)) - np.repeat(np.cumsum(seg_nb) - seg_nb, seg_nb)
    b = table.bonds[bo[seg_syn][seg_of_bond] + j].astype(np.int64)
    at = seg_out[seg_of_bond] + j
    bonds[at, 0] = written(seg_of_bond, b[:, 0])
    bonds[at, 1] = written(seg_of_bond, b[:, 1])
    bonds[at, 2] = b[:, 2]
    child = np.flatnonzero(has_link)  # its parent is the segment before it (same molecule, slot - 1)
    at = seg_out[child] + seg_nb[child]
    bonds[at, 0] = written(child - 1, table.down_attach[seg_syn[child - 1]].astype(np.int64))
    bonds[at, 1] = written(child, table.up_attach[seg_syn[child]].astype(np.int64))
    bonds[at, 2] = 1
    bond_offset = np.concatenate([[0], np.cumsum(np.bincount(seg_row, weights=seg_nout, minlength=m))]).astype(np.int64)

    texts = _texts(table.digest, table)
    smiles = []
    for row, k_last in zip(syn.tolist(), (n_slots - 1).tolist()):
        text = texts[k_last][row[k_last]]
        for k in range(k_last - 1, -1, -1):
            text = _join(texts[k][row[k]], text)
        smiles.append(text)
    return Spliced(
        smiles=smiles, atom_offset=atom_offset, assembly_index=assembly_index,
        z=table.z[src], charge=table.charge[src], bits=table.bits[src], logp=table.logp[src], weight=table.weight[src],
        donor=table.donor[src], acceptor=table.acceptor[src], bond_offset=bond_offset, bonds=bonds,
    )


def torsion_table(route: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rotations tried about each new bond: float64 [m, 2, 3] and counts int64 [m, 2]."""
    per_route_t = np.zeros((len(ROUTES), 2, 3))
    per_route_n = np.ones((len(ROUTES), 2), dtype=np.int64)
    for r, rt in enumerate(ROUTES):
        for k, name in enumerate(rt.rules):
            tors = RULES[RULE_INDEX[name]].torsions
            per_route_t[r, k, :len(tors)] = tors
            per_route_n[r, k] = len(tors)
    return per_route_t[route], per_route_n[route]


def conformer_choice(seed: int, lo: int, hi: int, synthon: np.ndarray, table: SynthonTable) -> np.ndarray:
    """Each slot's preferred conformer (uniform over the synthon's conformers), rows lo..hi."""
    out = np.zeros(synthon.shape, dtype=np.int64)
    n_conf = np.diff(table.conf_offset)
    first = lo // BLOCK_SIZE
    for b in range(first, (hi - 1) // BLOCK_SIZE + 1):
        b_lo, b_hi = max(lo, b * BLOCK_SIZE), min(hi, (b + 1) * BLOCK_SIZE)
        # draws for the whole block, so a row's value does not depend on the task's bounds
        u = seeds.stream(seed, CONFORMER, b).random((BLOCK_SIZE, 3))
        rows = np.arange(b_lo, b_hi)
        part = synthon[rows - lo]
        valid = part >= 0
        counts = np.where(valid, n_conf[np.maximum(part, 0)], 1)
        out[rows - lo] = np.where(valid, np.floor(u[rows - b * BLOCK_SIZE] * counts).astype(np.int64), 0)
    return out
