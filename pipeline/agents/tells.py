"""The tells agent: an exploit that reads roles off role-blind statistics alone.

It never associates anything with disease, outcomes, imaging or the latent
severity, runs no experiment and builds no phenotype.  It computes the
per-protein statistics of ``pipeline.tells.features`` (the tell scan's own
code, emitted into the sandbox) minus every statistic the scan exempts as a
planted signal (T4's shared locus and co-regulation, T9's site scale and
shape, T1's BMI path), and then acts on what would be a tell if the worlds
leaked:

1. Decoy-like proteins: proteins that agree unusually poorly with their own
   transcript *and* share unusually little of the common factors (robust z of
   both below ``EACH_Z``, their sum below ``SUM_Z``): the signature of a
   protein whose value comes from a separate bias equation (issue 12's
   findings 1 and 2).  At most ``MAX_CANDIDATES``.
2. Among them, the one least tied to anything else - the smallest sum of the
   robust z of its age coefficient, of its mean squared correlation with the
   other proteins and of its second genetic signal (when positive), if below
   ``T1_Z`` - is rejected as confounding (a bias equation without the ordinary
   covariate terms and without the disease's genetics in it); the others as
   reverse causation.
3. When a non-confounding candidate exists (a delayed-effect partner looks
   like a reverse-causation decoy), the proteins with the weakest lead variants
   (the delayed driver's fixed weak instrument, finding 3) are abstained on
   together with those candidates, in one entry of at most five.

On worlds without these tells no protein passes the thresholds and the agent
submits what the null agent does.  It plays the same single turn at every
budget.
"""
from __future__ import annotations

from ..tells.features import library_source
from ..tells.scan import EXEMPT
from .base import EpisodeInfo, ScriptedAgent, literal
from .correlation import source_of, write_submission

EACH_Z = -1.2
SUM_Z = -5.0
T1_Z = -3.5
MAX_CANDIDATES = 4


def robust_z(table, columns):
    """Per-column (value - median) / (1.4826 MAD) over all proteins."""
    import numpy as np

    out = table[columns].astype(float).copy()
    for c in columns:
        v = out[c]
        med = v.median()
        mad = 1.4826 * (v - med).abs().median()
        out[c] = (v - med) / (mad if np.isfinite(mad) and mad > 0 else 1.0)
    return out


def usable_columns(table, exempt_patterns):
    """Statistics no exemption pattern matches (planted signals are out of reach), numeric only."""
    import re

    return [c for c in table.columns if table[c].dtype.kind in "fiub"
            and not any(re.fullmatch(p, c) for p in exempt_patterns)]


def tells_claims(table, usable, each_z=-1.2, sum_z=-5.0, t1_z=-3.5, max_candidates=4):
    """Claims from role-blind statistics only (see the module docstring of pipeline.agents.tells)."""
    needed = ["transcript.r", "communality.pc12", "covariates.age", "communality.mean_r2_rest", "instrument.conditional_r2",
              "instrument.lead_r2"]
    claims = {"nominated": [], "directions": {}, "outcome_alignment": {}, "rejected": [], "abstentions": [],
              "confidence": 0.0}
    if any(c not in usable for c in needed):
        return claims
    z = robust_z(table, needed)
    score = z["transcript.r"] + z["communality.pc12"]
    candidates = z[(z["transcript.r"] < each_z) & (z["communality.pc12"] < each_z) & (score < sum_z)]
    candidates = list(score.loc[candidates.index].sort_values().index[:max_candidates])
    if not candidates:
        return claims
    isolation = (z.loc[candidates, "covariates.age"] + z.loc[candidates, "communality.mean_r2_rest"]
                 + z.loc[candidates, "instrument.conditional_r2"].clip(lower=0))
    confounded = [isolation.idxmin()] if isolation.min() < t1_z else []
    others = [c for c in candidates if c not in confounded]
    for protein in confounded:
        claims["rejected"].append({"molecule": protein, "mechanism": "confounding",
                                   "reason": "no transcript agreement, no common factors, no age term, tied to nothing"})
    for protein in others:
        claims["rejected"].append({"molecule": protein, "mechanism": "reverse_causation",
                                   "reason": "no transcript agreement and no common factors"})
    if others:
        # One entry of at most five: the unmatched proteins, filled up with the weakest
        # instruments (a weak instrument's estimated strength is noisy in small cohorts).
        others = others[:3]
        weakest = list(table["instrument.lead_r2"].drop(index=candidates).sort_values().index[:5 - len(others)])
        claims["abstentions"].append({"molecules": weakest + others,
                                      "reason": "weakest instruments with the unmatched proteins"})
    return claims


LIBRARY = (robust_z, usable_columns, tells_claims, write_submission)


class TellsAgent(ScriptedAgent):
    name = "tells"

    def programs(self, info: EpisodeInfo) -> list[str]:
        patterns = [e.pattern for e in EXEMPT]
        main = f"""
table = protein_statistics(RELEASE, load_genotypes())
table.to_csv(os.path.join(WORK, "role_blind_statistics.csv"))
usable = usable_columns(table, {literal(patterns)})
claims = tells_claims(table, usable, each_z={EACH_Z}, sum_z={SUM_Z}, t1_z={T1_Z},
                      max_candidates={MAX_CANDIDATES})
write_submission(claims, WORK)
print(len(usable), "role-blind statistics used of", table.shape[1])
print(json.dumps(claims, indent=1, sort_keys=True))
submit()
"""
        return [library_source() + "\n\n" + source_of(*LIBRARY) + "\n" + main]
