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


def _bond_lists(table_digest: str, table: SynthonTable) -> list[np.ndarray]:
    key = ("bonds", table_digest)
    if key not in _CACHE:
        _CACHE[key] = [table.bonds[table.bond_offset[s]:table.bond_offset[s + 1]].astype(np.int64) for s in range(table.n)]
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
    """SMILES, atoms and bonds of molecules given their slot synthons [m, 3]."""
    texts = _texts(table.digest, table)
    bond_lists = _bond_lists(table.digest, table)
    ao = table.atom_offset
    smiles = []
    order_parts = []
    bond_parts = []
    atom_offset = [0]
    bond_offset = [0]
    for row in synthon:
        slots = [int(s) for s in row if s >= 0]
        sizes = [int(ao[s + 1] - ao[s]) for s in slots]
        starts = np.concatenate([[0], np.cumsum(sizes)])[:-1]
        # the written order, innermost first: child text spliced into its parent's [*:2]
        order = np.arange(starts[-1], starts[-1] + sizes[-1])
        text = texts[len(slots) - 1][slots[-1]]
        for k in range(len(slots) - 2, -1, -1):
            s = slots[k]
            own = np.arange(starts[k], starts[k] + sizes[k])
            ins = int(table.insert_at[s])
            order = np.concatenate([own[:ins], order, own[ins:]])
            text = _join(texts[k][s], text)
        smiles.append(text)
        written_of = np.empty(len(order), dtype=np.int64)
        written_of[order] = np.arange(len(order))
        bonds = []
        for k, s in enumerate(slots):
            b = bond_lists[s]
            bonds.append(np.stack([written_of[b[:, 0] + starts[k]], written_of[b[:, 1] + starts[k]], b[:, 2]], axis=1))
            if k > 0:
                parent = slots[k - 1]
                bonds.append(np.array([[written_of[starts[k - 1] + table.down_attach[parent]],
                                        written_of[starts[k] + table.up_attach[s]], 1]]))
        bonds = np.concatenate(bonds)
        order_parts.append(order)
        bond_parts.append(bonds)
        atom_offset.append(atom_offset[-1] + len(order))
        bond_offset.append(bond_offset[-1] + len(bonds))
    atom_offset = np.array(atom_offset, dtype=np.int64)
    local = np.concatenate(order_parts).astype(np.int64)
    # assembly order positions are molecule-local: make them global
    assembly_index = local + np.repeat(atom_offset[:-1], np.diff(atom_offset))
    # the synthon atom of each written atom, for the per-atom tables
    slot_atom = np.concatenate([
        np.concatenate([np.arange(ao[s], ao[s + 1]) for s in row if s >= 0]) for row in synthon
    ]).astype(np.int64)
    src = slot_atom[assembly_index]
    return Spliced(
        smiles=smiles, atom_offset=atom_offset, assembly_index=assembly_index,
        z=table.z[src], charge=table.charge[src], bits=table.bits[src], logp=table.logp[src], weight=table.weight[src],
        donor=table.donor[src], acceptor=table.acceptor[src],
        bond_offset=np.array(bond_offset, dtype=np.int64), bonds=np.concatenate(bond_parts).astype(np.int64),
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
