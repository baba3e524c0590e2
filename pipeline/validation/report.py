"""Self-contained HTML report: the check table (figure beside target and band)
and the diagnostic plots embedded as PNG data URIs."""
from __future__ import annotations

import base64
import html
import io

import numpy as np


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


def write_html(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Validation: "
        f"{html.escape(str(report['world_id']))}</title><style>"
        "body{font-family:sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}"
        ".pass{background:#e7f6e7}.fail{background:#fbe3e3}.skip{background:#eee}"
        "img{margin:6px;border:1px solid #ddd}</style></head><body>",
        f"<h1>Validation report: {html.escape(str(report['world_id']))}</h1>",
        f"<p>{report['n_checks']} checks, <b>{report['n_failed']} failed</b>. "
        "Each band is the target plus or minus k standard errors of the figure at this world's scale "
        "(or a one-sided threshold), from <code>pipeline/data/calibration_targets.yaml</code> and the mechanism "
        "definitions. Levels: calibration (S1.1 figures), fidelity (mechanism against its analytic expectation, "
        "using the sealed latent), analyst (the trap as seen from the release only).</p>",
        "<table><tr><th>group</th><th>level</th><th>check</th><th>measured</th><th>target</th><th>band</th>"
        "<th>result</th><th>detail</th><th>source</th></tr>",
    ]

    def f(v):
        return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else html.escape(str(v)))

    for c in report["checks"]:
        cls = "skip" if c["skipped"] else ("pass" if c["passed"] else "fail")
        band = f"[{f(c['lower'])}, {f(c['upper'])}]"
        parts.append(f"<tr class='{cls}'><td>{html.escape(c['group'])}</td><td>{html.escape(c['level'])}</td>"
                     f"<td>{html.escape(c['name'])}</td><td>{f(c['measured'])}</td><td>{f(c['target'])}</td>"
                     f"<td>{band}</td><td>{cls.upper()}</td><td>{html.escape(c['detail'])}</td>"
                     f"<td>{html.escape(c['source'])}</td></tr>")
    parts.append("</table><h2>Plots</h2>")
    for name, data in report.get("_plots", {}).items():
        if name in BUILTIN:
            fig = BUILTIN[name](data)
        elif isinstance(data, dict) and callable(data.get("draw")):
            fig = data["draw"]()
        elif callable(data):
            fig = data()
        else:
            continue
        parts.append(f"<img alt='{html.escape(name)}' src='data:image/png;base64,{_fig_png(fig)}'>")
    parts.append("</body></html>")
    with open(path, "w") as fh:
        fh.write("\n".join(parts))
