"""Building blocks and synthons: the catalogue's cores and handles zipped into building
blocks (RDKit ``molzip``), each building block prepared for one rule by running the rule with a
small probe partner, and the probe product embedded (ETKDG + MMFF94) so a synthon's attachment
geometry is the real product's; the pharmacophore bits and atom properties the hidden score
reads.  ``fragments`` turns the records into the committed table."""
from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .catalogue import (ALIPHATIC_CORES, AROMATIC_CORES, CYCLIC_AMINES, EMBED_SEED, F_ACCEPTOR, F_AROMATIC, F_DONOR, F_HYDROPHOBE, F_NEGATIVE, F_POSITIVE, HANDLES, LINKER_AMINO_ACIDS, LINKER_BORONIC_ACIDS, MAX_HEAVY, ROLE_QUOTA, ROUTES, RULES, RULE_INDEX, Rule, SNAR_CORES, SUBSTITUENTS)

def _zip(core: str, handle: str, subs: tuple) -> str | None:
    from rdkit import Chem

    frag = core
    for pos, sub in zip(("[*:2]", "[*:3]"), subs):
        if pos not in frag:
            continue
        frag = frag.replace(pos, "[H]" if sub is None else sub)
    for pos in ("[*:2]", "[*:3]"):
        frag = frag.replace(pos, "[H]")
    try:
        mol = Chem.molzip(Chem.MolFromSmiles(f"{frag}.{handle}" if handle else frag))
        if mol is None:
            return None
        mol = Chem.RemoveHs(mol)
        Chem.SanitizeMol(mol)
    except Exception:
        return None
    if any(a.GetAtomicNum() == 0 for a in mol.GetAtoms()):
        return None
    return Chem.MolToSmiles(mol)


def _variants(cores, handles, max_heavy: int) -> list[str]:
    from rdkit import Chem

    out = []
    options = (None,) + tuple(SUBSTITUENTS)
    for core in cores:
        for handle in handles:
            for s2 in options:
                for s3 in (None,) + tuple(SUBSTITUENTS[:4]):
                    if s3 is not None and "[*:3]" not in core:
                        continue
                    if s2 is not None and "[*:2]" not in core:
                        continue
                    smi = _zip(core, handle, (s2, s3))
                    if smi and Chem.MolFromSmiles(smi).GetNumHeavyAtoms() <= max_heavy:
                        out.append(smi)
    return sorted(set(out))


def _seeded_pick(items: list[str], k: int, salt: str) -> list[str]:
    """A fixed selection of ``k`` items: those with the smallest salted hashes, in sorted order."""
    keyed = sorted(items, key=lambda s: hashlib.sha256(f"{salt}:{s}".encode()).digest())
    return sorted(keyed[:k])


def building_blocks() -> dict[str, list[str]]:
    """Canonical SMILES of every building block, by role (deterministic)."""
    from rdkit import Chem

    aromatic = [c for c in AROMATIC_CORES]
    anywhere = aromatic + list(ALIPHATIC_CORES)
    made = {
        "acid": _variants(anywhere, HANDLES["acid"], MAX_HEAVY),
        "amine": _variants(anywhere, HANDLES["amine"], MAX_HEAVY),
        "sulfonyl": _variants(aromatic, HANDLES["sulfonyl"], MAX_HEAVY),
        "aldehyde": _variants(anywhere, HANDLES["aldehyde"], MAX_HEAVY),
        "aryl_bromide": _variants(aromatic, HANDLES["aryl_bromide"], MAX_HEAVY),
        "boronic": _variants(aromatic, HANDLES["boronic"], MAX_HEAVY),
        "phenol": _variants(aromatic, HANDLES["phenol"], MAX_HEAVY),
        "alkyl_bromide": _variants(anywhere, HANDLES["alkyl_bromide"], MAX_HEAVY),
        "aryl_chloride": _variants(SNAR_CORES, ("",), MAX_HEAVY),
        "amino_acid": sorted({Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in LINKER_AMINO_ACIDS}),
        "boronic_acid_linker": sorted({Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in LINKER_BORONIC_ACIDS}),
    }
    # cyclic secondary amines join the amine pool as they are
    made["amine"] = sorted(set(made["amine"]) | {Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in CYCLIC_AMINES})
    # a building block is kept only if it reacts exactly once in every rule its role takes part in
    variants: dict = {}
    for role, variant in synthon_variants():
        variants.setdefault(role, []).append(variant)
    usable = {role: [s for s in items if all(prepare_synthon(role, s, v) is not None for v in variants.get(role, ()))]
              for role, items in made.items()}
    return {role: _seeded_pick(items, ROLE_QUOTA[role], role) for role, items in usable.items()}


# --------------------------------------------------------------------------- synthons


@dataclass
class SynthonSpec:
    """A building block prepared for one slot of one route position."""

    role: str  # building-block role
    variant: str  # "parent:<rule>", "child:<rule>" or "linker:<rule_up>:<rule_down>"
    block: str  # the building block's SMILES
    capped: object  # RDKit Mol: the probe product(s)
    synthon_atoms: list  # capped-mol indices of the synthon's own atoms
    up: tuple | None  # (attachment atom, cap atom, cap neighbour) toward the parent, capped-mol indices
    down: tuple | None  # the same toward the child


@lru_cache(maxsize=None)
def _rxn(smarts: str):
    from rdkit import RDLogger
    from rdkit.Chem import rdChemReactions

    RDLogger.DisableLog("rdApp.*")

    rxn = rdChemReactions.ReactionFromSmarts(smarts)
    rxn.Initialize()
    return rxn


def _react(rule: Rule, parent_mol, child_mol):
    """The unique product of ``rule`` on (parent, child), with reactant origins; None if not unique."""
    from rdkit import Chem

    products = _rxn(rule.smarts).RunReactants((parent_mol, child_mol))
    seen = {}
    for (p,) in products:
        try:
            Chem.SanitizeMol(p)
        except Exception:
            continue
        seen.setdefault(Chem.MolToSmiles(p), p)
    if len(seen) != 1:
        return None
    return next(iter(seen.values()))


def _origin(mol) -> list:
    """(reactant index, reactant atom index) of each product atom."""
    out = []
    for atom in mol.GetAtoms():
        props = atom.GetPropsAsDict()
        out.append((int(props.get("react_idx", -1)), int(props.get("react_atom_idx", -1))))
    return out


def _cap_triplet(mol, own: set, cap_atoms: set):
    """(attachment, cap, cap neighbour) for the one bond between ``own`` and ``cap_atoms``."""
    bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
    cross = [(i, j) if i in own else (j, i) for i, j in bonds if (i in own) != (j in own) and (i in cap_atoms or j in cap_atoms)]
    if len(cross) != 1:
        return None
    a, c = cross[0]
    nbrs = sorted(n.GetIdx() for n in mol.GetAtomWithIdx(c).GetNeighbors() if n.GetIdx() != a and n.GetAtomicNum() > 1)
    return (a, c, nbrs[0] if nbrs else -1)


def _probe_mol(smiles: str):
    from rdkit import Chem

    return Chem.MolFromSmiles(smiles)


def prepare_synthon(role: str, block: str, variant: str) -> SynthonSpec | None:
    """Run the variant's rule(s) with probe partners on ``block``; None when the
    block does not react exactly once per rule (such blocks are left out)."""
    from rdkit import Chem

    mol = Chem.MolFromSmiles(block)
    kind, *names = variant.split(":")
    rules = [RULES[RULE_INDEX[n]] for n in names]
    if kind == "parent":
        (rule,) = rules
        prod = _react(rule, mol, _probe_mol(rule.probes[0]))
        if prod is None:
            return None
        origin = _origin(prod)
        own = {i for i, (r, _) in enumerate(origin) if r == 0}
        cap = set(range(prod.GetNumAtoms())) - own
        down = _cap_triplet(prod, own, cap)
        return None if down is None else SynthonSpec(role, variant, block, prod, sorted(own), None, down)
    if kind == "child":
        (rule,) = rules
        prod = _react(rule, _probe_mol(rule.probes[1]), mol)
        if prod is None:
            return None
        origin = _origin(prod)
        own = {i for i, (r, _) in enumerate(origin) if r == 1}
        cap = set(range(prod.GetNumAtoms())) - own
        up = _cap_triplet(prod, own, cap)
        return None if up is None else SynthonSpec(role, variant, block, prod, sorted(own), up, None)
    # linker: first the rule toward the parent (the linker is its child), then toward the child
    rule_up, rule_down = rules
    first = _react(rule_up, _probe_mol(rule_up.probes[1]), mol)
    if first is None:
        return None
    o1 = _origin(first)
    own1 = [i for i, (r, _) in enumerate(o1) if r == 1]
    for atom in first.GetAtoms():
        atom.SetIntProp("stage1", 1 if atom.GetIdx() in own1 else 0)
    second = _react(rule_down, first, _probe_mol(rule_down.probes[0]))
    if second is None:
        return None
    o2 = _origin(second)
    own = set()
    for i, (r, j) in enumerate(o2):
        if r == 0 and first.GetAtomWithIdx(j).GetIntProp("stage1") == 1:
            own.add(i)
    up_cap = {i for i, (r, j) in enumerate(o2) if r == 0 and i not in own}
    down_cap = {i for i, (r, _) in enumerate(o2) if r == 1}
    up = _cap_triplet(second, own, up_cap)
    down = _cap_triplet(second, own, down_cap)
    if up is None or down is None or up[0] == down[0]:
        return None
    return SynthonSpec(role, variant, block, second, sorted(own), up, down)


def synthon_variants() -> list[tuple[str, str]]:
    """(role, variant) pairs needed by the routes, in a fixed order."""
    out = []
    for route in ROUTES:
        if len(route.roles) == 2:
            out += [(route.roles[0], f"parent:{route.rules[0]}"), (route.roles[1], f"child:{route.rules[0]}")]
        else:
            out += [(route.roles[0], f"parent:{route.rules[0]}"),
                    (route.roles[1], f"linker:{route.rules[0]}:{route.rules[1]}"),
                    (route.roles[2], f"child:{route.rules[1]}")]
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------- typing and properties


_FEATURE_SMARTS = {
    F_DONOR: ("[#7;!H0;!$([#7+0]-[#6]=[#7+])]", "[#8;H1]"),
    F_ACCEPTOR: ("[#8;!$([#8]-[#6](=O)-[#7,#8])]", "[n;X2;H0]", "[#7;X1]", "[NX3;H0,H1,H2;!$(N-[a,C,S]=[O,N,S]);!$(N-a);!$(N-S(=O))]"),
    F_HYDROPHOBE: ("[C;!$(C~[#7,#8,#9,S]);!$(C=O)]", "[c;!$(c~[#7,#8])]", "[Cl,Br,I]", "[S;X2]", "[CX4](F)(F)F"),
    F_AROMATIC: ("a",),
    F_POSITIVE: ("[NX3;H0,H1,H2;!$(N-[a,C,S,P]=[O,N,S]);!$(N-a);!$(N-[CX3]);!$(N-S);!$(N#*);!$(N-C#N);!$(N-[#7,#8])]",),
    F_NEGATIVE: ("[CX3](=O)[OX2H1]", "[OX2H1]-[CX3]=O"),
}


@lru_cache(maxsize=None)
def _feature_patterns():
    from rdkit import Chem

    return {f: [Chem.MolFromSmarts(s) for s in pats] for f, pats in _FEATURE_SMARTS.items()}


def feature_bits(mol) -> np.ndarray:
    """uint8 bit mask of pharmacophore features per atom of ``mol`` (bit f = FEATURES[f])."""
    bits = np.zeros(mol.GetNumAtoms(), dtype=np.uint8)
    for f, pats in _feature_patterns().items():
        for pat in pats:
            for match in mol.GetSubstructMatches(pat):
                bits[match[0]] |= np.uint8(1 << f)
    return bits


def atom_properties(mol) -> dict:
    """Per-atom additive contributions (Crippen logP, weight with implicit H,
    Lipinski donors and acceptors, ring membership) of ``mol``."""
    from rdkit.Chem import Descriptors, rdMolDescriptors

    contribs = rdMolDescriptors._CalcCrippenContribs(mol)
    logp = np.array([c[0] for c in contribs])
    weight = np.array([a.GetMass() + a.GetTotalNumHs() * 1.008 for a in mol.GetAtoms()])
    donor = np.array([(a.GetAtomicNum() in (7, 8)) * min(a.GetTotalNumHs(), 1) for a in mol.GetAtoms()], dtype=np.int8)
    acceptor = np.array([a.GetAtomicNum() in (7, 8) for a in mol.GetAtoms()], dtype=np.int8)
    del Descriptors
    return {"logp": logp, "weight": weight, "donor": donor, "acceptor": acceptor}


# --------------------------------------------------------------------------- embedding


def _embed(capped, n_conf: int, seed: int) -> np.ndarray | None:
    """Heavy-atom coordinates [n_conf, atoms, 3] of the capped molecule (ETKDGv3 + MMFF94)."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.Mol(capped))
    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    params.pruneRmsThresh = 0.5
    params.numThreads = 1
    ids = list(AllChem.EmbedMultipleConfs(mol, numConfs=n_conf, params=params))
    if not ids:
        return None
    AllChem.MMFFOptimizeMoleculeConfs(mol, numThreads=1, maxIters=2000)
    heavy = [a.GetIdx() for a in mol.GetAtoms() if a.GetAtomicNum() > 1]
    out = np.array([mol.GetConformer(c).GetPositions()[heavy] for c in ids])
    return out


def _n_conformers(capped) -> int:
    from rdkit.Chem import rdMolDescriptors

    rot = rdMolDescriptors.CalcNumRotatableBonds(capped)
    return 1 if rot <= 1 else 3


_RING = re.compile(r"(\[[^\]]*\]|%\d\d|\d|.)")


def _written(mol, root: int) -> tuple[str, list[int]]:
    """SMILES rooted at ``root`` and the written order of the atoms."""
    from rdkit import Chem

    smi = Chem.MolToSmiles(mol, rootedAtAtom=root, canonical=True)
    order = [int(x) for x in mol.GetProp("_smilesAtomOutputOrder").strip("[],").split(",") if x != ""]
    return smi, order


def synthon_record(spec: SynthonSpec, index: int) -> dict | None:
    """Everything a build needs of one synthon (strings, atoms, bonds, conformers)."""
    from rdkit import Chem

    capped = spec.capped
    own = spec.synthon_atoms
    # The synthon with dummies: [*:1] replaces the cap toward the parent, [*:2] the cap toward the child.
    rw = Chem.RWMol(capped)
    keep = set(own)
    dummies = {}
    for label, trip in ((1, spec.up), (2, spec.down)):
        if trip is None:
            continue
        cap = trip[1]
        dummies[label] = cap
        keep.add(cap)
    for label, cap in dummies.items():
        atom = rw.GetAtomWithIdx(cap)
        atom.SetAtomicNum(0)
        atom.SetFormalCharge(0)
        atom.SetNoImplicit(True)
        atom.SetNumExplicitHs(0)
        atom.SetIsAromatic(False)
        atom.SetAtomMapNum(label)
    for b in list(rw.GetBonds()):
        i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
        if (i in dummies.values() or j in dummies.values()) and b.GetIsAromatic():
            b.SetIsAromatic(False)
            b.SetBondType(Chem.BondType.SINGLE)
    remove = sorted(set(range(capped.GetNumAtoms())) - keep, reverse=True)
    old_index = [i for i in range(capped.GetNumAtoms()) if i in keep]
    for i in remove:
        rw.RemoveAtom(i)
    syn = rw.GetMol()
    syn.UpdatePropertyCache(strict=False)
    new_of_old = {old: new for new, old in enumerate(old_index)}
    # Written order: children are rooted at their parent-side dummy; parents at atom 0's canonical start.
    if 1 in dummies:
        smi, order = _written(syn, new_of_old[dummies[1]])
    else:
        smi, order = _written(syn, -1)
    tokens = _RING.findall(smi)
    # drop the root dummy token of a child; locate the child-side dummy token
    atoms_written = [old_index[i] for i in order]  # capped-mol indices in written order (dummies included)
    real_order = [c for c in atoms_written if c not in dummies.values()]
    if 1 in dummies:
        assert tokens[0] == "[*:1]", smi
        tokens = tokens[1:]
        if tokens and tokens[0] in ("-", "="):
            tokens = tokens[1:]
    insert_at = -1
    if 2 in dummies:
        pos = atoms_written.index(dummies[2])
        insert_at = sum(1 for c in atoms_written[:pos] if c not in dummies.values())
    text = "".join(tokens)
    # Kekulé bonds of the synthon in written order (the product's joining bonds are single)
    kek = Chem.Mol(capped)
    Chem.Kekulize(kek, clearAromaticFlags=True)
    pos_of = {c: k for k, c in enumerate(real_order)}
    bonds = []
    for b in kek.GetBonds():
        i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
        if i in pos_of and j in pos_of:
            bonds.append((pos_of[i], pos_of[j], int(b.GetBondTypeAsDouble())))
    bits = feature_bits(capped)[real_order]
    props = atom_properties(capped)
    n_conf = _n_conformers(capped)
    coords = _embed(capped, n_conf, EMBED_SEED + index)
    if coords is None:
        return None

    def trip(t):
        if t is None:
            return [-1, -1, -1], np.zeros((coords.shape[0], 2, 3))
        attach, cap, nxt = t
        heavy_index = {a.GetIdx(): k for k, a in enumerate(a for a in capped.GetAtoms())}
        ref = np.stack([coords[:, heavy_index[cap]], coords[:, heavy_index[nxt]] if nxt >= 0 else coords[:, heavy_index[cap]]], axis=1)
        return [pos_of[attach], -1, 1 if nxt >= 0 else 0], ref

    up_idx, up_ref = trip(spec.up)
    down_idx, down_ref = trip(spec.down)
    # the attachment atom's own heavy neighbour inside the synthon (torsion reference for a child)
    def own_neighbour(t):
        if t is None:
            return -1
        attach = t[0]
        nbrs = sorted(pos_of[n.GetIdx()] for n in capped.GetAtomWithIdx(attach).GetNeighbors() if n.GetIdx() in pos_of)
        return nbrs[0] if nbrs else -1

    return {
        "role": spec.role, "variant": spec.variant, "block": spec.block, "text": text,
        "insert_at": insert_at,
        "z": np.array([capped.GetAtomWithIdx(c).GetAtomicNum() for c in real_order], dtype=np.int8),
        "charge": np.array([capped.GetAtomWithIdx(c).GetFormalCharge() for c in real_order], dtype=np.int8),
        "bits": bits, "bonds": np.array(bonds, dtype=np.int16).reshape(-1, 3),
        "logp": props["logp"][real_order], "weight": props["weight"][real_order],
        "donor": props["donor"][real_order], "acceptor": props["acceptor"][real_order],
        "coords": coords[:, real_order].astype(np.float64),
        "up_attach": up_idx[0], "up_ref": up_ref, "up_has_next": up_idx[2], "up_neighbour": own_neighbour(spec.up),
        "down_attach": down_idx[0], "down_ref": down_ref, "down_has_next": down_idx[2],
        "rings": int(capped.GetRingInfo().NumRings()),
    }


def build_records(progress: bool = True, per_variant: int | None = None) -> list[dict]:
    blocks = building_blocks()
    records = []
    for role, variant in synthon_variants():
        kept = 0
        for smi in blocks[role][:per_variant]:
            spec = prepare_synthon(role, smi, variant)
            if spec is None:
                continue
            rec = synthon_record(spec, len(records))
            if rec is None:
                continue
            records.append(rec)
            kept += 1
        if progress:
            print(f"{role:>14} {variant:<36} {kept:>4} synthons", file=sys.stderr, flush=True)
    return records
