"""scripts/replicate_cohorts.py: fresh cohorts of a world's unchanged hidden model tell a
path of the model (a driver's cis variant: its z on L stays far from 0 in every cohort)
from a sampling extreme (a variant nothing ties to L: a replicate mean near 0)."""
from __future__ import annotations

import sys
from pathlib import Path

from worlds import build_world
from pipeline import bundle

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from replicate_cohorts import replicate_z  # noqa: E402


def test_replicates_separate_a_path_from_no_path(tmp_path):
    wdir = Path(build_world(tmp_path, "standard-01", extra=("release=noimaging",)))
    truth = bundle.read_sealed(str(wdir / bundle.SEALED), bundle.TRUTH)
    hidden = bundle.read_sealed(str(wdir / bundle.SEALED), bundle.HIDDEN_MODEL)
    movers = {m["variant"] for m in hidden["movers"]}
    strongest = max((m for m in hidden["movers"] if m["kind"] == "driver_cis"), key=lambda m: m["beta_l"])
    cis = hidden["protein_cis_variant"]
    drivers = {d["protein"] for d in truth["drivers"]}
    assert strongest["protein"] in drivers
    unlinked = next(v for v in cis if v and v not in movers)
    text = (wdir / bundle.SEALED / "world.yaml").read_text()
    res = replicate_z(text, [strongest["variant"], unlinked], 4, str(tmp_path))
    zl, se, _, _ = res[strongest["variant"]]
    assert abs(zl) > max(3.0, 3 * se), res  # the path shows in every fresh cohort
    zl0, se0, _, _ = res[unlinked]
    assert abs(zl0) < 4 * max(se0, 0.5), res  # no path: replicate mean within sampling of 0
