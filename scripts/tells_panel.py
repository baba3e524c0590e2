"""The tell scan of a whole panel, built without pixels: the figures of the
"Benchmark validity" page (docs/validity.md).

    python scripts/tells_panel.py [--scale tiny|small] [--out DIR] [--panel paper-v1] [--seeds FILE]
        [--development] [--jobs 2] [--reuse]

Builds every world of the panel into ``<out>/<world>`` with ``release=noimaging``
(participants are still selected and flagged; the scan needs no pixels, and the
surrogate check reads the sealed imaging traits), then runs ``python -m
pipeline.audit --tells <out>`` and prints its report; the JSON goes to
``<out>/tells.json`` and per-world analyses are cached in ``<out>/.tells-cache``
(reused while a world and the scan's code are unchanged).  Held-out worlds need seeds: ``--seeds`` names a sealed
seed file; without it, fixed test seeds derived from the world id are written to
``<out>/test-seeds.yaml`` (the same derivation as ``tests/biobank/test_panel.py``; they
are not the benchmark's sealed seeds); ``--development`` builds only the panel's
development worlds (no held-out world, no seeds needed).  Exit status 1 when the
scan finds a tell.
"""
from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.panel import panel_worlds, run  # noqa: E402


def test_seed(world: str) -> str:
    return hex(int(hashlib.sha256(f"test-panel/{world}".encode()).hexdigest()[:32], 16) | 1 << 127)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--out", default=None, help="default ./worlds-tells/<scale>")
    ap.add_argument("--panel", default="paper-v1")
    ap.add_argument("--seeds", help="sealed seed file for held-out worlds (default: fixed test seeds)")
    ap.add_argument("--development", action="store_true", help="only the panel's development worlds (not held-out)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reuse", action="store_true", help="scan the worlds already under --out without rebuilding")
    args = ap.parse_args(argv)
    out = Path(args.out or f"worlds-tells/{args.scale}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds
    if seeds is None:
        seeds = str(out / "test-seeds.yaml")
        held = [w for w in panel_worlds(args.panel) if w.startswith("heldout")]
        Path(seeds).write_text(yaml.safe_dump({w: test_seed(w) for w in held}))
    t0 = time.monotonic()
    if not args.reuse:
        only = ([f"panel.worlds=[{','.join(w for w in panel_worlds(args.panel) if not w.startswith('heldout'))}]"]
                if args.development else [])
        rows = run(args.panel, [f"scale={args.scale}", f"out={out}", f"seeds={seeds}", "release=noimaging",
                                "cluster.progress=false", *only], jobs=args.jobs)
        incomplete = [r for r in rows if not r.get("complete")]
        if incomplete:
            print(f"{len(incomplete)} world(s) incomplete: {incomplete}")
            return 2
    built = time.monotonic() - t0
    print(f"panel {args.panel} at scale {args.scale} without pixels: built in {built:.0f} s")
    t1 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pipeline.audit", "--tells", str(out), "--jobs", str(args.jobs),
                           "--json-out", str(out / "tells.json"), "--cache", str(out / ".tells-cache")], cwd=REPO)
    print(f"scanned in {time.monotonic() - t1:.0f} s")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
