"""The cis-MR agent: the correlation agent's phenotype, then lead-variant Mendelian randomisation.

One turn, observational only:

1. Phenotype as in ``correlation``.
2. Instruments: each protein's lead variant is found from the data, the
   variant with the largest |r| with the protein over all variants (one
   matrix product).  Instruments with F = r^2 (n - 2) / (1 - r^2) <= 30 are
   too weak to use.
3. Wald ratio beta_GY / beta_GP (standardised units) with SE
   se(beta_GY) / |beta_GP|, and the same ratio on cardiac events (cardiac
   death or any MACE event) for the outcome alignment.
4. Claims:
   * Significant proteins whose lead variant is their own are nominated; the
     direction is the MR sign (raising the protein raises severity ->
     inhibit).  Significance comes in two stages, the usual design of a
     discovery screen followed by genetic replication:
     - genome-wide: Bonferroni over the distinct lead variants of strong
       instruments (proteins sharing a lead share one test);
     - replication of the observational discovery: the ten strongest
       Bonferroni-significant observational associations with a strong
       instrument are the candidates, and each is tested one-sided, in the
       direction of its association, at 0.05 / (number of candidates).  A
       protein that drives disease is among the strongest associations,
       and its Wald ratio then only has to confirm it, not to beat every
       variant-protein pair in the genome; a weak instrument (h2 of a few
       per cent, a Wald SE of ~0.1 at 6,000 participants) can do the
       first and not the second.
   * The observational standouts (the correlation agent's picks: Bonferroni-
     significant, |r| at least half the strongest, at most five) that
     genetics does not refute are nominated after the MR ones, with the
     direction of their association.  Genetics refutes an association when
     a strong instrument shows no effect and its estimate excludes the
     observational one (the rejections below); a weak instrument's wide
     interval cannot, and absence of evidence is not evidence of absence.
   * Proteins sharing a significant lead variant cannot be told apart by
     genetics: the set is abstained on, unless the observational data single
     one member out (its association matches its genetic effect, r_obs / wald
     >= 0.6, and every other member's ratio is at most half of it), which is
     then nominated.  Shared loci are common (every protein draws its cis
     variant with replacement), so abstaining on every shared lead would give
     up most drivers whose locus happens to carry another protein.
   * A significant protein whose observational association is clearly
     weaker than its genetic effect (r_obs / wald < 0.6 and the gap more
     than 2.5 SE) is rejected as pleiotropy: its variant reaches the disease
     by some other path.  (A driver's observational association is its own
     effect plus what it shares with the other drivers through common
     factors, which can also subtract; 0.6 leaves room for that.)
   * Proteins among the strongest observational associations whose strong
     instrument shows no effect (MR p > 0.05, and the MR estimate excludes the
     observational one) are rejected: as a measurement artifact when the
     association vanishes within assessment centres, as confounding when it
     vanishes after adjusting for age, sex, BMI and smoking, otherwise as
     reverse causation.
"""
from __future__ import annotations

from .base import EpisodeInfo, ScriptedAgent
from .correlation import (build_phenotype, cardiac_death, source_of, standardise, two_sided_p, write_phenotype,
                          write_submission)

F_MIN = 30.0
PLEIOTROPY_RATIO = 0.6
#: Observational discoveries taken to MR replication (the family of the second stage).
CANDIDATES = 10


def cardiac_events(release, index):
    """1 for cardiac death or any MACE event, else 0, for the participants in ``index``."""
    import os

    import pandas as pd

    mace = pd.read_parquet(os.path.join(release, "mace_events.parquet"))
    with_event = set(mace["subject_id"].astype(str))
    dead = cardiac_death(release, index)
    flagged = pd.Series([s in with_event for s in index], index=index, dtype=float)
    return ((dead > 0) | (flagged > 0)).astype(float)


def mr_table(release, phenotype, genotypes, f_min=30.0):
    """One row per protein: lead variant, instrument F, observational r, Wald ratios on phenotype and events."""
    import os

    import numpy as np
    import pandas as pd

    proteins = pd.read_parquet(os.path.join(release, "proteomics.parquet"))
    proteins.index = proteins.index.astype(str)
    genotypes.index = genotypes.index.astype(str)
    ids = phenotype.index.intersection(proteins.index).intersection(genotypes.index)
    n = len(ids)
    P = standardise(proteins.loc[ids]).astype(np.float32)
    y = phenotype.loc[ids].to_numpy(dtype=float)
    y = (y - y.mean()) / y.std()
    events = cardiac_events(release, ids).to_numpy()
    events = (events - events.mean()) / (events.std() or 1.0)

    G = genotypes.loc[ids]
    variant_ids = np.asarray(G.columns)
    best_abs = np.full(P.shape[1], -1.0)
    lead = np.zeros(P.shape[1], dtype=np.int64)
    lead_r = np.zeros(P.shape[1])
    step = 512
    for start in range(0, G.shape[1], step):
        # Chunks of variants keep the standardised genotypes small at any scale.
        # np.array copies: pandas hands out read-only views under copy-on-write.
        block = np.array(G.iloc[:, start:start + step], dtype=np.float32)
        block[block < 0] = np.nan
        Gz = standardise(pd.DataFrame(block)).astype(np.float32)
        r = Gz.T @ P / n
        idx = np.abs(r).argmax(axis=0)
        val = r[idx, np.arange(r.shape[1])]
        better = np.abs(val) > best_abs
        best_abs[better] = np.abs(val[better])
        lead[better] = start + idx[better]
        lead_r[better] = val[better]

    lead_block = np.array(G.iloc[:, np.unique(lead)], dtype=float)
    lead_block[lead_block < 0] = np.nan
    Gl = standardise(pd.DataFrame(lead_block))
    column = {v: j for j, v in enumerate(np.unique(lead))}
    g = Gl[:, [column[v] for v in lead]]
    b_gy = g.T @ y / n
    b_ge = g.T @ events / n
    se_gy = np.sqrt(np.clip(1 - b_gy ** 2, 1e-12, None) / (n - 2))
    se_ge = np.sqrt(np.clip(1 - b_ge ** 2, 1e-12, None) / (n - 2))
    r_obs = P.T.astype(float) @ y / n
    r_lead = np.where(np.abs(lead_r) < 1e-9, 1e-9, lead_r)
    table = pd.DataFrame({
        "lead": variant_ids[lead], "r_gp": lead_r, "F": lead_r ** 2 * (n - 2) / np.clip(1 - lead_r ** 2, 1e-12, None),
        "r_obs": r_obs, "wald": b_gy / r_lead, "wald_se": se_gy / np.abs(r_lead), "z": b_gy / se_gy,
        "wald_events": b_ge / r_lead, "z_events": b_ge / se_ge,
    }, index=proteins.columns)
    table["p"] = two_sided_p(table["z"])
    table["p_events"] = two_sided_p(table["z_events"])
    table["p_obs"] = two_sided_p(np.arctanh(np.clip(table["r_obs"], -0.999, 0.999)) * np.sqrt(max(n - 3, 1)))
    strong = table["F"] > f_min
    table["shared_lead"] = table["lead"].map(table.loc[strong, "lead"].value_counts()).fillna(0).astype(int)
    return table


def association_checks(release, phenotype, proteins_of_interest):
    """r with the phenotype: raw, adjusted for age/sex/BMI/smoking, and within assessment centres."""
    import os

    import numpy as np
    import pandas as pd

    covariates = pd.read_parquet(os.path.join(release, "covariates.parquet"))
    covariates.index = covariates.index.astype(str)
    proteins = pd.read_parquet(os.path.join(release, "proteomics.parquet"), columns=list(proteins_of_interest))
    proteins.index = proteins.index.astype(str)
    ids = phenotype.index.intersection(proteins.index).intersection(covariates.index)
    y = phenotype.loc[ids].to_numpy(dtype=float)
    adjust = []
    for field in ("p21003_i0", "p31_i0", "p21001_i0", "p20116_i0"):
        if field in covariates.columns:
            value = np.array(pd.to_numeric(covariates.loc[ids, field], errors="coerce"), dtype=float)
            value[value < 0] = np.nan  # UK Biobank sentinel codes (-1, -3) are not measurements
            value[~np.isfinite(value)] = np.nanmean(value)
            adjust.append(value)
    A = np.c_[np.ones(len(ids)), *adjust]
    centre = covariates.loc[ids, "p54_i0"].astype(str).to_numpy() if "p54_i0" in covariates.columns else None

    def residual(v, design):
        beta, *_ = np.linalg.lstsq(design, v, rcond=None)
        return v - design @ beta

    def corr(a, b):
        a, b = a - a.mean(), b - b.mean()
        return float(a @ b / np.sqrt((a @ a) * (b @ b))) if (a @ a) > 0 and (b @ b) > 0 else 0.0

    rows = {}
    y_adj = residual(y, A)
    for protein in proteins_of_interest:
        p = np.array(proteins.loc[ids, protein], dtype=float)
        p[~np.isfinite(p)] = np.nanmean(p)
        row = {"r_raw": corr(p, y), "r_adjusted": corr(residual(p, A), y_adj)}
        if centre is not None:
            # Standardise within each centre: removes any centre-specific scale or offset.
            pz, yz = np.empty_like(p), np.empty_like(y)
            for c in np.unique(centre):
                m = centre == c
                pz[m] = (p[m] - p[m].mean()) / (p[m].std() or 1.0)
                yz[m] = y[m] - y[m].mean()
            row["r_within_centre"] = corr(pz, yz)
        rows[protein] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def strong_null_candidates(table, f_min=30.0):
    """Proteins among the strongest observational associations whose strong instrument shows nothing."""
    import numpy as np

    alpha = 0.05 / len(table)
    strongest = float(np.abs(table["r_obs"]).max())
    candidates = table[(table["p_obs"] < alpha) & (np.abs(table["r_obs"]) >= 0.5 * strongest)
                       & (table["F"] > f_min) & (table["p"] > 0.05)
                       & (np.abs(table["r_obs"] - table["wald"]) > 2 * table["wald_se"])]
    return list(candidates.index)


def mechanism_of(check):
    """The bias most consistent with a strong association that the instrument does not support."""
    raw = abs(check["r_raw"])
    if "r_within_centre" in check and abs(check["r_within_centre"]) < 0.5 * raw:
        return "measurement_artifact", "the association disappears when the protein is standardised within centre"
    if abs(check["r_adjusted"]) < 0.5 * raw:
        return "confounding", "the association halves after adjusting for age, sex, BMI and smoking"
    return "reverse_causation", "strong association but a strong cis instrument shows no effect on the phenotype"


def replication_candidates(table, f_min=30.0, size=10):
    """The observational discoveries taken to MR replication: the ``size`` strongest
    Bonferroni-significant associations among proteins with a strong instrument."""
    import numpy as np

    alpha = 0.05 / max(len(table), 1)
    found = table[(table["p_obs"] < alpha) & (table["F"] > f_min)]
    return list(found.reindex(np.abs(found["r_obs"]).sort_values(ascending=False).index).index[:size])


def observational_standouts(table, most=5):
    """The associations that stand out: Bonferroni-significant, |r| at least half the
    strongest, at most ``most`` (the correlation agent's picks)."""
    import numpy as np

    alpha = 0.05 / max(len(table), 1)
    strongest = float(np.abs(table["r_obs"]).max())
    found = table[(table["p_obs"] < alpha) & (np.abs(table["r_obs"]) >= 0.5 * strongest)]
    return list(found.reindex(np.abs(found["r_obs"]).sort_values(ascending=False).index).index[:most])


def replicated(table, candidates):
    """Candidates whose Wald ratio confirms the association: one-sided, in the direction of
    the observational r, at 0.05 / len(candidates)."""
    import math

    import numpy as np

    if not candidates:
        return []
    rows = table.loc[candidates]
    z = rows["z"] * np.sign(rows["r_obs"])
    p_one = z.map(lambda v: 0.5 * math.erfc(v / math.sqrt(2.0)))
    return list(rows.index[p_one < 0.05 / len(candidates)])


def mr_claims(table, checks, f_min=30.0, pleiotropy_ratio=0.6, candidates=10):
    """Claims from the MR table plus, for the strong null proteins, the association checks."""
    import numpy as np

    valid = table[table["F"] > f_min]
    # Proteins sharing a lead variant share one genotype-phenotype test (the same
    # beta_GY), so the Bonferroni family is the distinct lead variants.
    alpha = 0.05 / max(valid["lead"].nunique(), 1)
    confirmed = replicated(table, replication_candidates(table, f_min, candidates))
    significant = valid[(valid["p"] < alpha) | valid.index.isin(confirmed)].sort_values("p")

    def consistency(row):
        # A causal protein's observational association is near its genetic effect
        # (r_obs / wald around 1); far below it, the variant reaches the disease by
        # another path: another protein at the locus, or a direct effect.
        return row["r_obs"] * np.sign(row["wald"]) / max(abs(row["wald"]), 1e-9)

    def discordant(row):
        aligned_obs = row["r_obs"] * np.sign(row["wald"])
        return (consistency(row) < pleiotropy_ratio
                and (abs(row["wald"]) - aligned_obs) / row["wald_se"] > 2.5)

    claims = {"nominated": [], "directions": {}, "outcome_alignment": {}, "rejected": [], "abstentions": [],
              "confidence": 0.5}
    ambiguous, resolved, pleiotropic, seen_leads = [], [], [], set()

    def nominate(protein, row, sign=None):
        # The direction is the MR sign, or for an observational nomination its association's.
        sign = row["wald"] if sign is None else sign
        claims["nominated"].append(protein)
        claims["directions"][protein] = "inhibit" if sign > 0 else "activate"
        if row["p_events"] < 0.05:
            same = np.sign(row["wald_events"]) == np.sign(sign)
            claims["outcome_alignment"][protein] = "aligned" if same else "misaligned"
        else:
            claims["outcome_alignment"][protein] = "unknown"

    for protein, row in significant.iterrows():
        if row["lead"] in seen_leads:
            continue
        seen_leads.add(row["lead"])
        members = valid[valid["lead"] == row["lead"]]
        if len(members) > 1:
            # One variant, several proteins: genetics alone names the locus, not the protein.
            # The observational data single one out only when that member's association
            # matches the genetic effect and every other member's falls far short.
            ratios = {p: consistency(r) for p, r in members.iterrows()}
            best = max(ratios, key=ratios.get)
            others = [v for p, v in ratios.items() if p != best]
            if ratios[best] >= pleiotropy_ratio and all(v <= 0.5 * ratios[best] for v in others):
                nominate(best, members.loc[best])
                resolved.append([best] + [p for p in members.sort_values("F", ascending=False).index if p != best][:4])
            else:
                ambiguous.append(list(members.sort_values("F", ascending=False).index[:5]))
            continue
        if discordant(row):
            pleiotropic.append(protein)
            continue
        nominate(protein, row)
    for members in ambiguous:
        claims["abstentions"].append({"molecules": members, "reason": "share one significant lead cis variant"})
    for protein in pleiotropic:
        claims["rejected"].append({"molecule": protein, "mechanism": "pleiotropy",
                                   "reason": "genetic effect far larger than the observational association"})
    named = set(claims["nominated"]) | set(pleiotropic) | {p for m in ambiguous + resolved for p in m}
    observational = []
    for protein in observational_standouts(table):
        row = table.loc[protein]
        refuted = row["F"] > f_min and row["p"] > 0.05 and abs(row["r_obs"] - row["wald"]) > 2 * row["wald_se"]
        if protein in named or refuted:
            continue
        observational.append(protein)
        nominate(protein, row, sign=row["r_obs"])
    named |= set(observational)
    for protein, check in checks.iterrows():
        if protein in named:
            continue
        mechanism, reason = mechanism_of(check)
        claims["rejected"].append({"molecule": protein, "mechanism": mechanism, "reason": reason})
    claims["_observational"] = observational
    claims["_ambiguous"] = ambiguous
    claims["_resolved"] = resolved  # shared-lead sets whose first member was singled out and nominated
    claims["_pleiotropic"] = pleiotropic
    return claims


def public(claims):
    """The submission without the analysis-only keys (those starting with an underscore)."""
    return {k: v for k, v in claims.items() if not k.startswith("_")}


LIBRARY = (build_phenotype, write_phenotype, standardise, two_sided_p, cardiac_death, cardiac_events, mr_table,
           association_checks, strong_null_candidates, mechanism_of, replication_candidates, observational_standouts,
           replicated, mr_claims, public, write_submission)

ANALYSIS = f"""
phenotype = build_phenotype(RELEASE)
write_phenotype(phenotype, OUT_CSV)
table = mr_table(RELEASE, phenotype, load_genotypes(), f_min={F_MIN})
table.to_csv(os.path.join(WORK, "mr_table.csv"))
strong_null = strong_null_candidates(table, f_min={F_MIN})
checks = association_checks(RELEASE, phenotype, strong_null)
claims = mr_claims(table, checks, f_min={F_MIN}, pleiotropy_ratio={PLEIOTROPY_RATIO}, candidates={CANDIDATES})
with open(os.path.join(WORK, "mr_claims.json"), "w") as handle:
    json.dump(claims, handle, indent=2, sort_keys=True)
cols = ["lead", "F", "r_obs", "wald", "wald_se", "p", "wald_events", "p_events", "shared_lead"]
print("phenotype written for", len(phenotype), "participants")
print(table[table["F"] > {F_MIN}].sort_values("p")[cols].head(12).to_string(float_format=lambda v: f"{{v:.4g}}"))
print("association checks of strong proteins without genetic support:")
print(checks.round(3).to_string() if len(checks) else "(none)")
"""

SUBMIT = """
write_submission(public(claims), WORK)
print(json.dumps(public(claims), indent=1, sort_keys=True))
submit()
"""


class CisMRAgent(ScriptedAgent):
    name = "cis_mr"

    def programs(self, info: EpisodeInfo) -> list[str]:
        return [source_of(*LIBRARY) + "\n" + ANALYSIS + SUBMIT]
