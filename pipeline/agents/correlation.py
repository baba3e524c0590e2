"""The correlation agent: a phenotype from non-omics data, then a marginal protein screen.

What a careful analyst without genetics would do, and the baseline the
genetic agents must beat.  One turn:

1. Phenotype: the out-of-fold (5-fold ridge) prediction, from the ECG and
   coronary-CT features, of the clinical label of the disease (a
   cardiomyopathy or heart-failure diagnosis in the linked records; hard
   cardiac outcomes if too few carry one).  The label supervises the weights;
   the measurements carry the graded severity, so the composite ranks every
   participant, labelled or not.  Outcomes were tried as the label and track
   severity less well: their hazard also carries age and risk factors.
2. Screen: marginal correlation of every protein with the phenotype.
   Nominated: proteins significant after Bonferroni correction whose |r| is at
   least half the strongest |r| (at most five), i.e. the few that stand out.
3. Direction: a protein higher in more severe disease is to be inhibited,
   one lower is to be activated.  Outcome alignment: "aligned" when the
   protein's correlation with cardiac death has the same sign as with the
   phenotype at p < 0.05, "misaligned" when the opposite, else "unknown".

The functions below run inside the sandbox: the agent emits their source
(``inspect.getsource``) followed by a call, so each is self-contained and
reads only the release.
"""
from __future__ import annotations

import inspect

from .base import EpisodeInfo, ScriptedAgent


def build_phenotype(release):
    """Severity score per participant (higher = more severe), indexed by subject_id."""
    import os

    import numpy as np
    import pandas as pd

    ecg = pd.read_parquet(os.path.join(release, "ecg_features.parquet"))
    ct = pd.read_parquet(os.path.join(release, "coronary_ct.parquet"))
    mortality = pd.read_parquet(os.path.join(release, "mortality.parquet"))
    mace = pd.read_parquet(os.path.join(release, "mace_events.parquet"))
    features = ecg.join(ct, how="outer").apply(pd.to_numeric, errors="coerce").astype(float)
    for column in features.columns:
        if column.startswith("cac"):
            # Agatston scores are heavy-tailed; the log keeps a few calcified hearts from dominating.
            features[column] = np.log1p(features[column].clip(lower=0))
    # Winsorise: implausible entries (messy worlds) must not steer a linear fit.
    low, high = features.quantile(0.005), features.quantile(0.995)
    features = features.clip(low, high, axis=1)
    z = (features - features.mean()) / features.std(ddof=0).replace(0, 1)
    X = np.c_[np.ones(len(z)), z.fillna(0.0).to_numpy()]

    diagnoses = pd.read_parquet(os.path.join(release, "ehr_diagnoses.parquet"))
    # The clinical label of the disease: a cardiomyopathy (I42, I43, ischaemic I25.5) or
    # heart-failure (I50) diagnosis.  A target only, never a feature, or the fit would
    # learn the codes instead of the measurements.
    codes = diagnoses["icd10"].astype("string").fillna("")
    labelled = set(diagnoses.loc[codes.str.match(r"^(I42|I43|I50|I25\.5)"), "subject_id"].astype(str))
    ids = [str(s) for s in z.index]
    y = np.array([s in labelled for s in ids], dtype=float)
    if y.sum() < 50:
        # Too few diagnoses to learn from: fall back to hard outcomes (cardiac death, MACE).
        cardiac_death = mortality["cause"].astype("string").eq("cardiac").fillna(False)
        with_event = set(mace["subject_id"].astype(str))
        y = (cardiac_death.reindex(z.index, fill_value=False).to_numpy()
             | np.array([s in with_event for s in ids])).astype(float)

    folds = np.arange(len(z)) % 5
    penalty = np.eye(X.shape[1]) * (0.01 * len(z))
    penalty[0, 0] = 0.0
    predicted = np.zeros(len(z))
    for k in range(5):
        train = folds != k
        beta = np.linalg.solve(X[train].T @ X[train] + penalty, X[train].T @ y[train])
        predicted[~train] = X[~train] @ beta
    predicted = (predicted - predicted.mean()) / predicted.std()
    return pd.Series(predicted, index=z.index.astype(str), name="phenotype")


def write_phenotype(phenotype, out_csv):
    import pandas as pd

    pd.DataFrame({"subject_id": phenotype.index, "phenotype": phenotype.to_numpy()}).to_csv(out_csv, index=False)


def standardise(frame):
    """Column z-scores with missing values at the mean (0), as float64."""
    import numpy as np

    values = np.array(frame, dtype=float)
    mean = np.nanmean(values, axis=0)
    sd = np.nanstd(values, axis=0)
    sd[~np.isfinite(sd) | (sd == 0)] = 1.0
    values = (values - mean) / sd
    values[~np.isfinite(values)] = 0.0
    return values


def two_sided_p(z):
    import math

    import numpy as np

    z = np.abs(np.asarray(z, dtype=float))
    return np.array([math.erfc(v / math.sqrt(2.0)) for v in z.ravel()]).reshape(z.shape)


def cardiac_death(release, index):
    import os

    import pandas as pd

    mortality = pd.read_parquet(os.path.join(release, "mortality.parquet"))
    dead = mortality["cause"].astype("string").eq("cardiac").fillna(False).astype(float)
    return dead.reindex(index, fill_value=0.0)


def marginal_screen(release, phenotype):
    """Per-protein correlation with the phenotype and with cardiac death, with z and p."""
    import math
    import os

    import numpy as np
    import pandas as pd

    proteins = pd.read_parquet(os.path.join(release, "proteomics.parquet"))
    proteins.index = proteins.index.astype(str)
    ids = phenotype.index.intersection(proteins.index)
    P = standardise(proteins.loc[ids])
    n = len(ids)
    y = phenotype.loc[ids].to_numpy(dtype=float)
    y = (y - y.mean()) / y.std()
    death = cardiac_death(release, ids).to_numpy()
    death = (death - death.mean()) / (death.std() or 1.0)
    r = P.T @ y / n
    r_death = P.T @ death / n
    scale = math.sqrt(max(n - 3, 1))
    table = pd.DataFrame({
        "r": r, "z": np.arctanh(np.clip(r, -0.999, 0.999)) * scale,
        "r_death": r_death, "z_death": np.arctanh(np.clip(r_death, -0.999, 0.999)) * scale,
    }, index=proteins.columns)
    table["p"] = two_sided_p(table["z"])
    table["p_death"] = two_sided_p(table["z_death"])
    return table


def correlation_claims(table, max_nominations=5):
    import numpy as np

    alpha = 0.05 / len(table)
    strongest = float(np.abs(table["r"]).max())
    picked = table[(table["p"] < alpha) & (np.abs(table["r"]) >= 0.5 * strongest)]
    picked = picked.reindex(picked["r"].abs().sort_values(ascending=False).index)[:max_nominations]
    claims = {"nominated": [], "directions": {}, "outcome_alignment": {}, "rejected": [], "abstentions": [],
              "confidence": 0.3}
    for protein, row in picked.iterrows():
        claims["nominated"].append(protein)
        claims["directions"][protein] = "inhibit" if row["r"] > 0 else "activate"
        if row["p_death"] < 0.05:
            same = np.sign(row["r_death"]) == np.sign(row["r"])
            claims["outcome_alignment"][protein] = "aligned" if same else "misaligned"
        else:
            claims["outcome_alignment"][protein] = "unknown"
    return claims


def write_submission(claims, work):
    import json
    import os

    with open(os.path.join(work, "submission.json"), "w") as handle:
        json.dump(claims, handle, indent=2, sort_keys=True)


def source_of(*functions) -> str:
    """The emitted library: the functions' own source, in order."""
    return "\n\n".join(inspect.getsource(f) for f in functions)


LIBRARY = (build_phenotype, write_phenotype, standardise, two_sided_p, cardiac_death, marginal_screen,
           correlation_claims, write_submission)

MAIN = """
phenotype = build_phenotype(RELEASE)
write_phenotype(phenotype, OUT_CSV)
table = marginal_screen(RELEASE, phenotype)
table.to_csv(os.path.join(WORK, "marginal_screen.csv"))
claims = correlation_claims(table)
write_submission(claims, WORK)
print("phenotype written for", len(phenotype), "participants")
print(table.reindex(table["r"].abs().sort_values(ascending=False).index).head(10).round(4).to_string())
print("nominated:", claims["nominated"])
submit()
"""


class CorrelationAgent(ScriptedAgent):
    name = "correlation"

    def programs(self, info: EpisodeInfo) -> list[str]:
        return [source_of(*LIBRARY) + "\n" + MAIN]
