"""The MR-then-experiment agent: cis-MR, then experiments on what genetics cannot settle.

Turn 1 runs the ``cis_mr`` analysis and, with a budget, buys experiments in
this order of need, each only if it still fits the budget:

A. every member of a set sharing a significant lead variant that the MR
   analysis left ambiguous, and the member it singled out of each other shared
   set (genetics alone cannot tell them apart; only an experiment on the
   causal member earns a planted pair's full credit) - cell perturbations
   when the budget is tight, knockdowns when it covers A, C and one D by
   knockdown;
C. proteins whose instrument moves cardiac events (Bonferroni) but not the
   phenotype: a delayed-effect driver or a marker that harms survival - only a
   knockdown shows late effects and survival;
D. the protein most associated with cardiac events after year 5 (among
   participants event-free until then) that no analysis has explained yet: an
   effect that builds up over years shows there before it shows in a baseline
   phenotype, and only a knockdown can confirm it;
B. significant proteins the MR analysis suspects of pleiotropy (is there any
   effect at all? a cell perturbation answers that);
E. the remaining nominations (MR-supported first, then the observational
   standouts genetics could not refute), by knockdown, for direction and
   alignment.

Turn 2 reads the results.  An experiment lowers the protein, so the change
in severity it implies, from Delta cavity_r / 1.9 and -Delta wall_t / 0.55
(the readouts' slopes on severity), says what lowering does: a rise means
lowering worsens disease, so a drug should activate; a fall means inhibit.
|change| <= 0.1 severity units is no effect (a null protein's cell read is
noise of ~0.02; a driver's is ~0.5).  Outcome alignment comes from
Delta surv5y (knockdown only): survival moving the way the phenotype
improves is aligned, the other way misaligned.  Tested proteins with an
effect are nominated (unless misaligned: a marker that improves the
measurements while harming survival is not a target); tested ones without
an effect are dropped (MR nominations and pleiotropy suspects are rejected
as pleiotropy: their variant acts, the protein does not; an observational
standout is dropped without a rejection, since nothing says which bias made
it look like a target).
"""
from __future__ import annotations

from .base import EpisodeInfo, ScriptedAgent, literal
from .cis_mr import ANALYSIS, F_MIN, LIBRARY as MR_LIBRARY
from .correlation import source_of

EFFECT_THRESHOLD = 0.1


def event_only_candidates(table, claims, f_min=30.0):
    """Proteins whose instrument moves cardiac events (Bonferroni) but not the phenotype (p > 0.05)."""
    valid = table[table["F"] > f_min]
    alpha = 0.05 / max(len(valid), 1)
    named = set(claims["nominated"]) | {p for members in claims["_ambiguous"] + claims["_resolved"] for p in members}
    named |= {r["molecule"] for r in claims["rejected"]}
    picked = valid[(valid["p_events"] < alpha) & (valid["p"] > 0.05)].sort_values("p_events")
    return [p for p in picked.index if p not in named]


def late_event_candidates(release, claims, event_only, limit=2):
    """Unexplained proteins most associated with first cardiac events after year 5 (p < 0.05)."""
    import math
    import os

    import numpy as np
    import pandas as pd

    proteins = pd.read_parquet(os.path.join(release, "proteomics.parquet"))
    proteins.index = proteins.index.astype(str)
    mortality = pd.read_parquet(os.path.join(release, "mortality.parquet"))
    mortality.index = mortality.index.astype(str)
    mace = pd.read_parquet(os.path.join(release, "mace_events.parquet"))
    ids = proteins.index.intersection(mortality.index)
    first = mace.assign(subject_id=mace["subject_id"].astype(str)).groupby("subject_id")["years_from_baseline"].min()
    first = first.reindex(ids)
    years = pd.to_numeric(mortality.loc[ids, "followup_years"], errors="coerce")
    died = pd.to_numeric(mortality.loc[ids, "death"], errors="coerce").fillna(0) > 0
    cardiac = mortality.loc[ids, "cause"].astype("string").eq("cardiac").fillna(False)
    early = (first <= 5).fillna(False) | (died & (years <= 5)).fillna(False)
    late = (first > 5).fillna(False) | (cardiac & (years > 5)).fillna(False)
    at_risk = np.array(~early)
    y = np.array(late, dtype=float)[at_risk]
    if y.std() == 0 or at_risk.sum() < 50:
        return []
    y = (y - y.mean()) / y.std()
    P = standardise(proteins.loc[ids])[at_risk]
    r = P.T @ y / len(y)
    z = np.arctanh(np.clip(r, -0.999, 0.999)) * math.sqrt(max(len(y) - 3, 1))
    table = pd.DataFrame({"r_late": r, "p_late": two_sided_p(z)}, index=proteins.columns)
    named = set(claims["nominated"]) | set(claims["_pleiotropic"]) | set(event_only)
    named |= {p for members in claims["_ambiguous"] + claims["_resolved"] for p in members}
    named |= {x["molecule"] for x in claims["rejected"]}
    table = table[(table["p_late"] < 0.05) & ~table.index.isin(list(named))]
    return list(table.reindex(table["r_late"].abs().sort_values(ascending=False).index).index[:limit])


def plan_experiments(claims, event_only, late_only, budget, costs):
    """[(kind, protein)] in priority order, within the budget."""
    cell, knock = costs["cell_perturbation"], costs["knockdown"]
    ambiguous = [p for members in claims["_ambiguous"] for p in members]
    favoured = [members[0] for members in claims["_resolved"]]
    generous = budget >= knock * (len(ambiguous) + len(favoured) + len(event_only) + min(len(late_only), 1))
    plan, left = [], float(budget)

    def add(kind, protein):
        nonlocal left
        price = cell if kind == "cell_perturbation" else knock
        if price <= left and all(p != protein for _, p in plan):
            plan.append((kind, protein))
            left -= price

    for protein in ambiguous + favoured:
        add("knockdown" if generous else "cell_perturbation", protein)
    for protein in event_only:
        add("knockdown", protein)
    for protein in late_only:
        add("knockdown", protein)
    for protein in claims["_pleiotropic"]:
        add("cell_perturbation", protein)
    for protein in claims["nominated"]:
        add("knockdown", protein)
    return plan


def read_effect(payload, threshold=0.1):
    """(effect on severity of lowering the protein, has effect, direction, alignment) from one payload."""
    delta = payload.get("delta") or {}
    estimates = []
    if isinstance(delta.get("cavity_r"), (int, float)):
        estimates.append(delta["cavity_r"] / 1.9)
    if isinstance(delta.get("wall_t"), (int, float)):
        estimates.append(-delta["wall_t"] / 0.55)
    if not estimates:
        return 0.0, False, "unknown", "unknown"
    effect = sum(estimates) / len(estimates)
    has_effect = abs(effect) > threshold
    direction = "activate" if effect > 0 else "inhibit"
    surv = delta.get("surv5y")
    if not has_effect or not isinstance(surv, (int, float)) or abs(surv) < 1e-4:
        alignment = "unknown"
    else:
        # Lowering that lowers severity should raise survival (and the converse): then the
        # drug that improves the phenotype also improves survival.
        alignment = "aligned" if effect * surv < 0 else "misaligned"
    return effect, has_effect, direction, alignment


def apply_experiments(claims, plan, work, threshold=0.1):
    """Revise the MR claims with the delivered results; returns (claims, per-protein findings)."""
    import json
    import os

    findings = {}
    for kind, protein in plan:
        path = os.path.join(work, "experiments", f"{protein}.{kind}.json")
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            payload = json.load(handle)
        if payload.get("status") != "ok":
            continue
        effect, has_effect, direction, alignment = read_effect(payload, threshold)
        findings[protein] = {"kind": kind, "effect": effect, "has_effect": has_effect,
                             "direction": direction, "alignment": alignment}

    nominated = [p for p in claims["nominated"]]
    directions = dict(claims["directions"])
    alignment = dict(claims["outcome_alignment"])
    rejected = [r for r in claims["rejected"]]
    abstentions = []

    def nominate(protein, found):
        if protein not in nominated:
            nominated.append(protein)
        directions[protein] = found["direction"]
        if found["alignment"] != "unknown" or protein not in alignment:
            alignment[protein] = found["alignment"]

    def reject_pleiotropy(protein, why):
        if not any(r["molecule"] == protein for r in rejected):
            rejected.append({"molecule": protein, "mechanism": "pleiotropy", "reason": why})

    sets = claims["_ambiguous"] + claims["_resolved"]
    for members in sets:
        hits = [p for p in members if p in findings and findings[p]["has_effect"]
                and findings[p]["alignment"] != "misaligned"]
        untested = [p for p in members if p not in findings]
        for protein in members:
            # A member tested without effect is not the one the shared variant acts through.
            if protein in findings and protein not in hits and protein in nominated:
                nominated.remove(protein)
        if hits:
            for protein in hits:
                nominate(protein, findings[protein])
        elif untested and not any(p in nominated for p in members):
            abstentions.append({"molecules": members, "reason": "share one lead variant; experiments did not resolve"})
    for protein, found in findings.items():
        if any(protein in members for members in sets):
            continue
        if found["has_effect"] and found["alignment"] != "misaligned":
            rejected = [r for r in rejected if r["molecule"] != protein]
            nominate(protein, found)
        elif found["has_effect"]:
            # Improves the readouts but costs survival: a harmful marker, not a target.
            if protein in nominated:
                nominated.remove(protein)
        elif protein in claims.get("_observational", []):
            # An association genetics could not test, and lowering does nothing: not a target,
            # and nothing says which bias made it look like one.
            if protein in nominated:
                nominated.remove(protein)
        elif protein in nominated or protein in claims["_pleiotropic"]:
            if protein in nominated:
                nominated.remove(protein)
            reject_pleiotropy(protein, "its variant moves the phenotype but lowering the protein does nothing")
    revised = {
        "nominated": nominated,
        "directions": {p: directions.get(p, "unknown") for p in nominated},
        "outcome_alignment": {p: alignment.get(p, "unknown") for p in nominated},
        "rejected": rejected,
        "abstentions": abstentions,
        "confidence": 0.7 if findings else 0.5,
    }
    return revised, findings


LIBRARY = (*MR_LIBRARY, event_only_candidates, late_event_candidates, plan_experiments, read_effect,
           apply_experiments)


class MRKnockdownAgent(ScriptedAgent):
    name = "mr_knockdown"

    def programs(self, info: EpisodeInfo) -> list[str]:
        library = source_of(*LIBRARY)
        first = library + "\n" + ANALYSIS + f"""
event_only = event_only_candidates(table, claims, f_min={F_MIN})
late_only = late_event_candidates(RELEASE, claims, event_only)
plan = plan_experiments(claims, event_only, late_only, {info.budget!r}, {literal(info.costs)})
with open(os.path.join(WORK, "experiment_plan.json"), "w") as handle:
    json.dump({{"plan": plan, "event_only": event_only, "late_only": late_only}}, handle, indent=1)
# A provisional answer in place, so an episode cut short still scores the MR claims.
write_submission(public(claims), WORK)
for kind, protein in plan:
    request_experiment(kind, protein)
print("experiments requested:", plan)
if not plan:
    print(json.dumps(public(claims), indent=1, sort_keys=True))
    submit()
"""
        second = library + f"""
with open(os.path.join(WORK, "mr_claims.json")) as handle:
    claims = json.load(handle)
with open(os.path.join(WORK, "experiment_plan.json")) as handle:
    plan = [tuple(item) for item in json.load(handle)["plan"]]
revised, findings = apply_experiments(claims, plan, WORK, threshold={EFFECT_THRESHOLD})
for protein, found in findings.items():
    print(protein, found)
write_submission(revised, WORK)
print(json.dumps(revised, indent=1, sort_keys=True))
submit()
"""
        return [first, second]
