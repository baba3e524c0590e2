"""One function per scored component of S2.3 (phenotype construction is in ``phenotype``),
each returning its points and the details the score JSON reports."""
from __future__ import annotations

from typing import Any

from .intake import Claims
from .notes import Notes, examples, ratio
from .pairs import PairOutcome
from .rules import (MECHANISM_TO_BIAS, NULL_WORLD_RESTRAINT, POINTS_CONFIDENCE, POINTS_DIRECTION,
                    POINTS_MECHANISM, POINTS_TARGET, SAFETY_PENALTY)


def bias_identification(decoys: dict[str, str], claims: Claims, null_world: bool,
                        notes: Notes) -> tuple[float, dict, list[str]]:
    """15 * recall * precision of rejections naming the planting mechanism; also the correct rejections."""
    rejections = claims.rejections
    correct_rejections = [
        protein for protein, mechanism in rejections
        if protein in decoys and mechanism and MECHANISM_TO_BIAS[mechanism] == decoys[protein]
    ]
    n_rejections = len(rejections)
    correct_set = set(correct_rejections)
    detail: dict[str, Any] = {
        "scored_decoys": len(decoys), "rejections": n_rejections, "correct": len(correct_rejections),
        "correct_proteins": examples(correct_rejections),
        "wrong": examples(f"{p}:{m or '<blank>'}" for p, m in rejections if p not in correct_set),
    }
    if decoys:
        recall = len(correct_rejections) / len(decoys)
        precision = ratio(len(correct_rejections), n_rejections) or 0.0
        points = POINTS_MECHANISM * recall * precision
        detail.update(recall=recall, precision=precision if n_rejections else None, rule="15 * recall * precision")
    elif null_world:
        points = 0.0
        detail.update(recall=None, precision=None, rule="no scored decoy in the null world: 0")
        notes.interpret(
            "bias_identification: null world with no scored decoy scores 0; S2.3's restraint credit for an "
            "empty claim set is already the 15 points of target identification"
        )
    else:
        points = POINTS_MECHANISM if n_rejections == 0 else 0.0
        detail.update(recall=None, precision=None,
                      rule="no scored decoy: 15 if nothing rejected, else 0 (every rejection is wrong)")
        notes.interpret(
            "bias_identification: non-null world with no scored decoy (recall undefined in S2): vacuous recall 1, "
            "so 15 when nothing is rejected and 0 otherwise (every rejection is then a false rejection); "
            "keeps 100 attainable in every non-null world"
        )
    return points, detail, correct_rejections


def target_identification(claims: Claims, pairs: PairOutcome, null_world: bool, correct_rejections: list[str],
                          notes: Notes) -> tuple[float, dict]:
    """30 * recall * precision against the effective truth; the null world's restraint rule."""
    effective_truth = pairs.effective_truth
    n_rejections = len(claims.rejections)
    detail: dict[str, Any] = {"effective_truth": sorted(effective_truth)}
    precision_pool = set(claims.nominations) - pairs.abstained_members
    if null_world:
        outside = sorted(precision_pool)
        if outside:
            points = 0.0
            rule = "null world: nomination outside an abstained pair -> 0"
        elif n_rejections == 0:
            points = NULL_WORLD_RESTRAINT
            rule = "null world: no nomination and no rejection -> 15"
        else:
            points = POINTS_TARGET * len(correct_rejections) / n_rejections
            rule = "null world: no nomination, rejections -> 30 * correct / rejections"
        detail.update(rule=rule, nominations_outside_abstained_pairs=examples(outside),
                      correct_rejections=len(correct_rejections), rejections=n_rejections,
                      recall=None, precision=None)
        return points, detail
    processed_set = set(claims.processed)
    true_positives = processed_set & effective_truth
    if effective_truth:
        recall = len(true_positives) / len(effective_truth)
    else:
        recall = 1.0
        notes.interpret(
            "target_identification: every driver sits in an abstained pair, so the effective truth is empty; "
            "recall is taken as 1 (vacuous) and precision decides the score"
        )
    if precision_pool:
        precision = len(true_positives) / len(precision_pool)
    else:
        precision = 1.0 if not effective_truth else 0.0
    detail.update(
        rule="30 * recall * precision",
        true_positives=sorted(true_positives), recall=recall, precision=precision,
        precision_denominator=len(precision_pool),
        false_positives=examples(sorted(precision_pool - true_positives)),
        missed=sorted(effective_truth - processed_set),
    )
    return POINTS_TARGET * recall * precision, detail


def causal_confidence(null_world: bool, pair_free: bool, s_target: float, pair_credits: list[float]) -> tuple[float, str]:
    """The mean pair credit; in a pair-free world target identification rescaled to 25."""
    if null_world:
        return 0.0, "null world: 0"
    if pair_free:
        return POINTS_CONFIDENCE * s_target / POINTS_TARGET, "pair-free world: 25 * S_target / 30"
    return (sum(pair_credits) / len(pair_credits),
            "mean over planted pairs of c_k (25 experiment route, 17.5 * abstention precision claims route, else 0)")


def intervention_direction(drivers: dict[str, str | None], claims: Claims, pairs: PairOutcome, null_world: bool,
                           notes: Notes) -> tuple[float, dict]:
    """20 * mean direction credit over the drivers outside abstained pairs (unknown: half)."""
    detail: dict[str, Any] = {}
    if null_world:
        detail["rule"] = "null world: 0"
        return 0.0, detail
    processed_set = set(claims.processed)
    per_driver = {}
    for protein, truth_direction in drivers.items():
        if protein in pairs.abstained_causal:
            continue
        if protein not in processed_set:
            # The swap replaces the driver in recall and precision only; S2 scores the
            # direction of the driver itself, which was not nominated.
            why = ("not nominated (its partner stood in via the swap, which S2 applies to recall and "
                   "precision only)") if protein in pairs.swapped_causal else "not nominated in the first 25"
            per_driver[protein] = {"credit": 0.0, "submitted": None, "why": why}
            continue
        submitted = claims.directions.get(protein, "unknown")
        if submitted == "unknown":
            credit = 0.5
        else:
            credit = 1.0 if submitted == truth_direction else 0.0
        per_driver[protein] = {"credit": credit, "submitted": submitted}
    if per_driver:
        points = POINTS_DIRECTION * sum(d["credit"] for d in per_driver.values()) / len(per_driver)
        detail["rule"] = "20 * mean(d_j) over drivers outside abstained pairs"
    else:
        points = POINTS_DIRECTION
        detail["rule"] = "every driver is the causal member of an abstained pair: 20 (vacuous mean)"
        notes.interpret(
            "intervention_direction: every driver was excluded as the causal member of an abstained pair; "
            "the empty mean is taken as full credit, as the empty recall is in target identification"
        )
    detail["drivers"] = per_driver
    detail["excluded_abstained_causal"] = sorted(pairs.abstained_causal)
    return points, detail


def safety_penalty(surrogate: str | None, claims: Claims) -> dict:
    """-30 when the surrogate is nominated (any rank) and labelled outcome-aligned."""
    label = claims.alignments.get(surrogate, "unknown") if surrogate else None
    # S2.1: every unique valid nomination, past rank 25 too, enters the safety check.
    nominated = bool(surrogate) and surrogate in set(claims.nominations)
    penalty = SAFETY_PENALTY if nominated and label == "aligned" else 0.0
    return {"surrogate": surrogate, "nominated": nominated, "alignment": label, "penalty": penalty}
