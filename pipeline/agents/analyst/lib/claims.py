"""From evidence to claims, experiments and the submission.

Thresholds are statistical conventions, not properties of any world:
* an instrument is usable when its first-stage F > 10 (Staiger-Stock);
* a proteome-wide screen flags a protein at Bonferroni 0.05 over the proteins,
  against the empirical null of the screen's z-scores;
* MR is significant at Bonferroni 0.05 over the distinct usable instruments;
* follow-up tests on a short list use Bonferroni 0.05 over that list;
* "no effect" of an instrument means not even nominally significant (p > 0.05)
  while the instrument had the power to see the observational association;
* an instrument is pleiotropic when, besides that, its direct path carries most
  (more than half) of its effect on disease.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd

from . import evidence
from .data import nuisance_design
from .stats import outliers, zcrit, zs

F_MIN = 10.0
ALPHA = 0.05
MOST = 0.5



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


# ----------------------------------------------------------------------------- analysis


def _genotype_matrix(ctx, cov_index):
    geno = ctx["load_genotypes"]()
    geno.index = geno.index.astype(str)
    rows = geno.index.get_indexer(cov_index)
    G = geno.to_numpy()
    return G[rows] if not (rows == np.arange(len(rows))).all() else G


def build_table(ctx, store) -> None:
    """The proteome-wide statistics (the heavy matrix work), cached for the next step."""
    cov = store.read_frame("covariates.parquet")
    out = store.read_frame("outcomes.parquet").reindex(cov.index)
    pheno = store.read_frame("phenotype.parquet").reindex(cov.index)
    P = store.read_array("proteins.npy")
    with np.load(store.path("scan_state.npz")) as z:
        scan = {k: z[k] for k in z.files}
    ectx = {"cov": cov, "out": out, "pheno": pheno, "P": P, "proteins": store.read_json("proteins.json"),
            "scan": scan, "variant_ids": store.read_json("variant_ids.json")}
    table = evidence.protein_table(ectx)
    store.write_frame("table.parquet", table)
    store.write_json("table_notes.json", {"hub_threshold": int(ectx["hub_threshold"]),
                                          "hubs": [int(v) for v in ectx["hubs"]]})


def analyse(ctx, store) -> dict:
    cov = store.read_frame("covariates.parquet")
    pheno = store.read_frame("phenotype.parquet").reindex(cov.index)
    P = store.read_array("proteins.npy")
    proteins = store.read_json("proteins.json")
    variant_ids = store.read_json("variant_ids.json")
    with np.load(store.path("scan_state.npz")) as z:
        scan = {k: z[k] for k in z.files}
    table = store.read_frame("table.parquet")
    tnotes = store.read_json("table_notes.json")
    n, p = P.shape
    G = _genotype_matrix(ctx, cov.index)
    y = zs(pheno["phenotype"].to_numpy())
    D = nuisance_design(cov, cov.index)

    # Screens against the empirical null.
    for col in ("z_obs", "z_crude", "z_participation", "z_late_event_beyond", "z_hf_beyond", "z_early_event_beyond",
                "z_event_beyond", "z_v2_beyond", "z_imaging", "z_nonimaging"):
        if col in table:
            table[col + "_e"], table[col + "_flag"] = outliers(table[col].to_numpy())
    strong = table["F"] > F_MIN
    n_instr = max(int(table.loc[strong, "lead"].nunique()), 1)
    z_mr = zcrit(ALPHA / n_instr)
    # Genetic support: proteome-wide (Bonferroni over instruments), or, for the few proteins
    # the observational screen flagged, a confirmatory test over that short list (two stages).
    k_obs = max(int(table["z_obs_flag"].sum()), 1)
    confirm = table["z_obs_flag"] & (table["mr_z"].abs() > zcrit(ALPHA / k_obs)) \
        & (np.sign(table["mr"]) == np.sign(table["r_obs"]))
    table["mr_sig"] = strong & ((table["mr_z"].abs() > z_mr) | confirm)
    notes = {"n": int(n), "proteins": int(p), "instruments": n_instr, "z_mr": z_mr,
             "z_screen": zcrit(ALPHA / p), "hub_threshold": tnotes["hub_threshold"],
             "hubs": [variant_ids[v] for v in tnotes["hubs"]]}

    # Loci of the MR-significant proteins: which usable instruments tag the same signal.
    mr_sig = list(table.index[table["mr_sig"]])
    groups = evidence.locus_groups(table, G, mr_sig, F_MIN)
    table["locus"] = ""
    table["locus_members"] = ""
    for prot, members in groups.items():
        table.at[prot, "locus"] = table.at[prot, "lead_id"]
        table.at[prot, "locus_members"] = ",".join(m for m in members if m != prot)

    # Instrument direct effect (exclusion restriction) for the MR-significant proteins
    # (judged in ``classify`` at Bonferroni over them).
    table["z_direct"] = np.nan
    table["direct_share"] = np.nan
    for prot in mr_sig:
        j = proteins.index(prot)
        g = G[:, int(table.at[prot, "lead"])].astype(float)
        g = np.where(g < 0, np.nan, g)
        g = np.where(np.isnan(g), np.nanmean(g), g)
        zd, b_direct, b_total = evidence.direct_effect(y, g, P[:, j].astype(float), D)
        table.at[prot, "z_direct"] = zd
        table.at[prot, "direct_share"] = b_direct / b_total if b_total else np.nan

    # Colocalisation at each MR-significant instrument's locus (judged in ``classify``): is the
    # disease signal there the instrument's, or a neighbouring variant's that the lead tags?
    for col in ("z_lead_given_peak", "z_peak_given_lead", "z_peak_on_protein"):
        table[col] = np.nan
    table["coloc_peak"] = ""
    for prot in mr_sig:
        found = evidence.neighbour_signal(y, G, D, P[:, proteins.index(prot)], int(table.at[prot, "lead"]))
        if found is not None:
            peak, table.at[prot, "z_lead_given_peak"], table.at[prot, "z_peak_given_lead"], \
                table.at[prot, "z_peak_on_protein"] = found
            table.at[prot, "coloc_peak"] = variant_ids[peak]

    # Forward evidence (later disease beyond current severity: new heart-failure diagnoses and
    # the repeat MRI), combined; the proteins it flags are re-tested one by one, strongest
    # first, given the MR-supported proteins and the ones already kept (conditional analysis).
    out = store.read_frame("outcomes.parquet").reindex(cov.index)
    comb, nulls = forward_combined(table)
    table["z_forward_comb"] = comb
    z_fwd = zcrit(ALPHA / p)
    given = [proteins.index(q) for q in mr_sig]
    for prot in comb.abs().sort_values(ascending=False).index:
        if abs(comb[prot]) <= z_fwd:
            break
        if table.at[prot, "z_obs_flag"] or prot in mr_sig:
            continue
        z1, z2 = evidence.conditional_forward(P, proteins.index(prot), given, pheno, out, D)
        table.at[prot, "z_forward_comb"] = _combine(*((z - null[0]) / null[1] if null else np.nan
                                                      for z, null in zip((z1, z2), nulls)))
        if abs(table.at[prot, "z_forward_comb"]) > z_fwd:
            given.append(proteins.index(prot))

    # Reverse-direction MR for the proteins that stand out observationally.
    gw_z = scan["gwas"][:, 0].astype(float) * math.sqrt(n - 2)
    z_hit = zcrit(ALPHA / len(variant_ids))
    lead_of = {q: int(table.at[q, "lead"]) for q in table.index}
    rev, rev_variants = evidence.reverse_mr(P, G, table, gw_z, lead_of, z_hit)
    table["z_reverse_mr"] = rev
    notes["reverse_mr_instruments"] = [variant_ids[v] for v in rev_variants]
    del G

    result = classify(table, notes)
    store.write_frame("evidence_full.parquet", table)
    store.write_json("analysis.json", {"notes": notes, "result": result})
    claims = claims_from(result, table, {})
    claims["_result"] = result
    store.write_json("claims.json", claims)
    write_submission(ctx["WORK"], claims)
    return result


def _combine(*z: float) -> float:
    """Stouffer's combination of independent z for one hypothesis (the missing ones left out)."""
    finite = [v for v in z if np.isfinite(v)]
    return sum(finite) / math.sqrt(len(finite)) if finite else 0.0


def forward_combined(table: pd.DataFrame):
    """Each protein's forward evidence: the incident-diagnosis statistic and the repeat-MRI
    statistic, each against its proteome-wide empirical null, combined (Stouffer).

    Returns the combined z and the nulls' (centre, scale) (None for a missing statistic)."""
    from .stats import empirical_null

    nulls, parts = [], []
    for col in ("z_forward", "z_v2_beyond"):
        if col in table and table[col].notna().sum() > 10:
            centre, scale = empirical_null(table[col].to_numpy())
            nulls.append((centre, scale))
            parts.append(((table[col] - centre) / scale).fillna(0).to_numpy())
        else:
            nulls.append(None)
            parts.append(np.full(len(table), np.nan))
    comb = [_combine(a, b) for a, b in zip(*parts)]
    return pd.Series(comb, index=table.index), nulls


def classify(table: pd.DataFrame, notes: dict) -> dict:
    """Roles the evidence supports, each with its reason."""
    zs_ = notes["z_screen"]
    strong = table["F"] > F_MIN
    verdict: dict = {}

    def put(prot, label, reason, **extra):
        if prot not in verdict:
            verdict[prot] = {"label": label, "reason": reason, **extra}

    # 1. Genetically supported proteins: borrowed signals, shared loci, pleiotropic
    #    instruments, discordant outcomes, drivers.
    mr_sig = table.index[table["mr_sig"]]
    k = max(len(mr_sig), 1)
    z_k = zcrit(ALPHA / k)
    # Colocalisation fails when the locus's disease peak is another variant, which keeps its
    # effect given the lead (Bonferroni over the MR-significant proteins), while the lead adds
    # nothing given the peak and the peak does not move the protein (neither even nominally):
    # the MR signal is borrowed through LD.  No claim either way - the protein's own
    # instrument says nothing about it.
    if "z_lead_given_peak" in table:
        for prot in mr_sig:
            row = table.loc[prot]
            if np.isfinite(row["z_lead_given_peak"]) and abs(row["z_peak_given_lead"]) > z_k \
                    and abs(row["z_lead_given_peak"]) < zcrit(ALPHA) and abs(row["z_peak_on_protein"]) < zcrit(ALPHA):
                put(prot, "ld_neighbour", f"its MR signal (z {row['mr_z']:.1f}) is borrowed: the locus's disease peak "
                    f"is {row['coloc_peak']} (z {row['z_peak_given_lead']:.1f} given the lead), its lead "
                    f"{row['lead_id']} adds nothing given the peak (z {row['z_lead_given_peak']:.1f}) and the peak "
                    f"does not move the protein (z {row['z_peak_on_protein']:.1f}): no colocalisation")
    borrowed = {q for q, v in verdict.items() if v["label"] == "ld_neighbour"}
    shared_sets = []
    for prot in mr_sig:
        if prot in borrowed:
            continue
        members = [m for m in table.at[prot, "locus_members"].split(",") if m]
        members = [m for m in members if m not in borrowed]
        if members:
            group = sorted(set([prot] + members))[:5]
            if group not in shared_sets:
                shared_sets.append(group)
    in_shared = {m for g in shared_sets for m in g}
    for prot in mr_sig:
        row = table.loc[prot]
        direction = "inhibit" if row["mr"] > 0 else "activate"
        if prot in in_shared:
            put(prot, "shared_locus", f"its lead variant {row['lead_id']} also instruments "
                f"{table.at[prot, 'locus_members']}: genetics cannot say which protein carries the effect",
                direction=direction)
            continue
        # Pleiotropy: the instrument acts with the protein held fixed, the observational
        # association falls short of the genetic one, and the direct path carries most of the
        # instrument's effect.  Holding a confounded exposure fixed biases the direct-effect
        # test a little (conditioning on it links the instrument to the exposure's other
        # causes), which tens of thousands of participants make significant; a direct path
        # carrying a minority of the effect leaves the protein carrying the rest.
        if abs(row["z_direct"]) > z_k and abs(row["z_obs_vs_mr"]) > z_k and row["direct_share"] > MOST:
            put(prot, "pleiotropy", f"instrument {row['lead_id']} moves disease with the protein held fixed "
                f"(direct-effect z {row['z_direct']:.1f}, {row['direct_share']:.0%} of its effect; observational r "
                f"{row['r_obs']:.3f} vs MR {row['mr']:.3f})")
            continue
        if abs(row["mr_event_z"]) > z_k and np.sign(row["mr_event_z"]) != np.sign(row["mr_z"]):
            put(prot, "discordant", f"genetically raising it changes severity and cardiac events in opposite "
                f"directions (MR z {row['mr_z']:.1f} vs events {row['mr_event_z']:.1f}): a marker, not a target",
                direction=direction, z=float(row["mr_z"]))
            continue
        direct = (f"no direct instrument effect (z {row['z_direct']:.1f})" if abs(row["z_direct"]) <= z_k else
                  f"the instrument's direct path (z {row['z_direct']:.1f}) carries only {row['direct_share']:.0%} of "
                  f"its effect")
        put(prot, "driver", f"MR {row['mr']:.3f} (SE {row['mr_se']:.3f}, z {row['mr_z']:.1f}, F {row['F']:.0f}); "
            f"{direct}; observational r {row['r_obs']:.3f}", direction=direction, z=float(row["mr_z"]))

    # 2. Site artefact: one centre on another scale.
    if "z_site" in table:
        # Unequal spread across centres (Bonferroni over the proteome) that one centre accounts
        # for: the others agree (not even nominally heterogeneous without it).
        one_site = table["z_site_rest"] < zcrit(ALPHA) if "z_site_rest" in table else table["z_site"] > 0
        for prot in table.index[(table["z_site"] > zs_) & one_site]:
            row = table.loc[prot]
            put(prot, "measurement_artifact", f"its spread differs between assessment centres (Brown-Forsythe z "
                f"{row['z_site']:.1f}; {row.get('z_site_rest', np.nan):.1f} without the most deviant centre): one "
                f"site measures it on another scale; association r {row['r_obs']:.3f} pooled vs "
                f"{row.get('r_within_centre', np.nan):.3f} within centres")

    # 3. Delayed effects: later disease beyond what current severity explains, with no
    #    excess of events in the early years (a harmful marker raises those from the start).
    fwd = table["z_forward_comb"] if "z_forward_comb" in table else forward_combined(table)[0]
    fwd_flag = fwd.abs() > zcrit(ALPHA / len(table))
    # A delayed effect shows in later disease more than in the early years' events; a marker
    # that raises event risk from the start (a harmful surrogate) shows the reverse.
    early_ok = fwd.abs() > table["z_early_event_beyond"].fillna(0).abs()
    # ... and it is an excess: later disease follows the protein more than a marker of current
    # disease would, not less (a current-disease marker can fall short of its prediction).
    excess = np.sign(fwd) == np.sign(table["z_hf_beyond"].fillna(0)) if "z_hf_beyond" in table else fwd != fwd
    # A delayed effect is weak at baseline by definition: an observational standout that runs
    # ahead of current severity is a marker of the late course (below), not a delayed cause.
    quiet = ~table["z_obs_flag"]
    delayed = [q for q in table.index[fwd_flag & early_ok & excess & quiet] if q not in verdict]
    delayed.sort(key=lambda q: -abs(fwd[q]))  # strongest first: the first to test

    # 4. Observational standouts without genetic support.
    obs_flag = table["z_obs_flag"]
    k_obs = max(int(obs_flag.sum()), 1)
    z_ko = zcrit(ALPHA / k_obs)
    reverse_like, inconclusive = [], []
    for prot in table.index[obs_flag]:
        row = table.loc[prot]
        if prot in verdict or prot in delayed:
            continue
        genetic_null = strong[prot] and row["mr_p"] > ALPHA and abs(row["z_obs_vs_mr"]) > z_ko
        # Reverse-direction MR: variants that raise disease raise the protein too - it lies downstream.
        downstream = np.isfinite(row["z_reverse_mr"]) and abs(row["z_reverse_mr"]) > z_ko \
            and np.sign(row["z_reverse_mr"]) == np.sign(row["r_obs"]) \
            and not (abs(row["mr_z"]) > z_ko and np.sign(row["mr"]) == np.sign(row["r_obs"]))
        (reverse_like if (genetic_null or downstream) else inconclusive).append(prot)
    followers: list = []
    if (delayed and (reverse_like or inconclusive)) or len(reverse_like) >= 2:
        # With a delayed effect at work, or when several proteins follow disease, one of them may
        # mark the late course rather than current disease: the one whose association runs
        # furthest ahead of current severity is the best guess (the others, rejected below as
        # following current disease, stay in the delayed set: the guess can be wrong).  Proteins
        # whose genetics excludes a causal effect come first; ones with an inconclusive
        # instrument (which may yet be causes: a driver runs ahead of current severity too)
        # only after them.
        def ahead(group):
            return sorted(group, key=lambda q: -fwd[q] * np.sign(table.at[q, "r_obs"]))
        followers = ahead(reverse_like) + (ahead(inconclusive) if delayed else [])
        ahead = followers[0]
        row = table.loc[ahead]
        put(ahead, "late_marker", f"strong association (r {row['r_obs']:.3f}) with no genetic support; of such "
            f"proteins it runs furthest ahead of current severity (forward z {fwd[ahead]:.1f}), so it may mark the "
            f"delayed process")
    for prot in inconclusive:
        row = table.loc[prot]
        # Two lines of evidence that agree: a proteome-wide observational standout whose usable
        # instrument points the same way at the nominal level, with an estimate compatible with
        # the observational one (no sign of a different mechanism).  Enough to nominate when
        # no experiment settles it; an experiment, when bought, decides.
        agrees = bool(strong[prot] and row["mr_p"] <= ALPHA and np.sign(row["mr"]) == np.sign(row["r_obs"])
                      and abs(row["z_obs_vs_mr"]) < zcrit(ALPHA))
        put(prot, "unresolved", f"observational r {row['r_obs']:.3f} (z {row['z_obs']:.1f}) but the instrument "
            f"is weak or inconclusive (F {row['F']:.0f}, MR {row['mr']:.3f}, z {row['mr_z']:.1f})"
            + ("; it agrees with the association in sign and size (nominal level)" if agrees else ""),
            supported=agrees, direction="inhibit" if row["mr"] > 0 else "activate")
    for prot in reverse_like:
        row = table.loc[prot]
        put(prot, "reverse_causation", f"association r {row['r_obs']:.3f} (z {row['z_obs']:.1f}) but its instrument "
            f"(F {row['F']:.0f}) shows none (MR {row['mr']:.3f}, SE {row['mr_se']:.3f}); it predicts later disease "
            f"no further than current severity does (forward z {fwd[prot]:.1f}); reverse-MR z {row['z_reverse_mr']:.1f}")

    # 5. Confounding: a protein that a measured risk factor drives far more than it drives the
    #    proteome, associated with disease crude (severity score or cardiac events) but not once
    #    the risk factors are adjusted for, and without a genetic effect.
    risk = [c for c in ("z_age", "z_bmi", "z_smoking", "z_activity") if c in table]
    z_rf = zcrit(ALPHA / (len(table) * max(len(risk), 1)))
    driven = pd.Series(False, index=table.index)
    driver_of = pd.Series("", index=table.index)
    top = pd.Series(0.0, index=table.index)
    for c in risk:
        ze, _ = outliers(table[c].to_numpy())
        hit = np.abs(ze) > z_rf
        driven |= hit
        stronger = hit & (np.abs(ze) > top)  # named after the risk factor it stands out on most
        driver_of[stronger] = c[2:]
        top[stronger] = np.abs(ze)[stronger]
    # Change in estimate on adjustment, severity and events, against the proteome's own change
    # (every protein carries small covariate terms).
    k_rf = max(int(driven.sum()), 1)
    z_rk = zcrit(ALPHA / k_rf)
    changes = []
    for crude_col, adj_col in (("z_crude", "z_crude_adj"), ("z_event", "z_event_adj")):
        ze, _ = outliers((table[crude_col] - table[adj_col]).to_numpy())
        changes.append(pd.Series(np.abs(ze), index=table.index))
    change = pd.concat(changes, axis=1).max(axis=1)
    table["z_change_e"] = change
    adjusted_bulk = table["z_obs_e"].abs() < zs_
    for prot in table.index[driven & (change > z_rk) & adjusted_bulk]:
        row = table.loc[prot]
        if prot in verdict or row["mr_sig"]:
            continue
        put(prot, "confounding", f"{driver_of[prot]} drives it (r {row['r_' + driver_of[prot]]:.2f}, an outlier in the "
            f"proteome); its crude association with disease (severity z {row['z_crude']:.1f}, events z "
            f"{row['z_event']:.1f}) falls on adjustment (to {row['z_crude_adj']:.1f}, {row['z_event_adj']:.1f}), to an "
            f"ordinary protein's; no genetic effect")

    # 6. Selection into imaging: drives participation, unrelated to disease outside the imaged.
    if "z_participation" in table:
        for prot in table.index[table["z_participation_flag"]]:
            row = table.loc[prot]
            if prot in verdict:
                continue
            # Unrelated to disease outside the imaged: no more associated than an ordinary protein.
            unrelated = abs(row["z_nonimaging_e"]) < zs_ and not row["mr_sig"]
            if unrelated:
                put(prot, "selection", f"it predicts who was imaged (z {row['z_participation']:.1f}) beyond age, BMI, "
                    f"centre, ancestry and severity, and is no more related to disease than an ordinary protein "
                    f"(z {row['z_nonimaging']:.1f}); any analysis among the imaged conditions on it (collider): "
                    f"there its association is z {row['z_imaging']:.1f}")

    # 7. Delayed-effect candidates.
    for prot in delayed:
        row = table.loc[prot]
        put(prot, "delayed_candidate", f"predicts later disease beyond what current severity explains (forward z "
            f"{fwd[prot]:.1f}) without excess early events, while weakly associated at baseline (r {row['r_obs']:.3f})",
            direction="inhibit" if fwd[prot] > 0 else "activate")

    # 8. Weaker forward evidence: the same profile (quiet at baseline, ahead of current
    #    severity, no early excess) at the nominal level only.  Observation cannot tell a
    #    delayed effect this weak from chance, so no claim; a knockdown can, and one is bought
    #    when budget is left over (the strongest first).
    nominal = fwd.abs() > zcrit(ALPHA)
    for prot in sorted(table.index[nominal & early_ok & excess & quiet], key=lambda q: -abs(fwd[q])):
        row = table.loc[prot]
        put(prot, "forward_nominal", f"predicts later disease beyond current severity at the nominal level only "
            f"(forward z {fwd[prot]:.1f}, under the proteome-wide bar) without excess early events, weakly "
            f"associated at baseline (r {row['r_obs']:.3f}): no claim unless a knockdown shows an effect")

    pairs = [{"kind": "shared_locus", "members": g} for g in shared_sets]
    delayed_cands = [q for q, v in verdict.items() if v["label"] == "delayed_candidate"]
    if delayed_cands:
        pairs.append({"kind": "delayed", "members": (delayed_cands + followers)[:5], "candidates": delayed_cands,
                      "guess": followers[:1]})
    return {"verdict": verdict, "pairs": pairs}


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
