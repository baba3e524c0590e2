"""Pathways: latent processes that proteins feed and follow (SPEC sections 3 and 4).

Disease severity L is a latent process some proteins feed (the drivers) and some
follow (the T2 decoy: 0.50 L; the A9 partner: 0.50 L_late).  Feeding or following
one latent process makes a small cluster of correlated proteins, which takes a
principal component of its own; if L were the proteome's only such process, the
cluster alone (its members' share of the top components, their correlations)
would point at the roles without any causal reasoning.  So every protein belongs to
a pathway: the ordinary proteome is dealt into latent processes K_m built like L,

    K_m = z[sum_j v_j P_j + e eps],   |v_j| ~ U(driver_weight), random sign,

fed by about as many proteins as feed L (1-6; 2-6 without drivers) and followed by as
many as follow L (1-2 without the T2 decoy and the A9 partner) (follower = ordinary
protein + 0.50 K_m,
the T2 decoy's loading), with e^2 the variance L has outside its proteins, of which
a variant of its own carries L's 0.12 G_direct share (so a follower's second genetic
signal away from any protein's locus is no more L's than an ordinary pathway's).  The
variant is never linked to an instrument that moves L.  K_m is hidden; nothing else
depends on it.

A follower's path brings its upstream proteins' shared-factor content and covariate
terms with it.  Every follower (ordinary ones, the T2 decoy, the A9 partner) draws
its *total* factor loadings and covariate coefficients as an ordinary protein does
and its own part is that draw less what the path carries, with its residual
shortened so that its variance is an ordinary protein's; the planted path
(0.50 L, 0.50 L_late) itself is unchanged.  What a path carries is computed from
the model's linear structure (each protein is cis + trans + lambda F + beta X +
residual, X = age - 55, sex, BMI - 27, smoking), with the covariates' covariance
measured on the world's own first population blocks.

Ordinary covariate coefficients are heterogeneous (SPEC section 3: a protein's
covariate terms may not mark it): centred on the supplement's 0.01 (age), 0.10
(sex), 0.02 (BMI) with a smoking term centred on zero, so L's smoking term, which
T2 inherits, is one ordinary coefficient among others.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Ordinary covariate coefficients per protein (age per year, sex, BMI per kg/m2, smoking):
#: means are the supplement's fixed terms (smoking none), spreads about half of each.
COVARIATE_MEAN = np.array([0.01, 0.10, 0.02, 0.0])
COVARIATE_SD = np.array([0.005, 0.05, 0.01, 0.05])
COVARIATE_CENTRES = np.array([55.0, 0.0, 27.0, 0.0])
#: Proteins feeding one ordinary pathway (inclusive range; a world with drivers deals
#: around the number that feed L, ``upstream_range``), and following it.
UPSTREAM = (2, 6)
FOLLOWERS = (1, 2)
#: Blocks of the world's own population used to measure the covariates' covariance.
MOMENT_BLOCKS = 8


@dataclass
class PathwayModel:
    """The ordinary pathways of a world and what every follower's path carries."""

    upstream: list  # per pathway: int64 protein indices
    coef: list  # per pathway: K_m = sum coef_j raw_j + direct_m G_m + extra_m eps (unit variance)
    extra: np.ndarray  # [M]
    direct_variant: np.ndarray  # [M] the pathway's own variant G_m (as L has G_direct)
    direct: np.ndarray  # [M] its coefficient
    follows: np.ndarray  # [P] pathway index followed, -1 for none
    loading: float  # what a follower adds: loading x K_m
    residual_sd: np.ndarray  # [P] residual SD of the ordinary equation (0.8; shorter for followers)
    visit2_carry: np.ndarray  # [P] visit-to-visit residual correlation
    special_residual: dict  # role -> residual SD of its bias equation
    path_share: dict  # role or "K<m>" -> share of the path's variance in factors and covariates
    path_carried: dict  # role -> that share as it carries to visit 2 (factors 0.85, covariates 1)
    path_covariates: dict  # role -> the path's covariate content per unit of X (age - 55, sex, BMI - 27, smoking)
    total_loadings: np.ndarray  # [P, F] each protein's factor loadings with its path's (the ordinary draw)

    def summary(self, pid: list) -> dict:
        return {"pathways": [{"upstream": [pid[int(p)] for p in up], "coef": [round(float(c), 6) for c in co],
                              "direct_variant": int(self.direct_variant[m]), "direct": round(float(self.direct[m]), 6),
                              "followers": [pid[int(p)] for p in np.flatnonzero(self.follows == m)]}
                             for m, (up, co) in enumerate(zip(self.upstream, self.coef))],
                "loading": self.loading,
                "special_residual": {k: round(float(v), 6) for k, v in self.special_residual.items()},
                "path_factor_covariate_share": {k: round(float(v), 6) for k, v in self.path_share.items()}}


def covariate_matrix(pop: dict) -> np.ndarray:
    """X = (age - 55, sex, BMI - 27, smoking), float64 [n, 4]."""
    return np.column_stack([pop["age"] - COVARIATE_CENTRES[0], pop["sex"].astype(np.float64),
                            pop["bmi"] - COVARIATE_CENTRES[2], pop["smoking"].astype(np.float64)])


def covariate_moments(world) -> tuple:
    """Mean and covariance of X over the world's first blocks (elementwise sums: the same
    bits in every process), and the SDs of age and BMI."""
    from .modalities.population import population_block

    x = np.concatenate([covariate_matrix(population_block(world, b)) for b in range(min(world.n_blocks, MOMENT_BLOCKS))])
    mean = x.mean(axis=0)
    c = x - mean
    cov = np.array([[float(np.mean(c[:, i] * c[:, j])) for j in range(4)] for i in range(4)])
    return mean, cov


def upstream_range(n_drivers: int, delayed: bool) -> tuple:
    """How many proteins feed an ordinary pathway: about as many as feed L at baseline
    (the drivers, less a delayed A9 driver whose baseline weight is 4-10 % of its late
    one), so that the disease pathway is one of the world's pathways in size too; a
    world without drivers deals UPSTREAM.  A pathway nobody follows makes no correlation,
    so each has 1-2 followers, as L has the T2 decoy and the A9 partner."""
    k = n_drivers - (1 if delayed else 0)
    if k < 1:
        return UPSTREAM
    return max(1, k - 1), k + 1


def followers_range(n_following_l: int) -> tuple:
    """How many proteins follow an ordinary pathway: as many as follow L (the T2 decoy and
    the A9 partner; FOLLOWERS when neither is planted)."""
    return (n_following_l, n_following_l) if n_following_l >= 1 else FOLLOWERS


def _deal(rng, eligible: np.ndarray, must_feed: set, must_follow: set, n_up: tuple = UPSTREAM,
          n_follow: tuple = FOLLOWERS) -> tuple:
    """Pathway memberships for ``eligible`` proteins: lists of upstream and follower slots."""
    shapes = []
    remaining = len(eligible)
    while remaining > 0:
        u = int(rng.integers(n_up[0], n_up[1] + 1))
        f = int(rng.integers(n_follow[0], n_follow[1] + 1))
        if u + f < remaining:
            shapes.append([u, f])
            remaining -= u + f
            continue
        if remaining >= n_up[0] + n_follow[0]:  # the last pathway takes what is left
            f = max(min(f, remaining - n_up[0]), n_follow[0])
            shapes.append([remaining - f, f])
        elif shapes:  # too few for a pathway of their own: they feed the previous one
            shapes[-1][0] += remaining
        else:
            shapes.append([remaining, 0])
        remaining = 0
    slots = [(m, kind) for m, (u, f) in enumerate(shapes) for kind in ["up"] * u + ["follow"] * f]
    order = rng.permutation(len(slots))
    slots = [slots[i] for i in order]
    up_slots = [i for i, s in enumerate(slots) if s[1] == "up"]
    follow_slots = [i for i, s in enumerate(slots) if s[1] == "follow"]
    taken = {}
    for p in sorted(must_follow):
        if follow_slots:
            i = follow_slots.pop(int(rng.integers(len(follow_slots))))
            taken[i] = p
    for p in sorted(must_feed):
        i = up_slots.pop(int(rng.integers(len(up_slots))))
        taken[i] = p
    rest = [int(p) for p in rng.permutation(eligible) if int(p) not in must_feed and int(p) not in set(taken.values())]
    free = [i for i in range(len(slots)) if i not in taken]
    for i, p in zip(free, rest):
        taken[i] = p
    upstream = [[] for _ in shapes]
    follows = {}
    for i, p in taken.items():
        m, kind = slots[i]
        if kind == "up":
            upstream[m].append(p)
        else:
            follows[p] = m
    return [np.array(sorted(u), dtype=np.int64) for u in upstream], follows


def _mm(a, b) -> np.ndarray:
    """Matrix product with a fixed summation order (kernels.linalg): these values become
    world parameters, whose bits may not depend on BLAS paths or memory alignment."""
    from kernels.linalg import dot

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out = dot(a.reshape(1, -1) if a.ndim == 1 else a, b.reshape(-1, 1) if b.ndim == 1 else b)
    if a.ndim == 1 and b.ndim == 1:
        return out[0, 0]
    return out[0] if a.ndim == 1 else (out[:, 0] if b.ndim == 1 else out)


def _gauss_hermite(fn, n: int = 64) -> float:
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return float(np.sum(w * fn(x)) / np.sqrt(2 * np.pi))


def build(world, rng, weight_range: tuple, t1_loading: float, t2_loading: float, a9_loading: float,
          resid_carry: float, factor_carry: float, direct_pool: tuple) -> PathwayModel:
    """Deal the ordinary proteome into pathways and fit every follower's own loadings,
    covariate coefficients and residual to its path (module docstring).  Changes
    ``world.protein_loadings`` and ``world.protein_cov`` of followers in place."""
    from .world import COREGULATED_SHARED, L_AGE, L_BMI, L_DIRECT, L_SMOKING, LATE_CARRY, LATE_DRIVERS, PROTEIN_RESIDUAL

    P = world.n_proteins
    F = world.protein_loadings.shape[1]
    r = world.roles
    total_loadings = world.protein_loadings.copy()
    _, cov_x = covariate_moments(world)
    sigma = np.zeros((F + 4, F + 4))
    sigma[:F, :F] = np.eye(F)
    sigma[F:, F:] = cov_x
    sd_age, sd_bmi = np.sqrt(cov_x[0, 0]), np.sqrt(cov_x[2, 2])
    trans_var = np.where(world.protein_master >= 0, 0.01, 0.0)

    def content(p):  # Z content of protein p's ordinary raw value
        return np.concatenate([world.protein_loadings[p], world.protein_cov[p]])

    def var_of(q):
        return float(_mm(_mm(q, sigma), q))

    def raw_var(p):
        return float(world.protein_h2[p] + trans_var[p] + var_of(content(p)) + PROTEIN_RESIDUAL ** 2)

    # ---- who feeds and follows what
    in_l = set(int(d) for d in r.drivers) | {int(x) for x in (r.decoys.get("T2"), r.a9_partner) if x is not None}
    copies = set(int(m) for _, m in world.coregulated)
    anchors = set(int(a) for a, _ in world.coregulated) - in_l
    eligible = np.array([p for p in range(P) if p not in in_l and p not in copies], dtype=np.int64)
    t1 = r.decoys.get("T1")
    follows = np.full(P, -1, dtype=np.int64)
    upstream, coef, extra, direct = [], [], [], []
    if len(eligible) >= UPSTREAM[0]:
        n_l = int("T2" in r.decoys) + int(r.a9_partner is not None)
        upstream, follow_map = _deal(rng, eligible, anchors, set(), upstream_range(len(r.drivers), bool(r.delayed.any())),
                                     followers_range(n_l))
        for p, m in follow_map.items():
            follows[p] = m
    # each pathway its own variant: unlinked ones first, then any on no protein's locus
    first, second = (np.asarray(x, dtype=np.int64) for x in direct_pool)
    choices = np.concatenate([rng.permutation(first), rng.permutation(np.setdiff1d(second, first))])
    if len(choices) < len(upstream):
        choices = np.concatenate([choices, rng.choice(second, size=len(upstream) - len(choices))])
    direct_variant = [int(x) for x in choices[:len(upstream)]]
    extra_var = world.latent_residual ** 2 + L_BMI ** 2 + L_DIRECT ** 2 + L_AGE ** 2 + L_SMOKING ** 2 * 0.1
    residual_sd = np.full(P, PROTEIN_RESIDUAL)
    carry = np.full(P, resid_carry)
    share, carried, path_cov = {}, {}, {}
    loading = float(t2_loading)

    def fit_follower(p, a, l):
        """Own loadings and covariates = ordinary draw - l x path content; returns the
        share of the path's variance in factors and covariates."""
        world.protein_loadings[p] = world.protein_loadings[p] - l * a[:F]
        world.protein_cov[p] = world.protein_cov[p] - l * a[F:]
        return var_of(a)

    for m, up in enumerate(upstream):
        v = rng.uniform(*weight_range, len(up)) * np.where(rng.random(len(up)) < 0.5, -1.0, 1.0)
        sds = np.array([np.sqrt(raw_var(int(p))) for p in up])
        qs = np.array([content(int(p)) / s for p, s in zip(up, sds)])  # standardised Z content
        corr = _mm(_mm(qs, sigma), qs.T)
        np.fill_diagonal(corr, 1.0)
        var_k = float(_mm(_mm(v, corr), v)) + extra_var
        sd_k = np.sqrt(var_k)
        coef.append(v / sds / sd_k)
        extra.append(np.sqrt(extra_var - L_DIRECT ** 2) / sd_k)
        direct.append(L_DIRECT / sd_k)

        a = _mm(v, qs) / sd_k
        ex = var_of(a)
        share[f"K{m}"] = ex
        # visit to visit: upstream genetics persist, their residuals carry resid_carry,
        # factors 0.85 (VISIT2_FACTOR_CARRY), K's own term resid_carry
        rest_var = np.array([1.0 - var_of(q) for q in qs])
        stable = np.array([(world.protein_h2[int(p)] + trans_var[int(p)]) / s ** 2 for p, s in zip(up, sds)])
        rest_cov = (float(np.sum(v ** 2 * (stable + resid_carry * (rest_var - stable)))) + L_DIRECT ** 2
                    + (extra_var - L_DIRECT ** 2) * resid_carry)
        for p in np.flatnonzero(follows == m):
            p = int(p)
            fit_follower(p, a, loading)
            r2 = PROTEIN_RESIDUAL ** 2 - loading ** 2 * (1.0 - ex)
            residual_sd[p] = np.sqrt(r2)
            carry[p] = float(np.clip((resid_carry * PROTEIN_RESIDUAL ** 2 - loading ** 2 * rest_cov / var_k) / r2, 0.0, 1.0))

    # ---- what L and L_late carry (S1.2, S1.3), for the T2 decoy and the A9 partner
    special = {}
    if t1 is not None:
        # the T1 decoy is its ordinary value plus 0.55 z(BMI): its own residual in full, so
        # that once BMI is adjusted for (as every analysis does) it is an ordinary protein
        special["T1"] = float(residual_sd[int(t1)])
    if "T2" in r.decoys or r.a9_partner is not None:  # a null world's L still carries covariate terms
        hard = world.hard
        s = float(world.params["bias_params"]["hard"]["saturation"])
        f = (lambda x: s * np.tanh(x / s)) if hard else (lambda x: x)
        kappa = _gauss_hermite(lambda x: (1.0 / np.cosh(x / s)) ** 2) if hard else 1.0
        v_f = _gauss_hermite(lambda x: f(x) ** 2) if hard else 1.0
        qs, rem = [], []
        for d in r.drivers:
            d = int(d)
            var = raw_var(d)
            if world.t4_coregulated and d == r.t4_causal:
                var -= PROTEIN_RESIDUAL ** 2 * (1.0 - COREGULATED_SHARED)  # L reads the abundance, not the assay
            q = content(d) / np.sqrt(var)
            qs.append(kappa * q)
            rem.append(v_f - kappa ** 2 * var_of(q))
        qs, rem = np.array(qs).reshape(-1, F + 4), np.array(rem)
        l_terms = np.zeros(F + 4)  # L's own covariate terms (S1.2)
        l_terms[F + 0] = L_AGE / sd_age
        l_terms[F + 2] = L_BMI / sd_bmi
        l_terms[F + 3] = L_SMOKING
        w, wl = r.weights, r.weights_late
        a_l = (_mm(w, qs) if len(w) else np.zeros(F + 4)) + l_terms
        indep = L_DIRECT ** 2 + world.latent_residual ** 2
        bp = world.params["bias_params"]
        if world.has("T7"):
            indep += bp["T7"]["direct"] ** 2
        if hard:
            indep += bp["hard"]["polygenic_sd"] ** 2
        if r.interaction is not None:
            indep += r.interaction[2] ** 2
        var_l = var_of(a_l) + float(np.sum(w ** 2 * rem)) + indep
        sd_l = np.sqrt(var_l)
        a_l, d_l, i_l = a_l / sd_l, w / sd_l, indep / var_l  # standardised L
        paths = {}
        if "T2" in r.decoys:
            paths["T2"] = (int(r.decoys["T2"]), a_l, t2_loading)
        if r.a9_partner is not None:
            a_late = LATE_CARRY * a_l + LATE_DRIVERS * _mm(wl, qs)
            d_late = LATE_CARRY * d_l + LATE_DRIVERS * wl
            var_late = var_of(a_late) + float(np.sum(d_late ** 2 * rem)) + LATE_CARRY ** 2 * i_l
            paths["A9_partner"] = (int(r.a9_partner), a_late / np.sqrt(var_late), a9_loading)
        for role, (p, a, l) in paths.items():
            ex = fit_follower(p, a, l)
            share[role] = ex
            path_cov[role] = a[F:].copy()
            carried[role] = factor_carry * float(_mm(a[:F], a[:F])) + float(_mm(_mm(a[F:], cov_x), a[F:]))
            special[role] = float(np.sqrt(max(PROTEIN_RESIDUAL ** 2 - l ** 2 * (1.0 - ex), 0.0)))
    for role, p in (("T2", r.decoys.get("T2")), ("A9_partner", r.a9_partner)):
        if p is not None and role not in special:  # no drivers: L carries no protein
            l = t2_loading if role == "T2" else a9_loading
            special[role] = float(np.sqrt(max(PROTEIN_RESIDUAL ** 2 - l ** 2, 0.0)))
    return PathwayModel(upstream=upstream, coef=coef, extra=np.array(extra, dtype=np.float64), follows=follows,
                        direct_variant=np.array(direct_variant, dtype=np.int64), direct=np.array(direct, dtype=np.float64),
                        loading=loading, residual_sd=residual_sd, visit2_carry=carry, special_residual=special,
                        path_share=share, path_carried=carried,
                        path_covariates=path_cov, total_loadings=total_loadings)
