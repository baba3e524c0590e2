"""Every named random stream of a build, registered once with what it draws, in the
manner of sgkit's ``variables.py``.

A draw comes from ``seeds.stream(seed, name, block)`` (or ``seeds.seed_sequence`` /
``seeds.block_key`` for the keys of the Numba kernels and the MRI noise), keyed by
the world seed, the stream's name and a fixed 1,000-participant block (0 for a
world-level draw).  The name is hashed into the key, so a name is part of the world:
renaming a stream changes every value it draws, and two uses of one name would draw
the same numbers.  Hence one registration per name, here, and ``pipeline.seeds``
refuses a name this module does not list.

A registered name is either fixed (``"world/genome"``) or a template whose ``{field}``
parts stand for one path segment (``"morphology/{trait}"``), optionally restricted to
listed choices.  Call sites use the constants (``streams.GENOME``, or
``streams.MORPHOLOGY.format(trait=k)``), never a name spelled as a literal (a test walks
every draw of ``pipeline/``); another kind registers its own (``pipeline/screening/streams.py``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

#: Which seed keys a stream: the world seed, or the oracle key (``sealed/oracle.json``).
WORLD_SEED, ORACLE_KEY = "world seed", "oracle key"


@dataclass(frozen=True)
class Stream:
    """One registered stream: its name (or template), what it draws, and its keying."""

    name: str
    doc: str
    #: "world" (drawn once, block 0), "block" (one draw per participant block) or
    #: "protein" (the oracle's: block = the protein's index).
    level: str
    key: str = WORLD_SEED
    #: Allowed values of a template's fields (a field not listed takes any one segment).
    choices: dict = field(default_factory=dict)
    #: The kind of world that draws from it (``pipeline.kinds``); another kind registers its own.
    world_kind: str = "biobank"

    @property
    def pattern(self) -> re.Pattern:
        out, pos = "", 0
        for m in re.finditer(r"\{(\w+)\}", self.name):
            out += re.escape(self.name[pos:m.start()])
            allowed = self.choices.get(m.group(1))
            out += "(?:" + "|".join(re.escape(c) for c in allowed) + ")" if allowed else "[^/]+"
            pos = m.end()
        return re.compile(out + re.escape(self.name[pos:]))

    @property
    def literal_prefix(self) -> str:
        """The name up to its first field: what a call site spelling it as a literal writes."""
        return self.name.split("{", 1)[0]


#: name (or template) -> Stream, in registration order.
REGISTRY: dict[str, Stream] = {}
_LEVELS = ("world", "block", "protein")


def register(name: str, doc: str, level: str = "block", key: str = WORLD_SEED, world_kind: str = "biobank",
             **choices: tuple) -> str:
    """Register stream ``name`` once; returns the name (a template keeps its ``{field}`` parts)."""
    if name in REGISTRY:
        raise ValueError(f"stream {name!r} is registered twice; a stream name must be unique (it keys the draws)")
    if level not in _LEVELS:
        raise ValueError(f"stream {name!r}: level {level!r}; valid: {', '.join(_LEVELS)}")
    if not doc.strip():
        raise ValueError(f"stream {name!r}: no docstring; say what it draws")
    REGISTRY[name] = Stream(name, doc, level, key, dict(choices), world_kind)
    return name


class UnregisteredStream(ValueError):
    """A draw under a name :data:`REGISTRY` does not list."""


@lru_cache(maxsize=None)
def check(name: str) -> str:
    """``name`` when it is a registered name or fills a registered template; else an error."""
    if name in REGISTRY or any(s.pattern.fullmatch(name) for s in REGISTRY.values() if "{" in s.name):
        return name
    raise UnregisteredStream(f"random stream {name!r} is not registered; valid: a name registered in "
                             f"pipeline/streams.py (register it there, once, with what it draws)")


# ----------------------------------------------------------------------------- the world (block 0)

GENOME = register("world/genome", "variant positions, allele frequencies, LD correlations and liability thresholds",
                  "world")
ROLES = register("world/roles", "which proteins are drivers, decoys, pairs and the surrogate, and their weights",
                 "world")
ROLES_SALTED = register("world/roles/{salt}", "the roles re-dealt under ``world.roles_salt`` (same world otherwise; "
                        "the audit's role-shuffle comparison)", "world")
INSTRUMENTS = register("world/instruments", "each protein's cis variant and the trans and direct variants", "world")
TRANS = register("world/trans", "which proteins have a trans effect, whether its variant is private or a shared "
                 "master-regulator hub, and which hub", "world")
INSTRUMENT_STRENGTH = register("world/instrument_strength", "each protein's cis heritability (the h2 mixture)",
                               "world")
MOLECULES = register("world/molecules", "factor loadings, co-regulated pairs, transcript concordance, metabolite "
                     "weights", "world")
CENTRES = register("world/centres", "assessment centres: selection, age and BMI shifts, ancestry mix", "world")
T5_SITES = register("world/T5", "the T5 site fields of the imaging batch effect", "world")
ORACLE_KEY_SEED = register("oracle_key", "the 128-bit oracle key (sealed/oracle.json keys the oracle's streams)",
                           "world")
PROTEIN_COVARIATES = register("world/protein_covariates", "each protein's own covariate coefficients (age, sex, BMI, "
                              "smoking) around the supplement's values", "world")
PATHWAYS = register("world/pathways", "latent pathways: which proteins feed or follow each, their weights and own "
                    "variants (pipeline.pathways)", "world")
METABOLITE_UNITS = register("world/metabolite_units", "which metabolites are released in other units", "world")
TARGETABILITY = register("world/targetability", "the released targetability table's scores", "world")

# ----------------------------------------------------------------------------- per participant block

POPULATION = register("population", "sex, age, BMI, smoking, exercise, centre and ancestry")
GENOTYPES = register("genotypes", "haplotypes (a Numba kernel key, seeds.block_key)")
FACTORS = register("factors", "the shared molecular factors at baseline")
PROTEIN_RESIDUAL = register("protein_residual", "each protein's own residual at baseline")
COREGULATED_RESIDUAL = register("coregulated_residual", "the shared residual of each co-regulated pair at baseline")
TRANSCRIPT_RESIDUAL = register("transcript_residual", "transcripts' residuals around their proteins")
METABOLITE_RESIDUAL = register("metabolite_residual", "metabolites' residuals")
FACTORS_VISIT2 = register("factors_visit2", "the factors' renewal at visit 2")
PROTEIN_RESIDUAL_VISIT2 = register("protein_residual_visit2", "proteins' residual renewal at visit 2")
COREGULATED_RESIDUAL_VISIT2 = register("coregulated_residual_visit2", "co-regulated pairs' residual renewal at visit 2")
LATENT_RESIDUAL = register("latent_residual", "the residual of the latent severity L")
PATHWAY_RESIDUAL = register("pathway_residual", "each pathway's own variation at baseline")
PATHWAY_RESIDUAL_VISIT2 = register("pathway_residual_visit2", "each pathway's renewed variation at visit 2")
PATHWAY_AHEAD = register("pathway_ahead", "each late pathway's fresh variation five years after visit 2 (what a late "
                         "follower reads then, as the A9 partner reads L_late carried on)")
SPECIAL = register("special/{role}", "a bias equation's own residual (one stream per role protein)")
SPECIAL_VISIT2 = register("special_visit2/{role}", "a bias equation's residual renewal at visit 2")
EVAL_MASK = register("eval_mask", "the scorer's evaluation mask (sealed/eval_mask.npy)")
IMAGING_SELECTION = register("imaging_selection", "the noise of the imaging selection score (T3)")
DEATH_CARDIAC = register("death_cardiac", "the unit exponential behind each cardiac death time")
DEATH_OTHER = register("death_other", "the unit exponential behind each other-cause death time")
VISIT2_TIME = register("visit2_time", "when the repeat assessment happens")
VISIT2 = register("visit2", "who attends the repeat assessment")
A9_AHEAD = register("a9_partner/disease_ahead_visit2", "disease five years on, which the A9 partner tracks at visit 2")
MORPHOLOGY = register("morphology/{trait}", "a cardiac morphology trait's residual at baseline")
MORPHOLOGY_VISIT2 = register("morphology_visit2/{trait}", "a morphology trait's residual renewal at visit 2")
TRAITS_RV = register("{traits}/rv", "right-ventricle noise of the clinical traits (one stream per visit)",
                     traits=("traits", "traits_visit2"))
TRAITS_SEGMENT = register("{traits}/segment", "segmentation noise of the clinical traits (one stream per visit)",
                          traits=("traits", "traits_visit2"))
ECG = register("ecg", "the ECG features' residuals")
CORONARY_CT = register("coronary_ct", "the coronary CT features' shared residuals")
CORONARY_VESSEL = register("coronary_ct/{vessel}", "one vessel's stenosis residual")
MACE = register("mace/{event}", "the unit exponential behind each MACE event time")
DIAGNOSES = register("ehr/diagnoses", "the uniforms behind EHR diagnoses and their dates")
MEDICATIONS = register("ehr/medications", "the uniforms behind EHR medications")
MISSING = register("missing/{table}", "which values of a molecular table are missing")
MESSY_SENTINEL = register("messy/sentinel/{column}", "where a messy world writes sentinel codes in a covariate")
MESSY = register("messy/{table}", "a messy world's corruption of a table's columns")
VISIT2_COVARIATES = register("visit2_covariates", "the visit-2 covariates' changes (BMI and exercise)")
VISIT2_QUIT = register("visit2_quit", "who of the smokers has quit by visit 2")
MRI = register("mri/visit{visit}", "per-participant keys of the MRI noise kernel (seeds.seed_sequence)",
               visit=("1", "2"))

# ----------------------------------------------------------------------------- the oracle (keyed by the oracle key)

ORACLE_ASSAY = register("oracle/{kind}", "an experiment's draws for one protein", "protein", ORACLE_KEY,
                        kind=("cell_perturbation", "knockdown"))
ORACLE_OFF_TARGET = register("oracle/off_target", "an experiment's off-target effect for one protein", "protein",
                             ORACLE_KEY)
ORACLE_KNOCKDOWN_ASSAY = register("oracle/assay/knockdown", "the knockdown readouts' assay noise for one protein",
                                  "protein", ORACLE_KEY)
