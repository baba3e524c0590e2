"""``render(records, out)``: the report folder ``<out>/report/`` from the episode records.

    report.json      pipeline.evaluate.report(records), unrounded (undefined statistics are null)
    <table>.csv      one CSV per table (leaderboard, s4, s5, s6_budgets, s6_contrasts, s9, s10,
                     s11a, s11b, s11c, s11c_pairs, trials, usage, coverage, cells, world_means;
                     screening_leaderboard, screening_pairs, screening_trials, screening_episodes),
                     numbers at full precision, empty cells for null
    leaderboard.md   the leaderboard, S5 and S6 as Markdown tables (rounded), for a README
    report.html      one self-contained page: every table and the figures as base64 PNG
                     (matplotlib's Agg canvas): score distribution per agent by world,
                     component stack, budget lines, paired-difference forest plot, cost vs score,
                     and the screening leaderboard when there are screening records

The same records give byte-identical files (no time stamps, no random jitter, PNG metadata
without the software version).  The folder is written beside ``report/`` and moved into
place when complete, so a half-written report never looks done.
"""
from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import os
import shutil
from pathlib import Path
from typing import Iterable, Mapping, Optional

from .tables import report as make_report

#: Figure colours, one per agent in leaderboard order (matplotlib's tab10, fixed here so the
#: page does not depend on the user's matplotlib style).
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
COMPONENT_COLOURS = {"target_identification": "#4c72b0", "causal_confidence": "#55a868",
                     "bias_identification": "#c44e52", "intervention_direction": "#8172b2",
                     "phenotype_construction": "#ccb974"}
MARKERS = ("o", "s", "^", "D", "v", "P")
_RC = {"font.family": "DejaVu Sans", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
       "svg.hashsalt": "drugtargetworld", "path.simplify": True}


# ----------------------------------------------------------------------------- files


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def write_csv(path: Path, rows: list) -> None:
    """Rows (dicts) as CSV: columns in first-seen order, null as an empty cell."""
    columns: list = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])


def tables_of(rep: Mapping) -> dict:
    """``{file stem: rows}`` of every table in a report (biobank leaderboard included)."""
    out: dict = {}
    if "biobank" in rep:
        out["leaderboard"] = rep["biobank"]["leaderboard"]
        out.update(rep["biobank"]["tables"])
    if "screening" in rep:
        out.update(rep["screening"]["tables"])
    return out


def render(records: Iterable[Mapping], out: os.PathLike | str, *, report: Optional[Mapping] = None) -> dict:
    """Write ``<out>/report/`` (report.json, the CSVs, leaderboard.md, report.html).

    Parameters
    ----------
    records
        The episode records (validated by ``report``).
    out
        The evaluation's output folder; ``<out>/report/`` is replaced.
    report
        ``pipeline.evaluate.report(records)`` if the caller already has it (it must be of
        these records: its ``records_sha256`` is checked).

    Returns
    -------
    dict
        ``{"dir": <out>/report, "files": [file names, sorted]}``.

    Raises
    ------
    RecordError
        Bad records (from ``report``).
    ValueError
        A ``report`` that was computed from other records.
    """
    from .tables import records_digest
    from .records import validate_records

    records = list(records)
    if report is None:
        report = make_report(records)
    elif report.get("input", {}).get("records_sha256") != records_digest(validate_records(records)):
        raise ValueError("report: computed from other records (records_sha256 differs); pass the records it came "
                         "from or report=None")
    out = Path(out)
    target = out / "report"
    wip = out / ".report.wip"
    if wip.exists():
        shutil.rmtree(wip)
    wip.mkdir(parents=True)
    (wip / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    for name, rows in tables_of(report).items():
        write_csv(wip / f"{name}.csv", rows)
    (wip / "leaderboard.md").write_text(leaderboard_markdown(report), encoding="utf-8")
    (wip / "report.html").write_text(report_html(report, records), encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    os.replace(wip, target)
    return {"dir": target, "files": sorted(p.name for p in target.iterdir())}


# ----------------------------------------------------------------------------- number formats


def _f(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}f}"


def _p(value) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3g}"


def _money(value) -> str:
    return "–" if value is None else f"${value:,.2f}"


def _budget(value) -> str:
    return f"${value:,.0f}"


def _int(value) -> str:
    return "–" if value is None else f"{value:,.0f}"


# ----------------------------------------------------------------------------- Markdown


def _md_table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _one_orientation(rows: list, agents: list) -> list:
    """The pairs with agent_a ranked above agent_b (each unordered pair once)."""
    rank = {a: i for i, a in enumerate(agents)}
    return [r for r in rows if rank[r["agent_a"]] < rank[r["agent_b"]]]


def _leaderboard_rows(bio: Mapping) -> tuple[list, list]:
    header = ["Rank", "Agent", "Episodes", "Worlds", "Mean", "SD", "Median", "± SEM (trials)", "No phenotype (S11 A)",
              "Fixed labels (S11 C)", "Target precision", "Target recall", "Safety penalties",
              "Experiments delivered", "Tokens / episode", "Cost / episode"]
    rows = [[r["rank"], r["agent"], r["n_episodes"], r["n_worlds"], _f(r["mean"]), _f(r["sd"]), _f(r["median"]),
             _f(r["sem_over_trials"], 2), _f(r["mean_without_phenotype"]), _f(r["mean_fixed_labels"]),
             _f(r["target_precision"], 2), _f(r["target_recall"], 2), r["safety_penalties"],
             r["experiments_delivered"], _int(r["total_tokens_mean"]), _money(r["cost_usd_mean"])]
            for r in bio["leaderboard"]]
    return header, rows


def _pair_rows(rows: list) -> tuple[list, list]:
    header = ["A", "B", "Worlds", "Mean A − B", "95 % CI (t)", "Paired-t P", "A better / B better / ties",
              "Sign-test P", "Bootstrap 95 % CI"]
    body = [[r["agent_a"], r["agent_b"], r["n_worlds"], _f(r["mean_diff"], 2),
             f"{_f(r['ci_low'], 2)} to {_f(r['ci_high'], 2)}", _p(r["p_t"]),
             f"{r['n_a_better']} / {r['n_b_better']} / {r['n_ties']}", _p(r["p_sign"]),
             f"{_f(r['bootstrap_ci_low'], 2)} to {_f(r['bootstrap_ci_high'], 2)}"] for r in rows]
    return header, body


def _contrast_rows(rows: list) -> tuple[list, list]:
    header = ["Agent", "Contrast", "Worlds", "Mean high", "Mean low", "Difference", "95 % CI (t)", "Paired-t P",
              "High better / low better / ties", "Sign-test P"]
    body = [[r["agent"], f"{_budget(r['budget_high'])} − {_budget(r['budget_low'])}", r["n_worlds"],
             _f(r["mean_high"]), _f(r["mean_low"]), _f(r["mean_diff"], 2),
             f"{_f(r['ci_low'], 2)} to {_f(r['ci_high'], 2)}", _p(r["p_t"]),
             f"{r['n_high_better']} / {r['n_low_better']} / {r['n_ties']}", _p(r["p_sign"])] for r in rows]
    return header, body


def _screening_rows(scr: Mapping) -> tuple[list, list]:
    header = ["Mode", "Rank", "Agent", "Episodes", "Worlds", "Mean score (best of 3) %", "SD", "Min", "Max",
              "Submissions", "Labels used", "Label budget used"]
    body = [[r["mode"], r["rank"], r["agent"], r["n_episodes"], r["n_worlds"], _f(r["mean_score"]), _f(r["sd"]),
             _f(r["min"]), _f(r["max"]), _f(r["submissions_mean"], 2), _int(r["labels_used_mean"]),
             "–" if r["labels_used_fraction_mean"] is None else f"{100 * r['labels_used_fraction_mean']:.0f} %"]
            for r in scr["leaderboard"]]
    return header, body


def _noise_lines(trials: list) -> list:
    return [f"- {t['agent']}: {t['trials']} trials, pooled within-cell SD {_f(t['pooled_within_sd'], 2)}, "
            f"mean {_f(t['mean_over_trials'])} ± {_f(t['sem'], 2)} (SEM), noise floor {_f(t['noise_floor'], 2)} "
            f"over {t['cells']} cells" for t in trials if t["trials"] >= 2]


def leaderboard_markdown(rep: Mapping) -> str:
    """The leaderboard, S5 (each pair once, the higher-ranked agent first) and S6 contrasts as
    Markdown, numbers rounded for reading (report.json and the CSVs hold them unrounded)."""
    parts = ["# DrugTargetWorld evaluation\n",
             f"{rep['input']['n_records']} episode records (SHA-256 `{rep['input']['records_sha256'][:16]}…`); "
             "scores on the 0–100 scale. Generated by `pipeline.evaluate`; report.json holds every table "
             "unrounded.\n"]
    if "biobank" in rep:
        bio = rep["biobank"]
        budgets = ", ".join(_budget(b) for b in bio["budgets"])
        parts.append(f"## Leaderboard\n\n{len(bio['agents'])} agents × {len(bio['worlds'])} worlds × budgets "
                     f"{budgets}.\n")
        parts.append(_md_table(*_leaderboard_rows(bio)))
        noise = _noise_lines(bio["tables"]["trials"])
        if noise:
            parts.append("\nRun-to-run noise (trials ≥ 2): the noise floor is 1.96 × √2 × pooled within-cell SD / "
                         "√cells, the smallest difference between two single-trial runs of the grid beyond noise "
                         "at 95 %.\n\n" + "\n".join(noise) + "\n")
        pairs = _one_orientation(bio["tables"]["s5"], bio["agents"])
        if pairs:
            parts.append("\n## Pairwise comparisons (S5)\n\nBudgets averaged within world, then paired over worlds; "
                         "t-based 95 % CI, paired-t P, exact two-sided sign test (ties excluded), 20,000-resample "
                         "paired bootstrap (seed 0). Both orientations are in s5.csv.\n")
            parts.append(_md_table(*_pair_rows(pairs)))
        if bio["tables"]["s6_contrasts"]:
            parts.append("\n## Budget contrasts (S6)\n\nCell means paired by world.\n")
            parts.append(_md_table(*_contrast_rows(bio["tables"]["s6_contrasts"])))
    if "screening" in rep:
        parts.append("\n## Screening leaderboard\n\nBest of three submissions per episode: % of the true top K "
                     "among the submitted ids.\n")
        parts.append(_md_table(*_screening_rows(rep["screening"])))
    return "\n".join(parts)


# ----------------------------------------------------------------------------- figures


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


def fig_distribution(bio: Mapping, records: list) -> str:
    """Episode totals per world (x) and agent (colour; offset within the world), marker by budget,
    with each agent's world mean as a bar."""
    agents, worlds, budgets = bio["agents"], bio["worlds"], bio["budgets"]
    fig = _figure(min(16.0, max(6.0, 0.55 * len(worlds) * max(1, len(agents)) ** 0.5 + 2.5)), 3.8)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(agents))
    xw = {w: i for i, w in enumerate(worlds)}
    means = {(r["agent"], r["world"]): r["world_mean"] for r in bio["tables"]["world_means"]}
    for i, a in enumerate(agents):
        offset = -0.4 + width * (i + 0.5)
        for j, b in enumerate(budgets):
            pts = sorted((xw[r["world"]], r["total"], r["trial"]) for r in records
                         if r["agent"] == a and r["budget"] == b)
            if pts:
                ax.scatter([x + offset for x, _, _ in pts], [y for _, y, _ in pts], s=14, color=_colour(i),
                           marker=MARKERS[j % len(MARKERS)], alpha=0.8, linewidths=0,
                           label=a if j == 0 else None)
        for w in worlds:
            if (a, w) in means:
                x = xw[w] + offset
                ax.plot([x - width * 0.4, x + width * 0.4], [means[(a, w)]] * 2, color=_colour(i), lw=1.5)
    ax.set_xticks(range(len(worlds)), worlds, rotation=45, ha="right")
    ax.set_ylabel("total score")
    ax.set_ylim(-3, 103)
    ax.set_title("Score per episode by world (bars: budget-averaged world mean; marker: "
                 + ", ".join(f"{MARKERS[j % len(MARKERS)]} {_budget(b)}" for j, b in enumerate(budgets)) + ")",
                 fontsize=8)
    ax.legend(fontsize=7, ncols=min(4, len(agents)), loc="upper left", frameon=False)
    return _png(fig)


def fig_components(bio: Mapping) -> str:
    """Mean score components per agent, stacked; the mean safety penalty to the left of zero."""
    rows = bio["tables"]["s4"]
    fig = _figure(6.5, 0.45 * len(rows) + 1.4)
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    for comp, colour in COMPONENT_COLOURS.items():
        values = [r[f"{comp}_mean"] for r in rows]
        ax.barh(y, values, left=left, color=colour, label=comp.replace("_", " "), height=0.7)
        left = [l + v for l, v in zip(left, values)]
    ax.barh(y, [r["safety_penalty_mean"] for r in rows], color="#333333", label="safety penalty", height=0.7)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y, [r["agent"] for r in rows])
    ax.set_xlabel("mean points per episode")
    ax.legend(fontsize=7, ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return _png(fig)


def fig_budgets(bio: Mapping) -> str:
    """Mean over worlds of the cell means at each budget, per agent, with ± SE over worlds."""
    budgets = bio["budgets"]
    fig = _figure(5.5, 3.6)
    ax = fig.add_subplot()
    spread = 0.05  # agents side by side at each budget, so error bars do not hide each other
    for i, a in enumerate(bio["agents"]):
        shift = (i - (len(bio["agents"]) - 1) / 2) * spread
        xs, ys, es = [], [], []
        for j, b in enumerate(budgets):
            vals = [c["mean"] for c in bio["tables"]["cells"] if c["agent"] == a and c["budget"] == b]
            if vals:
                m = sum(vals) / len(vals)
                sd = (sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5 if len(vals) > 1 else 0.0
                xs.append(j + shift)
                ys.append(m)
                es.append(sd / len(vals) ** 0.5)
        ax.errorbar(xs, ys, yerr=es, color=_colour(i), marker="o", ms=4, capsize=3, label=a)
    ax.set_xticks(range(len(budgets)), [_budget(b) for b in budgets])
    ax.set_xlabel("experimental budget")
    ax.set_ylabel("mean total (± SE over worlds)")
    ax.legend(fontsize=7, frameon=False, loc="best")
    return _png(fig)


def fig_forest(bio: Mapping) -> str:
    """S5 paired differences (higher-ranked minus lower-ranked agent): t-based 95 % CI (thin) and
    bootstrap percentile CI (thick), mean as a dot."""
    rows = _one_orientation(bio["tables"]["s5"], bio["agents"])
    fig = _figure(6.0, 0.35 * max(1, len(rows)) + 1.2)
    ax = fig.add_subplot()
    for k, r in enumerate(rows[::-1]):
        if r["mean_diff"] is None:
            continue
        if r["ci_low"] is not None:
            ax.plot([r["ci_low"], r["ci_high"]], [k, k], color="#1f77b4", lw=1)
        if r["bootstrap_ci_low"] is not None:
            ax.plot([r["bootstrap_ci_low"], r["bootstrap_ci_high"]], [k, k], color="#1f77b4", lw=4, alpha=0.35)
        ax.plot([r["mean_diff"]], [k], "o", color="#1f77b4", ms=4)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)), [f"{r['agent_a']} − {r['agent_b']}" for r in rows[::-1]])
    ax.set_xlabel("difference of world means (points)")
    ax.set_title("Paired differences over worlds (thin: t 95 % CI; thick: bootstrap 95 % CI)", fontsize=8)
    return _png(fig)


def fig_cost(bio: Mapping) -> str:
    """Mean score against mean model cost per episode; agents without recorded cost at $0, hollow."""
    fig = _figure(5.5, 3.6)
    ax = fig.add_subplot()
    usage = {r["agent"]: r for r in bio["tables"]["usage"]}
    uncosted = []
    for i, r in enumerate(bio["leaderboard"]):
        cost = usage[r["agent"]]["cost_usd_mean"]
        if cost is None:
            uncosted.append(r["agent"])
            ax.scatter([0.0], [r["mean"]], s=36, facecolors="none", edgecolors=_colour(i), label=r["agent"])
        else:
            ax.scatter([cost], [r["mean"]], s=36, color=_colour(i), label=r["agent"])
    ax.set_xlabel("mean cost per episode (USD)")
    ax.set_ylabel("mean total")
    if uncosted:
        ax.set_title("hollow: no model cost recorded (plotted at $0)", fontsize=8)
    ax.legend(fontsize=7, frameon=False, loc="best")
    return _png(fig)


def fig_screening(scr: Mapping) -> str:
    """Mean best-of-three score per agent and mode, with the min-max range."""
    rows = scr["leaderboard"]
    fig = _figure(5.5, 0.35 * len(rows) + 1.3)
    ax = fig.add_subplot()
    labels = [f"{r['agent']} ({r['mode']})" for r in rows][::-1]
    for k, r in enumerate(rows[::-1]):
        ax.barh([k], [r["mean_score"]], color=_colour(k), height=0.6)
        ax.plot([r["min"], r["max"]], [k, k], color="black", lw=1)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_xlabel("best-of-three score (% of the true top K)")
    return _png(fig)


# ----------------------------------------------------------------------------- HTML


def _html_value(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return html.escape(f"{value:.4g}" if abs(value) < 1e-3 and value != 0 else f"{value:,.3f}".rstrip("0").rstrip("."))
    return html.escape(str(value))


def _html_table(rows: list, columns: Optional[list] = None) -> str:
    if not rows:
        return "<p><em>no rows</em></p>"
    if columns is None:
        columns = []
        for row in rows:
            columns.extend(k for k in row if k not in columns)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_html_value(row.get(c))}</td>" for c in columns) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _img(data: str, alt: str) -> str:
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>' \
           f"{html.escape(alt)}</figcaption></figure>"


_CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;
padding:0 1em;color:#222}h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:0.82em}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right;
white-space:nowrap}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.scroll{overflow-x:auto}
figure{margin:1em 0}img{max-width:100%}figcaption{font-size:0.85em;color:#555}code{background:#f3f3f3}"""

_TABLE_NOTES = {
    "s4": "S4: score distribution, components, target precision and recall, safety penalties.",
    "s5": "S5: between agents; budgets averaged within world, paired over worlds (both orientations).",
    "s6_budgets": "S6: performance by budget.",
    "s6_contrasts": "S6: budget contrasts paired by world.",
    "s9": "S9: experiment selection and use.",
    "s10": "S10: failures and attrition.",
    "s11a": "S11 A: without phenotype credit, clip(total_unclipped − phenotype, 0, 90).",
    "s11b": "S11 B: S5 on the scores without phenotype credit.",
    "s11c": "S11 C: every direction 'inhibit', every alignment 'aligned', re-scored by the scorer.",
    "s11c_pairs": "S11 C: S5 on the fixed-label scores.",
    "trials": "Trials: pooled within-cell SD, mean ± SEM over trials, noise floor.",
    "usage": "Tokens and cost per agent.",
    "coverage": "Coverage: worlds complete at every budget enter the world-level comparisons.",
    "cells": "Cells: per agent, world and budget.",
    "world_means": "World means: budget-averaged, per agent and complete world.",
}


def report_html(rep: Mapping, records: list) -> str:
    """The self-contained HTML page: leaderboard, figures and every table."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>DrugTargetWorld evaluation</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>DrugTargetWorld evaluation</h1>",
             f"<p>{rep['input']['n_records']} episode records; records SHA-256 "
             f"<code>{rep['input']['records_sha256']}</code>. Scores on the 0–100 scale; tables rounded here, "
             "unrounded in report.json and the CSV files.</p>"]
    if "biobank" in rep:
        from .records import validate_records

        checked = [r for r in validate_records(records) if r["kind"] == "biobank"]
        bio = rep["biobank"]
        parts.append("<h2>Leaderboard</h2>")
        parts.append(_html_table(bio["leaderboard"]))
        noise = _noise_lines(bio["tables"]["trials"])
        if noise:
            parts.append("<ul>" + "".join(f"<li>{html.escape(line[2:])}</li>" for line in noise) + "</ul>")
        import matplotlib

        with matplotlib.rc_context(_RC):
            parts.append("<h2>Figures</h2>")
            parts.append(_img(fig_distribution(bio, checked), "Score distribution per agent by world"))
            parts.append(_img(fig_components(bio), "Mean score components per agent"))
            parts.append(_img(fig_budgets(bio), "Mean score by budget"))
            parts.append(_img(fig_forest(bio), "Paired differences between agents (S5)"))
            parts.append(_img(fig_cost(bio), "Cost against score"))
        for name, rows in bio["tables"].items():
            parts.append(f'<h2 id="{name}">{html.escape(name)}</h2><p>{html.escape(_TABLE_NOTES.get(name, ""))}</p>')
            parts.append(_html_table(rows))
    if "screening" in rep:
        scr = rep["screening"]
        import matplotlib

        parts.append("<h2>Screening leaderboard</h2>")
        parts.append(_html_table(scr["leaderboard"]))
        with matplotlib.rc_context(_RC):
            parts.append(_img(fig_screening(scr), "Screening: best-of-three score per agent and mode"))
        for name in ("screening_pairs", "screening_trials", "screening_episodes"):
            parts.append(f"<h2>{name}</h2>")
            parts.append(_html_table(scr["tables"][name]))
    parts.append("</body></html>\n")
    return "\n".join(parts)
