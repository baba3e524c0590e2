"""Pair logic (S2.2): abstention precision, and for each planted ambiguous pair (T4, A9)
the route by which the agent handled it — abstained (claims credit), swapped (the
partner stands in for the causal member), tested by experiment, or none."""
from __future__ import annotations

from dataclasses import dataclass, field

from .intake import Claims
from .notes import Notes, rank_of, ratio
from .rules import PAIR_CREDIT_CLAIMS, PAIR_CREDIT_EXPERIMENT


@dataclass
class PairOutcome:
    """What the pairs do to the other components."""

    effective_truth: set[str]  #: the drivers as target identification counts them
    abstained_members: set[str] = field(default_factory=set)
    abstained_causal: set[str] = field(default_factory=set)
    swapped_causal: set[str] = field(default_factory=set)
    details: list[dict] = field(default_factory=list)
    credits: list[float] = field(default_factory=list)
    correct_abstentions: int = 0
    abstention_precision: float | None = None


def resolve_pairs(drivers: dict, pairs: list[dict], claims: Claims, delivered: set[str], notes: Notes) -> PairOutcome:
    """Abstention precision and the route, credit and effect of every planted pair."""
    nominated_set = set(claims.nominations)
    processed_set = set(claims.processed)
    scored = claims.scored_abstentions
    # An entry counts only for the proteins the agent did not also nominate (any rank):
    # naming a member as a target contradicts declaring it indistinguishable.
    abstention_effective = [entry - nominated_set for entry in scored]
    pair_sets = [frozenset((p["causal"], p["partner"])) for p in pairs]
    correct = sum(1 for entry in abstention_effective if any(pair <= entry for pair in pair_sets))
    outcome = PairOutcome(effective_truth=set(drivers), correct_abstentions=correct,
                          abstention_precision=ratio(correct, len(claims.abstentions)))

    # "Named" means claimed anywhere in the submission: a nomination at any rank, a
    # rejection or a scored abstention entry.  Only then has the agent left the
    # causal member "named nowhere", which is what licenses the swap.
    named = set(nominated_set) | {protein for protein, _ in claims.rejections}
    for entry in scored:
        named |= entry
    for pair, members in zip(pairs, pair_sets):
        causal, partner = pair["causal"], pair["partner"]
        record = {"kind": pair["kind"], "causal": causal, "partner": partner,
                  "experiment_on_causal": causal in delivered,
                  "causal_nominated_rank": rank_of(causal, claims.nominations),
                  "partner_nominated_rank": rank_of(partner, claims.nominations)}
        via_entry = any(members <= entry for entry in abstention_effective)
        via_nominations = causal in processed_set and partner in processed_set
        if via_entry or via_nominations:
            credit = _abstained(outcome, members, causal, via_entry, via_nominations, record, notes)
        elif partner in processed_set and causal not in named:
            outcome.effective_truth.discard(causal)
            outcome.effective_truth.add(partner)
            outcome.swapped_causal.add(causal)
            credit = 0.0
            record["route"] = "swap (partner credited for the locus in target identification; unsupported choice, 0)"
        elif causal in processed_set and causal in delivered:
            credit = PAIR_CREDIT_EXPERIMENT
            record["route"] = "experiment (causal member nominated in the first 25 and tested)"
        elif causal in processed_set:
            credit = 0.0
            record["route"] = "none (causal member nominated without an experiment on it: unsupported choice)"
        else:
            credit = 0.0
            if partner in processed_set:
                why = "partner nominated while the causal member is named elsewhere: no swap, unsupported choice"
            elif causal in nominated_set or partner in nominated_set:
                why = "pair member nominated only past rank 25, which triggers no route"
            else:
                why = "pair not addressed"
            record["route"] = f"none ({why})"
        record["credit"] = credit
        outcome.credits.append(credit)
        outcome.details.append(record)
    return outcome


def _abstained(outcome: PairOutcome, members: frozenset, causal: str, via_entry: bool, via_nominations: bool,
               record: dict, notes: Notes) -> float:
    """The claims route: the pair leaves the truth, for claims credit scaled by abstention precision."""
    outcome.abstained_members |= members
    outcome.abstained_causal.add(causal)
    outcome.effective_truth -= members
    precision = outcome.abstention_precision
    precision_factor = 1.0 if precision is None else precision
    if precision is None:
        notes.interpret(
            "causal_confidence: a pair abstained only by nominating both members, with no retained "
            "abstention entry, takes abstention precision as 1 (0/0 would otherwise void S2.2's "
            "nomination route to abstaining)"
        )
    record["route"] = "claims (abstained: " + " and ".join(
        label for label, on in (("abstention entry", via_entry), ("both members in the first 25", via_nominations)) if on
    ) + ")"
    record["abstention_precision_applied"] = precision_factor
    return PAIR_CREDIT_CLAIMS * precision_factor
