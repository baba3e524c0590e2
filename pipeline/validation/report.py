"""Self-contained HTML report: a summary at the top, one section per level of
evidence (calibration, fidelity, analyst) and for imaging, each figure beside
its target and band with the reason for every skipped row, and the diagnostic
plots embedded as PNG data URIs, scaled to the page."""
from __future__ import annotations

import base64
import html
import io

import numpy as np

from .core import SECTION_TITLES, SECTIONS, STATUSES, counts, section, status


def _fig_png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _af_plot(d):
    import matplotlib.pyplot as plt
    from scipy import stats

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.hist(d["q"], bins=30, density=True, alpha=0.6, label="ALT allele frequency (release)")
    x = np.linspace(0.035, 0.5, 200)
    floor = 0.034381
    ax.plot(x, stats.beta(d["a"], d["b"]).pdf((x - floor) / (0.5 - floor)) / (0.5 - floor), "k-",
            label="target: 0.034 + 0.466 Beta(0.73, 1.06)")
    ax.set_xlabel("allele frequency")
    ax.legend(fontsize=7)
    ax.set_title("Allele-frequency distribution")
    return fig


def _ld_plot(d):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    dist_kb = d["dist"] / 1000
    ax.scatter(dist_kb, d["r_obs"], s=4, alpha=0.4, label="observed adjacent-pair haplotype r")
    order = np.argsort(dist_kb)
    ax.plot(dist_kb[order], d["r_exp"][order], "k.", ms=2, label="expected (latent exp(-d/110 kb))")
    ax.set_xscale("log")
    ax.set_xlabel("distance between adjacent variants (kb)")
    ax.set_ylabel("r")
    ax.legend(fontsize=7)
    ax.set_title("LD by distance")
    return fig


BUILTIN = {"af": _af_plot, "ld": _ld_plot}


PLOT_CAPTIONS = {
    "af": "Allele-frequency distribution of the released variants against the scaled Beta target.",
    "ld": "Linkage disequilibrium between adjacent variants by distance.",
    "mechanisms": "The mechanisms as the sealed bundle shows them, one panel each.",
    "montage": "Mid-ventricular slices of the healthiest and the most severe imaged participant.",
}
STATUS_CLASS = {"PASS": "pass", "FAIL": "fail", "skipped": "skip", "reported": "rep"}
STATUS_MEANING = {
    "PASS": "within its band",
    "FAIL": "off its band (or could not be computed)",
    "skipped": "not run at this scale or in this world; the row says why",
    "reported": "a figure shown for reference, with no criterion",
}
_STYLE = (
    "body{font-family:sans-serif;margin:2em auto;max-width:1150px;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;font-size:13px;width:100%}td,th{border:1px solid #ccc;padding:3px 6px;"
    "vertical-align:top;text-align:left}th{background:#f4f4f4}"
    ".pass{background:#e7f6e7}.fail{background:#fbe3e3}.skip{background:#eee}.rep{background:#eef3fb}"
    ".summary{width:auto}.summary td,.summary th{text-align:right;min-width:5em}.summary td:first-child{text-align:left}"
    ".verdict{font-size:1.2em;font-weight:bold}.verdict.fail{color:#a00;background:none}"
    ".verdict.pass{color:#070;background:none}"
    "figure{margin:1em 0;max-width:100%}figure img{max-width:100%;height:auto;border:1px solid #ddd}"
    "figcaption{font-size:13px;color:#555}td.num{white-space:nowrap}"
)


def _f(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "-" if not np.isfinite(v) else f"{v:.4g}"
    return html.escape(str(v))


def _summary(report: dict, by_section: dict) -> list[str]:
    failed = [c for c in report["checks"] if status(c) == "FAIL"]
    verdict = ("pass", "Every figure with a criterion is within its band.") if not failed else \
        ("fail", f"{len(failed)} figure{'s' if len(failed) > 1 else ''} off {'their' if len(failed) > 1 else 'its'} band.")
    parts = ["<h2 id='summary'>Summary</h2>", f"<p class='verdict {verdict[0]}'>{verdict[1]}</p>",
             "<table class='summary'><tr><th>section</th>" + "".join(f"<th>{s}</th>" for s in STATUSES) + "</tr>"]
    for name, checks in by_section.items():
        if checks:
            n = counts(checks)
            parts.append(f"<tr><td><a href='#{name}'>{name}</a></td>"
                         + "".join(f"<td>{n[s]}</td>" for s in STATUSES) + "</tr>")
    n = counts(report["checks"])
    parts.append("<tr><th>all</th>" + "".join(f"<th>{n[s]}</th>" for s in STATUSES) + "</tr></table>")
    if failed:
        parts.append("<p>Off their band:</p><ul>" + "".join(
            f"<li><a href='#{section(c)}'>{html.escape(c['group'])}: {html.escape(c['name'])}</a> "
            f"({_f(c['measured'])} against [{_f(c['lower'])}, {_f(c['upper'])}])</li>" for c in failed) + "</ul>")
    parts.append("<p>" + "; ".join(f"<b>{k}</b>: {v}" for k, v in STATUS_MEANING.items()) + ". "
                 "Each band is the target plus or minus k standard errors of the figure at this world's scale "
                 "(or a one-sided threshold), from <code>pipeline/data/calibration_targets.yaml</code> and the "
                 "mechanism definitions.</p>")
    return parts


def _section(name: str, checks: list[dict]) -> list[str]:
    parts = [f"<h2 id='{name}'>{html.escape(SECTION_TITLES.get(name, name))}</h2>",
             "<table><tr><th>group</th><th>check</th><th>measured</th><th>target</th><th>band</th>"
             "<th>result</th><th>detail (why, for a skipped row)</th><th>source</th></tr>"]
    for c in checks:
        st = status(c)
        band = f"[{_f(c['lower'])}, {_f(c['upper'])}]" if (c["lower"] is not None or c["upper"] is not None) else "-"
        parts.append(f"<tr class='{STATUS_CLASS[st]}'><td>{html.escape(c['group'])}</td><td>{html.escape(c['name'])}</td>"
                     f"<td class='num'>{_f(c['measured'])}</td><td class='num'>{_f(c['target'])}</td>"
                     f"<td class='num'>{band}</td><td>{st}</td><td>{html.escape(c['detail'])}</td>"
                     f"<td>{html.escape(c['source'])}</td></tr>")
    parts.append("</table>")
    return parts


def write_html(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    world = html.escape(str(report["world_id"]))
    by_section: dict = {s: [] for s in SECTIONS}
    for c in report["checks"]:
        by_section.setdefault(section(c), []).append(c)
    present = [s for s, checks in by_section.items() if checks]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Validation: {world}</title>"
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Validation report: {world}</h1>",
        "<p>Sections: " + " &middot; ".join(f"<a href='#{s}'>{s}</a>" for s in [*present, "plots"]) + "</p>",
        *_summary(report, by_section),
    ]
    for name in present:
        parts += _section(name, by_section[name])
    parts.append("<h2 id='plots'>Plots</h2>")
    for name, data in report.get("_plots", {}).items():
        if name in BUILTIN:
            fig = BUILTIN[name](data)
        elif isinstance(data, dict) and callable(data.get("draw")):
            fig = data["draw"]()
        elif callable(data):
            fig = data()
        else:
            continue
        caption = PLOT_CAPTIONS.get(name, name)
        parts.append(f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{_fig_png(fig)}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    parts.append("</body></html>")
    with open(path, "w") as fh:
        fh.write("\n".join(parts))
