"""Verdicts: each protein classified from the evidence table.

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

import math

import numpy as np
import pandas as pd

from .stats import outliers, zcrit

F_MIN = 10.0
ALPHA = 0.05
MOST = 0.5


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
