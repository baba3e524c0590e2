"""``score``: one episode by Supplementary Methods S2, from parsed inputs to the score
dictionary.  Pure and never raising on agent input; the components run in a fixed
order because each appends its warnings and interpretations to the episode's notes."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .components import (bias_identification, causal_confidence, intervention_direction, safety_penalty,
                         target_identification)
from .intake import read_claims
from .notes import Notes, json_safe
from .pairs import resolve_pairs
from .phenotype import score_phenotype
from .rules import EXPERIMENT_KINDS
from .truth import is_valid as _is_valid, normalise_truth, valid_protein_set


def score(
    truth: dict,
    submission: Any,
    phenotype: pd.DataFrame | None,
    latent: pd.Series | None,
    eval_mask: np.ndarray | None,
    baseline_b: float | None,
    experiments: list[dict] | None,
    valid_proteins: set[str] | None,
    *,
    imaged: np.ndarray | None = None,
    paper_compat: bool = False,
) -> dict:
    """Score one episode by Supplementary Methods S2.  Pure; never raises on agent input.

    ``submission`` is the parsed submission.json (None when absent or unparseable),
    ``phenotype`` the phenotype table as read, ``latent`` baseline L indexed by
    subject_id, ``eval_mask`` aligned to ``latent``'s order, ``experiments`` the
    delivered experiments as ``{"kind", "protein"}``, ``imaged`` the world's imaged
    participants aligned to ``latent`` (the phenotype is scored on the imaged participants
    of the mask; None: a world without images, the whole mask), ``paper_compat`` S2.5's
    own phenotype rule (the participants given a value).
    """
    notes = Notes()
    world = normalise_truth(truth, notes)
    drivers: dict[str, str | None] = world["drivers"]
    decoys: dict[str, str] = world["decoys"]
    pairs: list[dict] = world["pairs"]
    surrogate = world["surrogate"]
    null_world = not drivers
    pair_free = not pairs

    valid, valid_source = valid_protein_set(valid_proteins, world, notes)
    truth_proteins = set(drivers) | set(decoys) | {p["partner"] for p in pairs} | ({surrogate} if surrogate else set())

    def is_valid(protein: Any) -> bool:
        return _is_valid(protein, valid, truth_proteins)

    claims = read_claims(submission, is_valid, notes)
    delivered = _delivered(experiments)

    paired = resolve_pairs(drivers, pairs, claims, delivered, notes)
    s_mechanism, mechanism_detail, correct_rejections = bias_identification(decoys, claims, null_world, notes)
    s_target, target_detail = target_identification(claims, paired, null_world, correct_rejections, notes)
    s_confidence, confidence_rule = causal_confidence(null_world, pair_free, s_target, paired.credits)
    s_direction, direction_detail = intervention_direction(drivers, claims, paired, null_world, notes)
    safety = safety_penalty(surrogate, claims)
    s_phenotype, phenotype_detail = score_phenotype(phenotype, latent, eval_mask, baseline_b, notes,
                                                    imaged=imaged, paper_compat=paper_compat)

    components = {
        "target_identification": s_target,
        "causal_confidence": s_confidence,
        "bias_identification": s_mechanism,
        "intervention_direction": s_direction,
        "phenotype_construction": s_phenotype,
    }
    penalty = safety["penalty"]
    unclipped = sum(components.values()) + penalty
    details = {
        "world_id": world["world_id"],
        "paper_compat": bool(paper_compat),
        "null_world": null_world,
        "pair_free": pair_free,
        "submission": {"status": claims.status, "confidence": claims.confidence,
                       "confidence_note": "recorded only: no component uses the stated confidence"},
        "valid_proteins_source": valid_source,
        "nominations": claims.nomination_stats,
        "rejections": {"count": len(claims.rejections),
                       "blanked_mechanisms": sum(1 for _, m in claims.rejections if not m)},
        "abstentions": {**claims.abstention_stats, "correct": paired.correct_abstentions,
                        "precision": paired.abstention_precision},
        "experiments_delivered": sorted(delivered),
        "effective_truth": sorted(paired.effective_truth),
        "pairs": paired.details,
        "target_identification": target_detail,
        "causal_confidence": {"rule": confidence_rule, "pair_credits": paired.credits},
        "bias_identification": mechanism_detail,
        "intervention_direction": direction_detail,
        "phenotype_construction": phenotype_detail,
        "safety": safety,
        "warnings": notes.warnings,
        "interpretations": notes.interpretations,
    }
    result = {**components, "safety_penalty": penalty,
              "total": min(max(unclipped, 0.0), 100.0), "total_unclipped": unclipped, "details": details}
    return json_safe(result)


def _delivered(experiments: Any) -> set[str]:
    """Proteins with a delivered experiment of a known kind (malformed records are ignored)."""
    delivered: set[str] = set()
    for item in experiments if isinstance(experiments, list) else []:
        if isinstance(item, dict) and item.get("kind") in EXPERIMENT_KINDS and isinstance(item.get("protein"), str):
            delivered.add(item["protein"])
    return delivered
