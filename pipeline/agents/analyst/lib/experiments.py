"""Experiments: findings read from delivered payloads, the next requests planned within the
budget, follow-up and the final submission."""
from __future__ import annotations

import json
import math
import os


from .claims import claims_from, write_submission


# ----------------------------------------------------------------------------- experiments


def read_finding(payload: dict) -> dict | None:
    """Direction and alignment from one delivered experiment; None if unusable.

    The protein is lowered.  cavity_r rises with severity (the prompt says so for
    every world), ejection fraction falls with it.  An effect is a change of the
    two severity readouts in opposite directions; lowering that worsens severity
    means a drug should activate the protein, improving means inhibit.  Outcome
    alignment needs survival (knockdown): survival moving with the severity
    readouts (better when severity falls) is aligned, against them misaligned.
    """
    if not isinstance(payload, dict) or payload.get("status") != "ok":
        return None
    d = payload.get("delta") or {}
    cav, ef, surv = d.get("cavity_r"), d.get("ef"), d.get("surv5y")
    if not isinstance(cav, (int, float)):
        return None
    coherent = isinstance(ef, (int, float)) and cav * ef < 0
    finding = {"kind": payload.get("action"), "cavity_r": cav, "ef": ef, "surv5y": surv,
               "wall_t": d.get("wall_t"), "coherent": bool(coherent)}
    finding["direction"] = "activate" if cav > 0 else "inhibit"
    if isinstance(surv, (int, float)) and surv != 0 and cav != 0:
        finding["alignment"] = "aligned" if surv * cav < 0 else "misaligned"
    else:
        finding["alignment"] = "unknown"
    return finding


def judge_findings(findings: dict, sets: list | None = None) -> dict:
    """Mark each finding as an effect or not.

    A knockdown is a clean read (no assay noise): a coherent non-zero change is an
    effect.  Cell perturbations are noisy and are bought only for a whole ambiguous
    set at once, whose members (at most one of which carries the set's genetic
    signal) are each other's controls: a member's change counts when it is
    coherent and at least four times every other member's (the others' changes
    are the assay's noise at that point).
    """
    for f in findings.values():
        f["effect"] = bool(f["coherent"] and f["cavity_r"] != 0) if f["kind"] == "knockdown" else False
    for members in sets or []:
        cells = {m: findings[m] for m in members if m in findings and findings[m]["kind"] != "knockdown"}
        if len(cells) < 2:
            continue
        for m, f in cells.items():
            others = [abs(g["cavity_r"]) for o, g in cells.items() if o != m]
            f["effect"] = bool(f["coherent"] and abs(f["cavity_r"]) >= 4 * max(others) and f["cavity_r"] != 0)
        # Two coherent knockdown effects in one set: the locus acts through the larger.
    return findings


def load_findings(work: str, sets: list | None = None) -> dict:
    folder = os.path.join(work, "experiments")
    findings = {}
    if not os.path.isdir(folder):
        return findings
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name)) as handle:
                payload = json.load(handle)
        except (OSError, ValueError):
            continue
        f = read_finding(payload)
        if f is None:
            continue
        prot = payload.get("protein") or name.split(".")[0]
        # A knockdown supersedes a cell read of the same protein (clean, late, with survival).
        if prot not in findings or f["kind"] == "knockdown":
            findings[prot] = f
    return judge_findings(findings, sets)


def next_requests(result: dict, findings: dict, requested: list, budget: float, costs: dict) -> list:
    """The experiments to buy now, most informative first.

    1. Ambiguous sets (observation cannot separate the members), shared loci first:
       knockdowns one member at a time until one shows an effect, with the cost of
       testing the rest reserved; if the budget cannot cover that, a shared locus
       gets cell perturbations of all its members at once (each member the others'
       control; its effect is there at baseline), while a delayed pair needs
       knockdowns (only they read late effects) and is otherwise left abstained.
    2. A knockdown each, from what is left above the reserve: standouts whose
       instrument is weak or inconclusive; then, with none held in reserve, the
       protein with the strongest forward evidence that is nominal only (where a
       delayed effect too weak for observation to establish would show: a knockdown
       reads the late horizon, and a protein that causes nothing shows no effect
       and gets no claim, so the test cannot mislead); then MR-supported drivers
       and discordant markers, weakest genetic evidence first (a confirmation
       matters most where the evidence is thinnest; it gives survival too).
    3. With budget still left and none held in reserve: the other proteins with
       nominal forward evidence, strongest first.
    """
    cell, kd = float(costs.get("cell_perturbation", 150000)), float(costs.get("knockdown", 400000))
    bought = {p for _, p in requested}
    pending = {p for _, p in requested if p not in findings}
    plan = []
    left = float(budget)
    reserve = 0.0
    pairs = sorted(result["pairs"], key=lambda pr: pr["kind"] != "shared_locus")
    for pair in pairs:
        members = pair["members"]
        if any(findings.get(m, {}).get("effect") for m in members):
            continue
        # Only a delayed pair's candidates can carry its effect; a shared locus's members all can.
        members = pair["candidates"] if pair["kind"] == "delayed" else members
        untested = [m for m in members if m not in bought]
        if not untested:
            continue
        used_cells = any(k == "cell_perturbation" and p in members for k, p in requested)
        if used_cells:
            continue  # a set tested by cells at once is settled by those reads
        waiting = any(m in pending for m in members)
        sequential = kd * len(untested) <= left - reserve
        if waiting:
            reserve += kd * len(untested)
        elif sequential:
            plan.append(("knockdown", untested[0]))
            bought.add(untested[0])
            left -= kd
            reserve += kd * (len(untested) - 1)
        elif pair["kind"] == "shared_locus" and not any(m in bought for m in members) \
                and cell * len(untested) <= left - reserve:
            for m in untested:
                plan.append(("cell_perturbation", m))
                bought.add(m)
                left -= cell
    verdict = result["verdict"]
    unresolved = [p for p, v in verdict.items() if v["label"] == "unresolved"]
    confirm = sorted((p for p, v in verdict.items() if v["label"] in ("driver", "discordant")),
                     key=lambda p: abs(verdict[p].get("z", math.inf)))
    # Exploratory only with nothing held back: a set's result may free budget for the above.
    exploratory = [p for p, v in verdict.items() if v["label"] == "forward_nominal"] if not reserve else []
    for prot in unresolved + exploratory[:1] + confirm + exploratory[1:]:
        if prot not in bought and kd <= left - reserve:
            plan.append(("knockdown", prot))
            bought.add(prot)
            left -= kd
    return plan


def _buy(ctx, store, result: dict, findings: dict) -> list:
    """Request what ``next_requests`` plans now and remember it; the plan."""
    requested = [tuple(x) for x in store.state.get("requested", [])]
    budget = float(ctx.get("budget_remaining") or 0)
    plan = next_requests(result, findings, requested, budget, ctx.get("costs") or {})
    for kind, prot in plan:
        ctx["request_experiment"](kind, prot)
        print(f"requested {kind} on {prot}")
    store.state["requested"] = [list(x) for x in requested + plan]
    store.save_state()
    return plan


def plan_and_request(ctx, store, result: dict) -> None:
    _buy(ctx, store, result, load_findings(ctx["WORK"], [p["members"] for p in result["pairs"]]))


def follow_up(ctx, store) -> bool:
    """Read delivered results, revise the claims, buy what is still needed; True when done."""
    analysis = store.read_json("analysis.json")
    result = analysis["result"]
    table = store.read_frame("evidence_full.parquet")
    findings = load_findings(ctx["WORK"], [p["members"] for p in result["pairs"]])
    for prot, f in findings.items():
        print(f"experiment {f['kind']} on {prot}: cavity_r {f['cavity_r']:+.4f}, ef {f['ef']}, surv5y {f['surv5y']} "
              f"-> {'effect' if f['effect'] else 'no effect'}, {f['direction']}, {f['alignment']}")
    claims = claims_from(result, table, findings)
    store.write_json("claims.json", claims)
    write_submission(ctx["WORK"], claims)
    store.write_json("findings.json", findings)
    return not _buy(ctx, store, result, findings)


def finalise(ctx, store) -> None:
    analysis = store.read_json("analysis.json")
    table = store.read_frame("evidence_full.parquet")
    findings = load_findings(ctx["WORK"], [p["members"] for p in analysis["result"]["pairs"]])
    claims = claims_from(analysis["result"], table, findings)
    store.write_json("claims.json", claims)
    store.write_json("findings.json", findings)
    write_submission(ctx["WORK"], claims)
