"""The linkage bound that scales with the cohort (SPEC section 4; issue 29).

Every variant that moves L (a driver's cis variant and private trans variant, the T7
decoy's cis variant, G_direct and the hard worlds' polygenic background) passes a share
r of its effect to any variant it is in LD with, so a protein whose instrument is such a
variant shows a reduced-form association with L of expected z about beta |r| sqrt(n),
beta the moving variant's effect on standardised L (or L_late) per SD of genotype.  A
fixed r^2 threshold is no bound at every n: r^2 = 0.05 gives z of 5-8 at 54,000
participants.  So the generator places every instrument locus (each protein's cis
variant, the master-regulator hubs, the private trans variants, G_direct) at expected
haplotype r below

    r_max = Z_PAIR / (beta_max sqrt(n)),

beta_max being the largest effect any variant of this world has on L or L_late, to every
other placed locus, whatever its role: the constraint that keeps instruments that move L
apart from other proteins' instruments is then the same for every protein, so it marks
none (a driver's locus is as isolated as any other).  With Z_PAIR = 0.5 a protein's
instrument with a moving locus on either side still has expected z below 1.

The effects are the model's own: L = z[sum w_j f(P_j) + 0.15 z(BMI) + 0.10 smoking +
0.12 G_direct + 0.08 z(age) + ... + eps] with each driver P_j = z[sqrt(h2) G_cis +
0.1 G_trans + lambda F + beta X + 0.8 eps], so a driver's cis genotype moves standardised
L by |w| sqrt(h2) / (sd(P_raw) sd(L_raw)) (the saturation of hard worlds only lowers it),
and L_late = z[0.75 L + 0.35 sum w_late P] likewise.  ``latent_model`` computes the
variances from the model's linear structure (``pipeline.model.linear``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .model import linear
from .model.constants import (COREGULATED_SHARED, L_AGE, L_BMI, L_DIRECT, L_SMOKING, LATE_CARRY, LATE_DRIVERS,
                              PROTEIN_RESIDUAL, TRANS_EFFECT)

#: Expected reduced-form z on L through LD allowed between one moving locus and one other
#: instrument locus; with one on either side an instrument stays below 1.
Z_PAIR = 0.5
#: An instrument's expected z on L through LD from all moving variants together must stay
#: below this (checked after placement; SPEC section 4 / issue 29).
Z_TOTAL = 1.0


@dataclass
class LatentModel:
    """The linear structure of L and L_late that the bound and the followers' paths need."""

    sd_l: float  # SD of L's raw value (L = raw / sd_l)
    sd_late: float  # SD of L_late's raw value (0.75 L + 0.35 sum w_late P)
    driver_sd: np.ndarray  # [drivers] SD of the raw value L reads (the T4 driver's abundance)
    d_l: np.ndarray  # [drivers] coefficient of each standardised driver in standardised L
    d_late: np.ndarray  # [drivers] same in L_late's raw value (divide by sd_late)
    a_l: np.ndarray  # [F + 4] standardised L's factor and covariate content
    a_late: np.ndarray  # [F + 4] standardised L_late's content
    kappa: float  # mean slope of the hard worlds' saturation (1 otherwise)
    extras: dict = field(default_factory=dict)


def latent_model(world, cov_x: np.ndarray) -> LatentModel:
    """L and L_late of ``world`` from its drivers' structure (``pipeline.model.linear``)."""
    F = world.protein_loadings.shape[1]
    r = world.roles
    sigma = linear.sigma_matrix(F, cov_x)
    sd_age, sd_bmi = np.sqrt(cov_x[0, 0]), np.sqrt(cov_x[2, 2])
    hard = world.hard
    s = float(world.params["bias_params"]["hard"]["saturation"])
    f = (lambda x: s * np.tanh(x / s)) if hard else (lambda x: x)
    kappa = linear.gauss_hermite(lambda x: (1.0 / np.cosh(x / s)) ** 2) if hard else 1.0
    v_f = linear.gauss_hermite(lambda x: f(x) ** 2) if hard else 1.0
    qs, rem, sds = [], [], []
    for d in r.drivers:
        d = int(d)
        var = linear.raw_variance(world, d, sigma)
        if world.t4_coregulated and d == r.t4_causal:
            var -= PROTEIN_RESIDUAL ** 2 * (1.0 - COREGULATED_SHARED)  # L reads the abundance, not the assay
        q = linear.content(world, d) / np.sqrt(var)
        qs.append(kappa * q)
        rem.append(v_f - kappa ** 2 * linear.var_of(q, sigma))
        sds.append(np.sqrt(var))
    qs, rem = np.array(qs).reshape(-1, F + 4), np.array(rem)
    l_terms = np.zeros(F + 4)  # L's own covariate terms (S1.2)
    l_terms[F + 0] = L_AGE / sd_age
    l_terms[F + 2] = L_BMI / sd_bmi
    l_terms[F + 3] = L_SMOKING
    w, wl = r.weights, r.weights_late
    a_l = (linear.mm(w, qs) if len(w) else np.zeros(F + 4)) + l_terms
    indep = L_DIRECT ** 2 + world.latent_residual ** 2
    bp = world.params["bias_params"]
    if world.has("T7"):
        indep += bp["T7"]["direct"] ** 2
    if hard:
        indep += bp["hard"]["polygenic_sd"] ** 2
    if r.interaction is not None:
        indep += r.interaction[2] ** 2
    var_l = linear.var_of(a_l, sigma) + float(np.sum(w ** 2 * rem)) + indep
    sd_l = float(np.sqrt(var_l))
    a_l, d_l, i_l = a_l / sd_l, w / sd_l, indep / var_l
    a_late = LATE_CARRY * a_l + LATE_DRIVERS * (linear.mm(wl, qs) if len(wl) else np.zeros(F + 4))
    d_late = LATE_CARRY * d_l + LATE_DRIVERS * wl
    var_late = linear.var_of(a_late, sigma) + float(np.sum(d_late ** 2 * rem)) + LATE_CARRY ** 2 * i_l
    sd_late = float(np.sqrt(var_late))
    return LatentModel(sd_l=sd_l, sd_late=sd_late, driver_sd=np.array(sds, dtype=np.float64), d_l=np.asarray(d_l, np.float64),
                       d_late=np.asarray(d_late, np.float64), a_l=a_l, a_late=a_late / sd_late, kappa=float(kappa),
                       extras={"i_l": float(i_l), "qs": qs, "rem": rem, "var_late": var_late})


def mover_effects(world, model: LatentModel, polygenic_effects: np.ndarray | None = None) -> list:
    """Every kind of variant that moves L with its effect per SD of genotype on standardised
    L and L_late: dicts (kind, protein or None, beta_l, beta_late).  Variants are attached
    by the caller (``with_variants``) once the loci are placed."""
    r = world.roles
    out = []
    for k, d in enumerate(r.drivers):
        d = int(d)
        for kind, coef in (("cis", float(np.sqrt(world.protein_h2[d]))), ("trans", float(TRANS_EFFECT))):
            g = coef / model.driver_sd[k]
            out.append({"kind": f"driver_{kind}", "protein": d, "beta_l": abs(model.d_l[k]) * g,
                        "beta_late": abs(model.d_late[k]) * g / model.sd_late})
    bp = world.params["bias_params"]

    def direct(kind, coef, protein=None):
        b = abs(coef) / model.sd_l
        out.append({"kind": kind, "protein": protein, "beta_l": b, "beta_late": LATE_CARRY * b / model.sd_late})

    direct("direct", L_DIRECT)
    if world.has("T7"):
        direct("T7_cis", float(bp["T7"]["direct"]), int(r.decoys["T7"]))
    if world.hard and polygenic_effects is not None and len(polygenic_effects):
        e = np.asarray(polygenic_effects, dtype=np.float64)
        scale = float(bp["hard"]["polygenic_sd"]) / float(np.sqrt(np.sum(e * e)))
        for i, x in enumerate(e):
            direct("polygenic", scale * float(x))
            out[-1]["index"] = i
    return out


def beta_max(effects: list) -> float:
    return max([max(e["beta_l"], e["beta_late"]) for e in effects] + [0.0])


def r_bound(beta: float, n: int, z: float = Z_PAIR) -> float:
    """Largest haplotype r allowed between an instrument locus and a locus whose effect on L is ``beta``."""
    return float(z / (max(beta, 1e-12) * np.sqrt(n)))


def model_r(world_or_arrays, i: np.ndarray, j: np.ndarray, decay_bp: float) -> np.ndarray:
    """Expected haplotype r between variants i and j (0 on different contigs)."""
    from .ld import expected_haplotype_r

    contig, position, af = world_or_arrays
    i, j = np.atleast_1d(i).astype(np.int64), np.atleast_1d(j).astype(np.int64)
    same = contig[i] == contig[j]
    rho = np.where(same, np.exp(-np.abs(position[i].astype(np.float64) - position[j]) / decay_bp), 0.0)
    rho = np.where(i == j, 1.0, rho)
    out = np.zeros(len(i))
    ok = rho > 0
    if ok.any():
        out[ok] = np.where(i[ok] == j[ok], 1.0, expected_haplotype_r(af[i[ok]], af[j[ok]], rho[ok]))
    return out


def expected_z_through_ld(arrays, decay_bp: float, n: int, targets: np.ndarray, movers: list, skip=None) -> np.ndarray:
    """For each target variant, sum over moving variants (dicts with ``variant``, ``beta_l``, ``beta_late``)
    of max(beta_l, beta_late) |r| sqrt(n): the expected reduced-form |z| on L or L_late that
    LD passes to it.  ``skip(target_index, mover)`` excludes a mover for one target."""
    targets = np.asarray(targets, dtype=np.int64)
    out = np.zeros(len(targets))
    for m in movers:
        v = int(m["variant"])
        if v < 0:
            continue
        r = np.abs(model_r(arrays, targets, np.full(len(targets), v), decay_bp))
        z = max(m["beta_l"], m["beta_late"]) * r * np.sqrt(n)
        if skip is not None:
            z = np.where([skip(t, m) for t in range(len(targets))], 0.0, z)
        out += z
    return out


def instrument_exposure(world) -> list:
    """Every protein's expected reduced-form |z| on L or L_late through LD, at the world's n,
    from the variants that move L other than its own (a driver's cis and trans variants,
    shared by its T4 partner; the T7 decoy's cis variant): one dict per protein with its cis
    and trans variants' figures and the moving variant that contributes most."""
    movers = world.extras.get("movers") or []
    decay = 1000.0 * float(world.params["ld_decay_kb"])
    arrays = (world.contig, world.position, world.af)
    r = world.roles
    own = {}
    for m in movers:
        p = m.get("protein")
        if p is None:
            continue
        own.setdefault(int(p), set()).add(int(m["variant"]))
    if r.t4_partner is not None and r.t4_causal in own:
        own.setdefault(int(r.t4_partner), set()).update(own[int(r.t4_causal)])
    sqrt_n = float(np.sqrt(world.n))
    mv = np.array([int(m["variant"]) for m in movers], dtype=np.int64)
    beta = np.array([max(m["beta_l"], m["beta_late"]) for m in movers])
    out = []
    for p in range(world.n_proteins):
        row = {"protein": p}
        for key, v in (("cis", int(world.protein_cis[p])), ("trans", int(world.protein_master[p]))):
            if v < 0 or not len(mv):
                row[key] = (0.0, None)
                continue
            keep = ~np.isin(mv, list(own.get(p, ())))
            rr = np.abs(model_r(arrays, np.full(len(mv), v), mv, decay))
            z = np.where(keep, beta * rr * sqrt_n, 0.0)
            k = int(np.argmax(z))
            row[key] = (float(z.sum()), movers[k]["kind"] if z[k] > 0 else None)
        out.append(row)
    return out
