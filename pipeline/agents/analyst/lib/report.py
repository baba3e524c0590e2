"""The audit trail: WORK/evidence.csv (one row per candidate protein) and WORK/report.md."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .experiments import load_findings

COLUMNS = {
    "r_obs": "assoc r (adjusted)", "z_obs": "assoc z", "r_crude": "crude r", "r_within_centre": "r within centre",
    "z_crude_adj": "severity z after covariate adjustment", "z_event": "events z", "z_event_adj": "events z adjusted",
    "z_site": "site-scale z", "z_participation": "imaging-participation z", "z_imaging": "assoc z among imaged",
    "z_nonimaging": "assoc z outside imaging", "z_forward_comb": "later disease beyond current severity z (diagnoses and repeat MRI)",
    "lead_id": "lead variant", "F": "instrument F", "mr": "MR estimate", "mr_se": "MR SE", "mr_z": "MR z",
    "mr_event_z": "MR on events z", "z_direct": "instrument direct-effect z",
    "coloc_peak": "locus disease peak", "z_lead_given_peak": "lead z given the peak", "z_reverse_mr": "reverse-MR z",
}


def evidence_table(store, work: str) -> pd.DataFrame:
    table = store.read_frame("evidence_full.parquet")
    analysis = store.read_json("analysis.json")
    verdict = analysis["result"]["verdict"]
    claims = store.read_json("claims.json")
    findings = load_findings(work, [p["members"] for p in analysis["result"]["pairs"]])
    top = list(table["r_obs"].abs().sort_values(ascending=False).index[:8])
    # Nominal-only forward signals (dozens, no claim) are listed when a knockdown tested them.
    listed = [q for q, v in verdict.items() if v["label"] != "forward_nominal" or q in findings]
    rows = list(dict.fromkeys(listed + list(findings) + top))
    out = table.loc[rows, [c for c in COLUMNS if c in table]].rename(columns=COLUMNS)
    nominated = set(claims.get("nominated", []))
    rejected = {r["molecule"]: r["mechanism"] for r in claims.get("rejected", [])}
    abstained = {m for a in claims.get("abstentions", []) for m in a["molecules"]}
    decision, why, experiment = [], [], []
    for prot in rows:
        f = findings.get(prot)
        experiment.append("" if f is None else
                          f"{f['kind']}: cavity_r {f['cavity_r']:+.3f}, ef {_fmt(f['ef'])}, surv5y {_fmt(f['surv5y'])}"
                          f" -> {'effect' if f['effect'] else 'no effect'}")
        if prot in nominated:
            decision.append(f"nominate ({claims['directions'].get(prot, 'unknown')}, "
                            f"{claims['outcome_alignment'].get(prot, 'unknown')})")
        elif prot in rejected:
            decision.append(f"reject: {rejected[prot]}")
        elif prot in abstained:
            decision.append("abstain (ambiguous set)")
        else:
            decision.append("no claim")
        v = verdict.get(prot)
        why.append(v["reason"] if v else "not a standout in any screen")
    out["experiment"] = experiment
    out["decision"] = decision
    out["why"] = why
    out.index.name = "protein"
    return out


def _fmt(v):
    return "n/a" if not isinstance(v, (int, float)) else f"{v:+.4f}"


def publish(ctx, store, final: bool = False) -> None:
    work = ctx["WORK"]
    table = evidence_table(store, work)
    table.to_csv(os.path.join(work, "evidence.csv"))
    analysis = store.read_json("analysis.json")
    notes = analysis["notes"]
    claims = store.read_json("claims.json")
    model = store.read_json("phenotype_model.json") if store.exists("phenotype_model.json") else {}
    lines = ["# Analyst report" + (" (final)" if final else " (provisional)"), ""]
    lines.append("## Phenotype")
    for g, m in model.get("groups", {}).items():
        lines.append(f"- {g}: loading {m['loading']:.3f} on the shared severity factor")
    if "imaging" in model:
        im = model["imaging"]
        lines.append(f"- MRI (own segmentation of cine and T1 maps, {im['n']} scans): loading {im['loading']:.3f}; "
                     f"imaged sub-cohort factor mean {im['subcohort_factor_mean']:+.3f}, variance "
                     f"{im['subcohort_factor_var']:.3f} (selection)")
    lines += ["", "## Genetics",
              f"- {notes['n']} participants, {notes['proteins']} proteins, {notes['instruments']} distinct usable "
              f"instruments (F > 10); MR significance |z| > {notes['z_mr']:.2f} (Bonferroni); proteome screens "
              f"|z| > {notes['z_screen']:.2f} against the empirical null",
              f"- trans-acting hub variants excluded as instruments (more than {notes['hub_threshold'] - 1} proteins "
              f"each): {', '.join(notes['hubs'][:12]) or 'none'}",
              f"- reverse-MR instruments (genome-wide significant for the phenotype): "
              f"{', '.join(notes.get('reverse_mr_instruments', [])) or 'none'}", "", "## Evidence table", ""]
    lines.append(_markdown(table))
    lines += ["", "## Submission", "```json", _json(claims), "```"]
    with open(os.path.join(work, "report.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 60):
        print(table.drop(columns=["why"]).round(3).to_string())
    print("\nwhy:")
    for prot, row in table.iterrows():
        print(f"  {prot}: {row['decision']} - {row['why']}")
    print("\nsubmission:", _json(claims))


def _json(claims) -> str:
    import json

    return json.dumps({k: v for k, v in claims.items() if not k.startswith("_")}, indent=1, sort_keys=True)


def _markdown(table: pd.DataFrame) -> str:
    cols = ["protein"] + list(table.columns)
    head = "| " + " | ".join(cols) + " |"
    sep = "|" + "---|" * len(cols)
    body = []
    for prot, row in table.iterrows():
        cells = [prot] + [(f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v)) for v in row]
        body.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join([head, sep, *body])
