"""The screening catalogue's definition: ring cores, substituents, reactive handles, the
reaction rules and the routes — the fixed, purchasable-style chemistry every screening world
draws its molecules from (see ``fragments`` for the whole pipeline from here to the embedded
synthon table)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
FRAGMENTS_NPZ = DATA_DIR / "fragments.npz"
FRAGMENTS_JSON = DATA_DIR / "fragments.json"
EMBED_SEED = 0xD0C0  # ETKDG's random seed: part of the catalogue's identity
FRAGMENTS_VERSION = 1

# Pharmacophore feature types (bit positions of ``SynthonTable.ftype``); the
# hidden pockets place feature points of these types.
FEATURES = ("donor", "acceptor", "hydrophobe", "aromatic", "positive", "negative")
F_DONOR, F_ACCEPTOR, F_HYDROPHOBE, F_AROMATIC, F_POSITIVE, F_NEGATIVE = range(6)

# --------------------------------------------------------------------------- building blocks

# Ring cores: [*:1] is the handle position, [*:2]/[*:3] optional substituent positions.
AROMATIC_CORES = (
    "[*:1]c1ccc([*:2])cc1", "[*:1]c1cccc([*:2])c1", "[*:1]c1ccccc1[*:2]", "[*:1]c1ccc([*:2])c([*:3])c1",
    "[*:1]c1ccc([*:2])nc1", "[*:1]c1cccnc1[*:2]", "[*:1]c1ccnc([*:2])c1", "[*:1]c1cnc([*:2])nc1",
    "[*:1]c1ccc([*:2])s1", "[*:1]c1csc([*:2])c1", "[*:1]c1ccc([*:2])o1", "[*:1]c1nc([*:2])cs1",
    "[*:1]c1cnn(C)c1", "[*:1]c1cc([*:2])n(C)n1", "[*:1]c1ccc2[nH]ccc2c1", "[*:1]c1ccc2occc2c1",
    "[*:1]c1ccc2ncccc2c1", "[*:1]c1ccc2ccccc2c1", "[*:1]c1ccc2OCOc2c1", "[*:1]c1ccc2c(c1)CCO2",
    "[*:1]c1cnccn1", "[*:1]c1ccc2nccn2c1", "[*:1]c1cc([*:2])on1", "[*:1]c1ccc(F)c([*:2])c1",
)
ALIPHATIC_CORES = (
    "[*:1]C1CC1", "[*:1]C1CCC1", "[*:1]C1CCCC1", "[*:1]C1CCC([*:2])CC1", "[*:1]C1CCOCC1", "[*:1]C1CCN(C)CC1",
    "[*:1]C1COC1", "[*:1]CC([*:2])C", "[*:1]C(C)(C)[*:2]", "[*:1]CCOC", "[*:1]C1CCCO1", "[*:1]CC(F)(F)F",
)
SUBSTITUENTS = ("F", "Cl", "C", "OC", "C(F)(F)F", "C#N", "CC", "OC(F)F")  # written from the ring atom outwards
CYCLIC_AMINES = (  # secondary amines whose ring NH is the handle
    "C1CCNCC1", "C1CNCCN1C", "C1COCCN1", "C1CCNC1", "C1CNC1", "C1CC2(CN1)COC2", "CC1CCNCC1", "OC1CCNCC1",
    "COC1CCNC1", "FC1(F)CCNCC1", "c1ccc(cc1)N1CCNCC1", "C1CCC2(CC1)CNC2", "CN(C)C1CCNC1", "O=C1CNCCN1",
    "c1ccc(CN2CCNCC2)cc1", "CC(C)N1CCNCC1", "C1CNCC2=CC=CC=C12", "c1cnc(nc1)N1CCNCC1",
)
HANDLES = {
    "acid": ("[*:1]C(=O)O", "[*:1]CC(=O)O"),
    "amine": ("[*:1]N", "[*:1]CN", "[*:1]CCN", "[*:1]NC"),
    "sulfonyl": ("[*:1]S(=O)(=O)Cl",),
    "aldehyde": ("[*:1]C=O",),
    "aryl_bromide": ("[*:1]Br",),
    "boronic": ("[*:1]B(O)O",),
    "phenol": ("[*:1]O",),
    "alkyl_bromide": ("[*:1]CBr", "[*:1]CCBr"),
}
# SNAr electrophiles: activated heteroaryl chlorides (the Cl is the handle).
SNAR_CORES = (
    "Clc1ncccn1", "Clc1ccnc(n1)[*:2]", "Clc1nccc(n1)[*:2]", "Clc1ncc([*:2])cn1", "Clc1ccc([*:2])nn1",
    "Clc1nc2ccccc2o1", "Clc1nc2ccccc2s1", "Clc1ncnc2ccccc12", "Clc1ncc([*:2])s1", "Clc1cnc([*:2])cn1",
    "Clc1ccc(cn1)C#N", "Clc1ccc(cn1)C(F)(F)F", "Clc1ncnc2[nH]ccc12", "Clc1nc([*:2])cs1",
)
LINKER_AMINO_ACIDS = (  # amine handle (child side) and acid handle (parent side)
    "NCC(=O)O", "NC(C)C(=O)O", "NCCC(=O)O", "N1CCC(CC1)C(=O)O", "N1CCCC1C(=O)O", "Nc1ccc(cc1)C(=O)O",
    "Nc1cccc(c1)C(=O)O", "NCc1ccc(cc1)C(=O)O", "NCc1cccc(c1)C(=O)O", "N1CC(C1)C(=O)O", "NC1CCC(CC1)C(=O)O",
    "NCC1CCN(CC1)C(=O)O", "Nc1ccc(nc1)C(=O)O", "Nc1cc(ccn1)C(=O)O", "NC(CC(C)C)C(=O)O", "NC(CO)C(=O)O",
    "N1CCN(CC1)CC(=O)O", "NCCOCC(=O)O", "Nc1ccc(F)c(c1)C(=O)O", "NCc1ccc(o1)C(=O)O", "N1CCC(C1)C(=O)O",
    "Nc1ccc(s1)C(=O)O", "NC1(CC1)C(=O)O", "NCc1cc(ccn1)C(=O)O", "NC(C(C)C)C(=O)O", "NC(Cc1ccccc1)C(=O)O",
    "NCCCC(=O)O", "N1CCOC(C1)C(=O)O", "NC1CCN(CC1)C(=O)O", "NC1CC(C1)C(=O)O", "NCc1ccc(s1)C(=O)O",
    "NCc1cnc(o1)C(=O)O", "NC(C)(C)C(=O)O", "NCC(F)(F)C(=O)O", "N1CCC(F)(CC1)C(=O)O", "NCc1ccc(F)c(c1)C(=O)O",
    "N1CC2(C1)CC(C2)C(=O)O", "NC1CCOC1C(=O)O", "NCCc1ccc(cc1)C(=O)O", "NCc1cccc(n1)C(=O)O", "NC(C1CC1)C(=O)O",
    "N1CCC(CC1)CC(=O)O", "NCC1CCC(CC1)C(=O)O", "NC1CCCC1C(=O)O", "NCc1csc(n1)C(=O)O", "NCc1ccc(o1)CC(=O)O",
)
LINKER_BORONIC_ACIDS = (  # boronic acid handle (Suzuki child side) and acid handle (amide parent side)
    "OB(O)c1ccc(cc1)C(=O)O", "OB(O)c1cccc(c1)C(=O)O", "OB(O)c1ccc(cc1F)C(=O)O", "OB(O)c1ccc(cc1C)C(=O)O",
    "OB(O)c1cc(cc(F)c1)C(=O)O", "OB(O)c1ccc(nc1)C(=O)O", "OB(O)c1ccc(s1)C(=O)O", "OB(O)c1ccc(o1)C(=O)O",
    "OB(O)c1ccc(CC(=O)O)cc1", "OB(O)c1ccc(CCC(=O)O)cc1", "OB(O)c1cc(ccc1OC)C(=O)O", "OB(O)c1cnc(nc1)C(=O)O",
    "OB(O)c1cc(cs1)C(=O)O", "OB(O)c1ccc2cc(ccc2c1)C(=O)O", "OB(O)c1ccc(cc1Cl)C(=O)O", "OB(O)c1cccc(CC(=O)O)c1",
    "OB(O)c1ccc(OCC(=O)O)cc1", "OB(O)c1ccc(cn1)C(=O)O",
)
MAX_HEAVY = 14  # building blocks of a screening catalogue are small: products stay drug-like
MAX_HEAVY_LINKER = 12
ROLE_QUOTA = {  # building blocks kept per role (a fixed, seeded selection when more are made)
    "acid": 220, "amine": 260, "sulfonyl": 90, "aldehyde": 110, "aryl_bromide": 150, "boronic": 150,
    "phenol": 80, "alkyl_bromide": 90, "aryl_chloride": 60, "amino_acid": 40, "boronic_acid_linker": 18,
}

# --------------------------------------------------------------------------- reaction rules


@dataclass(frozen=True)
class Rule:
    """One reaction: ``smarts`` joins reactant 0 (the parent's role) and reactant 1 (the child's).

    ``probes`` are the small partners used to derive each side's synthon:
    probes[0] reacts as reactant 1 with a parent building block, probes[1] as
    reactant 0 with a child.  ``torsions`` are the rotations (degrees) tried
    about the new bond when a product is assembled (conjugated bonds keep the
    probe's plane; single bonds between sp3 centres take the three staggered
    positions).
    """

    name: str
    smarts: str
    parent: str
    child: str
    probes: tuple
    torsions: tuple


# a primary or secondary aliphatic amine (not an amide, aniline, hydrazine or enamine), mapped as atom 3
_AMINE = "[NX3;H2,H1;!$(N-[C,S]=[O,N]);!$(N-a);!$(N-[#7,#8]);!$(N-C=C):3]"
RULES = (
    Rule("amide", "[C:1](=[O:2])[OX2H1].%s>>[C:1](=[O:2])[N:3]" % _AMINE,
         "acid", "amine", ("CN", "CC(=O)O"), (0.0, 180.0)),
    Rule("sulfonamide", "[S:1](=[O:2])(=[O:4])Cl.%s>>[S:1](=[O:2])(=[O:4])[N:3]" % _AMINE,
         "sulfonyl", "amine", ("CN", "CS(=O)(=O)Cl"), (0.0, 120.0, 240.0)),
    Rule("reductive_amination", "[CX3H1:1](=O)[#6:2].%s>>[CH2:1]([#6:2])[N:3]" % _AMINE,
         "aldehyde", "amine", ("CN", "CC=O"), (0.0, 120.0, 240.0)),
    Rule("snar", "[c:1]Cl.%s>>[c:1][N:3]" % _AMINE,
         "aryl_chloride", "amine", ("CN", "Clc1ncccn1"), (0.0, 180.0)),
    Rule("suzuki", "[c:1]Br.[c:2]B(O)O>>[c:1]-[c:2]", "aryl_bromide", "boronic",
         ("OB(O)c1ccccc1", "Brc1ccccc1"), (0.0, 180.0)),
    Rule("ether", "[c:1][OX2H1:2].[CH2:3]Br>>[c:1][O:2][CH2:3]", "phenol", "alkyl_bromide",
         ("CCBr", "Oc1ccccc1"), (0.0, 120.0, 240.0)),
)
RULE_INDEX = {r.name: i for i, r in enumerate(RULES)}


@dataclass(frozen=True)
class Route:
    """How a product is put together: two synthons (parent, child) or three
    (parent, linker, child).  ``rules`` name the bond(s); ``roles`` the synthon
    kinds in slot order; ``weight`` the route's share of a library."""

    name: str
    rules: tuple
    roles: tuple
    weight: float


ROUTES = (
    # two-component routes: shares below ~80 % of each route's space at 1,000,000 molecules
    Route("amide", ("amide",), ("acid", "amine"), 0.045),
    Route("sulfonamide", ("sulfonamide",), ("sulfonyl", "amine"), 0.018),
    Route("reductive_amination", ("reductive_amination",), ("aldehyde", "amine"), 0.022),
    Route("snar", ("snar",), ("aryl_chloride", "amine"), 0.012),
    Route("suzuki", ("suzuki",), ("aryl_bromide", "boronic"), 0.018),
    Route("ether", ("ether",), ("phenol", "alkyl_bromide"), 0.005),
    # acid -> amino acid linker (its amine) ; linker's acid -> amine
    Route("amide_amide", ("amide", "amide"), ("acid", "amino_acid", "amine"), 0.50),
    # aryl bromide -> carboxy-aryl boronic acid linker (Suzuki) ; linker's acid -> amine
    Route("suzuki_amide", ("suzuki", "amide"), ("aryl_bromide", "boronic_acid_linker", "amine"), 0.38),
)

# --------------------------------------------------------------------------- making building blocks
