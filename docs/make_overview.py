"""Draw the README's picture, docs/assets/overview.svg: a world's config and seed, the
generator, the release and sealed bundles, an agent's episode with the oracle, the scorer.

    python docs/make_overview.py [--png FILE]     # rewrites docs/assets/overview.svg (byte-stable)
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().parent / "assets" / "overview.svg"
PUBLIC = ("#e6f4ea", "#3c8d52")  # what an agent may read
SEALED = ("#fdecea", "#b3443a")  # what only the judges read
BUILD = ("#eef2f7", "#5a6b82")
AGENT = ("#fff6e0", "#b7892b")

# name: (x, y, w, h, colours, title, lines) in a 96 x 32 grid
BOXES = {
    "config": (1, 12, 12, 8, BUILD, "world config", ["+ secret seed"]),
    "generator": (17, 11, 15, 10, BUILD, "generator", ["hidden causal model,", "planted biases"]),
    "release": (37, 22, 16, 8, PUBLIC, "release/", ["tables, genotypes,", "MRI, manifest"]),
    "sealed": (37, 2, 16, 8, SEALED, "sealed/", ["truth, latent, oracle,", "seed, manifest"]),
    "agent": (58, 22, 17, 8, AGENT, "agent", ["turns of code run", "in a sandbox"]),
    "oracle": (58, 2, 17, 8, SEALED, "oracle", ["knockdowns, cell", "perturbations, ledger"]),
    "scorer": (80, 12, 15, 8, SEALED, "scorer", ["score.json, 0–100"]),
}


def anchor(name: str, side: str, shift: float = 0.0) -> tuple[float, float]:
    x, y, w, h = BOXES[name][:4]
    return {"left": (x, y + h / 2 + shift), "right": (x + w, y + h / 2 + shift),
            "top": (x + w / 2 + shift, y + h), "bottom": (x + w / 2 + shift, y)}[side]


ARROWS = [  # (from, side, to, side, label, label offset, curvature)
    ("config", "right", "generator", "left", None, (0, 0), 0.0),
    ("generator", "right", "release", "left", None, (0, 0), -0.25),
    ("generator", "right", "sealed", "left", None, (0, 0), 0.25),
    ("release", "right", "agent", "left", "reads", (0, 1.0), 0.0),
    ("agent", "bottom", "oracle", "top", "requests\n(budget)", (-5.2, 0), 0.0, -3),
    ("oracle", "top", "agent", "bottom", "results\n(next turn)", (5.2, 0), 0.0, 3),
    ("sealed", "right", "oracle", "left", None, (0, 0), 0.0),
    ("agent", "right", "scorer", "top", "submission,\nphenotype", (6.0, 4.0), -0.3),
    ("oracle", "right", "scorer", "bottom", "ledger", (2.5, -2.5), 0.3),
]


def draw(path: Path, png: Path | None = None) -> None:
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "dtw-overview", "font.family": "DejaVu Sans"})
    fig = plt.figure(figsize=(9.6, 3.3))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 96)
    ax.set_ylim(-2, 32)
    ax.axis("off")
    for x, y, w, h, (fill, edge), title, lines in BOXES.values():
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=1", fc=fill, ec=edge, lw=1.4))
        ax.text(x + w / 2, y + h * 0.68, title, ha="center", va="center", fontsize=10.5, weight="bold")
        ax.text(x + w / 2, y + h * 0.32, "\n".join(lines), ha="center", va="center", fontsize=8.5, linespacing=1.3)
    for spec in ARROWS:
        src, s_side, dst, d_side, label, (dx, dy), curve = spec[:7]
        shift = spec[7] if len(spec) > 7 else 0.0
        a, b = anchor(src, s_side, shift), anchor(dst, d_side, shift)
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=12, lw=1.2, color="#444",
                                     connectionstyle=f"arc3,rad={curve}", shrinkA=1, shrinkB=1))
        if label:
            ax.text((a[0] + b[0]) / 2 + dx, (a[1] + b[1]) / 2 + dy, label, ha="center", va="center", fontsize=8.5,
                    color="#333")
    # the scorer reads the sealed truth too: a line under the oracle
    a, b = anchor("sealed", "bottom"), anchor("scorer", "bottom", 4)
    ax.plot([a[0], a[0], b[0]], [a[1], -1, -1], color="#444", lw=1.2)
    ax.add_patch(FancyArrowPatch((b[0], -1), b, arrowstyle="-|>", mutation_scale=12, lw=1.2, color="#444",
                                 shrinkA=0, shrinkB=1))
    ax.text((a[0] + b[0]) / 2 + 8, -0.2, "truth, latent L, evaluation mask", ha="center", va="bottom", fontsize=8.5,
            color="#333")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": None}, facecolor="white")
    if png is not None:
        fig.savefig(png, dpi=110, facecolor="white")
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--png", type=Path, help="also write a PNG here (to look at)")
    args = parser.parse_args()
    draw(OUT, args.png)
    print(f"wrote {OUT}")
