"""Per-protein evidence: observational associations (crude, adjusted, within centre,
in the imaged sub-cohort, with imaging participation, with later disease and with
events beyond severity), Mendelian randomisation on several outcomes, and the
checks that only candidates need (instrument direct effect, locus sharing,
reverse-direction MR).

Every statistic is in standardised units with its z; thresholds are applied in
``claims``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .data import nuisance_design
from .stats import corr_columns, partial_columns, pvalue, zs

#: Columns either side of a variant that make up its locus (file order is genomic order;
#: LD decays within a few dozen).
LOCUS_COLUMNS = 60

# Outcome columns whose genome-wide associations the scan computes.
GWAS_OUTCOMES = ("phenotype", "crude", "nonimaging", "event", "early_event", "late_event", "hf_incident")


def outcome_matrix(pheno: pd.DataFrame, out: pd.DataFrame) -> np.ndarray:
    """[n, len(GWAS_OUTCOMES)] standardised outcome columns (missing at the mean)."""
    cols = []
    for name in GWAS_OUTCOMES:
        if name in pheno:
            v = pheno[name].to_numpy(dtype=float)
        elif name == "late_event":
            v = np.where(out["late_at_risk"].to_numpy() > 0, out["late_event"].to_numpy(dtype=float), np.nan)
        elif name == "hf_incident" and "hf_incident" in out:
            v = np.where(out["hf_prevalent"].to_numpy() > 0, np.nan, out["hf_incident"].to_numpy(dtype=float))
        elif name in out:
            v = out[name].to_numpy(dtype=float)
        else:
            v = np.zeros(len(out))
        cols.append(zs(v))
    return np.column_stack(cols).astype(np.float32)


def site_heterogeneity(P: np.ndarray, centre: np.ndarray):
    """Brown-Forsythe test of equal spread across centres, per protein, as z; and the same
    test with the most deviant centre left out.

    A site whose assay runs on another scale changes that protein's spread there and
    nowhere else; biology does not (centre composition shifts means a little, not
    spreads).  Brown-Forsythe (ANOVA of absolute deviations from each centre's median)
    rather than Bartlett: Bartlett's test reads heavy tails as unequal variances.
    Returns (z, z without the most deviant centre).
    """
    from scipy import stats

    levels = [c for c in np.unique(centre) if (centre == c).sum() > 10]
    k, p = len(levels), P.shape[1]
    if k < 3:
        return np.zeros(p), np.zeros(p)
    n = np.zeros((k, 1))
    mean = np.zeros((k, p))
    ss = np.zeros((k, p))
    for i, c in enumerate(levels):
        block = P[centre == c].astype(float)
        d = np.abs(block - np.nanmedian(block, axis=0))
        n[i] = len(block)
        mean[i] = np.nanmean(d, axis=0)
        ss[i] = np.nansum((d - mean[i]) ** 2, axis=0)

    def anova_z(include: np.ndarray) -> np.ndarray:
        w = n * include
        N = w.sum(axis=0)
        groups = include.sum(axis=0)
        grand = (w * mean).sum(axis=0) / N
        ssb = (w * (mean - grand) ** 2).sum(axis=0)
        ssw = (ss * include).sum(axis=0)
        F = (ssb / (groups - 1)) / np.maximum(ssw / (N - groups), 1e-300)
        pv = stats.f.sf(F, groups - 1, N - groups)
        return stats.norm.isf(np.clip(pv, 1e-300, 1) / 2)

    z_all = anova_z(np.ones((k, p)))
    overall = (n * mean).sum(axis=0) / n.sum()
    worst = np.argmax(np.abs(np.log(np.maximum(mean, 1e-12) / np.maximum(overall, 1e-12))), axis=0)
    rest = np.ones((k, p))
    rest[worst, np.arange(p)] = 0
    return z_all, anova_z(rest)


def within_centre(P: np.ndarray, centre: np.ndarray) -> np.ndarray:
    out = np.empty_like(P)
    for c in np.unique(centre):
        m = centre == c
        block = P[m]
        mean = np.nanmean(block, axis=0)
        sd = np.nanstd(block, axis=0)
        sd[sd == 0] = 1
        out[m] = (block - mean) / sd
    out[~np.isfinite(out)] = 0
    return out


class Adjusted:
    """The proteome residualised on one design once, then the partial regression of any
    outcome on each protein given that design (Frisch-Waugh), as (beta per SD, z).

    With a row mask the proteins' residuals from the whole cohort are used on the masked
    rows (the design's fit barely moves on a large subset) and the outcome is
    residualised on the masked rows."""

    def __init__(self, P: np.ndarray, design: np.ndarray):
        self.Q, _ = np.linalg.qr(design)
        Qx = self.Q.astype(P.dtype)
        self.RX = P - Qx @ (Qx.T @ P)
        self.sxx = np.einsum("ij,ij->j", self.RX, self.RX).astype(float)
        self.k = design.shape[1]

    def test(self, y: np.ndarray, mask: np.ndarray | None = None):
        y = np.asarray(y, dtype=float)
        if mask is None:
            RX, Q, yy, sxx = self.RX, self.Q, y, self.sxx
        else:
            RX, Q, yy = self.RX[mask], self.Q[mask], y[mask]
            sxx = np.einsum("ij,ij->j", RX, RX).astype(float)
        coef, *_ = np.linalg.lstsq(Q, yy, rcond=None)
        ry = yy - Q @ coef
        sxx = np.where(sxx > 0, sxx, np.nan)
        beta = (RX.T @ ry.astype(RX.dtype)).astype(float) / sxx
        n = len(ry)
        resid_var = (float(ry @ ry) - beta ** 2 * sxx) / max(n - self.k - 1, 1)
        se = np.sqrt(np.clip(resid_var, 1e-300, None) / sxx)
        return beta, beta / se


def corr_many(P: np.ndarray, columns: dict) -> dict:
    """Correlations (r, z) of the standardised proteome with several whole-cohort columns at once."""
    names = list(columns)
    Y = np.column_stack([zs(columns[k]) for k in names]).astype(P.dtype)
    n = P.shape[0]
    R = (P.T @ Y).astype(float) / n
    Z = np.arctanh(np.clip(R, -0.999999, 0.999999)) * math.sqrt(max(n - 3, 1))
    return {k: (R[:, i], Z[:, i]) for i, k in enumerate(names)}


def protein_table(ctx: dict) -> pd.DataFrame:
    """The proteome-wide table.  ``ctx`` holds: cov, out, pheno (DataFrame), P (standardised
    float32 [n, p], missing at 0), proteins (ids), scan (dict), variant_ids."""
    cov, out, pheno, P = ctx["cov"], ctx["out"], ctx["pheno"], ctx["P"]
    n, p = P.shape
    index = cov.index
    table = pd.DataFrame(index=ctx["proteins"])
    f = pheno["phenotype"].to_numpy(dtype=float)
    f = np.where(np.isfinite(f), f, np.nanmean(f))
    y = zs(f)
    crude = zs(pheno["crude"].to_numpy())
    event = out["event"].to_numpy(dtype=float)
    D = nuisance_design(cov, index)
    Dc = nuisance_design(cov, index, with_centre=True)

    # -- observational, whole cohort
    cols = {"obs": y, "crude": crude, "event": event, "nonimaging": pheno["nonimaging"].to_numpy()}
    for name in ("age", "bmi", "smoking", "activity"):
        if name in cov:
            v = cov[name].to_numpy(dtype=float)
            cols[name] = np.where(np.isfinite(v), v, np.nanmedian(v))
    for name, (r, z) in corr_many(P, cols).items():
        table[f"r_{name}"], table[f"z_{name}"] = r, z
    adj = Adjusted(P, D)  # adjusted for the measured covariates
    _, table["z_crude_adj"] = adj.test(crude)
    _, table["z_event_adj"] = adj.test(event)
    del adj
    if "centre" in cov:
        centre = cov["centre"].fillna(-1).to_numpy()
        table["z_site"], table["z_site_rest"] = site_heterogeneity(P, centre)
        Pw = within_centre(P, centre)
        table["r_within_centre"], table["z_within_centre"] = corr_many(Pw, {"y": y})["y"]
        del Pw
    # imaging sub-cohort and participation
    imaged = cov["imaged"].to_numpy() if "imaged" in cov else np.zeros(n, bool)
    if imaged.sum() > 50 and pheno["imaging_score"].notna().sum() > 50:
        s_im = pheno["imaging_score"].to_numpy()
        m = imaged & np.isfinite(s_im)
        table["r_imaging"], table["z_imaging"] = corr_columns(P, s_im, m)
        part = Adjusted(P, np.column_stack([Dc, y]))
        _, table["z_participation"] = part.test(imaged.astype(float))
        del part
    # later disease and events beyond current severity
    sev = Adjusted(P, np.column_stack([D, f]))
    for name, mask in (("early_event", None), ("late_event", out["late_at_risk"].to_numpy() > 0),
                       ("event", None)):
        _, table[f"z_{name}_beyond"] = sev.test(out[name].to_numpy(dtype=float), mask)
    if "hf_incident" in out:
        m = out["hf_prevalent"].to_numpy() == 0
        v = out["hf_incident"].to_numpy(dtype=float)
        b_obs, z_obs = sev.test(v, m)
        table["z_hf_beyond"] = z_obs
        table["r_hf_incident"], table["z_hf_incident"] = corr_columns(P, v, m)
        table["z_forward"] = forward_information(P, f, v, D, m, b_obs, z_obs)
    del sev
    if "imaging_v2" in pheno and pheno["imaging_v2"].notna().sum() > 50:
        v2 = pheno["imaging_v2"].to_numpy()
        m = np.isfinite(v2) & np.isfinite(pheno["imaging_score"].to_numpy())
        base = np.nan_to_num(pheno["imaging_score"].to_numpy())
        _, table["z_v2_beyond"] = partial_columns(P[m], v2[m], np.column_stack([D, base, y])[m])
        table["r_v2"], table["z_v2"] = corr_columns(P, v2, m)

    # -- genetics
    scan = ctx["scan"]
    hits = scan["hits"]
    from .genetics import hub_threshold

    hub = hub_threshold(hits)
    is_hub = hits >= hub
    top_idx, top_r = scan["top_idx"], scan["top_r"]
    lead = np.full(p, -1)
    r_gp = np.zeros(p)
    lead_is_hub = np.zeros(p, bool)
    for j in range(p):
        lead_is_hub[j] = is_hub[top_idx[0, j]]
        for k in range(top_idx.shape[0]):
            if not is_hub[top_idx[k, j]]:
                lead[j], r_gp[j] = top_idx[k, j], top_r[k, j]
                break
    table["lead"] = lead
    table["lead_id"] = [ctx["variant_ids"][v] if v >= 0 else "" for v in lead]
    table["trans_hub_lead"] = lead_is_hub
    table["r_gp"] = r_gp
    table["F"] = r_gp ** 2 * (n - 2) / np.clip(1 - r_gp ** 2, 1e-12, None)
    gw = scan["gwas"]  # [V, outcomes]
    safe = np.where(lead >= 0, lead, 0)
    r_gp_safe = np.where(np.abs(r_gp) > 1e-6, r_gp, np.nan)
    se_gp = np.sqrt(np.clip(1 - r_gp ** 2, 1e-12, None) / (n - 2))
    for k, name in enumerate(GWAS_OUTCOMES):
        r_gy = gw[safe, k].astype(float)
        se_gy = np.sqrt(np.clip(1 - r_gy ** 2, 1e-12, None) / (n - 2))
        key = "mr" if name == "phenotype" else f"mr_{name}"
        table[f"{key}_z"] = r_gy / se_gy
        table[key] = r_gy / r_gp_safe
        table[f"{key}_se"] = np.sqrt(se_gy ** 2 / r_gp_safe ** 2 + r_gy ** 2 * se_gp ** 2 / r_gp_safe ** 4)
    table["mr_p"] = pvalue(table["mr_z"])
    table["obs_p"] = pvalue(table["z_obs"])
    # Hausman-type contrast: does the observational association agree with the genetic estimate?
    se_obs = 1 / math.sqrt(n)
    table["z_obs_vs_mr"] = (table["r_obs"] - table["mr"]) / np.sqrt(table["mr_se"] ** 2 + se_obs ** 2)
    ctx["hub_threshold"] = hub
    ctx["hubs"] = np.flatnonzero(is_hub)
    return table


def forward_information(P: np.ndarray, f: np.ndarray, H: np.ndarray, D: np.ndarray, mask: np.ndarray,
                        b_obs: np.ndarray, z_obs: np.ndarray) -> np.ndarray:
    """z of each protein's association with later disease beyond what a marker of current
    disease would show.

    ``f`` is the phenotype, the factor model's conditional mean of current severity L,
    so its variance is its reliability R = corr(f, L)^2.  A protein that only marks
    current severity, P = alpha L + e, has alpha = cov(P, f) / R, and given f it still
    predicts later disease H (slope gamma on L) through the severity f misses:
    b = gamma alpha (1 - R) / (1 - alpha^2 R), with gamma = cov(H, f) / R.  A protein
    that carries information about the disease's course beyond current severity (a
    delayed cause, a marker of the late process) exceeds that.  ``b_obs`` and ``z_obs``
    are the observed partial regressions of H on each protein given D and f.
    """
    from .stats import ols

    R = float(np.clip(np.var(f), 0.05, 0.95))
    beta, _ = ols(H[mask], np.column_stack([D[mask], f[mask]]))
    gamma = beta[-1]  # cov(H, f) / var(f) = gamma R / R
    alpha = (P.T @ (f - f.mean()).astype(P.dtype)).astype(float) / len(f) / R
    b_pred = gamma * alpha * (1 - R) / np.clip(1 - alpha ** 2 * R, 1e-3, None)
    se = np.abs(b_obs / np.where(z_obs == 0, np.nan, z_obs))
    return (b_obs - b_pred) / se


def conditional_forward(P: np.ndarray, j: int, given: list, pheno: pd.DataFrame, out: pd.DataFrame,
                        D: np.ndarray) -> tuple:
    """Protein ``j``'s forward statistics (``z_forward``, ``z_v2_beyond``) with the proteins
    ``given`` added to the adjustment set: a conditional analysis, as for secondary GWAS
    signals, so that a protein correlated with a real delayed cause (shared factors) does
    not borrow its signal."""
    f = pheno["phenotype"].to_numpy(dtype=float)
    f = np.where(np.isfinite(f), f, np.nanmean(f))
    Dg = np.column_stack([D] + [P[:, [g]].astype(float) for g in given])
    x = P[:, [j]]
    z1 = z2 = np.nan
    if "hf_incident" in out:
        m = out["hf_prevalent"].to_numpy() == 0
        v = out["hf_incident"].to_numpy(dtype=float)
        b, z = Adjusted(x, np.column_stack([Dg, f])).test(v, m)
        z1 = float(forward_information(x, f, v, Dg, m, b, z)[0])
    if "imaging_v2" in pheno and pheno["imaging_v2"].notna().sum() > 50:
        v2 = pheno["imaging_v2"].to_numpy()
        y = zs(f)
        m = np.isfinite(v2) & np.isfinite(pheno["imaging_score"].to_numpy())
        base = np.nan_to_num(pheno["imaging_score"].to_numpy())
        _, zz = partial_columns(x[m], v2[m], np.column_stack([Dg, base, y])[m])
        z2 = float(zz[0])
    return z1, z2


def direct_effect(y: np.ndarray, g: np.ndarray, p: np.ndarray, design: np.ndarray):
    """z of the instrument's effect on y with the exposure held fixed (flexibly: P, P^2, P^3).

    Under the exclusion restriction the instrument reaches y only through the
    exposure, so this is zero; a pleiotropic instrument has a path of its own.
    """
    from .stats import ols

    pz = zs(p)
    X = np.column_stack([design, pz, pz ** 2, pz ** 3, zs(g)])
    beta, se = ols(y, X)
    total_beta, total_se = ols(y, np.column_stack([design, zs(g)]))
    return float(beta[-1] / se[-1]), float(beta[-1]), float(total_beta[-1])


def neighbour_signal(y: np.ndarray, G: np.ndarray, design: np.ndarray, p: np.ndarray, lead: int,
                     width: int = LOCUS_COLUMNS):
    """Colocalisation by conditional analysis: is the disease signal at the instrument's
    locus the instrument's own?

    Among the lead's neighbours (``width`` columns either side) the variant most
    associated with disease is the locus's disease peak.  If it is not the lead, disease is regressed on both (with the
    nuisance design) and so is the protein.  Returns None when the lead is its locus's
    peak, else (peak column, z of the lead's disease effect given the peak, z of the
    peak's given the lead, z of the peak's effect on the protein given the lead).

    A lead in weak LD with another variant that moves disease inherits a share of that
    variant's effect: with tens of thousands of participants even r^2 of a few percent
    makes an ordinary protein's MR estimate significant.  Then the lead adds nothing once
    the peak is known, the peak keeps its effect, and the peak is no instrument of the
    protein: two causal variants, one for the protein and one for disease, not one.
    """
    from .genetics import standardise_genotypes
    from .stats import ols

    lo, hi = max(0, lead - width), min(G.shape[1], lead + width + 1)
    block = standardise_genotypes(G[:, lo:hi]).astype(np.float64)
    yz = zs(np.asarray(y, dtype=np.float64))
    r = block.T @ yz / len(yz)
    k = int(np.argmax(np.abs(r)))
    if lo + k == lead or abs(r[k]) <= abs(r[lead - lo]):
        return None
    X = np.column_stack([design, block[:, lead - lo], block[:, k]])
    beta, se = ols(yz, X)
    pbeta, pse = ols(zs(np.asarray(p, dtype=np.float64)), X)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (lo + k, float(beta[-2] / se[-2]), float(beta[-1] / se[-1]), float(pbeta[-1] / pse[-1]))


def ld_r(G: np.ndarray, a: int, b: int) -> float:
    ga, gb = G[:, a].astype(float), G[:, b].astype(float)
    ga = np.where(ga < 0, np.nan, ga)
    gb = np.where(gb < 0, np.nan, gb)
    m = np.isfinite(ga) & np.isfinite(gb)
    if m.sum() < 10 or ga[m].std() == 0 or gb[m].std() == 0:
        return 0.0
    return float(np.corrcoef(ga[m], gb[m])[0, 1])


def locus_groups(table: pd.DataFrame, G: np.ndarray, candidates: list, f_min: float, r2_min: float = 0.5):
    """For each candidate protein, the proteins (strong instruments) whose lead variant is the
    candidate's or in LD with it (r^2 >= r2_min): colocalising exposures of one signal."""
    strong = table[table["F"] > f_min]
    leads = strong["lead"].to_numpy()
    groups = {}
    for prot in candidates:
        v = int(table.at[prot, "lead"])
        near = strong.index[np.abs(leads - v) <= LOCUS_COLUMNS]
        members = []
        for other in near:
            w = int(table.at[other, "lead"])
            r = 1.0 if w == v else ld_r(G, v, w)
            if r * r >= r2_min:
                members.append(other)
        groups[prot] = members
    return groups


def reverse_mr(P: np.ndarray, G: np.ndarray, table: pd.DataFrame, gwas_z: np.ndarray, lead_of: dict,
               z_hit: float, exclude_r2: float = 0.05):
    """Reverse-direction MR: does a genetic score for disease predict each protein?

    Instruments: genome-wide significant variants for the phenotype, one per locus
    (strongest first, others within 60 columns dropped), weighted by their effect.
    For each protein, variants in LD with its own lead are left out (its own cis
    effect is not disease).  Returns z of the protein on the score (sign: the score
    raises disease).
    """
    order = np.argsort(-np.abs(gwas_z))
    chosen = []
    for v in order:
        if abs(gwas_z[v]) < z_hit:
            break
        if all(abs(int(v) - c) > LOCUS_COLUMNS for c in chosen):
            chosen.append(int(v))
    if not chosen:
        return pd.Series(np.nan, index=table.index), []
    n = P.shape[0]
    Gs = np.column_stack([zs(np.where(G[:, v] < 0, np.nan, G[:, v]).astype(float)) for v in chosen])
    w = np.sign(gwas_z[chosen]) * np.abs(gwas_z[chosen])
    PG = (P.T @ Gs.astype(np.float32)) / n  # [p, K] correlations
    z = np.full(len(table), np.nan)
    for j, prot in enumerate(table.index):
        v = lead_of.get(prot, -1)
        keep = np.ones(len(chosen), bool)
        for k, c in enumerate(chosen):
            if v >= 0 and abs(c - v) <= LOCUS_COLUMNS and (c == v or ld_r(G, c, v) ** 2 > exclude_r2):
                keep[k] = False
        if not keep.any():
            continue
        ww = w[keep]
        score = PG[j, keep] @ ww
        se = math.sqrt(float(ww @ ww) / n)
        z[j] = score / se
    return pd.Series(z, index=table.index), chosen
