"""pipeline.evaluate: the statistics against scipy and a hand-worked example, the report
recomputed independently from a synthetic record set, the screening leaderboard, the report
folder, bad records, the record schema, record_from_score and the S11 C fixed-label submission (its re-score on a real world:
tests/biobank/test_fixed_labels.py)."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pipeline.evaluate import RecordError, record_from_score, report, stats
from pipeline.evaluate.records import (COMPONENTS, FIELDS, RECORD_FORMAT, SCHEMA_PATH, fixed_label_submission,
                                       load_records, record_schema, validate_records)
from pipeline.evaluate.render import render

BUDGETS = (0.0, 450_000.0, 2_000_000.0)


# ----------------------------------------------------------------------------- record builders


def biobank_record(agent, world, budget, trial=0, *, archetype="dcm", target=0.0, confidence=0.0, bias=0.0,
                   direction=0.0, phenotype=0.0, penalty=0.0, **extra):
    unclipped = target + confidence + bias + direction + phenotype + penalty
    record = {"record_format": RECORD_FORMAT, "kind": "biobank", "world": world, "archetype": archetype,
              "agent": agent, "budget": budget, "trial": trial, "target_identification": target,
              "causal_confidence": confidence, "bias_identification": bias, "intervention_direction": direction,
              "phenotype_construction": phenotype, "safety_penalty": penalty, "total_unclipped": unclipped,
              "total": min(max(unclipped, 0.0), 100.0), "fixed_labels_total": None}
    record.update(extra)
    return record


def screening_record(agent, world, mode="limited", trial=0, *, score=0.0, submissions=1, labels_used=0, **extra):
    record = {"record_format": RECORD_FORMAT, "kind": "screening", "world": world, "archetype": None,
              "agent": agent, "mode": mode, "trial": trial, "score": score, "total": score,
              "submissions": submissions, "labels_used": labels_used}
    record.update(extra)
    return record


def synthetic_records(seed: int = 7) -> list[dict]:
    """3 agents x 4 worlds x 3 budgets x 2 trials (72 episodes) with every field the tables use."""
    rng = np.random.default_rng(seed)
    worlds = [("w-dcm", "dcm"), ("w-hcm", "hcm"), ("w-hfpef", "hfpef"), ("w-null", "ischemic")]
    skill = {"alpha": 1.0, "beta": 0.7, "gamma": 0.4}
    records = []
    for agent, s in skill.items():
        for (world, archetype), budget, trial in itertools.product(worlds, BUDGETS, (0, 1)):
            target = float(np.clip(rng.normal(22 * s, 5), 0, 30))
            conf = float(rng.choice([0.0, 8.75, 12.5, 25.0]))
            bias = float(rng.choice([0.0, 7.5, 15.0]))
            direction = float(rng.choice([0.0, 10.0, 13.333333333333334, 20.0]))
            phenotype = float(rng.choice([0.0, 10.0, rng.uniform(0, 10)]))
            penalty = -30.0 if rng.random() < 0.2 else 0.0
            null = world == "w-null"
            n_kd = 0 if budget == 0 else int(rng.integers(0, int(budget // 400_000) + 1))
            requested = n_kd + int(rng.integers(0, 3))
            exits = ["submitted", "turn_limit", "policy_error"]
            usage = {}
            if agent == "alpha":
                prompt = int(rng.integers(1_000, 50_000))
                completion = int(rng.integers(100, 5_000))
                usage = {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": 0,
                         "total_tokens": prompt + completion, "cost_usd": float(prompt * 2e-6 + completion * 8e-6)}
            record = biobank_record(
                agent, world, budget, trial, archetype=archetype, target=target, confidence=conf, bias=bias,
                direction=direction, phenotype=phenotype, penalty=penalty,
                target_precision=None if null else float(rng.uniform(0, 1)),
                target_recall=None if null else float(rng.uniform(0, 1)),
                experiments_requested=requested, experiments_delivered=n_kd, experiments_delivered_knockdown=n_kd,
                experiments_delivered_cell_perturbation=0, experiments_refused=requested - n_kd,
                spend=400_000.0 * n_kd, exit_reason=str(rng.choice(exits, p=[0.7, 0.2, 0.1])),
                turns_used=int(rng.integers(1, 31)), no_code_turns=int(rng.integers(0, 3)),
                turn_timeouts=int(rng.integers(0, 2)), failed_runs=int(rng.integers(0, 4)),
                parse_failures=int(rng.integers(0, 2)), truncated_replies=0,
                nominations_past_cap=int(rng.random() < 0.1), submission_status="parsed", isolated=True,
                wall_s=float(rng.uniform(1, 100)), phenotype_status="scored" if phenotype > 0 else "absent",
                **usage)
            record["fixed_labels_total"] = float(np.clip(record["total"] + rng.normal(0, 6), 0, 100))
            records.append(record)
    return records


@pytest.fixture(scope="module")
def synthetic():
    records = synthetic_records()
    return records, report(records)


def _between(value, low, high, slack=1e-9):
    """low <= value <= high up to summation-order rounding (resampled means are sums of floats)."""
    assert low - slack <= value <= high + slack, (low, value, high)


def _row(rows, **key):
    found = [r for r in rows if all(r[k] == v for k, v in key.items())]
    assert len(found) == 1, (key, len(found))
    return found[0]


# ----------------------------------------------------------------------------- statistics vs scipy


@pytest.mark.parametrize("n", [2, 3, 5, 12, 20])
def test_paired_t_matches_scipy_ttest_rel(n):
    rng = np.random.default_rng(n)
    a, b = rng.normal(50, 10, n), rng.normal(47, 10, n)
    ours = stats.paired_t(a - b)
    ref = sps.ttest_rel(a, b)
    ci = ref.confidence_interval(0.95)
    assert ours["n"] == n and ours["df"] == n - 1
    assert ours["t"] == pytest.approx(float(ref.statistic), rel=1e-10)
    assert ours["p"] == pytest.approx(float(ref.pvalue), rel=1e-9)
    assert (ours["ci_low"], ours["ci_high"]) == pytest.approx((float(ci.low), float(ci.high)), rel=1e-10)


def test_paired_t_degenerate_cases():
    one = stats.paired_t([3.0])
    assert one["n"] == 1 and one["mean_diff"] == 3.0 and math.isnan(one["p"]) and math.isnan(one["ci_low"])
    constant = stats.paired_t([1.0, 1.0, 1.0])  # scipy: t = inf, p = 0
    assert constant["t"] == math.inf and constant["p"] == 0.0 and constant["ci_low"] == constant["ci_high"] == 1.0
    zero = stats.paired_t([0.0, 0.0])
    assert math.isnan(zero["t"]) and math.isnan(zero["p"])
    with pytest.raises(ValueError, match="not a finite number"):
        stats.paired_t([1.0, float("nan")])


def test_binomial_p_matches_scipy_binomtest():
    for n in range(1, 31):
        for k in range(n + 1):
            assert stats.binomial_two_sided_p(k, n) == pytest.approx(sps.binomtest(k, n, 0.5).pvalue, rel=1e-12), (k, n)
    with pytest.raises(ValueError):
        stats.binomial_two_sided_p(3, 2)


def test_sign_test_excludes_ties():
    result = stats.sign_test([2.0, -1.0, 0.0, 3.0, 1e-12, 4.0, -0.5, 5.0])
    assert (result["n_positive"], result["n_negative"], result["n_ties"], result["n_untied"]) == (4, 2, 2, 6)
    assert result["p"] == pytest.approx(sps.binomtest(4, 6, 0.5).pvalue, rel=1e-12)
    assert math.isnan(stats.sign_test([0.0, 0.0])["p"])


def test_bootstrap_is_the_documented_draw_and_near_the_exact_bootstrap():
    """With 4 pairs the bootstrap distribution can be enumerated (4^4 equally likely resamples);
    the 20,000-draw percentile interval must lie between its 2 % and 3 % (97 % and 98 %) quantiles."""
    d = np.array([4.0, -1.0, 2.5, 7.0])
    ours = stats.bootstrap_mean_ci(d)
    idx = np.random.default_rng(0).integers(0, 4, size=(20_000, 4))
    assert (ours["ci_low"], ours["ci_high"]) == tuple(np.percentile(d[idx].mean(axis=1), [2.5, 97.5]))
    exact = np.sort([np.mean(c) for c in itertools.product(d, repeat=4)])
    _between(ours["ci_low"], *np.quantile(exact, [0.02, 0.03]))
    _between(ours["ci_high"], *np.quantile(exact, [0.97, 0.98]))
    mirrored = stats.bootstrap_mean_ci(-d)
    assert (mirrored["ci_low"], mirrored["ci_high"]) == (-ours["ci_high"], -ours["ci_low"])


def test_hand_worked_example():
    """Two agents, three worlds, two budgets (0 and 450000), one trial; numbers by hand.

    Totals (target + phenotype, no penalty)::

        world   A at 0   A at 450k   B at 0   B at 450k   A's phenotype 5 everywhere, B's 0
        w1      10       12          10       10
        w2      20       20          18       18
        w3      30       34          29       29

    S4, agent A: totals 10, 12, 20, 20, 30, 34; mean 126 / 6 = 21; squared deviations
    121 + 81 + 1 + 1 + 81 + 169 = 454, SD = sqrt(454 / 5) = sqrt(90.8) = 9.5289034;
    median 20; linear quartiles at positions 1.25 and 3.75 of the sorted list:
    q1 = 12 + 0.25 * 8 = 14, q3 = 20 + 0.75 * 10 = 27.5.

    S5 (A - B): world means A 11, 20, 32 and B 10, 18, 29, differences 1, 2, 3: mean 2, SD 1,
    SE 1 / sqrt(3), t = 2 * sqrt(3) = 3.4641016 on 2 df.  With 2 df the t CDF is
    F(t) = 1/2 + t / (2 sqrt(2 + t^2)), so P = 1 - t / sqrt(2 + t^2) = 1 - 3.4641016 / sqrt(14)
    = 1 - 0.9258201 = 0.0741799.  The 97.5 % quantile solves (2F - 1) = t / sqrt(2 + t^2) = 0.95:
    t = 0.95 / sqrt(2 * 0.975 * 0.025) = 4.3026527, so the CI is 2 -/+ 4.3026527 / sqrt(3)
    = 2 -/+ 2.4841377 = [-0.4841377, 4.4841377].  Sign test: 3 of 3 positive, P = 2 / 2^3 = 0.25.
    Bootstrap: the smallest resampled mean, 1 (all three draws w1), has probability 1/27 = 3.7 %
    > 2.5 %, so the 2.5 % percentile is 1; symmetrically the 97.5 % percentile is 3.
    B - A: every difference and bound negated, the same P values.

    S11 B (A - B without phenotype credit): A 6, 15, 27 and B 10, 18, 29, differences -4, -3, -2:
    mean -3, SD 1, t = -3 sqrt(3) = -5.1961524, P = 1 - 5.1961524 / sqrt(29) = 1 - 0.9649013
    = 0.0350987, CI -3 -/+ 2.4841377 = [-5.4841377, -0.5158623].

    S6, agent A, 450k - 0: differences 2, 0, 4: mean 2, SD 2, t = 2 / (2 / sqrt(3)) = 1.7320508,
    P = 1 - 1.7320508 / sqrt(5) = 1 - 0.7745967 = 0.2254033; sign test with the tie dropped:
    2 of 2 positive, P = 2 / 4 = 0.5.

    S11 A of a penalised episode (agent C, one record): target 20, phenotype 8, penalty -30:
    total_unclipped -2, total 0, without phenotype clip(-2 - 8, 0, 90) = 0.
    """
    a = {"w1": (10, 12), "w2": (20, 20), "w3": (30, 34)}
    b = {"w1": (10, 10), "w2": (18, 18), "w3": (29, 29)}
    records = []
    for world in a:
        for i, budget in enumerate(BUDGETS[:2]):
            records.append(biobank_record("A", world, budget, target=a[world][i] - 5.0, phenotype=5.0))
            records.append(biobank_record("B", world, budget, target=float(b[world][i])))
    records.append(biobank_record("C", "w1", 0.0, target=20.0, phenotype=8.0, penalty=-30.0))
    rep = report(records)["biobank"]
    t = rep["tables"]

    s4 = _row(t["s4"], agent="A")
    assert (s4["n_episodes"], s4["mean"], s4["median"], s4["q1"], s4["q3"]) == (6, 21.0, 20.0, 14.0, 27.5)
    assert s4["sd"] == pytest.approx(9.5289034, abs=1e-7)

    ab = _row(t["s5"], agent_a="A", agent_b="B")
    assert (ab["n_worlds"], ab["mean_diff"], ab["sd_diff"]) == (3, 2.0, 1.0)
    assert ab["t"] == pytest.approx(3.4641016, abs=1e-7)
    assert ab["p_t"] == pytest.approx(0.0741799, abs=1e-7)
    assert (ab["ci_low"], ab["ci_high"]) == pytest.approx((-0.4841377, 4.4841377), abs=1e-7)
    assert (ab["n_a_better"], ab["n_b_better"], ab["n_ties"], ab["p_sign"]) == (3, 0, 0, 0.25)
    assert (ab["bootstrap_ci_low"], ab["bootstrap_ci_high"]) == (1.0, 3.0)
    ba = _row(t["s5"], agent_a="B", agent_b="A")
    assert ba["mean_diff"] == -2.0 and ba["p_t"] == ab["p_t"] and ba["p_sign"] == 0.25
    assert (ba["ci_low"], ba["ci_high"]) == pytest.approx((-4.4841377, 0.4841377), abs=1e-7)
    assert (ba["bootstrap_ci_low"], ba["bootstrap_ci_high"]) == (-3.0, -1.0)
    # C has one world at one budget only: no complete world, no comparison
    assert _row(t["s5"], agent_a="A", agent_b="C")["n_worlds"] == 0
    assert _row(t["coverage"], agent="C")["complete_worlds"] == 0

    nophen = _row(t["s11b"], agent_a="A", agent_b="B")
    assert nophen["mean_diff"] == -3.0 and nophen["t"] == pytest.approx(-5.1961524, abs=1e-7)
    assert nophen["p_t"] == pytest.approx(0.0350987, abs=1e-7)
    assert (nophen["ci_low"], nophen["ci_high"]) == pytest.approx((-5.4841377, -0.5158623), abs=1e-7)

    contrast = _row(t["s6_contrasts"], agent="A", contrast="450000-0")
    assert (contrast["n_worlds"], contrast["mean_diff"], contrast["sd_diff"]) == (3, 2.0, 2.0)
    assert contrast["t"] == pytest.approx(1.7320508, abs=1e-7)
    assert contrast["p_t"] == pytest.approx(0.2254033, abs=1e-7)
    assert (contrast["n_high_better"], contrast["n_ties"], contrast["p_sign"]) == (2, 1, 0.5)

    c = _row(t["s11a"], agent="C")
    assert c["mean"] == 0.0 and c["mean_total"] == 0.0
    assert _row(t["s4"], agent="C")["safety_penalties"] == 1


def test_hand_worked_trials_noise_floor():
    """One agent, two cells (w1 and w2 at budget 0), two trials.

    Trials give w1: 10, 14 (variance 8) and w2: 20, 22 (variance 2).  Pooled within-cell SD
    = sqrt((1 * 8 + 1 * 2) / (1 + 1)) = sqrt(5) = 2.2360680.  Noise floor = 1.96 * sqrt(2) *
    sqrt(5) / sqrt(2 cells) = 1.96 * sqrt(5) = 4.3826932.  Per-trial means: trial 0 (10 + 20) / 2
    = 15, trial 1 (14 + 22) / 2 = 18; mean 16.5, their SD 3 / sqrt(2) = 2.1213203, SEM
    2.1213203 / sqrt(2) = 1.5.
    """
    records = [biobank_record("D", w, 0.0, trial, target=v)
               for (w, trial), v in {("w1", 0): 10.0, ("w1", 1): 14.0, ("w2", 0): 20.0, ("w2", 1): 22.0}.items()]
    row = _row(report(records)["biobank"]["tables"]["trials"], agent="D")
    assert (row["trials"], row["cells"], row["cells_with_repeats"], row["pooled_df"]) == (2, 2, 2, 2)
    assert row["pooled_within_sd"] == pytest.approx(2.2360680, abs=1e-7)
    assert row["noise_floor"] == pytest.approx(4.3826932, abs=1e-7)
    assert (row["mean_over_trials"], row["sem"]) == pytest.approx((16.5, 1.5), abs=1e-12)
    assert row["sd_of_trial_means"] == pytest.approx(2.1213203, abs=1e-7)


# ----------------------------------------------------------------------------- the report, recomputed


def test_report_recomputed_independently(synthetic):
    records, rep = synthetic
    bio = rep["biobank"]
    t = bio["tables"]
    df = pd.DataFrame(records)
    assert rep["input"]["n_biobank"] == 72 and bio["budgets"] == list(BUDGETS)

    # S4 through pandas' own groupby statistics
    means = df.groupby("agent")["total"].mean()
    assert bio["agents"] == list(means.sort_values(ascending=False).index)
    for agent, group in df.groupby("agent"):
        s4 = _row(t["s4"], agent=agent)
        assert s4["n_episodes"] == 24 and s4["n_worlds"] == 4
        assert s4["mean"] == pytest.approx(group["total"].mean(), rel=1e-12)
        assert s4["sd"] == pytest.approx(group["total"].std(), rel=1e-12)
        assert s4["median"] == pytest.approx(group["total"].median(), rel=1e-12)
        assert (s4["q1"], s4["q3"]) == pytest.approx(tuple(group["total"].quantile([0.25, 0.75])), rel=1e-12)
        for comp in COMPONENTS:
            assert s4[f"{comp}_mean"] == pytest.approx(group[comp].mean(), rel=1e-12)
        assert s4["target_precision_mean"] == pytest.approx(group["target_precision"].mean(), rel=1e-12)
        assert s4["target_precision_n"] == group["target_precision"].notna().sum() == 18
        assert s4["safety_penalties"] == (group["safety_penalty"] == -30).sum()
        assert s4["safety_penalty_rate"] == pytest.approx((group["safety_penalty"] == -30).mean())

    # S5: budgets averaged within world, then scipy on the paired world means
    world = df.groupby(["agent", "world", "budget"])["total"].mean().groupby(["agent", "world"]).mean().unstack(0)
    assert len(t["s5"]) == 6  # every ordered pair of three agents
    for a, b in itertools.permutations(world.columns, 2):
        row = _row(t["s5"], agent_a=a, agent_b=b)
        ref = sps.ttest_rel(world[a], world[b])
        ci = ref.confidence_interval()
        d = (world[a] - world[b]).to_numpy()
        assert row["n_worlds"] == 4 and row["mean_diff"] == pytest.approx(d.mean(), rel=1e-12)
        assert row["p_t"] == pytest.approx(ref.pvalue, rel=1e-9)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
        pos, neg = int((d > 0).sum()), int((d < 0).sum())
        assert (row["n_a_better"], row["n_b_better"]) == (pos, neg)
        assert row["p_sign"] == pytest.approx(sps.binomtest(pos, pos + neg).pvalue, rel=1e-12)
        exact = np.sort([np.mean(c) for c in itertools.product(d, repeat=4)])
        _between(row["bootstrap_ci_low"], *np.quantile(exact, [0.02, 0.03]))
        _between(row["bootstrap_ci_high"], *np.quantile(exact, [0.97, 0.98]))
        back = _row(t["s5"], agent_a=b, agent_b=a)
        assert back["mean_diff"] == pytest.approx(-row["mean_diff"], abs=1e-12) and back["p_t"] == row["p_t"]
        assert (back["bootstrap_ci_low"], back["bootstrap_ci_high"]) == pytest.approx(
            (-row["bootstrap_ci_high"], -row["bootstrap_ci_low"]), abs=1e-12)

    # S6: cell means paired by world, scipy again
    cells = df.groupby(["agent", "world", "budget"])["total"].mean().unstack("budget")
    for agent in world.columns:
        for low, high in [(0.0, 450_000.0), (0.0, 2_000_000.0), (450_000.0, 2_000_000.0)]:
            row = _row(t["s6_contrasts"], agent=agent, budget_low=low, budget_high=high)
            ref = sps.ttest_rel(cells.loc[agent][high], cells.loc[agent][low])
            assert row["p_t"] == pytest.approx(ref.pvalue, rel=1e-9)
            assert row["mean_diff"] == pytest.approx((cells.loc[agent][high] - cells.loc[agent][low]).mean())
        for budget in BUDGETS:
            row = _row(t["s6_budgets"], agent=agent, budget=budget)
            sub = df[(df.agent == agent) & (df.budget == budget)]["total"]
            assert (row["n_episodes"], row["mean"]) == (8, pytest.approx(sub.mean(), rel=1e-12))

    # S11 A and C
    df["nophen"] = (df["total_unclipped"] - df["phenotype_construction"]).clip(0, 90)
    for agent, group in df.groupby("agent"):
        assert _row(t["s11a"], agent=agent)["mean"] == pytest.approx(group["nophen"].mean(), rel=1e-12)
        s11c = _row(t["s11c"], agent=agent)
        assert s11c["mean_fixed_labels"] == pytest.approx(group["fixed_labels_total"].mean(), rel=1e-12)
        assert s11c["bound_low"] == min(s11c["mean_total"], s11c["mean_fixed_labels"])
    nophen_world = df.groupby(["agent", "world", "budget"])["nophen"].mean().groupby(["agent", "world"]).mean()
    row = _row(t["s11b"], agent_a="alpha", agent_b="gamma")
    assert row["p_t"] == pytest.approx(sps.ttest_rel(nophen_world["alpha"], nophen_world["gamma"]).pvalue, rel=1e-9)

    # trials: pooled variance of balanced two-trial cells is the mean cell variance
    for agent, group in df.groupby("agent"):
        row = _row(t["trials"], agent=agent)
        pooled = math.sqrt(group.groupby(["world", "budget"])["total"].var().mean())
        assert row["pooled_within_sd"] == pytest.approx(pooled, rel=1e-12)
        assert row["noise_floor"] == pytest.approx(1.96 * math.sqrt(2) * pooled / math.sqrt(12), rel=1e-12)
        per_trial = group.groupby("trial")["total"].mean()
        assert row["sem"] == pytest.approx(per_trial.std() / math.sqrt(2), rel=1e-12)
        assert row["mean_over_trials"] == pytest.approx(group["total"].mean(), rel=1e-12)

    # S9, S10, usage
    for agent, group in df.groupby("agent"):
        eligible = group[group.budget > 0]
        s9 = _row(t["s9"], agent=agent)
        assert s9["eligible_episodes"] == 16
        assert s9["experiments_delivered"] == eligible["experiments_delivered"].sum()
        assert s9["refused_observational"] == group[group.budget == 0]["experiments_refused"].sum()
        assert s9["spend_total"] == eligible["spend"].sum()
        assert s9["budget_used_fraction_mean"] == pytest.approx((eligible["spend"] / eligible["budget"]).mean())
        s10 = _row(t["s10"], agent=agent)
        for reason, count in group["exit_reason"].value_counts().items():
            assert s10[f"exit_{reason}"] == count
        assert s10["no_code_turns_total"] == group["no_code_turns"].sum()
        assert s10["episodes_with_timeout"] == (group["turn_timeouts"] > 0).sum()
        assert s10["phenotype_full"] == (group["phenotype_construction"] == 10).sum()
    usage = _row(t["usage"], agent="alpha")
    alpha = df[df.agent == "alpha"]
    assert usage["cost_usd_total"] == pytest.approx(alpha["cost_usd"].sum(), rel=1e-12)
    assert usage["total_tokens_mean"] == pytest.approx(alpha["total_tokens"].mean(), rel=1e-12)
    assert _row(t["usage"], agent="beta")["cost_usd_mean"] is None
    board = _row(bio["leaderboard"], agent="alpha")
    assert board["cost_usd_mean"] == usage["cost_usd_mean"] and board["noise_floor"] is not None


def test_report_is_deterministic_and_json_clean(synthetic):
    records, rep = synthetic
    again = report(list(reversed(records)))
    text = json.dumps(rep, allow_nan=False)  # NaN never reaches the JSON
    assert json.dumps(again["biobank"], allow_nan=False) == json.dumps(rep["biobank"], allow_nan=False)
    assert '"NaN"' not in text


def test_incomplete_worlds_leave_the_world_level_comparisons():
    records = [r for r in synthetic_records() if not (r["agent"] == "beta" and r["world"] == "w-hcm"
                                                      and r["budget"] == 0.0)]
    t = report(records)["biobank"]["tables"]
    cov = _row(t["coverage"], agent="beta")
    assert (cov["complete_worlds"], cov["incomplete_worlds"]) == (3, "w-hcm")
    row = _row(t["s5"], agent_a="alpha", agent_b="beta")
    assert row["n_worlds"] == 3 and "w-hcm" not in row["worlds"].split()
    assert _row(t["s6_contrasts"], agent="beta", contrast="450000-0")["n_worlds"] == 3


def test_unrecorded_values_are_left_out_and_counted():
    """fixed_labels_total null: the episode leaves S11 C (n_missing) and a cell with no value left
    makes its world incomplete for the fixed-label comparison; absent process fields are counted
    as unrecorded, never as zero."""
    records = synthetic_records()
    for r in records:
        if r["agent"] == "beta" and r["world"] == "w-dcm" and r["budget"] == 0.0:
            r["fixed_labels_total"] = None  # both trials of one cell
        if r["agent"] == "beta" and r["world"] == "w-hcm" and r["budget"] == 0.0 and r["trial"] == 1:
            r["fixed_labels_total"] = None  # one trial: the cell keeps the other
        if r["agent"] == "gamma" and r["world"] == "w-null":
            for key in ("experiments_requested", "no_code_turns"):
                del r[key]
            r["exit_reason"] = "runner_crash"
    t = report(records)["biobank"]["tables"]
    s11c = _row(t["s11c"], agent="beta")
    assert (s11c["n_episodes"], s11c["n_missing"]) == (21, 3)
    beta = [r for r in records if r["agent"] == "beta" and r["fixed_labels_total"] is not None]
    assert s11c["mean_fixed_labels"] == pytest.approx(np.mean([r["fixed_labels_total"] for r in beta]), rel=1e-12)
    pair = _row(t["s11c_pairs"], agent_a="alpha", agent_b="beta")
    assert pair["n_worlds"] == 3 and pair["worlds"] == "w-hcm w-hfpef w-null"
    assert _row(t["s5"], agent_a="alpha", agent_b="beta")["n_worlds"] == 4  # the totals are all there
    s9, s10 = _row(t["s9"], agent="gamma"), _row(t["s10"], agent="gamma")
    assert (s9["experiments_unrecorded"], s9["eligible_episodes"]) == (6, 12)
    assert (s10["no_code_turns_unrecorded"], s10["exit_runner_crash"]) == (6, 6)
    gamma = [r for r in records if r["agent"] == "gamma" and "no_code_turns" in r]
    assert s10["no_code_turns_total"] == sum(r["no_code_turns"] for r in gamma)


# ----------------------------------------------------------------------------- screening


def test_screening_leaderboard():
    records = []
    for world, (a, b) in {"s1": (40.0, 20.0), "s2": (30.0, 25.0), "s3": (50.0, 10.0)}.items():
        records.append(screening_record("pose_al", world, score=a, submissions=3, labels_used=1000, label_budget=1000))
        records.append(screening_record("random", world, score=b, submissions=1, labels_used=0, label_budget=1000))
    records.append(screening_record("random", "s1", "unrestricted", score=5.0, labels_used=500, label_budget=1000))
    records.append(biobank_record("cis_mr", "standard-01", 0.0, target=12.0))
    rep = report(records)
    scr = rep["screening"]
    assert scr["modes"] == ["limited", "unrestricted"] and rep["biobank"]["agents"] == ["cis_mr"]
    top = _row(scr["leaderboard"], mode="limited", agent="pose_al")
    assert (top["rank"], top["n_episodes"], top["n_worlds"], top["mean_score"]) == (1, 3, 3, 40.0)
    assert (top["submissions_mean"], top["labels_used_mean"], top["labels_used_fraction_mean"]) == (3.0, 1000.0, 1.0)
    assert top["sd"] == pytest.approx(10.0)
    second = _row(scr["leaderboard"], mode="limited", agent="random")
    assert (second["rank"], second["mean_score"], second["min"], second["max"]) == (2, pytest.approx(55 / 3), 10.0, 25.0)
    alone = _row(scr["leaderboard"], mode="unrestricted", agent="random")
    assert (alone["rank"], alone["mean_score"], alone["labels_used_fraction_mean"]) == (1, 5.0, 0.5)
    pair = _row(scr["tables"]["screening_pairs"], mode="limited", agent_a="pose_al", agent_b="random")
    ref = sps.ttest_rel([40, 30, 50], [20, 25, 10])
    assert pair["p_t"] == pytest.approx(ref.pvalue, rel=1e-9) and pair["p_sign"] == 0.25
    assert len(scr["tables"]["screening_episodes"]) == 7


# ----------------------------------------------------------------------------- rendering


def test_render_writes_every_file_deterministically(synthetic, tmp_path):
    records, rep = synthetic
    records = records + [screening_record("random", "s1", score=12.0, labels_used=10, label_budget=100)]
    first = render(records, tmp_path / "one")
    second = render(list(records), tmp_path / "two")
    expected = {"report.json", "leaderboard.md", "report.html", "leaderboard.csv", "s4.csv", "s5.csv",
                "s6_budgets.csv", "s6_contrasts.csv", "s9.csv", "s10.csv", "s11a.csv", "s11b.csv", "s11c.csv",
                "s11c_pairs.csv", "trials.csv", "usage.csv", "coverage.csv", "cells.csv", "world_means.csv",
                "screening_leaderboard.csv", "screening_pairs.csv", "screening_trials.csv",
                "screening_episodes.csv"}
    assert set(first["files"]) == expected and first["files"] == second["files"]
    for name in first["files"]:
        assert (first["dir"] / name).read_bytes() == (second["dir"] / name).read_bytes(), name
    assert not (tmp_path / "one" / ".report.wip").exists()

    written = json.loads((first["dir"] / "report.json").read_text())
    assert written == json.loads(json.dumps(report(records)))
    s5 = pd.read_csv(first["dir"] / "s5.csv")
    assert len(s5) == 6 and s5["p_t"].tolist() == [r["p_t"] for r in written["biobank"]["tables"]["s5"]]
    page = (first["dir"] / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 6  # five biobank figures and the screening one
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<script" not in page
    md = (first["dir"] / "leaderboard.md").read_text()
    board = written["biobank"]["leaderboard"]
    assert md.index(f"| 1 | {board[0]['agent']} |") < md.index(f"| 2 | {board[1]['agent']} |")
    assert "Screening leaderboard" in md and "noise floor" in md

    # a second render replaces the folder; a report of other records is refused
    render(records[:10], tmp_path / "one")
    assert json.loads((first["dir"] / "report.json").read_text())["input"]["n_records"] == 10
    with pytest.raises(ValueError, match="other records"):
        render(records[:5], tmp_path / "three", report=rep)


# ----------------------------------------------------------------------------- bad records


def test_bad_records_raise_clear_errors():
    good = biobank_record("A", "w1", 0.0, target=10.0)
    with pytest.raises(RecordError, match=r"records\[0\].*missing key 'total'"):
        report([{k: v for k, v in good.items() if k != "total"}])
    with pytest.raises(RecordError, match="missing key 'fixed_labels_total'"):
        report([{k: v for k, v in good.items() if k != "fixed_labels_total"}])
    with pytest.raises(RecordError, match=r"total=nan: not a finite number"):
        report([{**good, "total": float("nan")}])
    with pytest.raises(RecordError, match="target_precision=nan"):
        report([{**good, "target_precision": float("nan")}])
    with pytest.raises(RecordError, match="must decompose"):
        report([{**good, "target_identification": 11.0}])
    with pytest.raises(RecordError, match="clipped to 0-100"):
        report([biobank_record("A", "w1", 0.0, target=5.0, penalty=-30.0) | {"total": 5.0}])
    with pytest.raises(RecordError, match="above 30"):
        report([biobank_record("A", "w1", 0.0, target=35.0)])
    with pytest.raises(RecordError, match=r"records\[1\].*same episode as records\[0\]"):
        report([good, dict(good)])
    with pytest.raises(RecordError, match="one archetype per world"):
        report([good, {**good, "agent": "B", "archetype": "hcm"}])
    with pytest.raises(RecordError, match="kind='toy'"):
        report([{**good, "kind": "toy"}])
    with pytest.raises(RecordError, match="budget=450000.*screening"):
        report([screening_record("r", "s1", budget=450000)])
    with pytest.raises(RecordError, match="total=5.0 differs from score"):
        report([screening_record("r", "s1", score=4.0) | {"total": 5.0}])
    with pytest.raises(RecordError, match="trial=-1"):
        report([{**good, "trial": -1}])
    with pytest.raises(RecordError, match="invalid type bool"):
        report([{**good, "budget": True}])
    with pytest.raises(RecordError, match="empty"):
        report([])
    with pytest.raises(RecordError, match="sequence of record dicts"):
        report(good)
    # absent optional fields read as null; numpy scalars are accepted
    checked = validate_records([{**good, "trial": np.int64(2), "total": np.float64(10.0)}])[0]
    assert checked["trial"] == 2 and type(checked["trial"]) is int and checked["experiments_requested"] is None


def test_load_records_names_the_bad_line(tmp_path):
    path = tmp_path / "episodes.jsonl"
    good = biobank_record("A", "w1", 0.0, target=10.0)
    path.write_text(json.dumps(good) + "\n\n[1, 2]\n")
    with pytest.raises(RecordError, match=r"episodes.jsonl:3: a JSON list"):
        load_records(path)
    path.write_text(json.dumps(good) + "\n")
    assert report(load_records(path))["input"]["n_records"] == 1


# ----------------------------------------------------------------------------- schema


def test_schema_file_is_generated_from_the_fields():
    assert json.loads(SCHEMA_PATH.read_text()) == record_schema()
    required = set(record_schema()["oneOf"][0]["required"])
    assert {"world", "kind", "archetype", "agent", "budget", "trial", "total", "total_unclipped", *COMPONENTS,
            "safety_penalty", "fixed_labels_total"} <= required
    assert len({f.name for f in FIELDS}) == len(FIELDS)


def test_schema_accepts_records_and_rejects_bad_ones(synthetic):
    import jsonschema

    validator = jsonschema.Draft202012Validator(record_schema())
    for record in synthetic[0][:5] + [screening_record("r", "s1", score=3.0)]:
        validator.validate(record)
    bad = dict(synthetic[0][0])
    del bad["total"]
    assert not validator.is_valid(bad)
    assert not validator.is_valid({**synthetic[0][0], "causal_confidence": 26.0})
    assert not validator.is_valid(screening_record("r", "s1", budget=0))


# ----------------------------------------------------------------------------- record_from_score


def _score_json(episode_dir: Path, **episode) -> dict:
    """A biobank score.json shaped as Episode.run writes it (trimmed to what records read)."""
    return {
        "target_identification": 20.0, "causal_confidence": 12.5, "bias_identification": 7.5,
        "intervention_direction": 10.0, "phenotype_construction": 4.0, "safety_penalty": -30.0,
        "total": 24.0, "total_unclipped": 24.0,
        "details": {"world_id": "standard-01", "submission": {"status": "parsed"},
                    "nominations": {"unique_valid": 27, "processed": [f"PROT_{i:04d}" for i in range(25)],
                                    "past_cap_count": 2},
                    "rejections": {"count": 1}, "abstentions": {"retained": 0},
                    "target_identification": {"precision": 0.5, "recall": 1.0},
                    "phenotype_construction": {"status": "scored", "r": 0.61}},
        "isolated": True, "isolation": "bubblewrap",
        "episode": {"world_id": "standard-01", "agent": "model-a", "budget": 450000.0, "exit_reason": "turn_limit",
                    "exit_detail": None, "turns_used": 4, "max_turns": 30, "spent": 400000.0, "scored_from": "work",
                    "paper_compat": False, "episode_id": "abc", "episode_dir": str(episode_dir),
                    "transcript": str(episode_dir / "transcript.json"), "ledger": str(episode_dir / "ledger.jsonl"),
                    "wall_s": 12.5, **episode},
        "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "cached_tokens": 100, "cost_usd": 0.0123},
    }


def test_record_from_score_reads_score_ledger_and_transcript(tmp_path):
    rows = [{"turn": 1, "kind": "knockdown", "protein": "PROT_0001", "status": "delivered", "cost": 400000},
            {"turn": 1, "kind": "knockdown", "protein": "PROT_0002", "status": "refused", "cost": 0},
            {"turn": 2, "kind": None, "protein": None, "status": "refused", "cost": 0}]
    (tmp_path / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    turns = [{"turn": 1, "code_source": "fence", "status": "ran", "submission": "absent"},
             {"turn": 2, "code_source": "none"},
             {"turn": 3, "code_source": "open_fence", "status": "timeout", "submission": "not acceptable JSON (x)"},
             {"turn": 4, "code_source": "fence", "status": "failed", "submission": "parsed"}]
    (tmp_path / "transcript.json").write_text(json.dumps({"format": "drugtargetworld-transcript/2", "turns": turns}))
    score = _score_json(tmp_path)
    (tmp_path / "score.json").write_text(json.dumps(score))
    record = record_from_score(tmp_path / "score.json", world="standard-01", kind="biobank", archetype="dcm",
                               agent="model-a", budget=450000, trial=1, fixed_labels_total=0.0,
                               agent_config_digest="cfg", manifest_digest="man")
    expect = {"total": 24.0, "safety_penalty": -30.0, "target_precision": 0.5, "target_recall": 1.0,
              "nominations": 27, "nominations_processed": 25, "nominations_past_cap": 2,
              "experiments_requested": 3, "experiments_delivered": 1, "experiments_delivered_knockdown": 1,
              "experiments_refused": 2, "spend": 400000.0, "exit_reason": "turn_limit", "turns_used": 4,
              "no_code_turns": 1, "turn_timeouts": 1, "failed_runs": 1, "truncated_replies": 1,
              "parse_failures": 1, "prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
              "cost_usd": 0.0123, "phenotype_r": 0.61, "isolated": True, "budget": 450000.0, "trial": 1,
              "manifest_digest": "man", "record_format": RECORD_FORMAT}
    assert {k: record[k] for k in expect} == expect

    bare = record_from_score({k: v for k, v in score.items() if k not in ("episode", "usage")}, world="standard-01",
                             kind="biobank", archetype="dcm", agent="x", budget=0, trial=0)
    assert bare["exit_reason"] is None and bare["experiments_requested"] is None and bare["cost_usd"] is None
    with pytest.raises(RecordError, match="score is of world 'standard-01'"):
        record_from_score(score, world="hard-01", kind="biobank", archetype=None, agent="a", budget=450000, trial=0)
    with pytest.raises(RecordError, match="played at budget 450000"):
        record_from_score(score, world="standard-01", kind="biobank", archetype=None, agent="a", budget=0, trial=0)
    with pytest.raises(RecordError, match="biobank score"):
        record_from_score(score, world="standard-01", kind="screening", archetype=None, agent="a", budget=None,
                          trial=0)
    with pytest.raises(RecordError, match="no such file"):
        record_from_score(score, world="standard-01", kind="biobank", archetype=None, agent="a", budget=450000,
                          trial=0, ledger=tmp_path / "missing.jsonl")


def test_record_from_screening_score():
    score = {"format": "screening-score/1", "kind": "screening", "world_id": "screening-01", "score": 13.0,
             "total": 13.0, "best_submission": 2, "top_k": 100, "refused": [{"position": 4, "reason": "x"}],
             "submissions": [{"index": 1, "size": 300, "overlap": 9, "score": 9.0},
                             {"index": 2, "size": 300, "overlap": 13, "score": 13.0}],
             "details": {"source": "ledger", "labels_used": 900, "warnings": []}, "isolated": True,
             "episode": {"world_id": "screening-01", "agent": "labels_only", "mode": "limited",
                         "exit_reason": "policy_error: reset: boom", "turns_used": 2, "max_turns": 40,
                         "labels_used": 900, "budget": 1000, "wall_s": 0.9}}
    record = record_from_score(score, world="screening-01", kind="screening", archetype=None, agent="labels_only",
                               budget=None, trial=0, transcript={"turns": [{"code_source": "none"}]})
    assert (record["score"], record["submissions"], record["submissions_refused"], record["labels_used"],
            record["label_budget"], record["mode"], record["exit_reason"], record["no_code_turns"]) == \
        (13.0, 2, 1, 900, 1000, "limited", "policy_error", 1)
    assert report([record])["screening"]["leaderboard"][0]["labels_used_fraction_mean"] == 0.9
    with pytest.raises(RecordError, match="invalid for a screening episode"):
        record_from_score(score, world="screening-01", kind="screening", archetype=None, agent="a", budget=0, trial=0)


# ----------------------------------------------------------------------------- S11 C


def test_fixed_label_submission_relabels_every_named_protein():
    sub = {"nominated": ["P1", {"protein": "P2", "rank": 1}, 7], "directions": {"P1": "activate", "P3": "unknown"},
           "outcome_alignment": {"P2": "misaligned"}, "rejected": [{"molecule": "P9", "mechanism": "confounding"}],
           "confidence": 0.4}
    fixed = fixed_label_submission(sub)
    assert fixed["directions"] == {"P1": "inhibit", "P2": "inhibit", "P3": "inhibit"}
    assert fixed["outcome_alignment"] == {"P1": "aligned", "P2": "aligned", "P3": "aligned"}
    assert {k: fixed[k] for k in ("nominated", "rejected", "confidence")} == \
        {k: sub[k] for k in ("nominated", "rejected", "confidence")}
    assert sub["directions"]["P1"] == "activate"  # the input is not modified
    assert fixed_label_submission([1, 2]) == [1, 2]
