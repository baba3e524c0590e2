"""Checks of one world that need its sealed truth (SPEC sections 3 and 4):

* ``instruments_moving_l``: every variant that moves L (a driver's cis variant,
  the T7 decoy's cis variant, the direct genetic effect G_direct) is shared with
  or linked (r^2 > 0.05) to no other protein's cis variant, except the driver
  itself and, for the T4 driver, its planted partner.  Linkage is the model's
  haplotype r^2 (latent Gaussian chain with correlation exp(-distance / decay),
  thresholded at the allele frequency), computed from the released positions,
  the allele frequencies of the released genotypes and the sealed decay, and
  reported beside the cohort's empirical r^2.  Weaker paths to L (a driver's
  trans master-regulator variant, the hard worlds' polygenic background) are
  listed for information and never fail.
* ``surrogate``: the T8 surrogate looks protective on the world's own imaging
  signature of L (the least-squares combination of the sealed imaging channels
  that best predicts L) and raises cardiac death.
* ``t4_inseparable``: observational data cannot tell the T4 driver from its
  partner: in the joint regression of L on both released proteins their
  coefficients do not differ beyond chance.

Every statistical threshold is a normal quantile at a stated false-alarm rate.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd
from scipy import stats as st

from .. import bundle

#: Haplotype r^2 above which two variants are linked (SPEC section 4).
LINK_R2 = 0.05
#: Correlation distances beyond this many decay lengths are unlinked (r^2 < 1e-9).
LINK_DECAYS = 20.0
#: Expected reduced-form z on L an instrument may get through LD from all moving variants (pipeline.linkage).
Z_TOTAL = 1.0
#: Expected z below which a check is reported as underpowered rather than judged.
POWER_Z = 6.2


@dataclass
class WorldTruth:
    """What the scan needs from one world's sealed bundle."""

    world_id: str
    archetype: str
    proteins: list
    truth: dict
    hidden: dict
    config: dict
    kinds: dict = field(default_factory=dict)  # protein -> role kind

    @classmethod
    def load(cls, world_dir: str) -> "WorldTruth":
        sealed = os.path.join(world_dir, bundle.SEALED)
        truth = bundle.read_sealed(sealed, bundle.TRUTH)
        hidden = bundle.read_sealed(sealed, bundle.HIDDEN_MODEL)
        oracle = bundle.read_sealed(sealed, bundle.ORACLE)
        config = bundle.read_sealed(sealed, bundle.WORLD_CONFIG) or {}
        out = cls(world_id=truth.get("world_id") or os.path.basename(world_dir), archetype=truth.get("archetype", ""),
                  proteins=list(oracle.get("proteins") or []), truth=truth, hidden=hidden, config=config)
        out.kinds = role_kinds(truth)
        return out

    @property
    def cis(self) -> dict:
        return dict(zip(self.proteins, self.hidden.get("protein_cis_variant") or []))

    def decoy(self, bias: str) -> Optional[str]:
        return next((d["protein"] for d in self.truth.get("decoys", []) if d.get("bias") == bias), None)

    def pair(self, kind: str) -> Optional[dict]:
        return next((p for p in self.truth.get("pairs", []) if p.get("kind") == kind), None)


def role_kinds(truth: dict) -> dict:
    """protein -> role kind (one per protein): driver, a9_driver, a9_partner, t4_driver,
    t4_partner, surrogate, or the bias of a scored decoy (T1, T2, T3, T7, T9)."""
    kinds = {d["protein"]: "driver" for d in truth.get("drivers", [])}
    for p in truth.get("pairs", []):
        prefix = str(p.get("kind", "")).lower()
        kinds[p["causal"]] = f"{prefix}_driver"
        kinds[p["partner"]] = f"{prefix}_partner"
    for d in truth.get("decoys", []):
        kinds[d["protein"]] = str(d.get("bias"))
    if truth.get("surrogate"):
        kinds[truth["surrogate"]] = "surrogate"
    return kinds


# ----------------------------------------------------------------------------- linkage


def model_r2(q1: float, q2: float, rho: float) -> float:
    """Haplotype r^2 of two variants whose latent Gaussians correlate ``rho``, each ALT
    below its threshold Phi^-1(q)."""
    if rho <= 0.0:
        return 0.0
    t1, t2 = st.norm.ppf(q1), st.norm.ppf(q2)
    if rho >= 1.0 - 1e-12:
        p11 = min(q1, q2)
    else:
        p11 = float(st.multivariate_normal(mean=[0.0, 0.0], cov=[[1.0, rho], [rho, 1.0]]).cdf([t1, t2]))
    d = p11 - q1 * q2
    return float(d * d / (q1 * (1 - q1) * q2 * (1 - q2)))


def check_instruments(world_dir: str, wt: WorldTruth, genotypes: pd.DataFrame, contig: np.ndarray,
                      position: np.ndarray) -> dict:
    """The locus check: no protein's instrument (its cis variant, its trans variant) carries
    an expected reduced-form z on L or L_late of 1 or more through LD or identity from the
    variants that move L (a driver's cis and trans variants, the T7 decoy's cis variant,
    G_direct, the polygenic background; ``hidden_model.json`` lists each with its effect),
    at the world's participant count, other than its own (a driver's, shared by its T4
    partner; the T7 decoy's).  Linkage is the model's haplotype r (latent Gaussian chain with
    correlation exp(-distance / decay), thresholded at the allele frequency), from the
    released positions, the released genotypes' allele frequencies and the sealed decay;
    the cohort's empirical r^2 is reported beside it.  Worlds built before the movers were
    recorded are judged by the old rule (model r^2 > 0.05 to a driver's cis variant, the T7
    variant or G_direct)."""
    variants = list(genotypes.columns)
    column = {v: i for i, v in enumerate(variants)}
    calls = genotypes.to_numpy()  # int8, -1 for a missing call (no float copy of the whole matrix)
    called = (calls >= 0).sum(axis=0)
    q = np.where(called > 0, np.where(calls >= 0, calls, 0).sum(axis=0, dtype=np.int64) / np.maximum(2.0 * called, 1.0), 0.0)
    n = calls.shape[0]

    def column_of(j: int) -> np.ndarray:
        x = calls[:, j].astype(np.float64)
        return np.where(x >= 0, x, 2 * q[j])
    decay_bp = 1000.0 * float(wt.hidden.get("ld_decay_kb") or (wt.config.get("world") or {}).get("ld_decay_kb", 110.0))
    cis = wt.cis
    trans = dict(zip(wt.proteins, wt.hidden.get("protein_trans_variant") or []))
    pairs = {p["causal"]: p for p in wt.truth.get("pairs", []) if p.get("kind") == "T4"}
    movers = list(wt.hidden.get("movers") or [])
    legacy = not movers
    if legacy:
        for d in wt.truth.get("drivers", []):
            movers.append({"variant": cis.get(d["protein"]), "kind": "driver_cis", "protein": d["protein"], "legacy": True})
        if wt.decoy("T7"):
            movers.append({"variant": cis.get(wt.decoy("T7")), "kind": "T7_cis", "protein": wt.decoy("T7"), "legacy": True})
        if wt.hidden.get("direct_variant"):
            movers.append({"variant": wt.hidden["direct_variant"], "kind": "direct", "protein": None, "legacy": True})
    own = {}
    for m in movers:
        if m.get("protein"):
            own.setdefault(m["protein"], set()).add(m["variant"])
    for causal, pair in pairs.items():
        own.setdefault(pair["partner"], set()).update(own.get(causal, set()))

    def corr(a: int, b: int) -> float:
        x, y = column_of(a), column_of(b)
        x, y = x - x.mean(), y - y.mean()
        den = math.sqrt(float(x @ x) * float(y @ y))
        return float(x @ y) / den if den > 0 else 0.0

    problems, notes = [], []
    worst = (0.0, None)
    for m in movers:
        variant = m["variant"]
        if variant not in column:
            problems.append(f"{m['kind']} {m.get('protein') or ''}: variant {variant} is not in the release")
            continue
        mi = column[variant]
        beta = max(float(m.get("beta_l", 0.0)), float(m.get("beta_late", 0.0)))
        for protein in wt.proteins:
            for role_of_v, v in (("cis", cis.get(protein)), ("trans", trans.get(protein))):
                if not v or v not in column or v in own.get(protein, set()):
                    continue
                j = column[v]
                if contig[j] != contig[mi]:
                    continue
                distance = abs(int(position[j]) - int(position[mi]))
                if distance > LINK_DECAYS * decay_bp:
                    continue
                r2_model = 1.0 if j == mi else model_r2(float(q[j]), float(q[mi]), math.exp(-distance / decay_bp))
                if m.get("legacy"):
                    if role_of_v == "cis" and r2_model > LINK_R2:
                        problems.append(f"{protein} ({wt.kinds.get(protein, 'ordinary')}) has cis variant {v}, linked to "
                                        f"{m['kind']} {variant}: model r2 {r2_model:.3f}, cohort r2 {corr(j, mi) ** 2:.3f}")
                    continue
                z = beta * math.sqrt(r2_model) * math.sqrt(n)
                if z > worst[0]:
                    worst = (z, f"{protein} {role_of_v} {v} via {m['kind']} {variant}")
                if z >= Z_TOTAL:
                    problems.append(f"{protein} ({wt.kinds.get(protein, 'ordinary')}): its {role_of_v} variant {v} "
                                    f"{'is' if j == mi else 'is linked to'} the {m['kind'].replace('_', ' ')} {variant}"
                                    f"{' of ' + m['protein'] if m.get('protein') else ''}: model r2 {r2_model:.2g}, cohort r2 "
                                    f"{corr(j, mi) ** 2:.2g}, {distance} bp, expected z {z:.2f} at n = {n}")
    detail = (f"{len(movers)} variant(s) move L; " + ("no other protein's cis variant is linked (model r2 > 0.05) to one (old rule)"
              if legacy else f"the largest expected z any other protein's instrument gets from one is {worst[0]:.3f}"
              + (f" ({worst[1]})" if worst[1] else "") + f", below {Z_TOTAL:g} at n = {n}")) if not problems else \
        f"{len(problems)} instrument(s) carry an effect on L through LD"
    return {"name": "instruments_moving_l", "world": wt.world_id, "passed": not problems, "detail": detail,
            "max_expected_z": round(worst[0], 4), "problems": problems, "notes": notes}


# ----------------------------------------------------------------------------- surrogate


def _z_of_r(r: float, n: int) -> float:
    return float(np.arctanh(np.clip(r, -0.999999, 0.999999)) * math.sqrt(max(n - 3, 1)))


def check_surrogate(world_dir: str, wt: WorldTruth) -> dict:
    """The surrogate's correlation with the imaging signature of L and its shift among
    cardiac deaths given L, as z-statistics; ``surrogate_verdict`` judges them."""
    surrogate = wt.truth.get("surrogate")
    base = {"name": "surrogate", "world": wt.world_id, "archetype": wt.archetype, "surrogate": surrogate}
    if not surrogate:
        return {**base, "applicable": False}
    sealed, release = os.path.join(world_dir, bundle.SEALED), os.path.join(world_dir, bundle.RELEASE)
    hidden = bundle.read_sealed(sealed, bundle.HIDDEN_PARTICIPANTS)
    latent = bundle.read_sealed(sealed, bundle.LATENT).reindex(hidden.index)
    traits = [c for c in hidden.columns if c.startswith("trait_")]
    proteins = pd.read_parquet(os.path.join(release, bundle.table_file("proteomics")), columns=[surrogate])
    p = np.array(proteins[surrogate].reindex(hidden.index.astype(str)), dtype=np.float64)
    p = np.where(np.isfinite(p), p, np.nanmean(p))
    L = latent["latent"].to_numpy(dtype=np.float64)
    n = len(L)
    out = dict(base, applicable=True, traits=len(traits))
    if traits:
        T = hidden[traits].to_numpy(dtype=np.float64)
        design = np.column_stack([np.ones(n), T])
        beta, *_ = np.linalg.lstsq(design, L, rcond=None)
        signature = design @ beta
        r_img = float(np.corrcoef(p, signature)[0, 1])
        # the surrogate's own imaging effect, beyond what it shares with L
        resid_p = p - np.polyval(np.polyfit(L, p, 1), L)
        resid_s = signature - np.polyval(np.polyfit(L, signature, 1), L)
        out.update(r_imaging=round(r_img, 4), z_imaging=round(_z_of_r(r_img, n), 2),
                   r_imaging_given_l=round(float(np.corrcoef(resid_p, resid_s)[0, 1]), 4),
                   signature_weights={t.removeprefix("trait_"): round(float(b), 4) for t, b in zip(traits, beta[1:])},
                   imaging_signature_r_with_l=round(float(np.corrcoef(signature, L)[0, 1]), 4))
    mortality = pd.read_parquet(os.path.join(release, bundle.table_file("mortality")))
    mortality.index = mortality.index.astype(str)
    died = mortality["cause"].astype("string").eq("cardiac").fillna(False).reindex(hidden.index.astype(str), fill_value=False)
    d = died.to_numpy(dtype=bool)
    late = latent["latent_late"].to_numpy(dtype=np.float64)
    adjust = np.column_stack([np.ones(n), L, late] + [hidden[c].to_numpy(dtype=np.float64) for c in ("z_age", "z_bmi")
                                                       if c in hidden.columns])
    resid = p - adjust @ np.linalg.lstsq(adjust, p, rcond=None)[0]
    k = int(d.sum())
    shift = float(resid[d].mean() - resid[~d].mean()) if 0 < k < n else 0.0
    se = float(resid.std() * math.sqrt(1.0 / max(k, 1) + 1.0 / max(n - k, 1)))
    hazard = float(((wt.config.get("world") or {}).get("bias_params") or {}).get("T8", {}).get("hazard", 0.40))
    # score test of a log-hazard ratio per SD: E[z] ~ beta * SD * sqrt(deaths * survivors / n)
    expected = hazard * float(resid.std()) * math.sqrt(k * (n - k) / n) if n else 0.0
    out.update(cardiac_deaths=k, death_shift_sd=round(shift, 4), z_cardiac_death=round(shift / se if se > 0 else 0.0, 2),
               expected_z_cardiac_death=round(expected, 2))
    return out


def surrogate_verdict(c: dict, z_crit: float) -> dict:
    """Imaging: the surrogate must look significantly protective (z <= -z_crit).  Cardiac
    death: significantly raised (z >= z_crit) when the world has the power (expected z at
    least ``POWER_Z``); otherwise it is left to the pooled test, and only a significant
    fall fails."""
    problems = []
    if not c.get("traits"):
        problems.append("sealed/hidden_participants.parquet carries no imaging trait channels: the surrogate's imaging "
                        "signature cannot be checked")
    elif not c["z_imaging"] <= -z_crit:
        problems.append(f"the surrogate does not look protective on the {c['archetype']} imaging signature of L: "
                        f"r = {c['r_imaging']:+.3f} (z = {c['z_imaging']:+.1f}; needs z <= -{z_crit:.2f})")
    z, expected = c["z_cardiac_death"], c["expected_z_cardiac_death"]
    if expected >= POWER_Z:
        verdict = "checked"
        if not z >= z_crit:
            problems.append(f"the surrogate does not raise cardiac death given L: shift {c['death_shift_sd']:+.3f} SD among "
                            f"{c['cardiac_deaths']} cardiac deaths (z = {z:+.1f}, expected {expected:.1f}; needs z >= {z_crit:.2f})")
    else:
        verdict = f"underpowered (expected z {expected:.1f} < {POWER_Z}; judged pooled over worlds)"
        if z <= -z_crit:
            problems.append(f"the surrogate lowers cardiac death given L (z = {z:+.1f})")
    return {**c, "passed": not problems, "problems": problems, "cardiac_death_verdict": verdict, "threshold": round(z_crit, 2),
            "detail": f"imaging r {c.get('r_imaging', float('nan')):+.3f} (z {c.get('z_imaging', float('nan')):+.1f}), "
                      f"cardiac-death z {z:+.1f} (expected {expected:.1f})"}


# ----------------------------------------------------------------------------- T4


def check_t4(world_dir: str, wt: WorldTruth) -> dict:
    """Joint regression of L on the T4 driver and partner as released: the difference of
    their coefficients in standard errors (positive: the driver stands out)."""
    pair = wt.pair("T4")
    base = {"name": "t4_inseparable", "world": wt.world_id}
    if not pair:
        return {**base, "applicable": False, "passed": True, "problems": [], "detail": "no T4 pair"}
    release, sealed = os.path.join(world_dir, bundle.RELEASE), os.path.join(world_dir, bundle.SEALED)
    cols = [pair["causal"], pair["partner"]]
    proteins = pd.read_parquet(os.path.join(release, bundle.table_file("proteomics")), columns=cols)
    proteins.index = proteins.index.astype(str)
    latent = bundle.read_sealed(sealed, bundle.LATENT)
    latent.index = latent.index.astype(str)
    ids = latent.index.intersection(proteins.index)
    X = np.array(proteins.loc[ids, cols], dtype=np.float64)
    X = np.where(np.isfinite(X), X, np.nanmean(X, axis=0))
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = latent.loc[ids, "latent"].to_numpy(dtype=np.float64)
    n = len(y)
    design = np.column_stack([np.ones(n), X])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ beta
    sigma2 = float(resid @ resid) / (n - 3)
    cov = sigma2 * np.linalg.inv(design.T @ design)
    # signed so that a positive z means the driver's own effect stands out from the partner's
    diff = float(np.sign(beta[1]) * (beta[1] - beta[2]))
    se = math.sqrt(max(float(cov[1, 1] + cov[2, 2] - 2 * cov[1, 2]), 1e-24))
    r_d, r_p = float(np.corrcoef(X[:, 0], y)[0, 1]), float(np.corrcoef(X[:, 1], y)[0, 1])
    return {**base, "applicable": True, "driver": pair["causal"], "partner": pair["partner"],
            "r_driver_l": round(r_d, 4), "r_partner_l": round(r_p, 4),
            "r_driver_partner": round(float(np.corrcoef(X[:, 0], X[:, 1])[0, 1]), 4),
            "beta_driver": round(float(beta[1]), 4), "beta_partner": round(float(beta[2]), 4), "z": round(diff / se, 2)}
