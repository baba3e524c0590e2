"""``report(records)``: every table of the evaluation (Supplementary Tables S4-S6, S9-S11, the
trials' noise floor, usage and the screening leaderboard) from the episode records alone.

Vocabulary used below: a *cell* is one (agent, world, budget) of the biobank grid, or one
(agent, world, mode) of a screening panel, and holds one episode per trial; a *cell mean*
averages a cell's trials; an agent's *world mean* averages its cell means over the budgets
(S5: "scores were first averaged across the three budget conditions").  A world enters an
agent's world-level analyses only when the agent has every budget of the record set there
(a *complete* world); incomplete worlds are listed in ``coverage`` and left out of S5, S11 B
and the pairwise part of S11 C, never averaged over fewer budgets.  Worlds are taken in
sorted order wherever order matters (the bootstrap).
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from itertools import permutations
from typing import Callable, Iterable, Mapping, Optional

import numpy as np

from . import stats
from .records import COMPONENTS, USAGE_FIELDS, validate_records

REPORT_FORMAT = "drugtargetworld-evaluation-report/1"
#: S11 A clips the score without phenotype credit to 0-90 (the phenotype's 10 points removed, no rescaling).
NO_PHENOTYPE_MAX = 90.0
#: A phenotype score at or above this earns "full credit" (S7/S10 wording); 10 points minus rounding.
PHENOTYPE_FULL = 10.0 - 1e-9
#: Exit reasons that always get an S10 column (the harness's; others found in the records are added).
EXIT_REASONS = ("submitted", "submission_written", "turn_limit", "policy_error", "sandbox_failure", "harness_error",
                "runner_crash")
ValueFn = Callable[[dict], Optional[float]]


def without_phenotype(record: Mapping) -> float:
    """S11 A: ``clip(total_unclipped - phenotype_construction, 0, 90)``.

    The phenotype's 10 points are removed, the other four components and the signed safety
    penalty are kept, and the result is clipped to 0-90 without rescaling.
    """
    return min(max(record["total_unclipped"] - record["phenotype_construction"], 0.0), NO_PHENOTYPE_MAX)


#: Metrics of the between-agent comparisons: the table each one fills and how a record gives it.
PAIR_METRICS: dict[str, tuple[str, ValueFn]] = {
    "total": ("s5", lambda r: r["total"]),
    "without_phenotype": ("s11b", without_phenotype),
    "fixed_labels": ("s11c_pairs", lambda r: r["fixed_labels_total"]),
}


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return float(np.mean(values)) if values else math.nan


def _known(records: Iterable[Mapping], key: str) -> list:
    return [r[key] for r in records if r.get(key) is not None]


# ----------------------------------------------------------------------------- cells


def cell_means(records: Iterable[Mapping], value: ValueFn, condition: str) -> dict:
    """``{(agent, world, condition value): mean over the cell's trials}`` of ``value(record)``.

    Records for which ``value`` gives None are skipped (a cell none of whose records has a
    value is absent).
    """
    groups: dict = defaultdict(list)
    for r in records:
        v = value(r)
        if v is not None:
            groups[(r["agent"], r["world"], r[condition])].append(v)
    return {key: float(np.mean(vals)) for key, vals in groups.items()}


def world_means(cells: Mapping, agent: str, conditions: Iterable) -> dict:
    """``{world: mean of the agent's cell means over conditions}`` for the worlds where the agent
    has a cell at every condition (the complete worlds), in sorted world order."""
    conditions = list(conditions)
    by_world: dict = defaultdict(dict)
    for (a, w, c), m in cells.items():
        if a == agent:
            by_world[w][c] = m
    return {w: float(np.mean([by_world[w][c] for c in conditions])) for w in sorted(by_world)
            if all(c in by_world[w] for c in conditions)}


def _pair_row(a: str, b: str, means_a: Mapping, means_b: Mapping) -> dict:
    """One between-agent comparison over the worlds both have: paired t, sign test, bootstrap."""
    worlds = sorted(set(means_a) & set(means_b))
    d = [means_a[w] - means_b[w] for w in worlds]
    t = stats.paired_t(d)
    s = stats.sign_test(d)
    boot = stats.bootstrap_mean_ci(d)
    return {
        "agent_a": a, "agent_b": b, "n_worlds": len(worlds),
        "mean_a": _mean(means_a[w] for w in worlds), "mean_b": _mean(means_b[w] for w in worlds),
        "mean_diff": t["mean_diff"], "sd_diff": t["sd"], "se_diff": t["se"],
        "ci_low": t["ci_low"], "ci_high": t["ci_high"], "t": t["t"], "df": t["df"], "p_t": t["p"],
        "n_a_better": s["n_positive"], "n_b_better": s["n_negative"], "n_ties": s["n_ties"], "p_sign": s["p"],
        "bootstrap_ci_low": boot["ci_low"], "bootstrap_ci_high": boot["ci_high"],
        "bootstrap_resamples": boot["resamples"], "bootstrap_seed": boot["seed"],
        "worlds": " ".join(worlds),
    }


def pairwise(records: list, agents: list, value: ValueFn, condition: str, conditions: list) -> list:
    """Every ordered pair of agents (both orientations) compared on world means of ``value``."""
    cells = cell_means(records, value, condition)
    means = {a: world_means(cells, a, conditions) for a in agents}
    return [_pair_row(a, b, means[a], means[b]) for a, b in permutations(agents, 2)]


# ----------------------------------------------------------------------------- biobank tables


def _s4(agent: str, rows: list, rank: int) -> dict:
    totals = [r["total"] for r in rows]
    d = stats.describe(totals)
    precision, recall = _known(rows, "target_precision"), _known(rows, "target_recall")
    penalties = sum(1 for r in rows if r["safety_penalty"] < 0)
    out = {"rank": rank, "agent": agent, "n_episodes": d["n"], "n_worlds": len({r["world"] for r in rows}),
           "mean": d["mean"], "sd": d["sd"], "median": d["median"], "q1": d["q1"], "q3": d["q3"], "iqr": d["iqr"],
           "min": d["min"], "max": d["max"]}
    out.update({f"{c}_mean": _mean(r[c] for r in rows) for c in COMPONENTS})
    out.update(safety_penalty_mean=_mean(r["safety_penalty"] for r in rows),
               target_precision_mean=_mean(precision), target_precision_n=len(precision),
               target_recall_mean=_mean(recall), target_recall_n=len(recall),
               safety_penalties=penalties, safety_penalty_rate=penalties / len(rows))
    return out


def _s6(agent: str, rows: list, budgets: list) -> tuple[list, list]:
    per_budget = []
    for b in budgets:
        totals = [r["total"] for r in rows if r["budget"] == b]
        d = stats.describe(totals)
        per_budget.append({"agent": agent, "budget": b, "n_episodes": d["n"],
                           "n_worlds": len({r["world"] for r in rows if r["budget"] == b}),
                           "mean": d["mean"], "sd": d["sd"], "median": d["median"], "min": d["min"], "max": d["max"]})
    cells = cell_means(rows, lambda r: r["total"], "budget")
    contrasts = []
    for i, low in enumerate(budgets):
        for high in budgets[i + 1:]:
            worlds = sorted({w for (_, w, b) in cells if b == high} & {w for (_, w, b) in cells if b == low})
            d = [cells[(agent, w, high)] - cells[(agent, w, low)] for w in worlds]
            t, s = stats.paired_t(d), stats.sign_test(d)
            contrasts.append({
                "agent": agent, "contrast": f"{_money(high)}-{_money(low)}", "budget_high": high, "budget_low": low,
                "n_worlds": len(worlds), "mean_high": _mean(cells[(agent, w, high)] for w in worlds),
                "mean_low": _mean(cells[(agent, w, low)] for w in worlds), "mean_diff": t["mean_diff"],
                "sd_diff": t["sd"], "ci_low": t["ci_low"], "ci_high": t["ci_high"], "t": t["t"], "df": t["df"],
                "p_t": t["p"], "n_high_better": s["n_positive"], "n_low_better": s["n_negative"],
                "n_ties": s["n_ties"], "p_sign": s["p"]})
    return per_budget, contrasts


def _money(budget: float) -> str:
    return f"{budget:.0f}" if float(budget).is_integer() else repr(budget)


def _s9(agent: str, rows: list) -> dict:
    counted = ("experiments_requested", "experiments_delivered", "experiments_refused")
    known = [r for r in rows if all(r[k] is not None for k in counted)]
    eligible = [r for r in known if r["budget"] > 0]
    observational = [r for r in known if r["budget"] == 0]
    spend_rows = [r for r in rows if r["budget"] > 0 and r["spend"] is not None]
    return {
        "agent": agent, "n_episodes": len(rows), "experiments_unrecorded": len(rows) - len(known),
        "eligible_episodes": len(eligible),
        "episodes_requesting": sum(1 for r in eligible if r["experiments_requested"] > 0),
        "episodes_with_delivery": sum(1 for r in eligible if r["experiments_delivered"] > 0),
        "experiments_requested": sum(r["experiments_requested"] for r in eligible),
        "experiments_delivered": sum(r["experiments_delivered"] for r in eligible),
        "knockdowns_delivered": sum(r["experiments_delivered_knockdown"] or 0 for r in eligible),
        "cell_perturbations_delivered": sum(r["experiments_delivered_cell_perturbation"] or 0 for r in eligible),
        "refused_eligible": sum(r["experiments_refused"] for r in eligible),
        "requests_observational": sum(r["experiments_requested"] for r in observational),
        "refused_observational": sum(r["experiments_refused"] for r in observational),
        "refused_total": sum(r["experiments_refused"] for r in known),
        "spend_total": float(sum(r["spend"] for r in spend_rows)),
        "spend_mean_eligible": _mean(r["spend"] for r in spend_rows),
        "budget_used_fraction_mean": _mean(r["spend"] / r["budget"] for r in spend_rows),
    }


def _count(rows: list, key: str) -> tuple[int, int, int]:
    """(sum over the records that hold the key, records with it > 0, records without it)."""
    known = _known(rows, key)
    return int(sum(known)), sum(1 for v in known if v > 0), len(rows) - len(known)


def _s10(agent: str, rows: list, reasons: list) -> dict:
    out = {"agent": agent, "n_episodes": len(rows)}
    exits = defaultdict(int)
    for r in rows:
        exits[r["exit_reason"] if r["exit_reason"] is not None else "unrecorded"] += 1
    out.update({f"exit_{reason}": exits.get(reason, 0) for reason in reasons})
    status = [r["submission_status"] for r in rows if r["submission_status"] is not None]
    out.update(
        no_parseable_submission=sum(1 for s in status if s != "parsed"),
        phenotype_scored=sum(1 for r in rows if r["phenotype_status"] == "scored"),
        phenotype_positive=sum(1 for r in rows if r["phenotype_construction"] > 0),
        phenotype_full=sum(1 for r in rows if r["phenotype_construction"] >= PHENOTYPE_FULL),
        nomination_cap_hit=sum(1 for r in rows if (r["nominations_past_cap"] or 0) > 0),
        not_isolated=sum(1 for r in rows if r["isolated"] is False),
    )
    for key, label in (("no_code_turns", "no_code"), ("turn_timeouts", "timeout"), ("failed_runs", "failed_run"),
                       ("parse_failures", "parse_failure"), ("truncated_replies", "truncated_reply")):
        total, episodes, missing = _count(rows, key)
        out[f"{key}_total"] = total
        out[f"episodes_with_{label}"] = episodes
        out[f"{key}_unrecorded"] = missing
    out.update(turns_used_mean=_mean(_known(rows, "turns_used")), wall_s_mean=_mean(_known(rows, "wall_s")),
               wall_s_total=float(sum(_known(rows, "wall_s"))))
    return out


def _s11a(agent: str, rows: list) -> dict:
    d = stats.describe([without_phenotype(r) for r in rows])
    mean_total = _mean(r["total"] for r in rows)
    return {"agent": agent, "n_episodes": d["n"], "mean_total": mean_total, "mean": d["mean"], "sd": d["sd"],
            "median": d["median"], "min": d["min"], "max": d["max"], "change": d["mean"] - mean_total}


def _s11c(agent: str, rows: list) -> dict:
    known = [r for r in rows if r["fixed_labels_total"] is not None]
    actual = _mean(r["total"] for r in known)
    fixed = _mean(r["fixed_labels_total"] for r in known)
    diffs = [r["fixed_labels_total"] - r["total"] for r in known]
    return {"agent": agent, "n_episodes": len(known), "n_missing": len(rows) - len(known), "mean_total": actual,
            "mean_fixed_labels": fixed, "mean_change": _mean(diffs),
            "episodes_up": sum(1 for x in diffs if x > stats.TIE_TOLERANCE),
            "episodes_down": sum(1 for x in diffs if x < -stats.TIE_TOLERANCE),
            "episodes_same": sum(1 for x in diffs if abs(x) <= stats.TIE_TOLERANCE),
            "bound_low": min(actual, fixed) if known else math.nan,
            "bound_high": max(actual, fixed) if known else math.nan}


def _trials(agent: str, rows: list, condition: str) -> dict:
    cells: dict = defaultdict(list)
    by_trial: dict = defaultdict(list)
    for r in rows:
        cells[(r["world"], r[condition])].append(r["total"])
        by_trial[r["trial"]].append(r["total"])
    pooled = stats.pooled_within_sd(cells[key] for key in sorted(cells, key=repr))
    over = stats.mean_sem_over_trials([float(np.mean(by_trial[t])) for t in sorted(by_trial)])
    return {"agent": agent, "trials": len(by_trial), "cells": len(cells),
            "cells_with_repeats": pooled["cells_used"], "pooled_within_sd": pooled["sd"], "pooled_df": pooled["df"],
            "mean_over_trials": over["mean"], "sd_of_trial_means": over["sd_of_trial_means"], "sem": over["sem"],
            "noise_floor": stats.noise_floor(pooled["sd"], len(cells))}


def _usage(agent: str, rows: list) -> dict:
    out = {"agent": agent, "n_episodes": len(rows),
           "episodes_with_usage": sum(1 for r in rows if any(r.get(k) is not None for k in USAGE_FIELDS))}
    for key in USAGE_FIELDS:
        known = _known(rows, key)
        out[f"{key}_mean"] = _mean(known)
        out[f"{key}_total"] = float(sum(known)) if known else math.nan
    return out


def _cells_table(records: list, condition: str, agents: list) -> list:
    groups: dict = defaultdict(list)
    archetype: dict = {}
    for r in records:
        groups[(r["agent"], r["world"], r[condition])].append(r["total"])
        archetype.setdefault(r["world"], r.get("archetype"))
    order = {a: i for i, a in enumerate(agents)}
    rows = []
    for (a, w, c) in sorted(groups, key=lambda k: (order[k[0]], k[1], k[2])):
        d = stats.describe(groups[(a, w, c)])
        rows.append({"agent": a, "world": w, "archetype": archetype[w], condition: c, "n_trials": d["n"],
                     "mean": d["mean"], "sd": d["sd"], "min": d["min"], "max": d["max"]})
    return rows


def _ranked_agents(records: list, value: ValueFn) -> list:
    """Agents by mean value descending, ties by label."""
    by_agent: dict = defaultdict(list)
    for r in records:
        by_agent[r["agent"]].append(value(r))
    return sorted(by_agent, key=lambda a: (-float(np.mean(by_agent[a])), a))


def _biobank(records: list) -> dict:
    agents = _ranked_agents(records, lambda r: r["total"])
    budgets = sorted({r["budget"] for r in records})
    worlds = sorted({r["world"] for r in records})
    by_agent = {a: [r for r in records if r["agent"] == a] for a in agents}
    found = {r["exit_reason"] if r["exit_reason"] is not None else "unrecorded" for r in records}
    reasons = list(EXIT_REASONS) + sorted(found - set(EXIT_REASONS))

    cells = cell_means(records, lambda r: r["total"], "budget")
    coverage, world_rows = [], []
    for a in agents:
        complete = world_means(cells, a, budgets)
        have = sorted({r["world"] for r in by_agent[a]})
        counts = defaultdict(int)
        for r in by_agent[a]:
            counts[(r["world"], r["budget"])] += 1
        coverage.append({"agent": a, "n_episodes": len(by_agent[a]), "n_worlds": len(have),
                         "complete_worlds": len(complete), "incomplete_worlds": " ".join(w for w in have
                                                                                        if w not in complete),
                         "trials_per_cell_min": min(counts.values()), "trials_per_cell_max": max(counts.values())})
        archetype = {r["world"]: r.get("archetype") for r in by_agent[a]}
        world_rows.extend({"agent": a, "world": w, "archetype": archetype[w], "world_mean": m}
                          for w, m in complete.items())

    tables: dict = {"coverage": coverage, "cells": _cells_table(records, "budget", agents), "world_means": world_rows}
    tables["s4"] = [_s4(a, by_agent[a], i + 1) for i, a in enumerate(agents)]
    s6 = [_s6(a, by_agent[a], budgets) for a in agents]
    tables["s6_budgets"] = [row for per_budget, _ in s6 for row in per_budget]
    tables["s6_contrasts"] = [row for _, contrasts in s6 for row in contrasts]
    for metric, (table, value) in PAIR_METRICS.items():
        rows = [r for r in records if value(r) is not None]
        tables[table] = [{"metric": metric, **row} for row in pairwise(rows, agents, value, "budget", budgets)]
    tables["s9"] = [_s9(a, by_agent[a]) for a in agents]
    tables["s10"] = [_s10(a, by_agent[a], reasons) for a in agents]
    tables["s11a"] = [_s11a(a, by_agent[a]) for a in agents]
    tables["s11c"] = [_s11c(a, by_agent[a]) for a in agents]
    tables["trials"] = [_trials(a, by_agent[a], "budget") for a in agents]
    tables["usage"] = [_usage(a, by_agent[a]) for a in agents]

    order = ("s4", "s5", "s6_budgets", "s6_contrasts", "s9", "s10", "s11a", "s11b", "s11c", "s11c_pairs", "trials",
             "usage", "coverage", "cells", "world_means")
    tables = {name: tables[name] for name in order}  # the supplement's order, then the supporting tables
    s4 = {row["agent"]: row for row in tables["s4"]}
    extra = {key: {row["agent"]: row for row in tables[key]} for key in ("s9", "s11a", "s11c", "trials", "usage")}
    leaderboard = []
    for a in agents:
        row, trials = s4[a], extra["trials"][a]
        leaderboard.append({
            "rank": row["rank"], "agent": a, "n_episodes": row["n_episodes"], "n_worlds": row["n_worlds"],
            "mean": row["mean"], "sd": row["sd"], "median": row["median"],
            "sem_over_trials": trials["sem"], "trials": trials["trials"], "noise_floor": trials["noise_floor"],
            "mean_without_phenotype": extra["s11a"][a]["mean"], "mean_fixed_labels": extra["s11c"][a]["mean_fixed_labels"],
            "target_precision": row["target_precision_mean"], "target_recall": row["target_recall_mean"],
            "safety_penalties": row["safety_penalties"],
            "experiments_delivered": extra["s9"][a]["experiments_delivered"],
            "total_tokens_mean": extra["usage"][a]["total_tokens_mean"],
            "cost_usd_mean": extra["usage"][a]["cost_usd_mean"], "cost_usd_total": extra["usage"][a]["cost_usd_total"],
        })
    return {"agents": agents, "worlds": worlds, "budgets": budgets, "leaderboard": leaderboard, "tables": tables}


# ----------------------------------------------------------------------------- screening


def _screening(records: list) -> dict:
    modes = sorted({r["mode"] for r in records})
    worlds = sorted({r["world"] for r in records})
    leaderboard, pairs, trials = [], [], []
    for mode in modes:
        rows = [r for r in records if r["mode"] == mode]
        agents = _ranked_agents(rows, lambda r: r["score"])
        for rank, a in enumerate(agents, 1):
            mine = [r for r in rows if r["agent"] == a]
            d = stats.describe([r["score"] for r in mine])
            budgets = [r for r in mine if r["label_budget"]]
            exits = defaultdict(int)
            for r in mine:
                exits[r["exit_reason"] or "unrecorded"] += 1
            leaderboard.append({
                "mode": mode, "rank": rank, "agent": a, "n_episodes": d["n"],
                "n_worlds": len({r["world"] for r in mine}), "mean_score": d["mean"], "sd": d["sd"],
                "median": d["median"], "min": d["min"], "max": d["max"],
                "submissions_mean": _mean(r["submissions"] for r in mine),
                "labels_used_mean": _mean(r["labels_used"] for r in mine),
                "labels_used_fraction_mean": _mean(r["labels_used"] / r["label_budget"] for r in budgets),
                "turns_used_mean": _mean(_known(mine, "turns_used")),
                "cost_usd_mean": _mean(_known(mine, "cost_usd")),
                "exit_reasons": " ".join(f"{k}:{v}" for k, v in sorted(exits.items())),
            })
            trials.append({"mode": mode, **_trials(a, mine, "mode")})
        pairs.extend({"mode": mode, **row}
                     for row in pairwise(rows, agents, lambda r: r["score"], "mode", [mode]))
    episodes = [{"agent": r["agent"], "world": r["world"], "mode": r["mode"], "trial": r["trial"],
                 "score": r["score"], "submissions": r["submissions"], "labels_used": r["labels_used"],
                 "label_budget": r["label_budget"], "exit_reason": r["exit_reason"]}
                for r in sorted(records, key=lambda r: (r["mode"], r["agent"], r["world"], r["trial"]))]
    return {"modes": modes, "worlds": worlds, "leaderboard": leaderboard,
            "tables": {"screening_leaderboard": leaderboard, "screening_pairs": pairs, "screening_trials": trials,
                       "screening_episodes": episodes}}


# ----------------------------------------------------------------------------- the report


def _clean(value):
    """JSON-ready: numpy scalars as Python numbers, NaN and infinities as None."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def episode_key(record: Mapping) -> tuple:
    """The sort key of a validated record: (kind, agent, world, budget or mode, trial)."""
    # Within a kind the condition has one type (a number, or a mode name), and kind is compared first.
    condition = record["budget"] if record["kind"] == "biobank" else record["mode"]
    return (record["kind"], record["agent"], record["world"], condition, record["trial"])


def records_digest(records: Iterable[Mapping]) -> str:
    """SHA-256 of validated records as canonical JSON (sorted keys) in :func:`episode_key` order,
    so the digest does not depend on the order the episodes finished in."""
    text = "\n".join(json.dumps(r, sort_keys=True, default=str) for r in sorted(records, key=episode_key))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def report(records: Iterable[Mapping]) -> dict:
    """Every evaluation table, computed from the episode records alone.

    Parameters
    ----------
    records
        Episode records (:mod:`pipeline.evaluate.records`; the lines of ``episodes.jsonl``),
        biobank and screening records in any mix.  Validated first (:func:`validate_records`):
        a missing key, NaN, a value out of range, a total that does not decompose or a
        repeated episode raises ``RecordError`` naming the record and field.

    Returns
    -------
    dict
        ``format``; ``input`` (record counts and the SHA-256 of the validated records);
        the same records in any order give the same report (they are sorted by
        :func:`episode_key` first).
        ``settings`` (CI level, bootstrap resamples and seed, tie tolerance); ``biobank``
        (``agents`` in leaderboard order, ``worlds``, ``budgets``, ``leaderboard``, ``tables``)
        when there are biobank records; ``screening`` (``modes``, ``worlds``, ``leaderboard``,
        ``tables``) when there are screening records.  Every table is a list of flat rows
        (column -> value), with unrounded numbers and ``None`` where a statistic is undefined.

        Biobank tables (per agent unless said otherwise; "world means" as in the module doc):

        ``s4``
            Distribution of ``total`` over all the agent's episodes (n, mean, SD with ddof 1,
            median, quartiles by linear interpolation, IQR, min, max), the mean of each
            component and of the safety penalty, mean target precision and recall over the
            episodes where they are defined (with their n), safety penalties (count of
            episodes with penalty < 0) and their rate.  ``rank`` orders agents by mean total.
        ``s5``
            Between agents, every ordered pair (a, b) in both orientations: world means of a
            minus those of b over the worlds complete for both; mean difference, SD, SE, the
            t-based 95 % CI, the paired-t P (``stats.paired_t``), the exact two-sided sign test
            with ties excluded (``stats.sign_test``) and the 20,000-resample paired percentile
            bootstrap CI (seed 0, ``stats.bootstrap_mean_ci``).
        ``s6_budgets``, ``s6_contrasts``
            Per budget: n, mean, SD, median, min, max.  Per pair of budgets (high - low: with
            the standard budgets 450000-0, 2000000-0, 2000000-450000): cell means paired by
            world over the worlds with both cells; mean difference, t CI, paired-t P, sign test.
        ``s9``
            Experiment use: budget-eligible episodes (budget > 0), episodes requesting and
            receiving at least one experiment, experiments requested / delivered (by kind) /
            refused in eligible episodes, requests and refusals in observational (budget 0)
            episodes, all refusals, total and mean spend over eligible episodes and the mean
            fraction of the budget spent.  Records without experiment counts are left out and
            counted in ``experiments_unrecorded``.
        ``s10``
            Failures and attrition: episodes per exit reason (``exit_<reason>`` for the
            harness's reasons, ``EXIT_REASONS``, and any other reason in the records;
            ``exit_runner_crash`` counts the crashes), episodes whose scored submission did not parse,
            phenotype scored / positive credit / full credit, nomination cap hit, episodes not
            isolated; no-code turns, turn timeouts, failed runs, submission parse failures and
            truncated replies (totals, episodes with at least one, records without the count);
            mean turns used; mean and total wall time.
        ``s11a``
            Without phenotype credit: ``clip(total_unclipped - phenotype_construction, 0, 90)``
            per episode; n, mean, SD, median, min, max, and the change from the mean total.
        ``s11b``
            As ``s5`` on the world means of the S11 A score.
        ``s11c``, ``s11c_pairs``
            Fixed labels (``fixed_labels_total``) over the episodes that have it: mean total
            and mean fixed-label total on those episodes, mean change, episodes up / down /
            unchanged, and the identification bounds [min, max] of the two means;
            ``s11c_pairs`` is ``s5`` on fixed-label world means.
        ``trials``
            With repeats: the pooled within-cell SD ``sqrt(sum (n_c - 1) s_c^2 / sum (n_c - 1))``
            over the agent's (world, budget) cells, the mean over trials of the per-trial means
            (each the mean total of that trial's episodes) +/- SEM (their SD / sqrt(trials)),
            and the noise floor ``1.96 * sqrt(2) * pooled SD / sqrt(cells)``; undefined (None)
            with one trial.
        ``usage``
            Prompt, completion, cached and total tokens and cost in USD: mean per episode and
            total over the episodes that report them.
        ``coverage``, ``cells``, ``world_means``
            Episodes, worlds and complete worlds per agent (and the incomplete ones); per
            (agent, world, budget) the trials' n, mean, SD, min, max; per (agent, complete
            world) the world mean.

        ``leaderboard`` gathers per agent: rank, mean, SD, median, SEM over trials, noise
        floor, S11 A and C means, target precision and recall, safety penalties, experiments
        delivered, mean tokens and mean and total cost.

        Screening tables, per mode: ``screening_leaderboard`` (rank by mean best-of-three
        score; n, SD, median, min, max, mean submissions, mean labels used and fraction of
        the label budget, mean turns, mean cost, exit reasons), ``screening_pairs`` (as
        ``s5`` with the mode as the only condition), ``screening_trials`` (as ``trials``) and
        ``screening_episodes`` (one row per episode).
    """
    # Canonical order: a parallel runner appends episodes as they finish, and the same episodes in
    # another order must give the same tables to the last bit (floating sums depend on order).
    checked = sorted(validate_records(records), key=episode_key)
    biobank = [r for r in checked if r["kind"] == "biobank"]
    screening = [r for r in checked if r["kind"] == "screening"]
    out: dict = {
        "format": REPORT_FORMAT,
        "input": {"n_records": len(checked), "n_biobank": len(biobank), "n_screening": len(screening),
                  "records_sha256": records_digest(checked)},
        "settings": {"ci_level": stats.CI_LEVEL, "bootstrap_resamples": stats.BOOTSTRAP_RESAMPLES,
                     "bootstrap_seed": stats.BOOTSTRAP_SEED, "tie_tolerance": stats.TIE_TOLERANCE,
                     "noise_floor_z": stats.NOISE_FLOOR_Z, "no_phenotype_max": NO_PHENOTYPE_MAX},
    }
    if biobank:
        out["biobank"] = _biobank(biobank)
    if screening:
        out["screening"] = _screening(screening)
    return _clean(out)
