"""Claims: the submission made from the verdicts and the experiments' findings."""
from __future__ import annotations

import json
import os

import pandas as pd



def _nominate_unless_misaligned(claims: dict, protein: str, finding: dict) -> None:
    """An experiment showed an effect: nominate with its direction, unless survival moved
    against the readouts (a misaligned target is never nominated)."""
    if finding["alignment"] != "misaligned":
        claims["nominated"].append(protein)
        claims["directions"][protein] = finding["direction"]
        claims["outcome_alignment"][protein] = finding["alignment"]

def empty_claims() -> dict:
    return {"nominated": [], "directions": {}, "outcome_alignment": {}, "rejected": [], "abstentions": [],
            "confidence": 0.0}


def write_submission(work: str, claims: dict) -> None:
    public = {k: v for k, v in claims.items() if not k.startswith("_")}
    tmp = os.path.join(work, "submission.json.tmp")
    with open(tmp, "w") as handle:
        json.dump(public, handle, indent=2, sort_keys=True)
    os.replace(tmp, os.path.join(work, "submission.json"))

# ----------------------------------------------------------------------------- claims


def claims_from(result: dict, table: pd.DataFrame, findings: dict) -> dict:
    """The submission implied by the verdicts and the experiments' findings."""
    verdict = result["verdict"]
    claims = empty_claims()
    mech = {"confounding", "reverse_causation", "selection", "pleiotropy", "measurement_artifact"}
    resolved = set()
    for pair in result["pairs"]:
        if pair["kind"] == "delayed":
            _delayed_claims(pair, verdict, findings, claims, resolved)
            continue
        tested = {m: findings[m] for m in pair["members"] if m in findings}
        hits = [m for m, f in tested.items() if f["effect"]]
        if hits:
            for m in hits:
                _nominate_unless_misaligned(claims, m, tested[m])
            resolved.update(pair["members"])
        elif len(tested) == len(pair["members"]):
            resolved.update(pair["members"])  # every member tested without effect
        else:
            untested = [m for m in pair["members"] if m not in tested]
            if len(untested) >= 2:
                claims["abstentions"].append({"molecules": untested[:5], "reason": _pair_reason(pair)})
            elif len(untested) == 1 and tested:
                # The tested members showed nothing: by elimination the signal is the last one's.
                m = untested[0]
                claims["nominated"].append(m)
                claims["directions"][m] = verdict.get(m, {}).get("direction", "unknown")
                claims["outcome_alignment"][m] = "unknown"
            resolved.update(pair["members"])
    for prot, v in verdict.items():
        if prot in resolved:
            continue
        f = findings.get(prot)
        if v["label"] == "driver":
            if f is not None and not f["effect"]:
                # Its instrument moves disease, lowering the protein does not: not a target.
                # How the instrument moves disease (another path, a linked variant, chance)
                # is not established, so no mechanism is claimed.
                continue
            if f is not None and f["alignment"] == "misaligned":
                continue
            claims["nominated"].append(prot)
            claims["directions"][prot] = f["direction"] if f is not None else v["direction"]
            claims["outcome_alignment"][prot] = f["alignment"] if f is not None else "unknown"
        elif v["label"] in mech:
            if f is not None and f["effect"]:
                if f["alignment"] != "misaligned":
                    claims["nominated"].append(prot)
                    claims["directions"][prot] = f["direction"]
                    claims["outcome_alignment"][prot] = f["alignment"]
                continue
            claims["rejected"].append({"molecule": prot, "mechanism": v["label"], "reason": v["reason"]})
        elif f is not None and f["effect"] and f["alignment"] != "misaligned" and (
                v["label"] in ("unresolved", "delayed_candidate")
                or (v["label"] == "forward_nominal" and _of_effect_size(f, findings))):
            claims["nominated"].append(prot)
            claims["directions"][prot] = f["direction"]
            claims["outcome_alignment"][prot] = f["alignment"]
        elif f is None and v["label"] == "unresolved" and v.get("supported"):
            claims["nominated"].append(prot)
            claims["directions"][prot] = v["direction"]
            claims["outcome_alignment"][prot] = "unknown"
        elif f is not None and not f["effect"] and v["label"] == "unresolved" and f["kind"] == "knockdown":
            # Lowering it changes nothing, yet it tracks disease after adjustment, at every
            # centre and outside the imaged: the disease moves it.
            claims["rejected"].append({"molecule": prot, "mechanism": "reverse_causation",
                                       "reason": v["reason"] + "; a knockdown shows no effect on disease"})
    claimed = set(claims["nominated"]) | {r["molecule"] for r in claims["rejected"]}
    # Half for the observational case, the rest in proportion to the claims an experiment tested.
    claims["confidence"] = round(0.5 + 0.5 * len(claimed & set(findings)) / len(claimed), 2) if claimed else 0.5
    return claims


def _of_effect_size(finding: dict, findings: dict) -> bool:
    """An exploratory knockdown's change counts only at the size of the episode's effects
    (at least a quarter of its largest knockdown change): a reagent with a small
    off-target action must not make a cause of a protein with weak evidence."""
    largest = max(abs(g["cavity_r"]) for g in findings.values() if g["kind"] == "knockdown")
    return abs(finding["cavity_r"]) * 4 >= largest


def _delayed_claims(pair: dict, verdict: dict, findings: dict, claims: dict, resolved: set) -> None:
    """Claims on a delayed set: candidates (quiet at baseline, running ahead of it) and the
    proteins that may mark the late course (best guess first).

    Only a knockdown reads late effects, and only a candidate can be the delayed cause.
    A candidate whose knockdown moves disease is nominated; one without effect is dropped.
    While candidates stay untested the set is abstained on (candidates and possible
    markers alike: which is which is what observation cannot tell); a lone candidate
    with no possible marker beside it is nominated on its forward evidence.  The best
    guess at the marker gets no claim; the other disease-following proteins keep their
    own verdicts (reverse causation), which the abstention does not contradict: it is
    about where the delayed effect sits, not about their mechanism.
    """
    candidates = pair.get("candidates", [])
    hits = [m for m in candidates if m in findings and findings[m]["effect"]]
    untested = [m for m in candidates if m not in findings]
    resolved.update(candidates + pair.get("guess", []))
    for m in hits:
        _nominate_unless_misaligned(claims, m, findings[m])
    if hits or not untested:
        return
    markers = [m for m in pair["members"] if m not in candidates]
    if markers:
        claims["abstentions"].append({"molecules": (untested + markers)[:5], "reason": _pair_reason(pair)})
    elif len(untested) >= 2:
        claims["abstentions"].append({"molecules": untested[:5], "reason": _pair_reason(pair)})
    else:
        m = untested[0]
        claims["nominated"].append(m)
        claims["directions"][m] = verdict.get(m, {}).get("direction", "unknown")
        claims["outcome_alignment"][m] = "unknown"


def _pair_reason(pair) -> str:
    if pair["kind"] == "shared_locus":
        return "one lead variant instruments all of them; genetics cannot tell which protein carries the effect"
    return ("later disease tracks them beyond baseline severity; a delayed causal effect and a marker of the "
            "late disease look alike without an experiment")
