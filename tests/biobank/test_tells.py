"""Benchmark validity (issue 12): the tell scan, its statistics, its sealed checks
and the ``tells`` exploit agent.

World-building tests use the test-only switch ``world.test_leaks`` (a list of
names from ``LEAKS``; each restores one leak the generator fixes removed).

    python -m pytest tests/biobank/test_tells.py               # default: tiny worlds, no pixels
    python -m pytest -m slow tests/biobank/test_tells.py       # the paper-v1 panel figures (scripts/tells_panel.py)
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from worlds import build_worlds
from pipeline import config
from pipeline.agents import create_agent
from pipeline.agents import tells as tells_agent
from pipeline.harness import run_episode
from pipeline.model.sampler import sample_world
from pipeline.score import score
from pipeline.tells import scan as tells_scan
from pipeline.tells.sealed_checks import model_r2, role_kinds

REPO = Path(__file__).resolve().parents[2]
LEAKS = ("transcripts", "communality", "weak_instrument", "cis_sharing", "t8_signs", "t4_separable")
#: The smallest set of tiny worlds found to catch all six leaks (docs/validity.md):
#: standard-01's roles (T1, T2, T4 pair, A9 pair, surrogate) in five archetype variants.
ARCHETYPES = ("dcm", "hcm", "ischemic", "hfpef", "hcm")


def _seed(i: int) -> str:
    return hex(int(hashlib.sha256(f"tells-test/{i}".encode()).hexdigest()[:32], 16) | 1 << 127)


def _leak_overrides(leaks: tuple) -> list:
    return [f"world.test_leaks=[{','.join(leaks)}]"]


def _build_set(root: Path, overrides: list, executor) -> Path:
    """The five worlds, built concurrently on ``executor`` (a cluster)."""
    build_worlds([(root, "standard-01", "tiny", (f"world.id=tells-{i}-{archetype}", f"world.seed={_seed(i)}",
                                                 f"world.archetype={archetype}", "release=noimaging", *overrides))
                  for i, archetype in enumerate(ARCHETYPES)], executor, jobs=len(ARCHETYPES))
    return root


@pytest.fixture(scope="module")
def leaky_set(tmp_path_factory, local_cluster):
    overrides = _leak_overrides(LEAKS)
    root = _build_set(tmp_path_factory.mktemp("tells_leaky"), overrides, local_cluster)
    results = tells_scan.analyse_all(str(root), jobs=2, cache=str(root / ".tells-cache"))
    return root, tells_scan.scan(results), results


# ----------------------------------------------------------------------------- statistics (no worlds)


def _synthetic_results(rng, worlds=20, proteins=300, stats=8, shift=None):
    """Per-world tables of i.i.d. statistics with the panel's role kinds dealt at random;
    ``shift`` = (statistic, kind, amount) moves one role kind's values."""
    kinds = ["driver", "driver", "a9_driver", "a9_partner", "t4_driver", "t4_partner", "surrogate", "T1", "T2"]
    out = []
    for w in range(worlds):
        ids = [f"PROT_{i:04d}" for i in range(proteins)]
        table = pd.DataFrame(rng.standard_normal((proteins, stats)), index=ids,
                             columns=[f"group.stat{j}" for j in range(stats)])
        roles = dict(zip(rng.choice(ids, len(kinds), replace=False), kinds))
        if shift:
            stat, kind, amount = shift
            for p, k in roles.items():
                if k == kind:
                    table.loc[p, stat] += amount
        out.append({"world": f"w{w}", "dir": "", "archetype": "dcm", "kinds": roles, "table": table, "checks": [],
                    "seconds": 0.0})
    return out


def test_pooled_test_is_calibrated_and_the_scan_false_alarm_rate_is_bounded():
    rng = np.random.default_rng(1)
    p = np.array([tells_scan.pooled_test(list(rng.uniform(size=12)))["p"] for _ in range(4000)])
    # two tests, Bonferroni inside the cell: at most the nominal rate (discrete mid-ranks only lower it)
    for level in (0.01, 0.05, 0.2):
        assert (p < level).mean() <= level + 3 * math.sqrt(level / 4000)
    # whole scans on null worlds at a family-wise rate of 0.5 (0.4 for the rank tests)
    runs = [tells_scan.scan(_synthetic_results(np.random.default_rng(100 + i), worlds=6, stats=4), alpha=0.5)
            for i in range(25)]
    false_alarms = sum(1 for r in runs if not r["passed"])
    assert false_alarms <= 25 * 0.4 + 3 * math.sqrt(25 * 0.4 * 0.6), false_alarms


def test_scan_singles_out_a_shifted_role_kind_and_only_it():
    results = _synthetic_results(np.random.default_rng(7), shift=("group.stat3", "a9_driver", -2.5))
    report = tells_scan.scan(results)
    found = {(r["statistic"], r["kind"]) for r in report["cells"] if r["verdict"] == "FINDING"}
    assert ("group.stat3", "a9_driver") in found
    assert found <= {("group.stat3", "a9_driver"), ("group.stat3", tells_scan.POOLED)}
    assert not report["passed"]


def test_exempt_planted_signals_never_fail_and_are_listed():
    results = _synthetic_results(np.random.default_rng(3), stats=2)
    for res in results:
        t4 = [p for p, k in res["kinds"].items() if k in ("t4_driver", "t4_partner")]
        res["table"]["instrument.share_same_lead"] = 0.0
        res["table"].loc[t4, "instrument.share_same_lead"] = 5.0  # the shared locus, maximal in every world
    report = tells_scan.scan(results)
    cell = next(r for r in report["cells"] if r["statistic"] == "instrument.share_same_lead" and r["kind"] == "t4_partner")
    assert cell["verdict"] == "exempt" and cell["p"] < 1e-6 and "shared locus" in cell["exempt"]
    assert report["passed"]
    assert any("T9" in e["kinds"] for e in report["exemptions"])


def test_conditional_exemption_drops_only_the_worlds_that_plant_it():
    """The imaging-flag association of L's members is exempt in T3 worlds (selection on
    0.55 L) and tested in the others: a driver shift confined to T3 worlds passes, the same
    shift in worlds without T3 is found (issue 29)."""
    def results(shift_in_t3: bool):
        out = _synthetic_results(np.random.default_rng(21), worlds=20, stats=1)
        for i, res in enumerate(out):
            t3 = i % 2 == 0
            res["biases"] = ["T3"] if t3 else []
            res["table"]["imaging.flag_z"] = np.random.default_rng(i).standard_normal(len(res["table"]))
            if t3 == shift_in_t3:
                drivers = [p for p, k in res["kinds"].items() if k == "driver"]
                res["table"].loc[drivers, "imaging.flag_z"] += 6.0
        return out

    exempt = tells_scan.scan(results(True))
    cell = _cell(exempt, "imaging.flag_z", "driver")
    assert cell["verdict"] == "ok" and cell["exempt_observations"] == 20 and cell["k"] == 20
    assert exempt["passed"]
    found = tells_scan.scan(results(False))
    assert _cell(found, "imaging.flag_z", "driver")["verdict"] == "FINDING" and not found["passed"]
    assert any(e["only_in_worlds_with"] == ["T3"] for e in found["exemptions"])


def test_a_pathway_class_exemption_holds_only_while_each_role_ranks_among_its_own_class():
    """Followers carry their process's genetics, so the T2 decoy and the A9 partner rank high
    among all ordinary proteins on their count of significant variants, as ordinary followers
    do, and the drivers low, as feeders do (exempt); the @class cells rank each role among the
    ordinary proteins of its own pathway class and are never exempt: roles that are one of
    them pass, a follower role above every follower of its kind is found."""
    stat = "instrument.n_significant_variants"

    def results(beyond_followers: bool):
        out = _synthetic_results(np.random.default_rng(31), worlds=20, stats=1)
        for i, res in enumerate(out):
            rng = np.random.default_rng(100 + i)
            table, kinds = res["table"], res["kinds"]
            table[stat] = rng.poisson(3, len(table)).astype(float)
            ordinary = [p for p in table.index if p not in kinds]
            res["followers"] = {"baseline": ordinary[:45], "late": ordinary[45:90]}
            table.loc[ordinary[:90], stat] += rng.poisson(7, 90)  # followers: their pathway's variants too
            for role, group in (("T2", ordinary[:45]), ("a9_partner", ordinary[45:90])):
                p = next(q for q, k in kinds.items() if k == role)
                twin = table.loc[group[int(rng.integers(len(group)))], stat]
                table.loc[p, stat] = table.loc[group, stat].max() + 5 if beyond_followers else twin
        return out

    one_of_them = tells_scan.scan(results(False))
    for kind in ("T2", "a9_partner"):
        assert _cell(one_of_them, stat, kind)["verdict"] == "exempt"
        assert _cell(one_of_them, stat, kind)["median_percentile"] > 0.75  # high among all ordinary proteins
        matched = _cell(one_of_them, stat, kind + tells_scan.MATCHED)
        assert matched["verdict"] == "ok" and matched["k"] == 20, matched
    assert _cell(one_of_them, stat, "driver")["median_percentile"] < 0.45  # feeders rank low among all
    assert _cell(one_of_them, stat, "driver" + tells_scan.MATCHED)["verdict"] == "ok"
    # nine roles per world, seven units: the T2 decoy and the A9 partner are one, the T4 pair one
    assert _cell(one_of_them, stat, tells_scan.POOLED + tells_scan.MATCHED)["k"] == 20 * 7
    assert one_of_them["passed"], one_of_them["findings"]
    beyond = tells_scan.scan(results(True))
    for kind in ("T2", "a9_partner"):
        assert _cell(beyond, stat, kind + tells_scan.MATCHED)["verdict"] == "FINDING"
    assert not beyond["passed"]
    assert "a9p@c" in tells_scan.format_report(beyond)


def test_roles_sharing_one_component_are_one_observation_of_the_pooled_cells():
    """The T2 decoy and the A9 partner both read L, the T4 pair measures one abundance: where a
    statistic is the same for both members (the extreme case), counting them as two independent
    observations makes the pooled cell fail clean worlds far above its level; as one observation
    (their normal scores averaged) it stays at or below the level, and a shift of one of them
    alone is still found (by its own cell)."""
    stat = "group.stat0"

    def shared(seed: int, shift: float = 0.0):
        out = _synthetic_results(np.random.default_rng(seed), worlds=10, stats=1)
        for res in out:
            table, by_kind = res["table"], {k: p for p, k in res["kinds"].items()}
            table.loc[by_kind["a9_partner"], stat] = table.loc[by_kind["T2"], stat] + shift
            table.loc[by_kind["t4_partner"], stat] = table.loc[by_kind["t4_driver"], stat]
        return out

    def pooled_p(results, clustered: bool) -> float:
        cell = _cell(tells_scan.scan(results), stat, tells_scan.POOLED)
        obs = cell["observations"]
        us = tells_scan.cluster_scores(obs) if clustered else [o["u"] for o in obs]
        return tells_scan.pooled_test(us)["p"]

    runs = 300
    clustered = np.array([pooled_p(shared(500 + i), True) for i in range(runs)])
    independent = np.array([pooled_p(shared(500 + i), False) for i in range(runs)])
    level = 0.05
    assert (clustered < level).mean() <= level + 3 * math.sqrt(level * (1 - level) / runs), (clustered < level).mean()
    assert (independent < level).mean() > 2 * level  # what counting both members did
    cell = _cell(tells_scan.scan(shared(900)), stat, tells_scan.POOLED)
    assert cell["k"] == 10 * 7 and len(cell["observations"]) == 10 * 9
    found = tells_scan.scan(shared(901, shift=6.0))  # the partner far above the decoy it shares L with
    assert _cell(found, stat, "a9_partner")["verdict"] == "FINDING"
    assert not found["passed"]


def test_expected_significant_counts_track_the_released_ones(tiny_world_noimaging):
    """``pipeline.model_counts`` predicts each protein's count of genome-wide significant
    variants from the world model alone (its sources and their expected LD), so that whether
    the generator sets roles apart can be asked of its distribution over fresh seeds rather
    than of one panel's draws.  On the all-biases tiny world the prediction's mean is the
    released count's within 3 SE of their per-protein difference, and the two correlate
    (0.94 here at n = 1,200; 0.99 on each of the six paper-scale panel worlds measured,
    docs/validity.md)."""
    import yaml

    from pipeline import model_counts

    world_yaml = (Path(tiny_world_noimaging) / "sealed" / "world.yaml").read_text()
    world = sample_world(config.from_record(world_yaml, str(Path(tiny_world_noimaging).parent)))
    expected = model_counts.expected_counts(world, 1000.0 * float(yaml.safe_load(world_yaml)["world"]["ld_decay_kb"]))
    found = tells_scan.analyse_world(tiny_world_noimaging)["table"]["instrument.n_significant_variants"]
    found = found.reindex([f"PROT_{p:04d}" for p in range(world.n_proteins)]).to_numpy()
    diff = expected - found
    assert abs(diff.mean()) <= 3 * diff.std() / math.sqrt(len(diff)), (expected.mean(), found.mean())
    assert np.corrcoef(expected, found)[0, 1] > 0.8


@pytest.mark.slow
@pytest.mark.parametrize("world,worlds", [("standard-02", 100), ("hard-01", 160)])
def test_roles_expected_significant_counts_rank_as_their_class_over_fresh_worlds(world, worlds):
    """Over 100 freshly seeded paper-scale worlds of a T7 config (standard-02) and 160 of a hard
    one (hard-01) no role kind's expected count of genome-wide significant variants sets it apart from
    the ordinary proteins of its pathway class (every cell's p above 0.01 / 10 cells, and the unit
    of L's two followers, the T2 decoy and the A9 partner with their normal scores averaged,
    shifted by less than 3.5), while with the pathways of before the fix (test-only g_m_only: each
    pathway holds only G_m, where L also holds the T7 decoy's instrument or a polygenic
    background) that unit ranks high.  Over 160 worlds: standard-02 +1.76 fixed, +6.91 leaky (T2
    +7.2, A9 partner +6.6; about +1.4 and +5.5 at 100); hard-01 -0.73 fixed, +4.76 leaky (T2
    +6.5, A9 partner +3.1).  The bar 3.5 sits between."""
    from scipy.special import ndtri

    from pipeline import model_counts

    def run(leaks: tuple):
        obs = model_counts.sample_ranks(world, "paper", worlds, leaks)
        drawn = sorted({o["world"] for o in obs})
        unit = [np.mean([ndtri(o["u"]) for o in obs if o["world"] == w and o["kind"] in ("T2", "a9_partner")])
                for w in drawn]
        return model_counts.pooled(obs), float(np.sum(unit) / math.sqrt(len(unit)))

    cells, shift = run(())
    assert all(t["p"] > 0.001 for t in cells.values()), cells
    assert abs(shift) < 3.5, shift
    _, leaky_shift = run(("world.test_leaks=[g_m_only]",))
    assert leaky_shift > 3.5, leaky_shift


def test_percentiles_are_mid_ranks_among_ordinary_proteins():
    values = pd.Series([1.0, 2.0, 2.0, 3.0, 10.0], index=list("abcde"))
    u = tells_scan.percentiles(values, ["a", "b", "c", "d"], ["e", "b"])
    assert u["e"] == pytest.approx(4.5 / 5) and u["b"] == pytest.approx((1 + 1.0 + 0.5) / 5)


def test_model_linkage_matches_simulated_haplotypes():
    rng = np.random.default_rng(5)
    from scipy.stats import norm

    for q1, q2, rho in ((0.2, 0.3, 0.8), (0.05, 0.4, 0.5), (0.45, 0.45, 0.95)):
        z1 = rng.standard_normal(400_000)
        z2 = rho * z1 + math.sqrt(1 - rho * rho) * rng.standard_normal(400_000)
        h1, h2 = z1 < norm.ppf(q1), z2 < norm.ppf(q2)
        r2 = np.corrcoef(h1, h2)[0, 1] ** 2
        assert model_r2(q1, q2, rho) == pytest.approx(r2, abs=0.01)
    assert model_r2(0.3, 0.3, 0.0) == 0.0


def test_role_kinds_from_truth():
    truth = {"drivers": [{"protein": "A"}, {"protein": "B"}, {"protein": "C"}], "surrogate": "S",
             "decoys": [{"protein": "D", "bias": "T2"}],
             "pairs": [{"kind": "T4", "causal": "A", "partner": "P"}, {"kind": "A9", "causal": "B", "partner": "Q"}]}
    assert role_kinds(truth) == {"A": "t4_driver", "P": "t4_partner", "B": "a9_driver", "Q": "a9_partner",
                                 "C": "driver", "D": "T2", "S": "surrogate"}


def test_agent_reaches_no_exempt_statistic():
    names = ["instrument.share_same_lead", "transcript.r", "shape.skew_raw", "covariates.bmi", "communality.max_abs_r",
             "covariates.age", "instrument.lead_r2", "shape.skew"]
    table = pd.DataFrame(np.zeros((3, len(names))), columns=names)
    usable = tells_agent.usable_columns(table, [e.pattern for e in tells_scan.EXEMPT])
    assert usable == ["transcript.r", "covariates.age", "instrument.lead_r2", "shape.skew"]
    assert usable == tells_scan.usable_statistics(names)


def test_agent_claims_from_planted_outliers_and_nothing_from_ordinary_proteins():
    rng = np.random.default_rng(11)
    cols = ["transcript.r", "communality.pc12", "covariates.age", "communality.mean_r2_rest", "instrument.conditional_r2",
            "instrument.lead_r2"]
    # ordinary proteins: within 2 SD on every statistic, so none can pass the decoy thresholds (sum below -5)
    table = pd.DataFrame(np.clip(rng.standard_normal((300, 6)), -2.0, 2.0), index=[f"PROT_{i:04d}" for i in range(300)],
                         columns=cols)
    usable = list(cols)
    empty = tells_agent.tells_claims(table, usable)
    assert not empty["rejected"] and not empty["abstentions"] and not empty["nominated"]
    table.loc["PROT_0007", cols[:5]] = [-4.0, -3.0, -3.5, -3.0, 0.0]  # no transcript, factors, age term, partners
    table.loc["PROT_0011", cols[:5]] = [-4.0, -3.0, -3.5, -2.0, 8.0]  # no transcript or factors; L's genetics
    table.loc["PROT_0020", "instrument.lead_r2"] = -9.0  # weakest instrument
    claims = tells_agent.tells_claims(table, usable)
    assert {(r["molecule"], r["mechanism"]) for r in claims["rejected"]} == {
        ("PROT_0007", "confounding"), ("PROT_0011", "reverse_causation")}
    entry = claims["abstentions"][0]["molecules"]
    assert len(entry) == 5 and entry[0] == "PROT_0020" and entry[-1] == "PROT_0011" and "PROT_0007" not in entry
    assert claims["nominated"] == []


# ----------------------------------------------------------------------------- tiny worlds


def _cell(report, stat, kind):
    return next(r for r in report["cells"] if r["statistic"] == stat and r["kind"] == kind)


def _failed(report, name):
    return [c for c in report["sealed_checks"] if c["name"].startswith(name) and not c["passed"]]


def _findings(report, cells):
    return [(stat, kind) for stat, kind in cells if _cell(report, stat, kind)["verdict"] == "FINDING"]


#: Where each of issue 12's six findings shows in the scan's report: the role kinds' ranks on
#: transcript agreement, communality and instrument strength; the sealed checks for the rest.
SIGNATURES = {
    # at least two of the three role kinds the leak gives the original's separate transcript
    # equation: with issue 29's families the scan tests ~1,400 cells, and on five tiny worlds
    # (k = 5) the T1 decoy's rank (median percentile 1.2 %, p 3.7e-5) sits just inside the
    # Bonferroni bar (5.7e-6) while T2 and the A9 partner are found (p 4.6e-7 and 4.7e-6)
    "transcripts": lambda r: len(_findings(r, [("transcript.r", "T1"), ("transcript.r", "T2"),
                                               ("transcript.r", "a9_partner")])) >= 2,
    "communality": lambda r: len(_findings(r, [("communality.pc12", "T2"), ("communality.pc12", "a9_partner")])) == 2,
    "weak_instrument": lambda r: len(_findings(r, [("instrument.lead_r2", "a9_driver")])) == 1,
    "cis_sharing": lambda r: bool(_failed(r, "instruments_moving_l")),
    "t8_signs": lambda r: bool(_failed(r, "surrogate")),
    "t4_separable": lambda r: bool(_failed(r, "t4_inseparable")),
}


def test_scan_catches_each_leak_on_a_leaky_build(leaky_set):
    _, report, _ = leaky_set
    missed = [leak for leak in LEAKS if not SIGNATURES[leak](report)]
    assert not missed, missed
    # the surrogate looks protective in DCM even with the fixed-sign leak: only other archetypes fail
    assert {c["archetype"] for c in _failed(report, "surrogate")} <= {"hcm", "ischemic", "hfpef"}
    assert not report["passed"]


@pytest.mark.slow
@pytest.mark.parametrize("leak", LEAKS)
def test_scan_catches_each_leak_alone(leak, tmp_path, local_cluster):
    """Each fix switched off on its own: its finding, and no other of the six, is caught."""
    report = tells_scan.run(str(_build_set(tmp_path, [f"world.test_leaks=[{leak}]"], local_cluster)), jobs=2)
    assert SIGNATURES[leak](report), leak
    assert [other for other in LEAKS if other != leak and SIGNATURES[other](report)] == []


def test_scan_finds_nothing_on_clean_worlds(tmp_path_factory, local_cluster):
    root = _build_set(tmp_path_factory.mktemp("tells_clean"), ["world.test_leaks=[]"], local_cluster)
    report = tells_scan.run(str(root), jobs=2)
    assert report["passed"], report["findings"]
    # issue 29's families are scanned: the partial-correlation graph, visit-change coherence,
    # the imaging flag, principal-component membership, trans hubs, locus isolation
    scanned = {r["statistic"] for r in report["cells"]}
    for stat in ("partial.max_abs", "partial.degree", "partial.mutual", "visit2.change_partner_r", "visit2.change_bmi_r",
                 "imaging.flag_z", "pcs.main_size", "instrument.trans_hub_size", "instrument.trans_private_r2",
                 "instrument.leads_within_1mb", "instrument.nearest_lead_kb"):
        assert stat in scanned, stat
    locus = [c for c in report["sealed_checks"] if c["name"] == "instruments_moving_l"]
    assert len(locus) == 5 and all(c["passed"] and c["max_expected_z"] < 1.0 for c in locus)


def test_tells_agent_exploits_a_leaky_build(leaky_set):
    """The exploit scores at least null + 10 on average where the roles leak.  Its claims are
    computed from the scan's own per-world statistics (the agent emits the same code) and
    scored; one world is played through the harness to show the sandboxed agent makes
    exactly these claims."""
    root, _, results = leaky_set
    exempt = [e.pattern for e in tells_scan.EXEMPT]
    gains = {}
    for res in results:
        sealed = Path(res["dir"]) / "sealed"
        truth = json.loads((sealed / "truth.json").read_text())
        proteins = set(json.loads((sealed / "oracle.json").read_text())["proteins"])
        table = res["table"]
        claims = tells_agent.tells_claims(table, tells_agent.usable_columns(table, exempt), each_z=tells_agent.EACH_Z,
                                          sum_z=tells_agent.SUM_Z, t1_z=tells_agent.T1_Z,
                                          max_candidates=tells_agent.MAX_CANDIDATES)
        ours, empty = (score(truth, c, None, None, None, None, [], proteins) for c in (claims, {}))
        assert ours["safety_penalty"] == 0.0
        gains[res["world"]] = (ours["total"], empty["total"], claims)
    assert np.mean([t - n for t, n, _ in gains.values()]) >= 10.0, {w: g[:2] for w, g in gains.items()}
    world = Path(results[1]["dir"])
    played = {}
    for name in ("null", "tells"):
        played[name] = run_episode(str(world), create_agent(name), budget=0, agent_name=name,
                                   out=root / "episodes" / world.name / name, timeout=240)
        assert played[name]["episode"]["exit_reason"] == "submitted" and played[name]["episode"]["spent"] == 0
    sandboxed = json.loads((Path(played["tells"]["episode"]["episode_dir"]) / "work" / "submission.json").read_text())
    total, null_total, claims = gains[results[1]["world"]]
    assert sandboxed == json.loads(json.dumps(claims))
    assert played["tells"]["total"] == pytest.approx(total) and played["null"]["total"] == pytest.approx(null_total)


def test_cli_writes_json_and_exits_1_on_findings(leaky_set, tmp_path):
    root, _, _ = leaky_set
    out = tmp_path / "tells.json"
    done = subprocess.run([sys.executable, "-m", "pipeline.audit", "--tells", str(root), "--json-out", str(out),
                           "--worlds", "tells-1-hcm", "--cache", str(root / ".tells-cache")],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert not report["passed"] and report["findings"]
    assert "tell scan of 1 world(s)" in done.stdout and "exempt planted signals" in done.stdout


def test_an_unreadable_world_fails_the_scan(tmp_path):
    for part in ("release", "sealed"):
        (tmp_path / "broken" / part).mkdir(parents=True)
    report = tells_scan.scan([tells_scan.analyse_world_safely(str(tmp_path / "broken"))])
    assert not report["passed"]
    assert [c["name"] for c in report["sealed_checks"]] == ["world_analysed"]
    assert "truth.json" in report["findings"][0]


def test_cli_rejects_a_folder_without_worlds(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pipeline.audit", "--tells", str(tmp_path)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode != 0 and "no built worlds" in done.stderr


@pytest.mark.slow
@pytest.mark.paper  # two whole panels (tiny and small): a documented command, not in CI
def test_paper_panel_tell_scan():
    """The full-panel figures: scripts/tells_panel.py at tiny and small scale (docs/validity.md)."""
    out = os.environ.get("DTW_TELLS_OUT", str(REPO / "worlds-tells"))
    seeds = os.environ.get("DTW_TELLS_SEEDS")
    for scale in ("tiny", "small"):
        cmd = [sys.executable, "scripts/tells_panel.py", "--scale", scale, "--out", f"{out}/{scale}"]
        if seeds:
            cmd += ["--seeds", seeds]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        print(done.stdout[-20000:])
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
