"""The instrument check (issue 29; SPEC section 4): does any protein outside the truth's
exemptions have a lead instrument that moves L?

    python -m pipeline.audit --instruments <world_dir>... [--alpha 0.05] [--json-out FILE]

Per world, as an analyst would from the release: each protein's lead variant over the
whole genome (the largest |r| with the protein's site-normalised values, as the tell
scan's genotype scan finds it), kept as an instrument when F = r^2 n > 10; then, with
the sealed latent, the lead variant's reduced-form association with L and with L_late
(t-statistics, each judged at the Bonferroni bar over the world's instrumented proteins,
two-sided ``--alpha``).  Every protein over the bar that is not exempt (the drivers, the
T4 partner, the T7 decoy: the instruments the truth lists; and a protein the model makes a
consequence of L, the T2 decoy or the A9 partner, whose lead is a variant that moves L: its
planted reverse path, a trap the truth lists) is a finding, reported with
its variant and what ties that variant to L in the hidden model: the cis variant of a
driver, a driver's trans variant (private or a hub), G_direct, the T7 variant, a
polygenic-background variant, a master-regulator hub, LD with a variant that moves L
(the model's haplotype r and the expected z it passes at this n), or none.

Also the pooled distribution of the ordinary (role-free) proteins' |z_L| over all worlds
given, against |N(0, 1)|: a Kolmogorov-Smirnov test, the count beyond 3 against its
binomial expectation and the sum of z^2 against chi^2_k, so that a leak too weak for the
per-protein bar but common shows.

Exit status 1 on any finding (or a pooled test below ``--alpha``), 2 on unusable input.
A lead variant's association with L under no path is exactly N(0, 1) (genotypes are drawn
independently of everything but their own effects), so with ``--alpha`` 0.05 a world has a
chance finding with probability about 0.05 per outcome; ``scripts/replicate_cohorts.py``
tells a chance finding from a path the model has by re-drawing the world's participants.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import pandas as pd
from scipy import stats as st

from .. import __version__, bundle
from ..tells.sealed_checks import role_kinds

F_MIN = 10.0  #: an instrument: F = r^2 n above this
EXEMPT_KINDS = ("driver", "a9_driver", "t4_driver", "t4_partner", "T7")  #: the instruments the truth lists
#: Proteins the hidden model makes a consequence of L (T2: z[.. + L]; the A9 partner: z[0.50 L_late + ..]):
#: a variant that moves L moves them through their planted reverse path, so such a lead is the
#: trap the truth lists (T2's rejection as reverse_causation scores; the A9 partner takes the
#: pair's swap rule), not an instrument outside the truth.
REVERSED_KINDS = ("T2", "a9_partner")
#: Ties (``Ties.describe``) through a variant that itself moves L or L_late.
MOVER_TIE_PREFIXES = ("cis variant of driver", "trans variant of driver", "G_direct", "cis variant of the T7 decoy",
                      "a polygenic-background variant")


def exemption(kind: str, tie: str) -> str | None:
    """Why an over-the-bar lead is exempt (None: a finding). ``kind`` is the protein's role kind,
    ``tie`` what ties its lead variant to L (``Ties.describe``)."""
    if kind in EXEMPT_KINDS:
        return "an instrument the truth lists"
    if kind in REVERSED_KINDS and str(tie).startswith(MOVER_TIE_PREFIXES):
        return "its planted reverse path (the variant moves L, L moves the protein)"
    return None


def judge(rows: list) -> list:
    """``rows`` (over-the-bar leads) with ``exempt`` and ``exempt_why`` set by ``exemption``;
    kept analyses are judged again by the current rule."""
    out = []
    for r in rows:
        why = exemption(r["kind"], r.get("tie", ""))
        out.append(dict(r, exempt=why is not None, exempt_why=why))
    return out


def _t(r: np.ndarray, n: int) -> np.ndarray:
    r = np.clip(r, -0.999999, 0.999999)
    return r * np.sqrt((n - 2) / (1.0 - r * r))


class Ties:
    """What ties a variant to L in one world's hidden model."""

    def __init__(self, hidden: dict, truth: dict, proteins: list, variant_ids: list, contig, position, q, n: int):
        from ..ld import expected_haplotype_r

        self._r = expected_haplotype_r
        self.n = n
        self.index = {v: i for i, v in enumerate(variant_ids)}
        self.contig, self.position, self.q = contig, position, q
        self.decay = 1000.0 * float(hidden.get("ld_decay_kb") or 110.0)
        self.movers = [m for m in hidden.get("movers") or [] if m.get("variant") in self.index]
        cis = hidden.get("protein_cis_variant") or []
        trans = hidden.get("protein_trans_variant") or []
        self.cis_of = dict(zip(proteins, cis))
        self.trans_users = {}
        for p, t in zip(proteins, trans):
            if t:
                self.trans_users.setdefault(t, []).append(p)
        self.drivers = {d["protein"] for d in truth.get("drivers", [])}

    def model_r(self, a: str, b: str) -> float:
        i, j = self.index[a], self.index[b]
        if i == j:
            return 1.0
        if self.contig[i] != self.contig[j]:
            return 0.0
        rho = math.exp(-abs(int(self.position[i]) - int(self.position[j])) / self.decay)
        if rho < 1e-9:
            return 0.0
        qi, qj = min(max(float(self.q[i]), 1e-6), 1 - 1e-6), min(max(float(self.q[j]), 1e-6), 1 - 1e-6)
        return float(np.ravel(self._r(np.array([qi]), np.array([qj]), np.array([rho])))[0])

    def expected_z(self, variant: str, own: set = frozenset()) -> tuple:
        """(expected |z| on L or L_late passed by LD or identity from the moving variants, the
        largest contributor) for ``variant``, leaving out the movers of proteins in ``own``."""
        total, best = 0.0, None
        for m in self.movers:
            if m.get("protein") in own:
                continue
            r = abs(self.model_r(variant, m["variant"]))
            z = max(m["beta_l"], m["beta_late"]) * r * math.sqrt(self.n)
            total += z
            if z > 0 and (best is None or z > best[0]):
                best = (z, m, r)
        return total, best

    def describe(self, variant: str, protein: str) -> str:
        users = [p for p in self.trans_users.get(variant, []) if p != protein]
        for m in self.movers:
            if m["variant"] == variant:
                what = {"driver_cis": f"cis variant of driver {m['protein']}", "direct": "G_direct",
                        "T7_cis": f"cis variant of the T7 decoy {m['protein']}", "polygenic": "a polygenic-background variant",
                        "driver_trans": (f"trans variant of driver {m['protein']} "
                                         f"({'private' if len(self.trans_users.get(variant, [])) <= 1 else 'a hub shared by ' + str(len(self.trans_users[variant])) + ' proteins'})")}
                return what.get(m["kind"], m["kind"])
        total, best = self.expected_z(variant)
        hub = f"a master-regulator hub of {len(self.trans_users[variant])} proteins" if len(self.trans_users.get(variant, [])) > 1 else ""
        if best is not None and best[0] >= 0.05:
            z, m, r = best
            kb = abs(int(self.position[self.index[variant]]) - int(self.position[self.index[m['variant']]])) / 1000.0
            link = (f"LD with {m['kind'].replace('_', ' ')} {m.get('protein') or ''} {m['variant']} "
                    f"(model r2 {r * r:.2g}, {kb:.0f} kb; expected z {total:.2f})").replace("  ", " ")
            return f"{hub}; {link}" if hub else link
        if hub:
            used = sorted(set(users) & self.drivers)
            return hub + (f" that driver {', '.join(used)} is on" if used else " used by no driver")
        own = "its own cis variant" if self.cis_of.get(protein) == variant else "another protein's or no protein's variant"
        return f"none ({own}; expected z {total:.2f})"


def analyse_world(world_dir: str, alpha: float = 0.05) -> dict:
    """The instrument check of one world (module docstring)."""
    from ..genotypes_io import load_genotypes
    from ..tells import features

    t0 = time.perf_counter()
    release, sealed = os.path.join(world_dir, bundle.RELEASE), os.path.join(world_dir, bundle.SEALED)
    truth = bundle.read_sealed(sealed, bundle.TRUTH)
    hidden = bundle.read_sealed(sealed, bundle.HIDDEN_MODEL)
    latent = bundle.read_sealed(sealed, bundle.LATENT)
    latent.index = latent.index.astype(str)
    covariates = pd.read_parquet(os.path.join(release, bundle.table_file("covariates")))
    covariates.index = covariates.index.astype(str)
    proteomics = pd.read_parquet(os.path.join(release, bundle.table_file("proteomics")))
    proteomics.index = proteomics.index.astype(str)
    subjects = covariates.index.intersection(proteomics.index).intersection(latent.index)
    proteins = [str(c) for c in proteomics.columns]
    raw = np.array(proteomics.loc[subjects], dtype=np.float64)
    centre = covariates.loc[subjects, "p54_i0"].astype(str).to_numpy() if "p54_i0" in covariates.columns else np.zeros(len(subjects), str)
    x = features.standardise_within(raw, centre)
    del raw
    genotypes = load_genotypes(release, threads=1)
    gz, q, variant_ids = features.genotype_matrix(genotypes, subjects)
    del genotypes
    contig, position = features.variant_positions(release, list(variant_ids))
    n = len(subjects)
    lead, lead_r = features.lead_scan(gz, x)
    del x
    F = lead_r ** 2 * n
    instrumented = F > F_MIN
    m = int(instrumented.sum())
    y = {}
    for name in ("latent", "latent_late"):
        v = latent.loc[subjects, name].to_numpy(dtype=np.float64)
        y[name] = (v - v.mean()) / v.std()
    g_lead = gz[:, lead].astype(np.float64)
    del gz
    z = {name: _t((g_lead * v[:, None]).sum(axis=0) / n, n) for name, v in y.items()}
    bar = float(st.norm.isf(alpha / (2 * max(m, 1))))
    kinds = role_kinds(truth)
    order = list((bundle.read_sealed(sealed, bundle.ORACLE) or {}).get("proteins") or proteins)
    ties = Ties(hidden, truth, order, list(variant_ids), contig, position, q, n)
    rows, ordinary = [], []
    for j, p in enumerate(proteins):
        if not instrumented[j]:
            continue
        kind = kinds.get(p, "ordinary")
        zl, zll = float(z["latent"][j]), float(z["latent_late"][j])
        if kind == "ordinary":
            ordinary.append(zl)
        if max(abs(zl), abs(zll)) <= bar:
            continue
        v = str(variant_ids[lead[j]])
        rows.append({"protein": p, "kind": kind, "variant": v, "F": round(float(F[j]), 1), "z_l": round(zl, 2),
                     "z_l_late": round(zll, 2), "tie": ties.describe(v, p)})
    rows = judge(rows)
    own_cis = {p: ties.cis_of.get(p) for p in proteins}
    expected = []
    for j, p in enumerate(proteins):  # the model's expected |z| through LD at each ordinary lead
        if instrumented[j] and kinds.get(p) is None:
            expected.append(ties.expected_z(str(variant_ids[lead[j]]))[0])
    findings = [r for r in rows if not r["exempt"]]
    return {"world": truth.get("world_id") or os.path.basename(world_dir), "dir": os.path.abspath(world_dir), "n": n,
            "proteins": len(proteins), "instrumented": m, "bar": round(bar, 3), "alpha": alpha,
            "over_bar": rows, "findings": findings, "ordinary_z": ordinary,
            "max_ordinary_abs_z": round(float(np.max(np.abs(ordinary))) if ordinary else 0.0, 2),
            "max_expected_z_ordinary": round(float(max(expected)) if expected else 0.0, 3),
            "lead_is_own_cis": float(np.mean([str(variant_ids[lead[j]]) == own_cis.get(p) for j, p in enumerate(proteins)
                                               if instrumented[j]])),
            "seconds": round(time.perf_counter() - t0, 1)}


def pooled(results: list, alpha: float) -> dict:
    """The ordinary instruments' |z_L| over all worlds against |N(0, 1)|."""
    z = np.abs(np.concatenate([np.asarray(r["ordinary_z"], dtype=np.float64) for r in results])) if results else np.empty(0)
    k = len(z)
    if not k:
        return {"k": 0, "passed": True}
    ks = st.kstest(z, st.halfnorm.cdf)
    beyond = int((z > 3).sum())
    p3 = 2 * st.norm.sf(3)
    p_beyond = float(st.binom.sf(beyond - 1, k, p3))
    chi2 = float((z ** 2).sum())
    p_chi2 = float(st.chi2.sf(chi2, k))
    p = min(1.0, 3 * min(ks.pvalue, p_beyond, p_chi2))  # Bonferroni over the three
    return {"k": k, "ks_d": round(float(ks.statistic), 5), "ks_p": float(ks.pvalue), "beyond_3": beyond,
            "beyond_3_expected": round(k * p3, 1), "p_beyond_3": p_beyond, "chi2": round(chi2, 1), "chi2_df": k,
            "p_chi2": p_chi2, "p": p, "passed": p >= alpha}


def run(world_dirs: list, alpha: float = 0.05) -> dict:
    results = [analyse_world(d, alpha) for d in world_dirs]
    pool = pooled(results, alpha)
    findings = [dict(f, world=r["world"]) for r in results for f in r["findings"]]
    return {"alpha": alpha, "worlds": [{k: v for k, v in r.items() if k != "ordinary_z"} for r in results],
            "pooled": pool, "findings": findings,
            "expected_chance_findings": round(sum(2 * alpha for _ in results), 2),
            "passed": not findings and pool["passed"]}


def format_report(report: dict) -> str:
    lines = [f"instrument check of {len(report['worlds'])} world(s): lead variant per protein (F = r2 n > {F_MIN:g}), "
             f"its t on L and L_late, Bonferroni over the instrumented proteins at {report['alpha']:g} per outcome",
             f"{'world':<22} {'n':>6} {'instr.':>6} {'bar':>5} {'max|z| ord.':>11} {'exp. z LD':>9} {'own cis':>7}  findings"]
    for w in report["worlds"]:
        lines.append(f"{w['world']:<22} {w['n']:>6} {w['instrumented']:>6} {w['bar']:>5.2f} {w['max_ordinary_abs_z']:>11.2f} "
                     f"{w['max_expected_z_ordinary']:>9.2f} {w['lead_is_own_cis']:>7.3f}  {len(w['findings'])}")
        for r in w["over_bar"]:
            mark = "exempt " if r["exempt"] else "FINDING"
            why = f" [exempt: {r['exempt_why']}]" if r.get("exempt_why") and r["kind"] not in EXEMPT_KINDS else ""
            lines.append(f"    {mark} {r['protein']} ({r['kind']}) lead {r['variant']} F {r['F']:.0f} z_L {r['z_l']:+.2f} "
                         f"z_Llate {r['z_l_late']:+.2f}: {r['tie']}{why}")
    p = report["pooled"]
    if p.get("k"):
        lines.append(f"pooled ordinary |z_L| over {p['k']} instruments vs |N(0,1)|: KS D {p['ks_d']:.4f} (p {p['ks_p']:.3g}); "
                     f"{p['beyond_3']} beyond 3 (expected {p['beyond_3_expected']}, p {p['p_beyond_3']:.3g}); "
                     f"sum z2 {p['chi2']:.0f} on {p['chi2_df']} df (p {p['p_chi2']:.3g}) -> {'pass' if p['passed'] else 'FAIL'}")
    lines.append(f"chance findings expected at this alpha: {report['expected_chance_findings']}")
    lines.append("PASSED: no protein outside the exemptions has a lead instrument that moves L" if report["passed"]
                 else f"FAILED: {len(report['findings'])} finding(s)" + ("" if p.get("passed", True) else "; pooled test"))
    return "\n".join(lines)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.audit --instruments",
                                 description="instrument check: lead instruments that move L outside the truth's exemptions")
    ap.add_argument("worlds", nargs="+", help="built worlds (<out>/<id> holding release/ and sealed/), or folders of them")
    ap.add_argument("--alpha", type=float, default=0.05, help="two-sided level per world and outcome, Bonferroni over proteins")
    ap.add_argument("--json-out", help="write the full report as JSON here")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # the unified command-line style: key=value as well as --key value
    argv = [x for a in (sys.argv[1:] if argv is None else argv)
            for x in ((f"--{a.split('=', 1)[0].replace('_', '-')}", a.split("=", 1)[1])
                      if "=" in a and a.split("=", 1)[0].replace("-", "_") in ("alpha", "json_out") else (a,))]
    args = ap.parse_args(argv)
    if not 0 < args.alpha < 1:
        ap.error(f"--alpha: {args.alpha} is out of range; valid: 0 < alpha < 1")
    dirs = []
    for d in args.worlds:
        if os.path.isdir(os.path.join(d, bundle.RELEASE)) and os.path.isdir(os.path.join(d, bundle.SEALED)):
            dirs.append(d)
        elif os.path.isdir(d):
            dirs += [os.path.join(d, x) for x in sorted(os.listdir(d))
                     if os.path.isdir(os.path.join(d, x, bundle.RELEASE)) and os.path.isdir(os.path.join(d, x, bundle.SEALED))]
    if not dirs:
        print(f"error: --instruments {' '.join(args.worlds)}: no built worlds; valid: world folders holding release/ and sealed/",
              file=sys.stderr)
        return 2
    report = run(dirs, args.alpha)
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(report, fh, indent=1, default=float)
    print(format_report(report))
    return 0 if report["passed"] else 1
