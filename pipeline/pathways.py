"""Pathways: latent processes that proteins feed and follow (SPEC sections 3 and 4).

Disease severity L is a latent process some proteins feed (the drivers; in A9 worlds one
of them a delayed driver whose baseline weight is 4-10 % of its late one) and some follow
(the T2 decoy: 0.50 L; the A9 partner: 0.50 L_late, measured at baseline), with a later
state L_late = z[0.75 L + 0.35 sum w_late P].  Feeding or following one latent process
makes a small cluster of correlated proteins with its own partial-correlation structure
and its own behaviour between visits; if L were the proteome's only such process, that
structure alone would point at the roles.  So every protein belongs to a pathway: the
ordinary proteome is dealt into latent processes built like L and L_late,

    K_m = z[sum_j v_j P_j + 0.12 G_m + e eps],   |v_j| ~ U(driver_weight), random sign,
    K_m_late = z[0.75 K_m + 0.35 sum_j v_late,j P_j],

fed by about as many proteins as feed L at baseline (the world's non-delayed drivers
+-2; UPSTREAM without drivers), each with its own residual SD (``world.pathway_residual``,
around L's 0.55 and 0.70) and its own follower loading (``world.pathway_loading``, around
the T2 decoy's 0.50), so that how tightly a pathway's members are tied varies as much
between ordinary pathways as it does between L and them.  Each pathway takes L's own shape in its world: a
delayed feeder (the A9 driver's: late weight 1.15-1.45 x the largest other, baseline
weight 4-10 % of it) and a late follower (ordinary protein + 0.50 K_m_late at baseline,
as the A9 partner follows L_late) where A9 is planted, a baseline follower (+ 0.50 K_m,
as the T2 decoy follows L) where T2 is; or, at ``world.pathway_absent_rate``, no
follower (and no delayed feeder) at all, as L has none in the worlds planting neither,
so that a feeder nobody follows is as common as L's least connected member needs.
e^2 is the variance L has outside its proteins, of which G_m, a variant of its own, carries L's
0.12 G_direct share (placed like G_direct: never near an instrument that moves L).  Where T7 is
planted L also holds the T7 decoy's cis variant (0.15 per SD, a protein L does not read), so each
pathway with followers holds the cis variant of an ordinary protein outside it (``pleio_protein``,
each pathway a different one) with that coefficient in its own units: L's followers then carry
no variant source an ordinary follower lacks (issue 29; ``pipeline.model_counts``).

Between visits the followers behave as L's do: at visit 2 a baseline follower reads
K_m_late and a late follower K_m_late carried on five more years (as the T2 decoy reads
L_late and the A9 partner L_late carried on), both built from the feeders' *baseline*
values, with the covariate change their path stands in for; the feeders themselves are
ordinary proteins at visit 2.  K_m and K_m_late are hidden; nothing else depends on them.

A follower's path brings its upstream proteins' shared-factor content and covariate
terms with it.  Every follower (ordinary ones, the T2 decoy, the A9 partner) draws
its *total* factor loadings and covariate coefficients as an ordinary protein does
and its own part is that draw less what the path carries, with its residual
shortened so that its variance is an ordinary protein's; the planted path
(0.50 L, 0.50 L_late) itself is unchanged.  What a path carries is computed from
the model's linear structure (each protein is cis + trans + lambda F + beta X +
residual, X = age - 55, sex, BMI - 27, smoking), with the covariates' covariance
measured on the world's own first population blocks; the visit-to-visit carry of every
follower's own residual is fitted by one formula (``follower_carry``) so that its
stability is an ordinary protein's.

Ordinary covariate coefficients are heterogeneous (SPEC section 3: a protein's
covariate terms may not mark it): centred on the supplement's 0.01 (age), 0.10
(sex), 0.02 (BMI) with a smoking term centred on zero, so L's smoking term, which
T2 inherits, is one ordinary coefficient among others.

The test-only leaks (``pipeline.leaks``) ``pathway_shapes`` (the pre-issue-29 pathways:
every pathway with as many baseline followers as follow L, no delayed feeder) and
``visit2_recomputed`` (the followers' visit-2 values recomputed from their feeders' visit-2
values) replace ``PathwayDesign`` and the followers' visit-2 step (``pipeline.leak_hooks``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import leaks
from .linkage import latent_model
from .model.constants import (COREGULATED_SHARED, L_AGE, L_BMI, L_DIRECT, L_SMOKING, LATE_CARRY, LATE_DRIVERS,
                              PROTEIN_RESIDUAL)
from .model.linear import content, mm, sigma_matrix, var_of

#: Proteins feeding one ordinary pathway (inclusive range; a world with drivers deals
#: around the number that feed L, ``upstream_range``).
UPSTREAM = (2, 6)


#: Follower kinds (``PathwayModel.follower_kind``).
NONE, BASELINE, LATE = 0, 1, 2


@dataclass
class PathwayModel:
    """The ordinary pathways of a world and what every follower's path carries."""

    upstream: list  # per pathway: int64 protein indices (the delayed feeder, if any, last)
    coef: list  # per pathway: K_m = sum coef_j raw_j + direct_m G_m + extra_m eps (unit variance)
    extra: np.ndarray  # [M]
    direct_variant: np.ndarray  # [M] the pathway's own variant G_m (as L has G_direct); -1 without followers
    direct: np.ndarray  # [M] its coefficient
    follows: np.ndarray  # [P] pathway index followed, -1 for none
    loading: float  # what the T2 decoy and the A9 partner add: 0.50 x L (or L_late)
    residual_sd: np.ndarray  # [P] residual SD of the ordinary equation (0.8; shorter for followers)
    visit2_carry: np.ndarray  # [P] visit-to-visit residual correlation
    special_residual: dict  # role -> residual SD of its bias equation
    path_share: dict  # role or "K<m>" -> share of the path's variance in factors and covariates
    path_carried: dict  # role -> that share as it carries to visit 2 (factors 0.85, covariates 1)
    path_covariates: dict  # role -> the path's covariate content per unit of X (age - 55, sex, BMI - 27, smoking)
    total_loadings: np.ndarray  # [P, F] each protein's factor loadings with its path's (the ordinary draw)
    follower_kind: np.ndarray = None  # [P] NONE, BASELINE (reads K_m) or LATE (reads K_m_late)
    delayed: list = None  # per pathway: the delayed feeder's protein index or -1
    late_coef: list = None  # per pathway: K_m_late = late_k K_m + sum late_coef_j raw_j (unit variance)
    late_k: np.ndarray = None  # [M]
    rho: np.ndarray = None  # [M] corr(K_m, K_m_late) (and of K_m_late with its value five years on)
    cov_change: np.ndarray = None  # [M, 2, 4] covariate content of K_m and K_m_late per unit of X
    weights: list = None  # per pathway: (baseline weights, late weights) of its feeders
    follower_loading: np.ndarray = None  # [P] what each ordinary follower adds: loading x K_m (or K_m_late); 0 otherwise
    residual: np.ndarray = None  # [M] each pathway's own residual SD (L's is 0.55, 0.70 in hard worlds)
    cov_coef: np.ndarray = None  # [M, 4] K_m's own covariate terms per unit of X (L's 0.15 z(BMI), 0.10 smoking, 0.08 z(age))
    pleio_protein: np.ndarray = None  # [M] in a T7 world: the ordinary protein whose cis variant also moves K_m (-1 none)
    pleio_variant: np.ndarray = None  # [M] that protein's cis variant (-1 none)
    pleio: np.ndarray = None  # [M] its coefficient in K_m (T7's direct effect on L, in K_m's units)
    poly_variants: list = None  # per pathway, in a hard world: the variants of its polygenic background (as L's)
    poly_coef: list = None  # per pathway: their coefficients in K_m (standardised; squares sum to L's background share)

    def genotype_terms(self) -> tuple:
        """Every pathway's own genotype terms as flat arrays (pathway m's are ``indptr[m]:indptr[m + 1]``):
        G_m first, then the pleiotropic instrument (T7 worlds), then the polygenic background (hard
        worlds); none for a pathway nobody follows.  Returns (indptr int64, variant int64, coef float64)."""
        M = len(self.direct_variant)
        variant, coef, sizes = [], [], np.zeros(M, dtype=np.int64)
        for m in np.flatnonzero(self.direct_variant >= 0):
            v, c = [self.direct_variant[m:m + 1]], [self.direct[m:m + 1]]
            if self.pleio_variant is not None and self.pleio_variant[m] >= 0:
                v.append(self.pleio_variant[m:m + 1])
                c.append(self.pleio[m:m + 1])
            if self.poly_variants is not None:
                v.append(self.poly_variants[m])
                c.append(self.poly_coef[m])
            variant += v
            coef += c
            sizes[m] = sum(len(x) for x in v)
        indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if not variant:
            return indptr, np.zeros(0, dtype=np.int64), np.zeros(0)
        return indptr, np.concatenate(variant).astype(np.int64), np.concatenate(coef).astype(np.float64)

    def summary(self, pid: list) -> dict:
        out = []
        for m, (up, co) in enumerate(zip(self.upstream, self.coef)):
            row = {"upstream": [pid[int(p)] for p in up], "coef": [round(float(c), 6) for c in co],
                   "direct_variant": int(self.direct_variant[m]), "direct": round(float(self.direct[m]), 6),
                   "followers": [pid[int(p)] for p in np.flatnonzero(self.follows == m)]}
            if self.follower_kind is not None:
                row["late_followers"] = [pid[int(p)] for p in np.flatnonzero((self.follows == m) & (self.follower_kind == LATE))]
                row["delayed"] = pid[int(self.delayed[m])] if self.delayed[m] >= 0 else None
                row["weights"] = [round(float(x), 6) for x in self.weights[m][0]]
                row["weights_late"] = [round(float(x), 6) for x in self.weights[m][1]]
                row["residual"] = round(float(self.residual[m]), 6)
                row["follower_loading"] = [round(float(self.follower_loading[int(p)]), 6) for p in np.flatnonzero(self.follows == m)]
            if self.pleio_protein is not None and self.pleio_protein[m] >= 0:
                row["pleiotropic"] = {"protein": pid[int(self.pleio_protein[m])], "variant": int(self.pleio_variant[m]),
                                      "coef": round(float(self.pleio[m]), 6)}
            if self.poly_variants is not None and len(self.poly_variants[m]):
                row["polygenic"] = {"variants": [int(v) for v in self.poly_variants[m]],
                                    "coef": [round(float(c), 6) for c in self.poly_coef[m]]}
            out.append(row)
        return {"pathways": out, "loading": self.loading,
                "special_residual": {k: round(float(v), 6) for k, v in self.special_residual.items()},
                "path_factor_covariate_share": {k: round(float(v), 6) for k, v in self.path_share.items()}}


def upstream_range(n_drivers: int, delayed: bool) -> tuple:
    """How many proteins feed an ordinary pathway at full weight: about as many as feed L
    at baseline (the drivers, less a delayed A9 driver whose baseline weight is 4-10 % of
    its late one), so that the disease pathway is one of the world's pathways in size too;
    a world without drivers deals UPSTREAM.  A delayed feeder, when the pathway has one,
    comes on top, as the A9 driver does."""
    k = n_drivers - (1 if delayed else 0)
    if k < 1:
        return UPSTREAM
    return max(1, k - 2), k + 2


def _deal(rng, eligible: np.ndarray, must_feed: set, n_up: tuple, shape_of) -> tuple:
    """Pathway memberships for ``eligible`` proteins.  ``shape_of(u)`` draws a pathway's
    other slots given its u full-weight feeders: (delayed feeders, baseline followers,
    late followers).  Returns (per pathway the full-weight feeders, per pathway the
    delayed feeder or -1, {follower: (pathway, kind)})."""
    shapes = []
    remaining = len(eligible)
    while remaining > 0:
        u = int(rng.integers(n_up[0], n_up[1] + 1))
        d, b, l = shape_of(u)
        size = u + d + b + l
        if size < remaining:
            shapes.append([u, d, b, l])
            remaining -= size
            continue
        if remaining >= n_up[0] + d + b + l:  # the last pathway takes what is left as full-weight feeders
            shapes.append([remaining - d - b - l, d, b, l])
        elif shapes:  # too few for a pathway of their own: they feed the previous one
            shapes[-1][0] += remaining
        else:
            shapes.append([remaining, 0, 0, 0])
        remaining = 0
    kinds = ("up", "delayed", "base", "late")
    slots = [(m, kind) for m, shape in enumerate(shapes) for kind, k in zip(kinds, shape) for _ in range(k)]
    order = rng.permutation(len(slots))
    slots = [slots[i] for i in order]
    up_slots = [i for i, s in enumerate(slots) if s[1] == "up"]
    taken = {}
    for p in sorted(must_feed):
        i = up_slots.pop(int(rng.integers(len(up_slots))))
        taken[i] = p
    placed = set(taken.values())
    rest = [int(p) for p in rng.permutation(eligible) if int(p) not in placed]
    free = [i for i in range(len(slots)) if i not in taken]
    for i, p in zip(free, rest):
        taken[i] = p
    upstream = [[] for _ in shapes]
    delayed = [-1] * len(shapes)
    follows = {}
    for i, p in taken.items():
        m, kind = slots[i]
        if kind == "up":
            upstream[m].append(p)
        elif kind == "delayed":
            delayed[m] = p
        else:
            follows[p] = (m, BASELINE if kind == "base" else LATE)
    return [np.array(sorted(u), dtype=np.int64) for u in upstream], delayed, follows


def follower_carry(resid_carry: float, residual: float, loading: float, rho: float, carried: float) -> float:
    """Visit-to-visit correlation of a follower's own residual (SD ``residual``) that makes
    its stability an ordinary protein's: carry r^2 + rho l^2 = c 0.8^2 + l^2 k, with c the
    ordinary residual carry, rho the path's correlation between the visits and k its
    factor and covariate share as it carries to visit 2 (the T2 decoy's and the A9
    partner's own formula, ``pipeline.modalities.cohort.visit2_specials``)."""
    r2 = residual ** 2
    if r2 <= 0:
        return 0.0
    target = resid_carry * PROTEIN_RESIDUAL ** 2 + loading ** 2 * carried
    return float(np.clip((target - rho * loading ** 2) / r2, 0.0, 1.0))


class PathwayDesign:
    """How the ordinary pathways take L's own shape in this world (module docstring): a
    baseline follower where T2 is planted, a delayed feeder and a late follower where A9 is,
    or no follower at all at ``absent_rate``; each pathway its own residual and follower
    loading; L's own covariate terms (0.15 z(BMI) + 0.10 smoking + 0.08 z(age), ``l_terms``)
    and G_m, as S1.2.  A pathway reads a co-regulated anchor's abundance, as L reads the T4
    driver's."""

    anchor_abundance = True

    def __init__(self, rng, world, l_terms: np.ndarray, *, absent_rate: float, late_followers: tuple,
                 residual_range: tuple, loading_range: tuple, loading: float):
        self.rng, self.l_terms = rng, l_terms
        self.absent_rate, self.late_followers = absent_rate, late_followers
        # the range is around L's residual, 0.55 (``world.latent_residual``); a hard world's L has
        # 0.70, so its pathways' range moves with it (their ties as loose as L's)
        shift = world.latent_residual - float(world.params["latent_residual"])
        self.residual_range = (residual_range[0] + shift, residual_range[1] + shift)
        self.loading_range = loading_range
        self.base, self.late = int("T2" in world.roles.decoys), int(world.roles.a9_partner is not None)
        # where T7 is planted, L holds a protein's cis variant as well as G_direct (T7's
        # instrument, 0.15 per SD): each pathway likewise an ordinary protein's
        self.t7 = float(world.params["bias_params"]["T7"]["direct"]) if "T7" in world.biases else 0.0
        # in a hard world L holds a polygenic background (polygenic_sd over its variants): each
        # pathway likewise one of its own, as many variants drawn as L's are, the same share of
        # its variance as L's background has of L's (its effects sit near the significance bar
        # at paper scale, so their size relative to the process is what counts)
        self.poly = float(world.params["bias_params"]["hard"]["polygenic_sd"]) if world.hard else 0.0

    def shape_of(self, u: int) -> tuple:
        """(delayed feeders, baseline followers, late followers) of a pathway of u full-weight feeders."""
        if self.rng.random() < self.absent_rate:
            return 0, 0, 0
        n_late = int(self.rng.integers(self.late_followers[0], self.late_followers[1] + 1)) if self.late else 0
        return self.late, self.base, n_late

    def process(self) -> tuple:
        """(residual SD, follower loading) of the next pathway, around L's and the T2 decoy's."""
        return self.rng.uniform(*self.residual_range), self.rng.uniform(*self.loading_range)

    def terms(self, residual: float) -> tuple:
        """(the process's covariate content, its variance outside its feeders and covariates)."""
        return self.l_terms, residual ** 2 + L_DIRECT ** 2 + self.t7 ** 2


def build(world, rng, weight_range: tuple, t1_loading: float, t2_loading: float, a9_loading: float,
          resid_carry: float, factor_carry: float, direct_pool, cov_x: np.ndarray, absent_rate: float = 0.15,
          late_ratio: tuple = (1.15, 1.45), base_fraction: tuple = (0.04, 0.10), residual_range: tuple = (0.55, 0.55),
          loading_range: tuple = (0.50, 0.50), late_followers: tuple = (1, 1), protein_cis: np.ndarray = None) -> PathwayModel:
    """Deal the ordinary proteome into pathways and fit every follower's own loadings,
    covariate coefficients and residual to its path (module docstring).  Returns the
    PathwayModel and every protein's factor loadings and covariate coefficients with the
    followers' fitted (``world``'s are the ordinary draws, read and not changed).
    ``direct_pool(k)`` gives k variants for the pathways' own variants; ``absent_rate`` is the
    share of pathways nobody follows; ``cov_x`` is the covariates' covariance on the world's
    first population blocks (``pipeline.model.sampler.covariate_moments``)."""
    P = world.n_proteins
    F = world.protein_loadings.shape[1]
    r = world.roles
    total_loadings = world.protein_loadings.copy()
    protein_loadings, protein_cov = world.protein_loadings.copy(), world.protein_cov.copy()
    sigma = sigma_matrix(F, cov_x)
    trans_var = np.where(world.protein_master >= 0, 0.01, 0.0)
    sd_age, sd_bmi = np.sqrt(cov_x[0, 0]), np.sqrt(cov_x[2, 2])
    l_terms = np.zeros(F + 4)  # L's own covariate content (S1.2) per SD of age and BMI
    l_terms[F + 0], l_terms[F + 2], l_terms[F + 3] = L_AGE / sd_age, L_BMI / sd_bmi, L_SMOKING
    design = leaks.hook(world.leaks, "pathway_design", PathwayDesign)(
        rng, world, l_terms, absent_rate=absent_rate, late_followers=late_followers, residual_range=residual_range,
        loading_range=loading_range, loading=float(t2_loading))

    pair_anchors = set(int(a) for a, _ in world.coregulated)

    def raw_var(p):
        """Variance of what a pathway reads of feeder p: its raw value, or for the anchor of a
        co-regulated pair its abundance without the assay's own noise (as L reads the T4 driver's)."""
        v = float(world.protein_h2[p] + trans_var[p] + var_of(content(world, p), sigma) + PROTEIN_RESIDUAL ** 2)
        if p in pair_anchors and design.anchor_abundance:
            v -= PROTEIN_RESIDUAL ** 2 * (1.0 - COREGULATED_SHARED)
        return v

    # ---- who feeds and follows what
    in_l = set(int(d) for d in r.drivers) | {int(x) for x in (r.decoys.get("T2"), r.a9_partner) if x is not None}
    copies = set(int(m) for _, m in world.coregulated)
    anchors = set(int(a) for a, _ in world.coregulated) - in_l
    eligible = np.array([p for p in range(P) if p not in in_l and p not in copies], dtype=np.int64)
    t1 = r.decoys.get("T1")
    follows = np.full(P, -1, dtype=np.int64)
    kind_of = np.zeros(P, dtype=np.int8)
    upstream, delayed_of = [], []
    shape_of = design.shape_of
    if len(eligible) >= UPSTREAM[0]:
        upstream, delayed_of, follow_map = _deal(rng, eligible, anchors, upstream_range(len(r.drivers), bool(r.delayed.any())),
                                                 shape_of)
        for p, (m, kind) in follow_map.items():
            follows[p] = m
            kind_of[p] = kind
    has_followers = [bool(np.any(follows == m)) for m in range(len(upstream))]
    # each pathway with followers has its own variant (as L has G_direct)
    chosen = list(direct_pool(int(sum(has_followers)))) if upstream else []
    direct_variant = np.full(len(upstream), -1, dtype=np.int64)
    it = iter(chosen)
    for m, yes in enumerate(has_followers):
        if yes:
            direct_variant[m] = int(next(it))
    residual_sd = np.full(P, PROTEIN_RESIDUAL)
    follower_loading = np.zeros(P)
    residual_m = []
    carry = np.full(P, resid_carry)
    share, carried, path_cov = {}, {}, {}
    loading = float(t2_loading)
    coef, extra, direct, late_coef, late_k, rho_m, cov_change, weights_m, members = [], [], [], [], [], [], [], [], []
    pleio = []
    t7, poly = float(getattr(design, "t7", 0.0)), float(getattr(design, "poly", 0.0))
    needs_l = poly > 0 or "T2" in r.decoys or r.a9_partner is not None
    lm = latent_model(world, cov_x) if needs_l else None  # L and L_late: the polygenic share, the T2 and A9 paths
    poly_share = poly ** 2 / lm.sd_l ** 2 if poly > 0 else 0.0
    cov_coef = []
    x_scale = np.ones(4)  # content is per unit of X already (age - 55, sex, BMI - 27, smoking)

    def fit_follower(p, a, l):
        """Own loadings and covariates = ordinary draw - l x path content; returns the
        share of the path's variance in factors and covariates."""
        protein_loadings[p] = protein_loadings[p] - l * a[:F]
        protein_cov[p] = protein_cov[p] - l * a[F:]
        return var_of(a, sigma)

    def carried_share(a):
        return factor_carry * float(mm(a[:F], a[:F])) + float(mm(mm(a[F:], cov_x), a[F:]))

    for m, up in enumerate(upstream):
        # each process its own unexplained variation and follower loading, around L's (0.55 or
        # 0.70; the T2 decoy's 0.50), so that how strongly a pathway's members are tied marks none
        res_m, load_m = design.process()
        residual_m.append(res_m)
        v = rng.uniform(*weight_range, len(up)) * np.where(rng.random(len(up)) < 0.5, -1.0, 1.0)
        v_late = v.copy()
        feeders = [int(p) for p in up]
        if delayed_of[m] >= 0:
            ratio, frac = rng.uniform(*late_ratio), rng.uniform(*base_fraction)
            sign = -1.0 if rng.random() < 0.5 else 1.0
            late = sign * ratio * (float(np.max(np.abs(v))) if len(v) else float(weight_range[1]))
            v = np.append(v, frac * late)
            v_late = np.append(v_late, late)
            feeders.append(int(delayed_of[m]))
        members.append(np.array(feeders, dtype=np.int64))
        weights_m.append((v, v_late))
        sds = np.array([np.sqrt(raw_var(p)) for p in feeders])
        qs = np.array([content(world, p) / s for p, s in zip(feeders, sds)]).reshape(-1, F + 4)  # standardised Z content
        corr = mm(mm(qs, sigma), qs.T)
        np.fill_diagonal(corr, 1.0)
        rem = 1.0 - np.array([var_of(q, sigma) for q in qs])
        terms, indep = design.terms(res_m)
        a_raw = mm(v, qs) + terms
        var_k = (var_of(a_raw, sigma) + float(np.sum(v ** 2 * rem)) + indep) / (1.0 - poly_share)
        indep_all = indep + poly_share * var_k  # with the polygenic background's share (hard worlds)
        sd_k = np.sqrt(var_k)
        coef.append(v / sds / sd_k)
        extra.append(np.sqrt(indep - L_DIRECT ** 2 - t7 ** 2) / sd_k)
        direct.append(L_DIRECT / sd_k)
        pleio.append(t7 / sd_k)
        cov_coef.append(terms[F:] * x_scale / sd_k)
        a = a_raw / sd_k
        share[f"K{m}"] = var_of(a, sigma)
        # K_m_late = z[0.75 K_m + 0.35 sum v_late P] (L_late's equation), from baseline values
        a_late = LATE_CARRY * a + LATE_DRIVERS * mm(v_late, qs)
        d_late = LATE_CARRY * v / sd_k + LATE_DRIVERS * v_late
        var_late = var_of(a_late, sigma) + float(np.sum(d_late ** 2 * rem)) + LATE_CARRY ** 2 * indep_all / var_k
        sd_late = np.sqrt(var_late)
        late_k.append(LATE_CARRY / sd_late)
        late_coef.append(LATE_DRIVERS * v_late / sds / sd_late)
        cov_pk = (mm(corr, v) + mm(mm(qs, sigma), terms)) / sd_k  # cov(P_j, K_m)
        rho = float((LATE_CARRY + LATE_DRIVERS * mm(v_late, cov_pk)) / sd_late)
        rho_m.append(rho)
        a_late = a_late / sd_late
        cov_change.append(np.stack([a[F:], a_late[F:]]))
        for p in np.flatnonzero(follows == m):
            p = int(p)
            path = a if kind_of[p] == BASELINE else a_late
            ex = fit_follower(p, path, load_m)
            r2 = PROTEIN_RESIDUAL ** 2 - load_m ** 2 * (1.0 - ex)
            residual_sd[p] = np.sqrt(r2)
            follower_loading[p] = load_m
            carry[p] = follower_carry(resid_carry, residual_sd[p], load_m, rho, carried_share(path))

    # ---- what L and L_late carry (S1.2, S1.3), for the T2 decoy and the A9 partner
    special = {}
    if t1 is not None:
        # the T1 decoy is its ordinary value plus 0.55 z(BMI): its own residual in full, so
        # that once BMI is adjusted for (as every analysis does) it is an ordinary protein
        special["T1"] = float(residual_sd[int(t1)])
    if "T2" in r.decoys or r.a9_partner is not None:  # a null world's L still carries covariate terms
        paths = {}
        if "T2" in r.decoys:
            paths["T2"] = (int(r.decoys["T2"]), lm.a_l, t2_loading)
        if r.a9_partner is not None:
            paths["A9_partner"] = (int(r.a9_partner), lm.a_late, a9_loading)
        for role, (p, a, l) in paths.items():
            ex = fit_follower(p, a, l)
            share[role] = ex
            path_cov[role] = a[F:].copy()
            carried[role] = carried_share(a)
            special[role] = float(np.sqrt(max(PROTEIN_RESIDUAL ** 2 - l ** 2 * (1.0 - ex), 0.0)))
    for role, p in (("T2", r.decoys.get("T2")), ("A9_partner", r.a9_partner)):
        if p is not None and role not in special:  # no drivers: L carries no protein
            l = t2_loading if role == "T2" else a9_loading
            special[role] = float(np.sqrt(max(PROTEIN_RESIDUAL ** 2 - l ** 2, 0.0)))
    pleio_protein, pleio_variant = _pleiotropic(rng, world, protein_cis, members, follows, has_followers, t7 > 0)
    poly_variants, poly_coef = _polygenic(rng, world, protein_cis, direct_pool, has_followers, poly_share)
    model = PathwayModel(upstream=members, coef=coef, extra=np.array(extra, dtype=np.float64), follows=follows,
                         direct_variant=direct_variant, direct=np.array(direct, dtype=np.float64),
                         loading=loading, residual_sd=residual_sd, visit2_carry=carry, special_residual=special,
                         path_share=share, path_carried=carried, path_covariates=path_cov, total_loadings=total_loadings,
                         follower_kind=kind_of, delayed=list(delayed_of), late_coef=late_coef,
                         late_k=np.array(late_k, dtype=np.float64), rho=np.array(rho_m, dtype=np.float64),
                         cov_change=np.array(cov_change, dtype=np.float64).reshape(-1, 2, 4), weights=weights_m,
                         follower_loading=follower_loading,
                         residual=np.array(residual_m, dtype=np.float64),
                         cov_coef=np.array(cov_coef, dtype=np.float64).reshape(-1, 4),
                         pleio_protein=pleio_protein, pleio_variant=pleio_variant,
                         pleio=np.where(pleio_protein >= 0, np.array(pleio, dtype=np.float64).reshape(-1), 0.0),
                         poly_variants=poly_variants, poly_coef=poly_coef)
    return model, protein_loadings, protein_cov


def _pleiotropic(rng, world, protein_cis, members: list, follows: np.ndarray, has_followers: list, planted: bool) -> tuple:
    """In a world planting T7 (L holds the T7 decoy's cis variant, a protein that L does not
    read): for each pathway with followers an ordinary protein outside it, each a different
    one, whose cis variant enters K_m with T7's coefficient, so that L's followers carry no
    variant source an ordinary follower lacks.  Drawn last, so no other draw moves.
    Returns (protein [M], variant [M]), -1 where none."""
    M = len(members)
    protein, variant = np.full(M, -1, dtype=np.int64), np.full(M, -1, dtype=np.int64)
    if not planted or protein_cis is None or not M:
        return protein, variant
    r = world.roles
    roles = set(int(d) for d in r.drivers) | set(int(v) for v in r.decoys.values())
    roles |= {int(x) for x in (r.a9_partner, r.t4_partner, r.surrogate) if x is not None}
    pool = [int(p) for p in rng.permutation(world.n_proteins) if int(p) not in roles]
    used = set()
    for m in range(M):
        if not has_followers[m]:
            continue
        inside = set(int(p) for p in members[m]) | set(int(p) for p in np.flatnonzero(follows == m))
        q = next((p for p in pool if p not in used and p not in inside), None)
        if q is None:
            break
        used.add(q)
        protein[m], variant[m] = q, int(protein_cis[q])
    return protein, variant


def _polygenic(rng, world, protein_cis, direct_pool, has_followers: list, share: float) -> tuple:
    """In a hard world (L holds a polygenic background: ``polygenic_sd`` spread over its variants,
    each a standard normal draw scaled so that their squares sum to polygenic_sd^2, ``share`` of
    L's variance): for each pathway with followers one of its own, as many variants as L's, drawn
    as L's are from the variants no locus claimed (``direct_pool.free_variants``, where L's
    background was placed), topped up from the variants that are no locus where there are fewer,
    with standard normal effects scaled to the same share of K_m's variance; drawn last, so no
    other draw moves.  Returns (variants, coefficients in K_m's standardised units) per pathway."""
    M = len(has_followers)
    empty = np.zeros(0, dtype=np.int64)
    if share <= 0 or not M:
        return [empty] * M, [np.zeros(0)] * M
    k = len(world.polygenic_effects)
    free = getattr(direct_pool, "free_variants", None)
    loci = set(int(v) for v in protein_cis) | set(int(v) for v in world.protein_master if v >= 0)
    if free is None:  # a placement that does not say (the test-only pre-issue-12 loci): any variant that is no locus
        free = np.array([v for v in range(world.n_variants) if v not in loci], dtype=np.int64)
    free = np.asarray(free, dtype=np.int64)
    taken = loci | set(free.tolist())
    rest = np.array([v for v in range(world.n_variants) if v not in taken], dtype=np.int64)
    variants, coefs = [], []
    for m in range(M):
        if not has_followers[m] or k == 0:
            variants.append(empty)
            coefs.append(np.zeros(0))
            continue
        take = min(k, free.size)
        v = rng.choice(free, size=take, replace=False)
        if take < k:
            v = np.concatenate([v, rng.choice(rest, size=min(k - take, rest.size), replace=False)])
        e = rng.standard_normal(v.size)
        variants.append(v.astype(np.int64))
        coefs.append(np.sqrt(share) / float(np.sqrt(np.sum(e * e))) * e)
    return variants, coefs

