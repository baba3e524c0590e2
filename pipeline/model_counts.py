"""The tell scan's genetic-count statistic in expectation, from the world model alone (issue 29).

A check of the generator, not of a release: it reads the world model itself (which the judging
side, ``pipeline.tells`` included, may not import), so it lives beside the generator.

``instrument.n_significant_variants`` (``pipeline.tells.genetics``) counts each protein's
genome-wide significant variants (|r| > 5.45 / sqrt(n), p = 5e-8).  A protein's count is its
sources' (its own cis variant, its own trans variant, and for a follower every variant its
process carries: the feeders' cis and trans variants, the process's own variant, in a T7
world its pleiotropic protein's cis variant and in a hard world its polygenic background; for the
T2 decoy and the A9 partner every variant that moves L) plus, for each source whose effect
clears the bar, the variants in LD strong enough to clear it too.  On one panel of worlds the
realised counts of the roles are one draw; whether the *generator* sets roles apart is a
question about its distribution, which this module answers without building anything:

    expected count = sum over sources s with |e_s| > t of (1 + #{v : r_LD(s, v) |e_s| > t})

with e_s the source's effect on the protein per SD of genotype in SD units of the protein
(cis sqrt(h2), trans 0.1, a path's coefficient times its loading), r_LD the model's expected
haplotype r (``pipeline.ld``) and t = 5.45 / sqrt(n).  Each role protein is ranked among the
ordinary proteins of its pathway class (as the scan's ``@class`` cells do) and the ranks are
pooled over freshly seeded worlds as the scan pools them (``pipeline.tells.scan``), the roles
that carry one component counted once.

    python -m pipeline.model_counts world=standard-01 scale=paper --worlds 40

On the kept paper-scale panel worlds (standard-01..05, hard-01) the expected counts track the
released ones (T2 decoy 20/12/19/5/18 expected against 17/13/18/5/19 found; docs/validity.md).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from typing import Optional

import numpy as np

#: |z| of a genome-wide significant association (p = 5e-8, two-sided).
Z_GENOME_WIDE = 5.45
#: Expected r^2 below which a pair is never counted (r * effect < t needs r < 0.06 at any effect <= 1 at n = 54,000).
R2_FLOOR = 1e-3


def role_kinds_of(world) -> dict:
    """protein index -> role kind, read as the scan reads them (``sealed_checks.role_kinds`` of
    the world's ``truth.json``)."""
    from .tells.sealed_checks import role_kinds
    from .writers.sealed import truth

    index = {name: i for i, name in enumerate(world.protein_ids)}
    return {index[name]: kind for name, kind in role_kinds(truth(world)).items()}


class _Neighbours:
    """Expected haplotype r of every linked pair, by variant."""

    def __init__(self, world, decay_bp: float):
        from . import ld

        i, j, r2 = ld.linked_pairs(world.contig, world.position, world.af, decay_bp, r2_min=R2_FLOOR)
        r = np.sqrt(r2)
        order = np.argsort(np.concatenate([i, j]), kind="stable")
        self.var = np.concatenate([i, j])[order]
        self.r = np.concatenate([r, r])[order]

    def count(self, v: int, effect: float, t: float) -> int:
        lo, hi = np.searchsorted(self.var, [v, v + 1])
        return 1 + int(np.sum(self.r[lo:hi] * effect > t))


def expected_counts(world, decay_bp: float, n: Optional[int] = None) -> np.ndarray:
    """Expected count of genome-wide significant variants of every protein of ``world``."""
    from .model import linear
    from .model.constants import PROTEIN_RESIDUAL, TRANS_EFFECT
    from .model.sampler import covariate_moments
    from .pathways import LATE

    n = int(n or world.n)
    t = Z_GENOME_WIDE / np.sqrt(n)
    nb = _Neighbours(world, decay_bp)
    pm, r = world.pathways, world.roles
    _, cov_x = covariate_moments(world)
    sigma = linear.sigma_matrix(world.protein_loadings.shape[1], cov_x)

    def own(p):
        out = [(int(world.protein_cis[p]), float(np.sqrt(world.protein_h2[p])))]
        if world.protein_master[p] >= 0:
            out.append((int(world.protein_master[p]), TRANS_EFFECT))
        return out

    def path_sources(p):
        m = int(pm.follows[p])
        if m < 0:
            return []
        late = int(pm.follower_kind[p]) == LATE
        load = float(pm.follower_loading[p])
        out = []
        for j, u in enumerate(pm.upstream[m]):
            c = float(pm.coef[m][j])
            if late:
                c = float(pm.late_k[m]) * c + float(pm.late_coef[m][j])
            out += [(v, load * c * e) for v, e in own(int(u))]
        carry = float(pm.late_k[m]) if late else 1.0
        if pm.direct_variant[m] >= 0:
            out.append((int(pm.direct_variant[m]), load * float(pm.direct[m]) * carry))
        if pm.pleio_variant is not None and pm.pleio_variant[m] >= 0:
            out.append((int(pm.pleio_variant[m]), load * float(pm.pleio[m]) * carry))
        if pm.poly_variants is not None:
            out += [(int(v), load * float(c) * carry) for v, c in zip(pm.poly_variants[m], pm.poly_coef[m])]
        return out

    def l_sources(key: str, loading: float):
        """Every variant that moves L (the sampler's record, ``world.extras["movers"]``) with
        ``loading`` x its effect on L (``beta_l``) or L_late (``beta_late``)."""
        return [(int(e["variant"]), loading * float(e[key])) for e in world.extras.get("movers") or []]

    special, special_cov = {}, {}
    if "T2" in r.decoys:
        special[int(r.decoys["T2"])] = l_sources("beta_l", float(pm.loading))
        special_cov[int(r.decoys["T2"])] = pm.path_covariates.get("T2")
    if r.a9_partner is not None:
        special[int(r.a9_partner)] = l_sources("beta_late", float(pm.loading))
        special_cov[int(r.a9_partner)] = pm.path_covariates.get("A9_partner")
    F = world.protein_loadings.shape[1]

    def sd_of(p) -> float:
        """SD of the protein's value: an ordinary protein's (a follower's own part with its
        path's factor and covariate content, the ordinary draw it was fitted to)."""
        q = linear.content(world, p).copy()
        m = int(pm.follows[p])
        if m >= 0 or p in special:
            q[:F] = pm.total_loadings[p]
            if m >= 0:
                q[F:] += float(pm.follower_loading[p]) * pm.cov_change[m][1 if int(pm.follower_kind[p]) == LATE else 0]
            elif special_cov.get(p) is not None:
                q[F:] += float(pm.loading) * np.asarray(special_cov[p])
        trans = TRANS_EFFECT ** 2 if world.protein_master[p] >= 0 else 0.0
        return float(np.sqrt(world.protein_h2[p] + trans + linear.var_of(q, sigma) + PROTEIN_RESIDUAL ** 2))

    counts = np.zeros(world.n_proteins)
    for p in range(world.n_proteins):
        sources = own(p) + (special[p] if p in special else path_sources(p))
        sd = sd_of(p)
        total: dict = {}
        for v, e in sources:
            total[v] = total.get(v, 0.0) + e / sd
        counts[p] = sum(nb.count(v, abs(e), t) for v, e in total.items() if abs(e) > t)
    return counts


def world_ranks(world, decay_bp: float, n: Optional[int] = None) -> list:
    """Each role protein's mid-rank percentile among the ordinary proteins of its pathway class,
    as the scan's observations: dicts (protein, kind, u, value, unit)."""
    import pandas as pd

    from .pathways import BASELINE, LATE
    from .tells.exemptions import PLANTED_CLASS
    from .tells.scan import percentiles, shared_group

    counts = expected_counts(world, decay_bp, n)
    kinds = role_kinds_of(world)
    pm = world.pathways
    names = [f"PROT_{p:04d}" for p in range(world.n_proteins)]
    values = pd.Series(counts, index=names)
    classes = {"baseline": [], "late": [], "none": []}
    for p in range(world.n_proteins):
        if p in kinds:
            continue
        k = int(pm.follower_kind[p]) if pm.follows[p] >= 0 else -1
        classes["baseline" if k == BASELINE else "late" if k == LATE else "none"].append(names[p])
    out = []
    for p, kind in kinds.items():
        k = int(pm.follower_kind[p]) if pm.follows[p] >= 0 else -1
        cls = PLANTED_CLASS.get(kind) or ("baseline" if k == BASELINE else "late" if k == LATE else "none")
        u = percentiles(values, classes[cls], [names[p]]).get(names[p])
        if u is not None:
            out.append({"protein": names[p], "kind": kind, "u": u, "value": float(counts[p]),
                        "unit": shared_group(str(world.id), names[p], kind)})
    return out


def fresh_seed(label: str, i: int) -> str:
    return hex(int(hashlib.sha256(f"model-counts/{label}/{i}".encode()).hexdigest()[:32], 16) | 1 << 127)


def pooled(observations: list) -> dict:
    """The scan's pooled tests per role kind and over every role (shared-component groups once)."""
    from .tells.scan import cluster_scores, pooled_test

    out = {}
    for kind in sorted({o["kind"] for o in observations}):
        out[kind] = pooled_test([o["u"] for o in observations if o["kind"] == kind])
    out["any_role"] = pooled_test(cluster_scores(observations))
    return out


def sample_ranks(world_name: str, scale: str, worlds: int, overrides: tuple = (), n: Optional[int] = None) -> list:
    """Observations of ``worlds`` freshly seeded worlds of config ``world_name`` at ``scale``
    (counted at ``n`` participants, default the scale's: a larger n magnifies a difference in
    the variants a process carries, whose LD neighbours clear the bar more often)."""
    from . import config
    from .model.sampler import sample_world

    obs = []
    for i in range(worlds):
        cfg = config.load([f"world={world_name}", f"scale={scale}", f"world.seed={fresh_seed(world_name, i)}",
                              f"world.id={world_name}-fresh{i}", *overrides])
        wd = sample_world(cfg)
        obs += [dict(o, world=wd.id) for o in world_ranks(wd, 1000.0 * float(cfg.cfg.world.ld_decay_kb), n)]
    return obs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.model_counts", description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="world=NAME scale=NAME and other world overrides")
    ap.add_argument("--worlds", type=int, default=40, help="freshly seeded worlds (default 40)")
    args = ap.parse_args(argv)
    kv = dict(a.split("=", 1) for a in args.overrides if "=" in a)
    rest = tuple(a for a in args.overrides if a.split("=", 1)[0] not in ("world", "scale"))
    obs = sample_ranks(kv.get("world", "standard-01"), kv.get("scale", "paper"), args.worlds, rest)
    for kind, test in pooled(obs).items():
        print(f"{kind:>12}  k={test['k']:4d}  z_shift={test['z_shift']:+7.3f}  p={test['p']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
