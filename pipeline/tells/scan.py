"""The tell scan: can a role be read off a set of releases without causal reasoning?

    python -m pipeline.audit --tells <dir holding built worlds> [--json-out FILE] [--jobs N] [--alpha 0.01]
        [--worlds id,id] [--cache DIR]

Every subdirectory of ``<dir>`` holding ``release/`` and ``sealed/`` is one world.
For each world the role-blind statistics of ``pipeline.tells.features`` are
computed from the release alone; the sealed truth only says which protein has
which role.  For every statistic and role kind, each role protein's value is
ranked among the world's ordinary (role-free) proteins, giving a percentile u
(mid-rank, (rank - 0.5) / (ordinary + 1), so u is uniform on a grid when the
role protein is one of them).  Percentiles are pooled across worlds through
their normal scores z = Phi^-1(u), which are standard normal under that null:

* shift test: S = sum(z) / sqrt(k) ~ N(0, 1) (a role ranking high or low);
* extremity test: Q = sum(z^2) ~ chi^2_k (a role in the outer tails, either side);
* p = min(1, 2 min(p_shift, p_extreme)) for the cell.

The pooled cells (``any_role``, ``any_role@class``) take one observation per role protein
and world, except where two roles carry one component by construction (``SHARED_COMPONENT``:
the T2 decoy and the A9 partner both read L; the T4 pair measures one abundance): such a
group is one observation, the mean of its members' normal scores (``cluster_scores``), so a
world's shared component is not counted twice.

A paired test compares the T4 driver with its partner in the same world
(S = sum(z_driver - z_partner) / sqrt(2k)).  A cell is a finding when its p is
below ``alpha_ranks / m`` (Bonferroni over the m tested cells).  The discrete
grid makes the normal scores slightly under-dispersed, so the tests are
conservative.

False-positive rate: with the default ``--alpha 0.01`` the scan fails a
clean set of worlds by chance with probability at most 1 %: 0.8 % for the rank
tests (Bonferroni, conservative since statistics are correlated), 0.1 % for the
T4 inseparability test and 0.1 % for the surrogate's imaging and death tests
(each at one-sided level 0.1 % / number of worlds).  The linkage check of
instruments that move L is deterministic (model r^2 from positions, allele
frequencies and the sealed LD decay).

Power: a cell with k observations detects a mean normal-score shift of
delta_80 = (z_crit + 0.84) / sqrt(k) with 80 % power; the table reports it as the
typical percentile Phi(-delta_80) such a role would sit at.  Role kinds present
in few worlds (T9 in 5 of 20) are caught only when they sit near the extreme of
their world nearly every time.

Exempt (computed and shown, never failing): the planted signals of SPEC section
3 and 4, listed in ``EXEMPT`` with the reason.  The T4 exemptions hold only while
the pair structure does not point at T4: the ``t4_pair`` cells (never exempt)
rank the T4 pair, the mean of its members' values, among the world's ordinary
co-regulated pairs on every statistic, pooled across worlds as above.  Likewise a
pathway-class exemption (a follower carries its process's genetics, so followers and
feeders differ) holds only while the ``@class`` cells (never exempt) rank each role among
the world's ordinary proteins of its own pathway class (``PLANTED_CLASS``, else the sealed
record) as one of them, on every statistic it exempts.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Iterable, Optional

import numpy as np
import pandas as pd
from scipy import stats as st
from scipy.special import chdtrc, ndtr, ndtri

from .. import bundle
from . import features
from .sealed_checks import POWER_Z, WorldTruth, check_instruments, check_surrogate, check_t4, surrogate_verdict
from .exemptions import (  # noqa: F401  (re-exported: the scan's vocabulary)
    ROLE_KINDS, POOLED, PAIRED, T4_PAIR, PLANTED_CLASS, MATCHED, ALPHA_SHARES, OUTER, SHARED_COMPONENT,
    Exemption, L_LINKED, EXEMPT, NOT_RANKED, exemption, class_exempt, usable_statistics,
)


# ----------------------------------------------------------------------------- per world


def world_dirs(root: str) -> list:
    out = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if os.path.isdir(os.path.join(d, bundle.RELEASE)) and os.path.isdir(os.path.join(d, bundle.SEALED)):
            out.append(d)
    return out


def analyse_world(world_dir: str) -> dict:
    """Role-blind statistics (release only), role kinds and the sealed checks of one world."""
    from ..genotypes_io import load_genotypes

    t0 = time.perf_counter()
    release = os.path.join(world_dir, bundle.RELEASE)
    wt = WorldTruth.load(world_dir)
    genotypes = load_genotypes(release, threads=1)
    table = features.protein_statistics(release, genotypes)
    contig, position = features.variant_positions(release, list(genotypes.columns))
    checks = [check_instruments(world_dir, wt, genotypes, contig, position),
              check_surrogate(world_dir, wt), check_t4(world_dir, wt)]
    return {"world": wt.world_id, "dir": world_dir, "archetype": wt.archetype, "kinds": wt.kinds,
            "biases": list(wt.truth.get("biases") or []),
            "coregulated": [list(p) for p in wt.hidden.get("coregulated_pairs") or []],
            "followers": ordinary_followers(wt.hidden), "table": table, "checks": checks, "seconds": round(time.perf_counter() - t0, 1)}


def ordinary_followers(hidden: dict) -> dict:
    """{"baseline": [...], "late": [...]}: the proteins that follow an ordinary pathway's K_m or
    K_m_late (the sealed pathway record, ``pipeline.pathways.PathwayModel.summary``)."""
    out = {"baseline": [], "late": []}
    for m in (hidden.get("pathways") or {}).get("pathways") or []:
        late = set(m.get("late_followers") or [])
        out["late"] += sorted(late)
        out["baseline"] += [p for p in m.get("followers") or [] if p not in late]
    return out


def followers_of(res: dict) -> Optional[dict]:
    """The followers of a per-world result analysed before they were recorded, from its sealed
    bundle (None when that is gone: its @class cells are then missing, and say so by their k)."""
    try:
        res["followers"] = ordinary_followers(WorldTruth.load(res["dir"]).hidden)
    except Exception:
        res["followers"] = None
    return res["followers"]


def pathway_class(protein: str, kind: str, followers: dict) -> str:
    """"baseline", "late" or "none": the role's planted following, else its place in the record."""
    if kind in PLANTED_CLASS:
        return PLANTED_CLASS[kind]
    return next((g for g in ("baseline", "late") if protein in set(followers.get(g) or [])), "none")


def class_percentiles(values: pd.Series, table_index, kinds: dict, followers: dict) -> dict:
    """Each role protein's mid-rank percentile among the ordinary proteins of its pathway class."""
    ordinary = [p for p in table_index if p not in kinds]
    groups = {g: [p for p in followers.get(g) or [] if p not in kinds] for g in ("baseline", "late")}
    taken = set(groups["baseline"]) | set(groups["late"])
    groups["none"] = [p for p in ordinary if p not in taken]
    out = {}
    for protein, kind in kinds.items():
        out.update(percentiles(values, groups[pathway_class(protein, kind, followers)], [protein]))
    return out


def analyse_world_safely(world_dir: str) -> dict:
    """``analyse_world``, or a record of why the world could not be analysed (a finding, never a silent pass)."""
    try:
        return analyse_world(world_dir)
    except Exception as exc:  # an unreadable world fails the scan with its reason
        return {"world": os.path.basename(world_dir), "dir": world_dir, "error": f"{type(exc).__name__}: {exc}"}


def percentiles(values: pd.Series, ordinary: list, proteins: Iterable) -> dict:
    """Mid-rank percentile of each of ``proteins`` among the ordinary proteins' finite values."""
    base = np.sort(values.reindex(ordinary).to_numpy(dtype=np.float64))
    base = base[np.isfinite(base)]
    proteins = [p for p in proteins if p in values.index]
    if len(base) == 0 or not proteins:
        return {}
    v = values.reindex(proteins).to_numpy(dtype=np.float64)
    below = np.searchsorted(base, v, side="left")
    equal = np.searchsorted(base, v, side="right") - below
    u = (below + 0.5 * equal + 0.5) / (len(base) + 1)
    return {p: float(x) for p, x, ok in zip(proteins, u, np.isfinite(v)) if ok}


def pair_percentile(values: pd.Series, pairs: list, kinds: dict) -> Optional[tuple]:
    """(pair label, mid-rank percentile, value) of the T4 pair among the ordinary co-regulated
    pairs, a pair's value being the mean of its members'; None without both."""
    def value(a, m):
        return float(np.mean([values.get(a, np.nan), values.get(m, np.nan)]))

    t4 = [(a, m) for a, m in pairs if kinds.get(a) == "t4_driver" and kinds.get(m) == "t4_partner"]
    ordinary = np.sort([x for x in (value(a, m) for a, m in pairs if a not in kinds and m not in kinds) if np.isfinite(x)])
    if not t4 or not len(ordinary):
        return None
    v = value(*t4[0])
    if not np.isfinite(v):
        return None
    below = np.searchsorted(ordinary, v, side="left")
    equal = np.searchsorted(ordinary, v, side="right") - below
    return f"{t4[0][0]}-{t4[0][1]}", float((below + 0.5 * equal + 0.5) / (len(ordinary) + 1)), v


# ----------------------------------------------------------------------------- pooled tests


def pooled_test(u: list) -> dict:
    """Shift and extremity tests of percentiles that are uniform under the null."""
    z = ndtri(np.clip(np.asarray(u, dtype=np.float64), 1e-12, 1 - 1e-12))
    k = len(z)
    s = float(z.sum() / math.sqrt(k))
    q = float((z ** 2).sum())
    p_shift = float(2 * ndtr(-abs(s)))
    p_extreme = float(chdtrc(k, q))
    return {"k": k, "z_shift": round(s, 3), "chi2": round(q, 3), "p_shift": p_shift, "p_extreme": p_extreme,
            "p": min(1.0, 2 * min(p_shift, p_extreme))}


def shared_group(world: str, protein: str, kind: str) -> str:
    """The pooled cells' unit of observation: the world's shared-component group of ``kind``
    (``SHARED_COMPONENT``), else the protein itself."""
    group = next((g for g in SHARED_COMPONENT if kind in g), None)
    return f"{world}/{'+'.join(group) if group else protein}"


def cluster_scores(obs: list) -> list:
    """One percentile per unit of observation: the members' normal scores averaged.

    Two roles that carry one component (both read L; the T4 pair) are not independent
    draws, and counting both would inflate a pooled cell's sum by up to sqrt(2).  Under the
    null each member's score is N(0, 1), so their mean is normal with variance (1 + rho) / 2
    <= 1: taken as one N(0, 1) score it keeps the shift and extremity tests at or below
    their level whatever the correlation rho (conservative by (1 - rho) / 2 at most)."""
    units: dict = {}
    for o in obs:
        units.setdefault(o.get("unit", o["protein"]), []).append(ndtri(min(max(o["u"], 1e-12), 1 - 1e-12)))
    return [float(ndtr(np.mean(z))) for z in units.values()]


def scan(results: list, alpha: float = 0.01) -> dict:
    """Pool the per-world results into the report."""
    alpha_ranks = alpha * ALPHA_SHARES["ranks"]
    broken = [r for r in results if "error" in r]
    results = [r for r in results if "error" not in r]
    stats_names = list(dict.fromkeys(c for r in results for c in r["table"].columns if c not in NOT_RANKED))
    cells: dict = {}
    dropped: dict = {}  # (stat, kind) -> observations a conditional exemption leaves out
    for res in results:
        table, kinds = res["table"], res["kinds"]
        ordinary = [p for p in table.index if p not in kinds]
        by_kind: dict = {}
        for protein, kind in kinds.items():
            if protein in table.index:
                by_kind.setdefault(kind, []).append(protein)
        for stat in stats_names:
            if stat not in table.columns:
                continue
            values = table[stat]
            u = percentiles(values, ordinary, list(kinds))
            for protein, kind in kinds.items():
                if protein not in u:
                    continue
                if any(e.covers_in(kind, stat, res.get("biases") or ()) for e in EXEMPT):
                    dropped[(stat, kind)] = dropped.get((stat, kind), 0) + 1
                    continue
                for key in ((stat, kind), (stat, POOLED)):
                    if key[1] == POOLED and exemption(kind, stat):
                        continue
                    cells.setdefault(key, []).append({"world": res["world"], "protein": protein, "u": u[protein],
                                                      "value": float(values[protein]),
                                                      "unit": shared_group(res["world"], protein, kind)})
            followers = res.get("followers") if "followers" in res else followers_of(res)
            if followers is not None and any(class_exempt(k, stat) for k in set(kinds.values())):
                for protein, u_c in class_percentiles(values, table.index, kinds, followers).items():
                    kind = kinds[protein]
                    if not class_exempt(kind, stat):
                        continue
                    for key in ((stat, kind + MATCHED), (stat, POOLED + MATCHED)):
                        cells.setdefault(key, []).append({"world": res["world"], "protein": protein, "u": u_c,
                                                          "value": float(values[protein]),
                                                          "unit": shared_group(res["world"], protein, kind)})
            drivers, partners = by_kind.get("t4_driver", []), by_kind.get("t4_partner", [])
            pair_u = pair_percentile(values, res.get("coregulated") or [], kinds)
            if pair_u is not None:
                cells.setdefault((stat, T4_PAIR), []).append({"world": res["world"], "protein": pair_u[0], "u": pair_u[1],
                                                              "value": pair_u[2]})
            if drivers and partners and drivers[0] in u and partners[0] in u:
                cells.setdefault((stat, PAIRED), []).append(
                    {"world": res["world"], "protein": f"{drivers[0]}-{partners[0]}", "u_driver": u[drivers[0]],
                     "u_partner": u[partners[0]]})
    rows = []
    for (stat, kind), obs in cells.items():
        exempt = None if kind in (POOLED, PAIRED) or kind.endswith(MATCHED) else exemption(kind, stat)
        if kind == PAIRED:
            if any(exemption(k, stat) for k in ("t4_driver", "t4_partner")):
                exempt = exemption("t4_driver", stat) or exemption("t4_partner", stat)
            d = (ndtri(np.array([o["u_driver"] for o in obs])) - ndtri(np.array([o["u_partner"] for o in obs]))) / math.sqrt(2)
            test = pooled_test(list(ndtr(d)))
            us = [o["u_driver"] for o in obs]
        elif kind in (POOLED, POOLED + MATCHED):
            us = cluster_scores(obs)  # one observation per role, or per shared-component group
            test = pooled_test(us)
        else:
            us = [o["u"] for o in obs]
            test = pooled_test(us)
        rows.append({"statistic": stat, "kind": kind, "worlds": len({o["world"] for o in obs}), **test,
                     "exempt_observations": dropped.get((stat, kind), 0),
                     "median_percentile": round(float(np.median(us)), 4),
                     "outer_2pct": int(sum(1 for x in us if x < OUTER or x > 1 - OUTER)),
                     "exempt": exempt.reason if exempt else None,
                     "observations": [{k: (round(v, 5) if isinstance(v, float) else v) for k, v in o.items()} for o in obs]})
    tested = [r for r in rows if not r["exempt"]]
    m = max(len(tested), 1)
    threshold = alpha_ranks / m
    z_crit = float(st.norm.isf(threshold / 4))  # two tests, two-sided
    for r in rows:
        delta = (z_crit + 0.84) / math.sqrt(r["k"])
        r["detectable_percentile"] = round(float(ndtr(-delta)), 5)
        r["verdict"] = "exempt" if r["exempt"] else ("FINDING" if r["p"] < threshold else "ok")
    rows.sort(key=lambda r: (r["verdict"] != "FINDING", r["p"]))
    sealed = sealed_verdicts(results, alpha) + [
        {"name": "world_analysed", "world": r["world"], "passed": False, "detail": "could not be analysed",
         "problems": [r["error"]]} for r in broken]
    findings = [r for r in rows if r["verdict"] == "FINDING"]
    failed_checks = [c for c in sealed if not c["passed"]]
    return {
        "worlds": [{"world": r["world"], "archetype": r["archetype"], "seconds": r["seconds"],
                    "roles": {k: sorted(p for p, kk in r["kinds"].items() if kk == k) for k in set(r["kinds"].values())}}
                   for r in results],
        "alpha": alpha, "alpha_ranks": alpha_ranks, "tests": m, "per_test_threshold": threshold,
        "exemptions": [{"kinds": list(e.kinds), "statistics": e.pattern, "reason": e.reason,
                        "only_in_worlds_with": list(e.worlds_with)} for e in EXEMPT],
        "cells": rows, "sealed_checks": sealed,
        "findings": [f"{r['statistic']} singles out {r['kind']}: median percentile {r['median_percentile']:.3f}, "
                     f"{r['outer_2pct']}/{r['k']} in the outer 2 %, p = {r['p']:.2e}" for r in findings]
                    + [f"{c['name']} [{c.get('world', 'pooled')}]: {p}" for c in failed_checks for p in c["problems"]],
        "passed": not findings and not failed_checks,
    }


def sealed_verdicts(results: list, alpha: float) -> list:
    """Per-world sealed checks plus the pooled T4 and surrogate tests."""
    out = []
    surrogates = [c for res in results for c in res["checks"] if c["name"] == "surrogate" and c.get("applicable")]
    z_surrogate = float(st.norm.isf(alpha * ALPHA_SHARES["surrogate"] / 2 / max(len(surrogates), 1)))
    for res in results:
        for c in res["checks"]:
            if c["name"] == "instruments_moving_l":
                out.append(c)
            elif c["name"] == "surrogate" and c.get("applicable"):
                out.append(surrogate_verdict(c, z_surrogate))
    t4 = [c for res in results for c in res["checks"] if c["name"] == "t4_inseparable" and c.get("applicable")]
    if t4:
        a = alpha * ALPHA_SHARES["t4"] / 2  # half per world (Bonferroni over worlds), half pooled
        z_world = float(st.norm.isf(a / (2 * len(t4))))
        for c in t4:
            bad = abs(c["z"]) > z_world
            out.append({**c, "passed": not bad, "threshold": round(z_world, 2),
                        "detail": f"joint regression of L: driver {c['beta_driver']:+.3f} vs partner {c['beta_partner']:+.3f} "
                                  f"(z = {c['z']:+.2f}; r with L {c['r_driver_l']:+.3f} vs {c['r_partner_l']:+.3f})",
                        "problems": [f"the T4 driver and partner separate by association with L: z = {c['z']:+.2f} "
                                     f"(|z| > {z_world:.2f})"] if bad else []})
        pooled = sum(c["z"] for c in t4) / math.sqrt(len(t4))
        z_pool = float(st.norm.isf(a / 2))
        out.append({"name": "t4_inseparable_pooled", "world": "pooled", "passed": abs(pooled) <= z_pool,
                    "z": round(pooled, 2), "threshold": round(z_pool, 2), "worlds": len(t4),
                    "detail": f"Stouffer z of driver-minus-partner over {len(t4)} T4 worlds",
                    "problems": [] if abs(pooled) <= z_pool else
                    [f"over {len(t4)} T4 worlds the driver stands out from its partner (z = {pooled:+.2f})"]})
    deaths = [c for c in out if c["name"] == "surrogate" and "z_cardiac_death" in c]
    if deaths:
        z = sum(c["z_cardiac_death"] for c in deaths) / math.sqrt(len(deaths))
        expected = sum(c["expected_z_cardiac_death"] for c in deaths) / math.sqrt(len(deaths))
        z_crit = float(st.norm.isf(alpha * ALPHA_SHARES["surrogate"] / 2))
        ok = z >= z_crit if expected >= POWER_Z else z > -z_crit
        out.append({"name": "surrogate_cardiac_death_pooled", "world": "pooled", "passed": ok, "z": round(z, 2),
                    "expected_z": round(expected, 2), "detail": f"Stouffer z over {len(deaths)} worlds",
                    "problems": [] if ok else [f"the surrogate does not raise cardiac death over the worlds (z = {z:+.2f})"]})
    return out


# ----------------------------------------------------------------------------- output


def format_report(report: dict, width: int = 7) -> str:
    cells = {(r["statistic"], r["kind"]): r for r in report["cells"]}
    kinds = [k for k in ROLE_KINDS + (POOLED, PAIRED, T4_PAIR) + tuple(k + MATCHED for k in ROLE_KINDS + (POOLED,))
             if any(kk == k for _, kk in cells)]
    stats_names = sorted({s for s, _ in cells}, key=lambda s: (s.split(".")[0], s))
    lines = [f"tell scan of {len(report['worlds'])} world(s): {', '.join(w['world'] for w in report['worlds'])}",
             f"cells: median percentile of the role among ordinary proteins; '!' finding (p < {report['per_test_threshold']:.1e}, "
             f"Bonferroni over {report['tests']} tests at {report['alpha_ranks']:g}), 'e' exempt planted signal, '-' no role",
             "stat".ljust(40) + "".join(k.replace("a9_partner", "a9p").replace("any_role", "any").replace(MATCHED, "@c")[:width - 1].rjust(width)
                                       for k in kinds)]
    for s in stats_names:
        row = s[:39].ljust(40)
        for k in kinds:
            r = cells.get((s, k))
            if r is None:
                row += "-".rjust(width)
            else:
                mark = "!" if r["verdict"] == "FINDING" else ("e" if r["verdict"] == "exempt" else " ")
                row += f"{100 * r['median_percentile']:.0f}{mark}".rjust(width)
        lines.append(row)
    lines.append("")
    lines.append("observations per role kind (k) and the smallest detectable typical percentile (80 % power):")
    for k in kinds:
        ks = [r for r in report["cells"] if r["kind"] == k and not r["exempt"]]
        if ks:
            r = max(ks, key=lambda x: x["k"])
            lines.append(f"  {k:<18} k = {r['k']:>3} in {r['worlds']:>2} worlds; detectable: typical percentile "
                         f"<= {100 * r['detectable_percentile']:.2g} % or >= {100 - 100 * r['detectable_percentile']:.4g} %")
    lines.append("")
    lines.append("exempt planted signals:")
    for e in report["exemptions"]:
        where = f" (in worlds with {', '.join(e['only_in_worlds_with'])})" if e.get("only_in_worlds_with") else ""
        lines.append(f"  {', '.join(e['kinds'])}: {e['statistics']}{where}  -- {e['reason']}")
    lines.append("")
    lines.append("sealed checks:")
    for c in report["sealed_checks"]:
        lines.append(f"  {c['name']:<32} {c.get('world', ''):<22} {'pass' if c['passed'] else 'FAIL':<5} {c.get('detail', '')}")
    lines.append("")
    top = [r for r in report["cells"] if not r["exempt"]][:15]
    lines.append("lowest p-values (statistic, kind, k, median percentile, outer 2 %, z_shift, p, verdict):")
    for r in top:
        lines.append(f"  {r['statistic']:<40} {r['kind']:<18} {r['k']:>3} {r['median_percentile']:>7.3f} "
                     f"{r['outer_2pct']:>3} {r['z_shift']:>+8.2f} {r['p']:>10.2e} {r['verdict']}")
    lines.append("")
    if report["findings"]:
        lines.append(f"FINDINGS ({len(report['findings'])}):")
        lines += [f"  {f}" for f in report["findings"]]
    lines.append("PASSED: no role kind is singled out" if report["passed"] else "FAILED")
    return "\n".join(lines)


def _json_ready(report: dict) -> dict:
    def clean(v):
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if isinstance(v, (np.floating, float)):
            return float(v) if math.isfinite(float(v)) else None
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.bool_):
            return bool(v)
        return v
    return clean(report)


def map_single_threaded(fn, *iterables, jobs: int = 1) -> list:
    """``map`` in ``jobs`` fresh worker processes whose BLAS runs one thread each.

    The statistics are many small dense products; a multi-threaded BLAS on a
    shared machine spends most of its time waiting for its other thread (20x
    slower here), so workers are spawned with the thread count pinned before
    numpy loads."""
    import multiprocessing

    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update({k: "1" for k in names})
    try:
        with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
            return list(pool.map(fn, *iterables))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: The version of a cached per-world analysis (``analyse_all(cache=...)``).
CACHE_FORMAT = "drugtargetworld-tells-cache/1"


def _cache_key(world_dir: str) -> str:
    """Changes with the world's bytes (both manifests) and the analysis code."""
    import hashlib

    h = hashlib.sha256()
    for part in ("release/MANIFEST.json", "sealed/MANIFEST.json"):
        path = os.path.join(world_dir, part)
        h.update(open(path, "rb").read() if os.path.exists(path) else b"-")
    import inspect

    here = os.path.dirname(os.path.abspath(__file__))
    for path in (*features.source_files(), os.path.join(here, "sealed_checks.py")):
        h.update(open(path, "rb").read())
    h.update(inspect.getsource(analyse_world).encode())  # the rest of this module only pools and reports
    return h.hexdigest()[:20]


def read_cached(path: str) -> dict:
    """One cached per-world analysis, its format checked (an unversioned file, written before the
    cache carried one, is the analysis itself)."""
    import pickle

    from ..formats import check_format

    with open(path, "rb") as fh:
        kept = pickle.load(fh)
    if isinstance(kept, dict) and set(kept) == {"format", "analysis"}:
        check_format(kept["format"], CACHE_FORMAT, path)
        return kept["analysis"]
    return kept


def run(root: str, alpha: float = 0.01, jobs: int = 1, only: Optional[list] = None, cache: Optional[str] = None) -> dict:
    """Analyse every world under ``root`` (``only``: these ids) and pool them into the report."""
    report = scan(analyse_all(root, jobs, only, cache), alpha)
    report["root"] = os.path.abspath(root)
    return report


def analyse_all(root: str, jobs: int = 1, only: Optional[list] = None, cache: Optional[str] = None) -> list:
    """Per-world analyses (``analyse_world``) of every world under ``root``.  With
    ``cache``, they are kept there and reused while the world's manifests and this
    package's code are unchanged."""
    import pickle

    dirs = world_dirs(root)
    if only:
        dirs = [d for d in dirs if os.path.basename(d) in only]
    if not dirs:
        raise ValueError(f"--tells {root}: no built worlds (subfolders holding release/ and sealed/)")
    cached: dict = {}
    if cache:
        os.makedirs(cache, exist_ok=True)
        for d in dirs:
            path = os.path.join(cache, f"{os.path.basename(d)}-{_cache_key(d)}.pkl")
            if os.path.exists(path):
                cached[d] = read_cached(path)
    todo = [d for d in dirs if d not in cached]
    fresh = dict(zip(todo, map_single_threaded(analyse_world_safely, todo, jobs=jobs))) if todo else {}
    if cache:
        for d, res in fresh.items():
            if "error" in res:
                continue
            with open(os.path.join(cache, f"{os.path.basename(d)}-{_cache_key(d)}.pkl"), "wb") as fh:
                pickle.dump({"format": CACHE_FORMAT, "analysis": res}, fh)
    return [cached.get(d) or fresh[d] for d in dirs]


def scan_main(root: str, *, json_out: Optional[str] = None, alpha: float = 0.01, jobs: int = 1,
              worlds: Optional[str] = None, cache: Optional[str] = None) -> int:
    """The tell scan over the worlds under ``root``: the report printed and written as JSON."""
    if not 0 < alpha < 1:
        print(f"error: alpha: {alpha} is out of range; valid: 0 < alpha < 1", file=sys.stderr)
        return 2
    if not os.path.isdir(root):
        print(f"error: --tells {root}: no such folder; valid: a folder holding built worlds", file=sys.stderr)
        return 2
    try:
        report = run(root, alpha, max(1, jobs), worlds.split(",") if worlds else None, cache=cache)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = json_out or os.path.join(root, "tells.json")
    with open(out, "w") as fh:
        json.dump(_json_ready(report), fh, indent=1)
    print(format_report(report))
    print(f"report written to {out}")
    return 0 if report["passed"] else 1
