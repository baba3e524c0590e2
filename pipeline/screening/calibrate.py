"""Difficulty calibration: the four reference strategies on every world of a screening panel.

    python -m pipeline.screening.calibrate [panel=screening-v1] [scale=small] [out=./worlds]
        [strategies=random,labels_only,invariant_al,pose_al] [cluster=local] [isolation=auto]
        [jobs=1] [reuse=false]

Builds any world of the panel that is missing (or incomplete), plays one
unrestricted-mode episode per strategy and world, and prints the table: each
strategy's score per world, the mean over the worlds and its standard error
(SD / sqrt(worlds)), and, at paper scale, whether the mean lies in the
strategy's band (docs/results/screening-calibration.md, "Difficulty").  The table is also written as JSON to
``<out>/calibration-<panel>-<scale>.json``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

BANDS = {  # paper scale, mean over the panel's worlds, % of the top-K found
    "random": (0.1, 0.6),
    "labels_only": (5.0, 15.0),
    "invariant_al": (25.0, 42.0),
}
POSE_MARGIN, POSE_MAX = 10.0, 80.0  # pose_al >= invariant_al + 10 points and <= 80 %
# The source's leaderboard (do-challenge.txt), drawn on the figure for reference.
SOURCE_RESULTS = {"best, invariant features": 37.2, "best without spatial networks": 50.3,
                  "best unrestricted": 77.8, "best in 10 hours": 33.6}


def band_checks(means: dict) -> list[dict]:
    out = []
    for name, (lo, hi) in BANDS.items():
        if name in means:
            out.append({"strategy": name, "band": [lo, hi], "mean": means[name], "ok": lo <= means[name] <= hi})
    if "pose_al" in means and "invariant_al" in means:
        lo = means["invariant_al"] + POSE_MARGIN
        out.append({"strategy": "pose_al", "band": [lo, POSE_MAX], "mean": means["pose_al"], "ok": lo <= means["pose_al"] <= POSE_MAX})
    return out


def _finished(episode_dir: Path, wid: str, name: str, manifest: Path):
    """A finished episode of ``name`` on this build of ``wid`` (its score written after the
    world's manifest), or None."""
    path = episode_dir / "score.json"
    try:
        result = json.loads(path.read_text())
        ep = result["episode"]
        if (ep["world_id"] == wid and ep["agent"] == name and ep["exit_reason"] != "runner_crash"
                and path.stat().st_mtime > manifest.stat().st_mtime):
            return result
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def run(panel: str, scale: str, out: str, strategies: list, cluster: str = "local", isolation: str = "auto",
        jobs: int = 1, reuse: bool = False) -> dict:
    """``jobs`` episodes play at once (each is its own sandboxed processes; the strategies
    are single-threaded); ``reuse`` keeps an episode already finished on the current build
    (an interrupted calibration resumes) instead of replaying it."""
    from concurrent.futures import ThreadPoolExecutor

    from .. import config
    from ..build import build
    from ..panel import panel_worlds, status
    from .agents import create_agent
    from .episode import run_episode

    rows: dict = {s: {} for s in strategies}
    worlds = panel_worlds(panel)
    for wid in worlds:
        resolved = config.load([f"world={wid}", f"scale={scale}", f"out={out}", f"cluster={cluster}"])
        manifest = Path(out) / wid / "release" / "MANIFEST.json"
        size = json.loads(manifest.read_text()).get("conformations") if manifest.exists() else None
        if not status(resolved)["complete"] or size != resolved.n:  # missing, incomplete or another scale
            build(resolved, progress=True)

    def play(wid: str, name: str) -> None:
        episode_dir = Path(out) / "episodes" / f"{wid}-{scale}" / name
        result = _finished(episode_dir, wid, name, Path(out) / wid / "release" / "MANIFEST.json") if reuse else None
        reused = result is not None
        if not reused:
            result = run_episode(Path(out) / wid, create_agent(name), agent_name=name, mode="unrestricted",
                                 isolation=isolation, out=episode_dir, overwrite=True)
        rows[name][wid] = {"score": result["score"], "overlaps": [s["overlap"] for s in result["submissions"]],
                           "exit": result["episode"]["exit_reason"], "seconds": result["episode"]["wall_s"],
                           "isolated": result["isolated"], "reused": reused}
        sys.stderr.write(f"{wid} {name}: {result['score']:.1f} % {rows[name][wid]['overlaps']} "  # one write: lanes
                         f"({rows[name][wid]['seconds']:.0f} s{', reused' if reused else ''})\n")  # never interleave
        sys.stderr.flush()

    with ThreadPoolExecutor(max(1, int(jobs))) as pool:
        for future in [pool.submit(play, wid, name) for wid in worlds for name in strategies]:
            future.result()
    rows = {name: {w: rows[name][w] for w in worlds} for name in strategies}  # panel order, whatever finished first
    means, ses = {}, {}
    for name in strategies:
        vals = np.array([rows[name][w]["score"] for w in worlds])
        means[name] = float(vals.mean())
        ses[name] = float(vals.std(ddof=1) / np.sqrt(len(vals))) if len(vals) > 1 else float("nan")
    table = {"panel": panel, "scale": scale, "worlds": worlds, "rows": rows, "mean": means, "se": ses,
             "bands": band_checks(means) if scale == "paper" else None}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"calibration-{panel}-{scale}.json").write_text(json.dumps(table, indent=2))
    figure(table, Path(out) / f"calibration-{panel}-{scale}.png")
    return table


def figure(table: dict, path) -> None:
    """Each strategy's score per world (points), the panel mean with its SE (bar), the
    bands at paper scale (shaded) and the source's leaderboard (dotted lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, worlds = list(table["rows"]), table["worlds"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    x = np.arange(len(names))
    ax.bar(x, [table["mean"][n] for n in names], width=0.6, color="#c6dbef", edgecolor="#4a6f8a",
           yerr=[0 if np.isnan(table["se"][n]) else table["se"][n] for n in names], capsize=4, label="mean ± SE")
    for j, w in enumerate(worlds):
        ax.scatter(x + (j - (len(worlds) - 1) / 2) * 0.12, [table["rows"][n][w]["score"] for n in names],
                   s=18, zorder=3, label=w)
    for check in table.get("bands") or []:
        i = names.index(check["strategy"])
        ax.fill_between([i - 0.4, i + 0.4], *check["band"], color="#2ca02c" if check["ok"] else "#d62728",
                        alpha=0.15, lw=0, zorder=0)
    for label, value in SOURCE_RESULTS.items():
        ax.axhline(value, ls=":", lw=0.8, color="0.4")
        ax.text(len(names) - 0.45, value, f" source: {label} {value:g} %", va="center", fontsize=7, color="0.3")
    ax.set_xticks(x, names)
    ax.set_xlim(-0.6, len(names) + 1.4)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of the true top-K found (best submission)")
    bands = " (shaded: the issue's bands, green = met)" if table.get("bands") else ""
    ax.set_title(f"{table['panel']}, {table['scale']} scale: one unrestricted episode per strategy and world{bands}",
                 fontsize=8)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(table: dict) -> None:
    worlds = table["worlds"]
    print(f"{'strategy':<14}" + "".join(f"{w:>14}" for w in worlds) + f"{'mean':>9}{'SE':>7}")
    for name, per in table["rows"].items():
        print(f"{name:<14}" + "".join(f"{per[w]['score']:>13.1f}%" for w in worlds)
              + f"{table['mean'][name]:>8.1f}%{table['se'][name]:>7.1f}")
    for check in table["bands"] or []:
        print(f"{'ok  ' if check['ok'] else 'OUT '} {check['strategy']}: mean {check['mean']:.1f} % in {check['band']}")


def main(argv: list[str] | None = None) -> int:
    args = {"panel": "screening-v1", "scale": "small", "out": "./worlds",
            "strategies": "random,labels_only,invariant_al,pose_al", "cluster": "local", "isolation": "auto",
            "jobs": "1", "reuse": "false"}
    for item in (sys.argv[1:] if argv is None else argv):
        key, sep, value = item.partition("=")
        if not sep or key not in args:
            print(f"calibrate: {item}: unknown; valid keys: {', '.join(args)}", file=sys.stderr)
            return 2
        args[key] = value
    try:
        jobs = int(args["jobs"])
        if not 1 <= jobs <= 64:
            raise ValueError
    except ValueError:
        print(f"calibrate: jobs={args['jobs']}: invalid; valid: an integer in [1, 64]", file=sys.stderr)
        return 2
    if args["reuse"].lower() not in ("true", "false"):
        print(f"calibrate: reuse={args['reuse']}: invalid; valid: true or false", file=sys.stderr)
        return 2
    table = run(args["panel"], args["scale"], args["out"], args["strategies"].split(","), args["cluster"], args["isolation"],
                jobs=jobs, reuse=args["reuse"].lower() == "true")
    print_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
