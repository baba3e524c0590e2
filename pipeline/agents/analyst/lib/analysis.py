"""The analysis: the evidence table (associations, MR, adjustments) built and classified, and the
first claims written."""
from __future__ import annotations

import math

import numpy as np

from . import evidence
from .data import nuisance_design
from .stats import outliers, zcrit, zs
from .claims import claims_from, write_submission
from .verdicts import ALPHA, F_MIN, _combine, classify, forward_combined


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
