"""The population stage: from the blocks' small per-participant records to the
latent disease and everything that depends on whole-population quantities
(standardisation, the top-20 % imaging cut).

Per-block records are concatenated in block order, so every reduction here is
over the same array whatever the Dask chunking was.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import blocks, leaks, streams
from ..blocks import zscore
from ..model.constants import (CARDIAC_AGE, CARDIAC_BASE, CARDIAC_BMI, CARDIAC_L, CARDIAC_SMOKING, L_AGE, L_BMI,
                               L_DIRECT, L_SMOKING, LATE_CARRY, LATE_DRIVERS, OTHER_AGE_CENTRE, OTHER_AGE_SLOPE,
                               OTHER_BASE, PROTEIN_RESIDUAL)
from ..model.world import World
from .molecules import covariate_terms, finish_moments

# Proteins whose equation a bias replaces: (bias, loading field, supplement residual field).
SPECIAL_PATHS = {"T1": ("T1", "bmi_loading", "residual"), "T2": ("T2", "latent_loading", "residual"),
                 "A9_partner": ("A9", "partner_latent", "partner_residual")}


def special_residual(world: World, role: str) -> float:
    """Residual SD of a bias equation: the protein's ordinary residual less what the
    planted path brings beyond the factors and covariate terms its own part gives up
    (pipeline.pathways), so its variance, factor share, instrument strength and
    covariate terms are an ordinary protein's and only the path differs."""
    return float(world.pathways.special_residual[role])


def ordinary_residual_sd(world: World, p: int) -> float:
    return float(PROTEIN_RESIDUAL if world.pathways is None else world.pathways.residual_sd[p])


def special_raw(world: World, role: str, p: int, ordinary_raw: np.ndarray, ordinary_resid: np.ndarray, eps: np.ndarray,
                g_cis: np.ndarray, path: np.ndarray, cov_terms: np.ndarray | None = None) -> tuple:
    """Raw value of a protein whose equation a bias replaces (T1, T2, the A9 partner):
    the ordinary protein's cis, trans, factor and covariate terms (``ordinary_raw`` less
    its residual 0.8 ``ordinary_resid``), the bias equation's own residual ``eps`` scaled
    by ``special_residual``, and the planted path.  Returns (raw, biological part without
    the covariate terms, the part that is neither path nor residual); the biological part
    is None without ``cov_terms``."""
    return leaks.hook(world.leaks, "special_raw", _special_raw)(world, role, p, ordinary_raw, ordinary_resid, eps, g_cis,
                                                                 path, cov_terms)


def _special_raw(world: World, role: str, p: int, ordinary_raw: np.ndarray, ordinary_resid: np.ndarray, eps: np.ndarray,
                 g_cis: np.ndarray, path: np.ndarray, cov_terms: np.ndarray | None = None) -> tuple:
    bias, load_key, _ = SPECIAL_PATHS[role]
    loading = float(world.params["bias_params"][bias][load_key])
    systematic = ordinary_raw - ordinary_residual_sd(world, p) * ordinary_resid
    if role == "T1":
        # confounding adds the BMI path to an ordinary protein, residual and all: BMI, which
        # every analysis adjusts for, is what differs (its residual is the block's own draw,
        # at either visit, so a pathway it feeds sees it as any protein)
        raw = ordinary_raw + loading * path
    else:
        raw = systematic + special_residual(world, role) * eps + loading * path
    return raw, (None if cov_terms is None else raw - cov_terms), systematic


@dataclass
class Cohort:
    """Per-participant vectors for the whole population (length n), plus the
    population moments the release pass needs."""

    pop: dict
    protein_mean: np.ndarray
    protein_sd: np.ndarray
    transcript_mean: np.ndarray
    transcript_sd: np.ndarray
    metabolite_mean: np.ndarray
    metabolite_sd: np.ndarray
    z_age: np.ndarray
    z_bmi: np.ndarray
    z_exercise: np.ndarray
    proteins: dict  # protein index -> standardised true abundance at baseline (tracked roles)
    g_cis: dict  # protein index -> standardised cis genotype
    latent: np.ndarray
    latent_late: np.ndarray
    special: dict  # protein index -> released standardised value at baseline (special equations)
    special_tr: dict  # protein index -> its standardised transcript (from the final biological value)
    special_v2_path: dict  # protein index -> the planted path's value at visit 2 (visit-2 rows only)
    special_v2_eps: dict  # protein index -> its own residual at visit 2 (visit-2 rows only)
    selection_score: np.ndarray
    imaged: np.ndarray
    visit2: np.ndarray
    visit2_years: np.ndarray
    eval_mask: np.ndarray
    age_sd: float
    age_mean: float
    extras: dict = field(default_factory=dict)


def f_driver(world: World, p: np.ndarray) -> np.ndarray:
    """Hard worlds saturate molecular effects: f(P) = 1.6 tanh(P / 1.6)."""
    if world.hard:
        s = float(world.params["bias_params"]["hard"]["saturation"])
        return s * np.tanh(p / s)
    return p


def driver_sum(world: World, proteins: dict, weights: np.ndarray) -> np.ndarray:
    r = world.roles
    total = np.zeros(len(next(iter(proteins.values())))) if proteins else 0.0
    for p, wgt in zip(r.drivers, weights):
        total = total + wgt * f_driver(world, proteins[int(p)])
    if r.interaction is not None:
        a, b, coef = r.interaction
        total = total + coef * proteins[a] * proteins[b]
    return total


def assemble(world: World, cores: list) -> Cohort:
    cores = sorted(cores, key=lambda c: c["block"])
    n = world.n
    pop = {k: np.concatenate([c["pop"][k] for c in cores]) for k in cores[0]["pop"]}
    tracked = world.tracked_proteins()
    raw = np.concatenate([c["tracked_raw"] for c in cores])
    gcis = np.concatenate([c["g_cis_tracked"] for c in cores])
    m_prot = sum_in_order([c["m_prot"] for c in cores])
    m_tr = sum_in_order([c["m_tr"] for c in cores])
    m_met = sum_in_order([c["m_met"] for c in cores])
    p_mean, p_sd = finish_moments(m_prot, n)
    t_mean, t_sd = finish_moments(m_tr, n)
    m_mean, m_sd = finish_moments(m_met, n)
    g_direct = np.concatenate([c["g_direct"] for c in cores])
    g_poly = np.concatenate([c["g_poly"] for c in cores])

    proteins = {int(p): (raw[:, k] - p_mean[p]) / p_sd[p] for k, p in enumerate(tracked)}
    if world.t4_coregulated:
        # L depends on the T4 driver's own abundance; its released value adds its assay's noise
        proteins[int(world.roles.t4_causal)] = zscore(np.concatenate([c["t4_abundance"] for c in cores]))
    g_cis = {int(p): gcis[:, k] for k, p in enumerate(tracked)}
    z_age, z_bmi, z_ex = zscore(pop["age"]), zscore(pop["bmi"]), zscore(pop["exercise"])
    bp = world.params["bias_params"]
    r = world.roles

    # ---- latent severity (S1.2) ---------------------------------------------------
    l_raw = (L_BMI * z_bmi + L_SMOKING * pop["smoking"] + L_DIRECT * g_direct + L_AGE * z_age
             + world.latent_residual * blocks.normal(world, streams.LATENT_RESIDUAL))
    if r.drivers.size:
        l_raw = l_raw + driver_sum(world, proteins, r.weights)
    if world.has("T7"):
        # the decoy's own cis variant has a direct path to L (exclusion restriction broken)
        l_raw = l_raw + bp["T7"]["direct"] * g_cis[r.decoys["T7"]]
    if world.hard:
        l_raw = l_raw + bp["hard"]["polygenic_sd"] * zscore(g_poly)
    latent = zscore(l_raw)
    latent_raw_sd = float(l_raw.std())
    late = LATE_CARRY * latent
    if r.drivers.size:
        late = late + LATE_DRIVERS * driver_sum(world, proteins, r.weights_late)
    latent_late = zscore(late)
    latent_late_raw_sd = float(late.std())

    # ---- special protein equations (decoys that are not ordinary proteins) --------
    special, special_tr, systematic = {}, {}, {}
    special_moments = {}
    specials = sorted(world.special_proteins().items(), key=lambda kv: kv[1])
    resid = np.concatenate([c["special_resid"] for c in cores]) if specials else None
    tr_own = np.concatenate([c["special_tr_own"] for c in cores]) if specials else None
    cov_terms = covariate_terms(world, pop, proteins=[p for _, p in specials]) if specials else None
    paths = {"T1": z_bmi, "T2": latent, "A9_partner": latent_late}
    # T1 may feed a pathway, which reads its block value: its own residual is that value's
    # residual draw, so the pathway's followers see the T1 decoy as they see any protein
    own_eps = leaks.hook(world.leaks, "special_eps", special_eps)
    eps = {role: own_eps(world, role, resid[:, k]) for k, (role, _) in enumerate(specials)}
    for k, (role, p) in enumerate(specials):
        x, bio, sys_part = special_raw(world, role, p, raw[:, list(tracked).index(p)], resid[:, k], eps[role], g_cis[p],
                                       paths[role], cov_terms[:, k])
        special_moments[p] = (x.mean(), x.std())
        special[p] = (x - x.mean()) / x.std()
        systematic[p] = sys_part / x.std()
        proteins[p] = special[p]
        leaks.hook(world.leaks, "special_transcript", special_transcript)(world, special_tr, p, bio, tr_own[:, k],
                                                                           role=role, path=paths[role], raw=x)

    # ---- outcomes need the surrogate; imaging selection needs L and P_sel ---------
    eval_mask = blocks.uniform(world, streams.EVAL_MASK) < float(world.params["eval_fraction"])
    score = (-0.24 * z_age - 0.52 * z_bmi + world.centre_selection[pop["centre"]]
             + world.ancestry_selection[pop["ancestry"]])
    t3 = bp["T3"]
    noise = t3["noise"] * blocks.normal(world, streams.IMAGING_SELECTION)
    if world.has("T3"):
        eta = t3["eta"]
        score = score + t3["latent"] * eta * latent + t3["protein"] * eta * proteins[r.decoys["T3"]]
    score = score + noise
    order = np.argsort(-score, kind="stable")
    imaged = np.zeros(n, dtype=bool)
    imaged[order[: world.n_imaged]] = True

    cohort = Cohort(
        pop=pop, protein_mean=p_mean, protein_sd=p_sd, transcript_mean=t_mean, transcript_sd=t_sd,
        metabolite_mean=m_mean, metabolite_sd=m_sd, z_age=z_age, z_bmi=z_bmi, z_exercise=z_ex,
        proteins=proteins, g_cis=g_cis, latent=latent, latent_late=latent_late, special=special, special_tr=special_tr,
        special_v2_path={}, special_v2_eps={},
        selection_score=score, imaged=imaged, visit2=np.zeros(n, bool), visit2_years=np.full(n, np.nan),
        eval_mask=eval_mask, age_sd=float(pop["age"].std()), age_mean=float(pop["age"].mean()),
    )
    cohort.extras["special_moments"] = special_moments
    cohort.extras["special_systematic"] = systematic
    cohort.extras["special_eps"] = eps
    cohort.extras["latent_raw_sd"] = latent_raw_sd
    cohort.extras["latent_late_raw_sd"] = latent_late_raw_sd
    cohort.extras["g_poly"] = g_poly
    cohort.extras["g_direct"] = g_direct
    return cohort


def special_eps(world: World, role: str, block_resid: np.ndarray) -> np.ndarray:
    """A bias equation's own residual: the T1 decoy's is its block value's residual draw
    (``block_resid``), the others' a stream of their own."""
    return block_resid if role == "T1" else blocks.normal(world, streams.SPECIAL.format(role=role))


def special_transcript(world: World, special_tr: dict, p: int, bio: np.ndarray, own: np.ndarray, role: str = "",
                       path: np.ndarray | None = None, raw: np.ndarray | None = None) -> None:
    """The transcript of bias protein ``p`` follows the protein's final biological value,
    with its own part (``own``: the transcript's own noise and covariate terms): set in
    ``special_tr``.

    The T2 decoy's and the A9 partner's equations keep an ordinary protein's variance, so
    c x their final value is an ordinary transcript's share.  The T1 decoy is an ordinary
    protein *plus* 0.55 z(BMI), residual and all (``_special_raw``): were its transcript
    c x that whole value, the shared BMI path would raise its protein-transcript agreement
    above an ordinary protein's (the paper-scale tell scan found it: median percentile 0.93
    over seven worlds), and SPEC section 3 forbids a role from showing in its transcript's
    agreement.  So its transcript is c x the ordinary part plus the share ``b`` of the BMI
    path (BMI acts on the protein partly after transcription) that leaves its agreement
    with the protein what the ordinary protein's was, with BMI in it or adjusted for
    (``t1_transcript_share``)."""
    c = float(world.transcript_concordance[p])
    if role == "T1" and path is not None and raw is not None:
        a = float(world.params["bias_params"]["T1"]["bmi_loading"])
        ordinary_t = c * (bio - a * path) + own
        t = ordinary_t + t1_transcript_share(raw - a * path, ordinary_t, path, a, c) * path
    else:
        t = c * bio + own
    special_tr[p] = (t - t.mean()) / t.std()


def t1_transcript_share(protein: np.ndarray, transcript: np.ndarray, path: np.ndarray, a: float, c: float) -> float:
    """The coefficient b of ``path`` in the T1 decoy's transcript for which
    corr(protein + a path, transcript + b path) = corr(protein, transcript) in this cohort
    (``protein`` and ``transcript`` its ordinary values): bisection on [0, c a] (at b = 0 the
    path only dilutes the agreement, at c a it raises it), 60 steps, so every build of the
    same world finds the same b.  0 when the world plants no BMI path."""
    if a == 0.0 or c <= 0.0:
        return 0.0
    if a < 0.0:  # the same problem with the path's sign turned
        return -t1_transcript_share(protein, transcript, -path, -a, c)
    def moments(x, y):
        x, y = x - x.mean(), y - y.mean()
        # numpy's pairwise sums, as every moment of this stage (BLAS dot may sum differently by process)
        return float((x * y).sum()), float((x * x).sum()), float((y * y).sum())
    sxy, sxx, syy = moments(protein, transcript)
    sxz, _, szz = moments(protein, path)
    syz = moments(transcript, path)[0]
    target = sxy / np.sqrt(sxx * syy)
    px, pxx = sxy + a * syz, sxx + 2 * a * sxz + a * a * szz  # the decoy's protein against the ordinary transcript

    def gap(b):
        return (px + b * (sxz + a * szz)) / np.sqrt(pxx * (syy + 2 * b * syz + b * b * szz)) - target

    lo, hi = 0.0, c * a
    if gap(lo) >= 0.0 or gap(hi) <= 0.0:  # no crossing inside: the nearer end
        return lo if abs(gap(lo)) <= abs(gap(hi)) else hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if gap(mid) < 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def sum_in_order(parts: list) -> np.ndarray:
    total = np.zeros_like(parts[0])
    for x in parts:  # fixed block order: float sums are reproducible
        total = total + x
    return total


# ------------------------------------------------------------------------- outcomes


def surrogate_values(world: World, cohort: Cohort) -> np.ndarray:
    r = world.roles
    if r.surrogate is None:
        return np.zeros(world.n)
    return cohort.proteins[r.surrogate]


def simulate_deaths(world: World, cohort: Cohort) -> dict:
    """Competing cardiac and non-cardiac death times with administrative censoring.

    Cardiac hazard 0.006 exp(0.70 L(t) + 0.45 z(age_t) + 0.35 smoking + 0.15 z(BMI)
    + 0.40 P_T8) with L(t) = L before year 5 and L_late after, and attained age
    (z(age_t) = z(age) + t / SD(age)); non-cardiac hazard Gompertz in attained age.
    Times are drawn by inverting the closed-form cumulative hazards.
    """
    pop = cohort.pop
    t8 = world.params["bias_params"]["T8"]["hazard"] if world.has("T8") else 0.0
    base = CARDIAC_AGE * cohort.z_age + CARDIAC_SMOKING * pop["smoking"] + CARDIAC_BMI * cohort.z_bmi + t8 * surrogate_values(world, cohort)
    k = CARDIAC_AGE / cohort.age_sd
    c1 = CARDIAC_BASE * np.exp(CARDIAC_L * cohort.latent + base)
    c2 = CARDIAC_BASE * np.exp(CARDIAC_L * cohort.latent_late + base)
    switch = float(world.params["visit2_years"])
    e_card = blocks.exponential(world, streams.DEATH_CARDIAC)
    h_switch = c1 * np.expm1(k * switch) / k
    t_early = np.log1p(k * e_card / c1) / k
    t_late = np.log(np.exp(k * switch) + k * np.maximum(e_card - h_switch, 0.0) / c2) / k
    t_card = np.where(e_card < h_switch, t_early, t_late)
    e_other = blocks.exponential(world, streams.DEATH_OTHER)
    a = OTHER_BASE * np.exp(OTHER_AGE_SLOPE * (pop["age"] - OTHER_AGE_CENTRE))
    t_other = np.log1p(OTHER_AGE_SLOPE * e_other / a) / OTHER_AGE_SLOPE
    horizon = float(world.params["followup_years"])
    t_death = np.minimum(t_card, t_other)
    died = t_death < horizon
    cause = np.where(~died, "", np.where(t_card <= t_other, "cardiac", "other"))
    followup = np.where(died, t_death, horizon)
    return {"died": died, "cause": cause, "followup": followup, "t_death": np.where(died, t_death, np.nan)}


def choose_visit2(world: World, cohort: Cohort, deaths: dict) -> tuple[np.ndarray, np.ndarray]:
    """A random 20 % of participants, among those alive at their visit-2 date:
    (bool [n] who attends, float [n] years from baseline, NaN for the others)."""
    n = world.n
    when = float(world.params["visit2_years"]) + blocks.uniform(world, streams.VISIT2_TIME) - 0.5
    alive = ~(deaths["died"] & (deaths["followup"] <= when))
    frac = float(world.params["visit2_fraction"])
    q = min(1.0, frac * n / max(1, int(alive.sum())))
    visit2 = alive & (blocks.uniform(world, streams.VISIT2) < q)
    return visit2, np.where(visit2, when, np.nan)


def visit2_specials(world: World, cohort: Cohort, bmi2: np.ndarray) -> tuple[dict, dict]:
    """The planted paths of the bias equations at visit 2 (visit-2 rows): BMI then, L_late
    (disease then) for the reverse-causation decoy, and for the A9 partner, which tracks
    disease five years ahead, disease five years after visit 2: L_late carried on as L
    carried into L_late (correlation rho = r(L, L_late)) with fresh variation.  The omics
    stage applies them to the proteins' ordinary visit-2 values and standardises with the
    baseline moments, so change is visible.

    Returns ({protein: planted path}, {protein: own residual}), visit-2 rows only:
    the cohort's ``special_v2_path`` and ``special_v2_eps``."""
    v2 = cohort.visit2
    z_bmi2 = (bmi2 - cohort.pop["bmi"].mean()) / cohort.pop["bmi"].std()
    # both standardised; no BLAS in a written value; clipped: a world without drivers has
    # L_late = L, and rounding put rho a hair above 1 (NaN for a path no such world uses)
    rho = float(np.clip(np.mean(cohort.latent * cohort.latent_late), -1.0, 1.0))
    ahead = rho * cohort.latent_late + np.sqrt(1 - rho * rho) * blocks.normal(world, streams.A9_AHEAD)
    paths = {"T1": z_bmi2, "T2": cohort.latent_late, "A9_partner": ahead}
    leaks.hook(world.leaks, "visit2_special_paths", _visit2_path_change)(world, cohort, bmi2, paths)
    v2_path = {p: paths[role][v2] for role, p in world.special_proteins().items()}
    # The planted path persists between visits more than an ordinary protein's residual
    # does (BMI and disease change little in five years), so the bias equation's own
    # residual renews faster, by just enough that the protein's visit-to-visit stability
    # is an ordinary protein's: carry r'^2 + rho l^2 = c s^2 + l^2 k, with s and c the residual
    # SD and carry of the protein's ordinary equation (0.8 and 0.6 unless it follows a pathway)
    # and k the path's carried factor and covariate share.
    before = {"T1": cohort.z_bmi, "T2": cohort.latent, "A9_partner": cohort.latent_late}
    eps = cohort.extras["special_eps"]
    v2_eps = {}
    special_carry = leaks.hook(world.leaks, "visit2_special_carry", _visit2_special_carry)
    for role, p in world.special_proteins().items():
        carry = special_carry(world, role, p, before[role], paths[role])
        renewed = carry * eps[role] + np.sqrt(1 - carry * carry) * blocks.normal(world, streams.SPECIAL_VISIT2.format(role=role))
        v2_eps[p] = renewed[v2]
    return v2_path, v2_eps


def _visit2_path_change(world: World, cohort: Cohort, bmi2: np.ndarray, paths: dict) -> None:
    """L and L_late are standardised at their own time, so they do not age: the covariate
    terms a follower's path stands in for (pipeline.pathways) change with the visit as its
    own terms do (five years older, BMI then).  Changes ``paths`` in place."""
    change = np.column_stack([np.nan_to_num(cohort.visit2_years), np.zeros(len(bmi2)), bmi2 - cohort.pop["bmi"],
                              np.zeros(len(bmi2))])
    for role in ("T2", "A9_partner"):
        a = world.pathways.path_covariates.get(role)
        if a is not None:
            paths[role] = paths[role] + sum(float(a[j]) * change[:, j] for j in range(4))


def _visit2_special_carry(world: World, role: str, p: int, x: np.ndarray, y: np.ndarray) -> float:
    """The visit-to-visit carry of bias protein ``p``'s own residual, from its path before
    (``x``) and at visit 2 (``y``)."""
    bias, load_key, _ = SPECIAL_PATHS[role]
    loading = float(world.params["bias_params"][bias][load_key])
    rho = float(np.mean((x - x.mean()) * (y - y.mean())) / (x.std() * y.std()))
    r2 = special_residual(world, role) ** 2
    # the path's factor and covariate content stands in for the ordinary part it replaced
    # (pipeline.pathways) and carries as that part would
    target = (float(world.pathways.visit2_carry[p]) * ordinary_residual_sd(world, p) ** 2
              + loading ** 2 * world.pathways.path_carried.get(role, 0.0))
    return float(np.clip((target - rho * loading ** 2) / r2, 0.0, 1.0)) if r2 > 0 else 0.0
