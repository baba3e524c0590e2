"""The numbers and vocabularies of Supplementary Methods S2: points per component, caps,
the labels a submission may use and how rejection mechanisms map to planted biases."""
from __future__ import annotations

import re

POINTS_TARGET = 30.0
POINTS_CONFIDENCE = 25.0
POINTS_MECHANISM = 15.0
POINTS_DIRECTION = 20.0
POINTS_PHENOTYPE = 10.0
SAFETY_PENALTY = -30.0

PAIR_CREDIT_EXPERIMENT = 25.0
PAIR_CREDIT_CLAIMS = 17.5
NULL_WORLD_RESTRAINT = 15.0

NOMINATION_CAP = 25
ABSTENTION_SCORED_CAP = 1000
ABSTENTION_MIN_IDS = 2
ABSTENTION_MAX_IDS = 5

PHENOTYPE_MIN_FINITE = 51
PHENOTYPE_CEILING = 0.85
PHENOTYPE_GAP_EPS = 1e-6

MECHANISM_TO_BIAS = {
    "confounding": "T1",
    "reverse_causation": "T2",
    "selection": "T3",
    "pleiotropy": "T7",
    "measurement_artifact": "T9",
}
BIAS_TO_MECHANISM = {bias: mechanism for mechanism, bias in MECHANISM_TO_BIAS.items()}
DIRECTION_LABELS = ("inhibit", "activate", "unknown")
ALIGNMENT_LABELS = ("aligned", "misaligned", "unknown")
PAIR_KINDS = ("T4", "A9")
EXPERIMENT_KINDS = ("knockdown", "cell_perturbation")

# Only used when the sealed bundle lacks oracle.json's protein list.
FALLBACK_PROTEIN_PATTERN = re.compile(r"^PROT_[0-9]{4,}$")

COMPONENT_KEYS = (
    "target_identification",
    "causal_confidence",
    "bias_identification",
    "intervention_direction",
    "phenotype_construction",
)
# Warnings name offending input; a hostile submission can hold millions of entries.
MAX_EXAMPLES = 10
