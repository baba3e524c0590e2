"""Calibration figures of the world core against Supplementary Methods S1.1 and
the paper's anchors (the values in ``targets``), each with a tolerance of k
analytic standard errors at the world's scale (``pipeline/data/calibration_targets.yaml``);
what the world sets itself (its scale, visit-2 fraction, messiness) comes from
its resolved config, its centre shifts from the sealed hidden model."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..ld import expected_haplotype_r
from .core import Check, band, targets
from .targets import V

GROUP = "calibration"


def allele_frequencies(hap: np.ndarray) -> np.ndarray:
    """ALT frequency per variant of int8 [v, s, 2] haplotypes, slab by slab (bounded memory)."""
    out = np.empty(hap.shape[0])
    for v0 in range(0, hap.shape[0], 256):
        slab = hap[v0:v0 + 256].reshape(min(256, hap.shape[0] - v0), -1)
        out[v0:v0 + 256] = slab.sum(axis=1, dtype=np.int64) / slab.shape[1]
    return out


def _phi(n, sum_a, sum_b, sum_ab):
    """Correlation of two 0/1 variables from their sums (E[a^2] = E[a] for binary a)."""
    ma, mb = sum_a / n, sum_b / n
    cov = sum_ab / n - ma * mb
    return cov / np.sqrt(np.maximum(ma - ma * ma, 1e-12) * np.maximum(mb - mb * mb, 1e-12))


def _corr_from_sums(n, sa, sb, saa, sbb, sab):
    """Pearson correlation from the sums of a, b, a^2, b^2 and ab over n rows."""
    cov = sab / n - (sa / n) * (sb / n)
    return cov / np.sqrt(np.maximum(saa / n - (sa / n) ** 2, 1e-300) * np.maximum(sbb / n - (sb / n) ** 2, 1e-300))


def pair_correlations(hap: np.ndarray, idx: np.ndarray, groups: int) -> tuple:
    """Haplotype correlation of variant pairs (idx, idx + 1) and its delete-one-group
    jackknife replicates, from per-group sums (participants in ``groups`` groups by
    index; both haplotypes of a participant in one group).  Works in chunks of pairs
    on the int8 calls, so memory stays bounded at any cohort size.
    Returns (r [pairs], r_without_group [pairs, groups])."""
    n_s = hap.shape[1]
    gid = np.arange(n_s) % groups
    onehot = np.zeros((n_s, groups), dtype=np.float32)
    onehot[np.arange(n_s), gid] = 1.0
    n_g = 2.0 * onehot.sum(axis=0)  # haplotypes per group
    r_all = np.empty(len(idx))
    r_jack = np.empty((len(idx), groups))
    for c0 in range(0, len(idx), 128):
        sel = idx[c0:c0 + 128]
        a = hap[sel].astype(np.float32)  # [c, s, 2]
        b = hap[sel + 1].astype(np.float32)
        sa = (a.sum(axis=2)) @ onehot  # [c, groups] sums per group
        sb = (b.sum(axis=2)) @ onehot
        sab = ((a * b).sum(axis=2)) @ onehot
        n_tot = n_g.sum()
        r_all[c0:c0 + 128] = _phi(n_tot, sa.sum(axis=1), sb.sum(axis=1), sab.sum(axis=1))
        r_jack[c0:c0 + 128] = _phi(n_tot - n_g[None, :], sa.sum(axis=1, keepdims=True) - sa,
                                   sb.sum(axis=1, keepdims=True) - sb, sab.sum(axis=1, keepdims=True) - sab)
    return r_all, r_jack


def age_target(world) -> tuple:
    """Mean, SD and 4th central moment of the centre mixture of TN(59.147 + shift, 9.245^2; 45, 84)."""
    p = np.asarray(world.hidden["centre_p"])
    shifts = np.asarray(world.hidden["centre_age_shift"])
    m1 = m2 = m3 = m4 = 0.0
    for pc, sc in zip(p, shifts):
        mu = V.age_mean + sc
        dist = stats.truncnorm((V.age_lower - mu) / V.age_sd, (V.age_upper - mu) / V.age_sd, loc=mu, scale=V.age_sd)
        raw = [dist.moment(k) for k in (1, 2, 3, 4)]
        m1 += pc * raw[0]
        m2 += pc * raw[1]
        m3 += pc * raw[2]
        m4 += pc * raw[3]
    var = m2 - m1 ** 2
    mu4 = m4 - 4 * m1 * m3 + 6 * m1 ** 2 * m2 - 3 * m1 ** 4
    return m1, np.sqrt(var), mu4


def checks(world) -> tuple[list, dict]:
    tg = targets()
    cov = world.covariates
    n = len(cov)
    out: list[Check] = []
    plots: dict = {}

    # ---- age ---------------------------------------------------------------------
    age = cov["p21003_i0"].to_numpy(float)
    mean_t, sd_t, mu4 = age_target(world)
    se_mean = sd_t / np.sqrt(n)
    se_sd = np.sqrt(max(mu4 - sd_t ** 4, 1e-9) / (4 * sd_t ** 2 * n))
    k = tg["age_mean"]["k_se"]
    out.append(band("age mean (years)", GROUP, age.mean(), mean_t, k * se_mean, tg["age_mean"]["source"], se=se_mean))
    out.append(band("age SD (years)", GROUP, age.std(), sd_t, tg["age_sd"]["k_se"] * se_sd, tg["age_sd"]["source"], se=se_sd))
    lo, hi = V.age_lower, V.age_upper
    ok = bool(age.min() >= lo and age.max() <= hi)
    out.append(Check("age within bounds [45, 84]", GROUP, float(age.min()), None, lo, hi, ok and age.max() <= hi,
                     tg["age_bounds"]["source"], f"min {age.min():.1f}, max {age.max():.1f}", level="calibration"))

    # ---- sex -----------------------------------------------------------------------
    male = cov["p31_i0"].to_numpy(float)
    se = np.sqrt(V.male_fraction * (1 - V.male_fraction) / n)
    out.append(band("male fraction", GROUP, male.mean(), V.male_fraction, tg["male_fraction"]["k_se"] * se, tg["male_fraction"]["source"], se=se))

    # ---- BMI: residual SD given the designed effects, and the empirical centre -------
    bmi = cov["p21001_i0"].to_numpy(float)
    codes = world.centre_codes
    centre_idx = pd.Series(range(len(codes)), index=codes)[cov["p54_i0"].to_numpy()].to_numpy()
    anc_idx = cov["p21000_i0"].to_numpy() - 1
    background = np.asarray(world.hidden["centre_bmi_shift"])[centre_idx] + np.asarray(world.hidden["ancestry_bmi"])[anc_idx]
    resid = bmi - (V.bmi_age_slope * (age - V.age_mean) + V.bmi_sex_effect * (male - V.male_fraction) + background)
    # Quantile-based estimates: BMI is clipped at 15 and 55, which bends the tails but
    # not the middle.  SE of the IQR-based SD is 1.166 sigma / sqrt(n); of the median
    # 1.2533 sigma / sqrt(n) (normal-theory efficiencies).
    q25, q50, q75 = np.quantile(resid, [0.25, 0.5, 0.75])
    sd_iqr = (q75 - q25) / 1.3490
    se = 1.166 * V.bmi_residual_sd / np.sqrt(n)
    out.append(band("BMI residual SD (kg/m2, IQR-based)", GROUP, sd_iqr, V.bmi_residual_sd, tg["bmi_residual_sd"]["k_se"] * se,
                    tg["bmi_residual_sd"]["source"], se=se))
    se = 1.2533 * V.bmi_residual_sd / np.sqrt(n)
    out.append(band("BMI centre (kg/m2, median)", GROUP, q50, V.bmi_centre, tg["bmi_centre"]["k_se"] * se,
                    tg["bmi_centre"]["source"], se=se))

    # ---- allele frequencies ----------------------------------------------------------
    hap = world.haplotypes  # int8 [v, s, 2]
    q = allele_frequencies(hap)
    x = (q - V.af_floor) / (0.5 - V.af_floor)
    ks = stats.kstest(x, stats.beta(V.af_beta_a, V.af_beta_b).cdf).statistic
    crit = tg["af_distribution"]["k_ks"] / np.sqrt(len(q))
    out.append(Check("allele-frequency KS distance to the scaled Beta", GROUP, float(ks), 0.0, None, float(crit), bool(ks <= crit),
                     tg["af_distribution"]["source"], f"{len(q)} variants; ALT AF quantiles 5/50/95 % = "
                     + "/".join(f"{v:.3f}" for v in np.quantile(q, [0.05, 0.5, 0.95])), level="calibration"))
    plots["af"] = {"q": q, "a": V.af_beta_a, "b": V.af_beta_b}

    # ---- LD by distance: adjacent same-contig pairs ----------------------------------
    var = world.variants
    same = var["contig"].to_numpy()[1:] == var["contig"].to_numpy()[:-1]
    dist = np.diff(var["position"].to_numpy()).astype(float)
    idx = np.flatnonzero(same)
    decay = V.ld_decay_kb * 1000.0
    rho = np.exp(-dist[idx] / decay)
    q1, q2 = q[idx].clip(1e-4, 1 - 1e-4), q[idx + 1].clip(1e-4, 1 - 1e-4)
    r_exp = expected_haplotype_r(q1, q2, rho)
    groups = 20
    r_obs, r_jack = pair_correlations(hap, idx, groups)
    close = rho > 0.3
    m = int(close.sum())
    if m >= 3:
        # SE by a delete-one-group jackknife over participants: phi coefficients of
        # binary alleles do not follow the normal-theory SE, and adjacent pairs overlap.
        stats_j = np.nanmean(r_jack[close] - r_exp[close, None], axis=0)
        se = float(np.sqrt((groups - 1) / groups * np.sum((stats_j - stats_j.mean()) ** 2)))
        diff = float(np.mean(r_obs[close] - r_exp[close]))
        out.append(band("LD: mean observed - expected haplotype r (pairs with latent rho > 0.3)", GROUP, diff, 0.0,
                        tg["ld_decay"]["k_se"] * se, tg["ld_decay"]["source"],
                        f"{m} adjacent pairs; mean observed r {np.mean(r_obs[close]):.3f}, expected {np.mean(r_exp[close]):.3f}; "
                        "SE by participant jackknife", se=se))
    else:
        out.append(Check("LD by distance", GROUP, float("nan"), None, None, None, False, tg["ld_decay"]["source"],
                         f"only {m} close adjacent pairs", level="calibration"))
    plots["ld"] = {"dist": dist[idx], "r_obs": r_obs, "r_exp": r_exp}

    # ---- Hardy-Weinberg ---------------------------------------------------------------
    p_alt, het = np.empty(hap.shape[0]), np.empty(hap.shape[0])
    for v0 in range(0, hap.shape[0], 256):
        dos = hap[v0:v0 + 256, :, 0] + hap[v0:v0 + 256, :, 1]  # int8, one slab at a time
        p_alt[v0:v0 + 256] = dos.mean(axis=1) / 2
        het[v0:v0 + 256] = (dos == 1).mean(axis=1)
    hexp = 2 * p_alt * (1 - p_alt)
    ok_v = hexp > 0.02
    f = 1 - het[ok_v] / hexp[ok_v]
    chi2 = hap.shape[1] * f ** 2
    frac = float(np.mean(chi2 > stats.chi2.ppf(0.999, 1)))
    se = np.sqrt(0.001 * 0.999 / ok_v.sum())
    out.append(band("Hardy-Weinberg: fraction of variants with p < 0.001", GROUP, frac, 0.001, tg["hardy_weinberg"]["k_se"] * se,
                    tg["hardy_weinberg"]["source"], f"mean F = {f.mean():+.4f}", se=se))

    # ---- instrument strength ------------------------------------------------------------
    prot = world.proteomics
    hid = world.hidden
    geno = world.genotypes
    special_ids = {d["protein"] for d in world.truth["decoys"] if d["bias"] in ("T1", "T2")}
    special_ids |= {p["partner"] for p in world.truth["pairs"] if p["kind"] == "A9"}
    t9 = {d["protein"] for d in world.truth["decoys"] if d["bias"] == "T9"}
    h2 = np.asarray(hid["protein_h2"])
    lss = np.asarray(hid["protein_loading_ss"])
    trans = np.asarray([v is not None for v in hid["protein_trans_variant"]])
    # the covariate terms' variance including their covariances (BMI depends on age and sex):
    # each protein's own coefficients when the sealed model lists them (pipeline.pathways)
    coefs = (hid.get("protein_covariates") or {}).get("coef")
    if coefs:
        smoking = np.clip(np.nan_to_num(world.covariates["p20116_i0"].to_numpy(float)), 0, 1)
        x = np.column_stack([age, male, bmi, smoking])
        x = x - x.mean(axis=0)
        cov_var = np.einsum("ij,jk,ik->i", np.asarray(coefs), x.T @ x / len(x), np.asarray(coefs))
    else:
        cov_var = float(np.var(V.protein_age * age + V.protein_sex * male + V.protein_bmi * bmi))
    resid_var = round(V.protein_residual_sd ** 2, 12)  # 0.64, without the last bit 0.8 ** 2 carries in floats
    r_exp_all = np.sqrt(h2) / np.sqrt(h2 + V.protein_trans_variance * trans + lss + cov_var + resid_var)
    # The SE is a delete-one-group jackknife over participants: every protein's r shares the
    # cohort's realised factor and covariate variances, so the proteins' sampling errors are
    # correlated and the SE of independent errors, sqrt(sum (1 - r^2)^2 / n) / m, understates
    # the mean's (a 4.03 "SE" miss of 0.0003 in standard-01 at paper scale).
    groups = 20
    gid = np.arange(len(prot)) % groups
    pids = list(prot.columns)
    keep = [j for j, pid in enumerate(pids) if pid not in special_ids and pid not in t9]
    r_full = np.empty(len(keep))
    r_jack = np.empty((len(keep), groups))
    ses = np.empty(len(keep))
    for i, j in enumerate(keep):
        g = geno[hid["protein_cis_variant"][j]].to_numpy(float)
        y = prot[pids[j]].to_numpy(float)
        okm = np.isfinite(y) & np.isfinite(g)
        sums = [np.bincount(gid[okm], weights=v, minlength=groups)
                for v in (np.ones(okm.sum()), g[okm], y[okm], g[okm] * g[okm], y[okm] * y[okm], g[okm] * y[okm])]
        total = [v.sum() for v in sums]
        r_full[i] = _corr_from_sums(*total)
        r_jack[i] = _corr_from_sums(*[t - v for t, v in zip(total, sums)])
        ses[i] = (1 - r_exp_all[j] ** 2) / np.sqrt(okm.sum())
    mean_diff = float(np.mean(r_full - r_exp_all[keep]))
    jack = (r_jack - r_exp_all[keep][:, None]).mean(axis=0)
    se = float(np.sqrt((groups - 1) / groups * np.sum((jack - jack.mean()) ** 2)))
    se_independent = float(np.sqrt(np.sum(np.square(ses))) / len(ses))
    out.append(band("instrument strength: mean r(G_cis, P) - expected", GROUP, mean_diff, 0.0,
                    tg["instrument_strength"]["k_se"] * se, tg["instrument_strength"]["source"],
                    f"{len(keep)} ordinary proteins; expected r range {r_exp_all.min():.2f}-{r_exp_all.max():.2f}; "
                    f"jackknife SE {se:.2g} (independent-error SE {se_independent:.2g})", se=se))
    driver_r = []
    for d in world.truth["drivers"]:
        j = pids.index(d["protein"])
        g = geno[hid["protein_cis_variant"][j]].to_numpy(float)
        y = prot[d["protein"]].to_numpy(float)
        okm = np.isfinite(y)
        driver_r.append(abs(np.corrcoef(g[okm], y[okm])[0, 1]))
    plots["driver_instrument_r"] = driver_r

    # ---- missingness, imaging and visit-2 fractions --------------------------------------
    miss = float(prot.isna().to_numpy().mean())
    p0 = V.protein_missingness
    se = np.sqrt(p0 * (1 - p0) / prot.size)
    if world.config["world"].get("messy"):
        out.append(Check("protein missingness", GROUP, miss, p0, None, None, True, tg["protein_missingness"]["source"],
                         "hard-messy world: heavier, non-random missingness by design", level="calibration", skipped=True))
    else:
        out.append(band("protein missingness", GROUP, miss, p0, tg["protein_missingness"]["k_se"] * se,
                        tg["protein_missingness"]["source"], se=se))
    imaged = cov["imaged"].to_numpy().mean()
    want = world.config["scale"]["imaged"] / world.config["scale"]["participants"]
    out.append(band("imaged fraction", GROUP, imaged, want, tg["imaged_fraction"]["abs"], tg["imaged_fraction"]["source"]))
    v2 = cov["visit2"].to_numpy().mean()
    p0 = float(world.config["world"]["visit2_fraction"])
    se = np.sqrt(p0 * (1 - p0) / n)
    out.append(band("visit-2 fraction", GROUP, v2, p0, tg["visit2_fraction"]["k_se"] * se, tg["visit2_fraction"]["source"], se=se))

    # ---- outcomes ------------------------------------------------------------------------
    mort = world.table("mortality")
    for key, target, measured in (("deaths_fraction", V.deaths_fraction, mort["death"].mean()),
                                  ("cardiac_deaths_fraction", V.cardiac_deaths_fraction, (mort["cause"] == "cardiac").mean())):
        t = tg[key]
        se = np.sqrt(target * (1 - target) / n)
        label = "deaths / cohort" if key == "deaths_fraction" else "cardiac deaths / cohort"
        out.append(band(label, GROUP, float(measured), target, t["abs"] + t["k_se"] * se, t["source"], se=se))
    meds = world.table("ehr_medications")
    counts = meds.groupby("subject_id").size().reindex(cov.index, fill_value=0).to_numpy(float)
    t = tg["medication_rows_per_participant"]
    se = counts.std() / np.sqrt(n)
    out.append(band("medication rows per participant", GROUP, counts.mean(), V.medication_rows_per_participant,
                    t["abs"] + t["k_se"] * se, t["source"], se=se))
    plots["driver_instrument_r"] = driver_r
    return out, plots
