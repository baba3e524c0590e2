"""The scorer: Supplementary Methods S2, applied to one episode.

``score`` is the pure core (truth, parsed submission, phenotype table, sealed
latent, evaluation mask, baseline, delivered experiments, valid identifiers in;
the score dictionary out).  ``score_episode`` reads a sealed bundle and a work
folder and calls it; ``python -m pipeline.score --sealed DIR --work DIR
[--ledger FILE]`` prints the result as JSON.

Whatever an agent leaves in its work folder is scored by the S2 rules and never
raises: S2.4 scores every exit path from what WORK holds, so a crash here would
turn a malformed submission into an unscored episode.  Every choice the source
leaves open is written next to the code that makes it and is reported in
``details.interpretations`` whenever it affected the episode.

One job per module, in the order an episode flows through them:

    rules       the points, caps and vocabularies of S2
    work        the agent's work folder read defensively, with input caps
    sealed      the sealed bundle read through pipeline.bundle
    truth       the truth's scored parts, tolerantly; which identifiers are valid
    intake      claim intake (S2.1): the submission's fields as Claims
    pairs       pair logic (S2.2): abstention precision and each pair's route
    components  target identification, causal confidence, bias identification,
                intervention direction and the safety penalty, one function each
    phenotype   phenotype construction (S2.5)
    core        ``score``: the components in order, the score dictionary
    episode     ``score_episode``: files in, score out
    cli         the command line
"""
from __future__ import annotations

from .cli import main
from .core import score
from .episode import score_episode
from .rules import (ABSTENTION_MAX_IDS, ABSTENTION_MIN_IDS, ABSTENTION_SCORED_CAP, ALIGNMENT_LABELS,
                    BIAS_TO_MECHANISM, COMPONENT_KEYS, DIRECTION_LABELS, EXPERIMENT_KINDS,
                    FALLBACK_PROTEIN_PATTERN, MAX_EXAMPLES, MECHANISM_TO_BIAS, NOMINATION_CAP, NULL_WORLD_RESTRAINT,
                    PAIR_CREDIT_CLAIMS, PAIR_CREDIT_EXPERIMENT, PAIR_KINDS, PHENOTYPE_CEILING, PHENOTYPE_GAP_EPS,
                    PHENOTYPE_MIN_FINITE, POINTS_CONFIDENCE, POINTS_DIRECTION, POINTS_MECHANISM, POINTS_PHENOTYPE,
                    POINTS_TARGET, SAFETY_PENALTY)
from .sealed import SealedBundleError
from .work import PHENOTYPE_MAX_BYTES, PHENOTYPE_MAX_ROWS, SUBMISSION_MAX_BYTES, InputTooLarge

__all__ = [
    "score", "score_episode", "main", "SealedBundleError", "InputTooLarge", "COMPONENT_KEYS", "MECHANISM_TO_BIAS",
    "BIAS_TO_MECHANISM", "DIRECTION_LABELS", "ALIGNMENT_LABELS", "PAIR_KINDS", "EXPERIMENT_KINDS",
    "FALLBACK_PROTEIN_PATTERN", "MAX_EXAMPLES", "NOMINATION_CAP", "ABSTENTION_SCORED_CAP", "ABSTENTION_MIN_IDS",
    "ABSTENTION_MAX_IDS", "POINTS_TARGET", "POINTS_CONFIDENCE", "POINTS_MECHANISM", "POINTS_DIRECTION",
    "POINTS_PHENOTYPE", "SAFETY_PENALTY", "PAIR_CREDIT_EXPERIMENT", "PAIR_CREDIT_CLAIMS", "NULL_WORLD_RESTRAINT",
    "PHENOTYPE_MIN_FINITE", "PHENOTYPE_CEILING", "PHENOTYPE_GAP_EPS", "SUBMISSION_MAX_BYTES", "PHENOTYPE_MAX_BYTES",
    "PHENOTYPE_MAX_ROWS",
]
