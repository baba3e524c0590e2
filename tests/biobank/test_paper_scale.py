"""Paper-scale acceptance (slow; outside the default run):

    python -m pytest -m slow tests/biobank/test_paper_scale.py

* every analyst-view mechanism check passes on all-biases at paper scale, each figure
  beside its threshold in the report, and fails on the negative-control world;
* the environment's baseline b lands in the paper's archetype range (+-0.03) on the
  heldout-*-01 worlds while the supervised non-omics phenotype reaches |r| >= 0.85.

Worlds are built under $DTW_PAPER_OUT (default: a pytest temporary folder).  A
paper-scale world with images is about 16 GB; after its checks the image folders are
removed (the validation report, with its plots, stays in sealed/validation/) unless
DTW_PAPER_KEEP=1.
"""
import os
import secrets

import pytest
import yaml

from worlds import build_world
from pipeline.validate import run

pytestmark = [pytest.mark.slow, pytest.mark.paper]  # hours: a documented command, not in CI

ANALYST_EXPECTED = [
    "drivers: cis-MR sign", "T1: association removed by BMI adjustment", "T2: strong association with a null instrument",
    "T3: collider shift among the imaged", "T4: one variant moves both members",
    "T7: the instrument moves disease", "T8: surrogate raises cardiac deaths", "T8: surrogate gives better imaging",
    "T9: one site on another affine scale", "T9: the unit mix makes the decoy look associated",
    "A9: weak baseline effect, strong late effect", "A9: partner tracks later disease",
]


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    path = os.environ.get("DTW_PAPER_OUT")
    if path:
        os.makedirs(path, exist_ok=True)
        return path
    return str(tmp_path_factory.mktemp("paper"))


def _write_report(world_dir, report):
    import shutil

    from pipeline.validate import print_table
    from pipeline.validation.report import write_html

    from pipeline.bundle import reports_dir

    folder = reports_dir(world_dir)  # sealed/validation: the report names the drivers
    os.makedirs(folder, exist_ok=True)
    write_html(report, os.path.join(folder, "validation.html"))
    with open(os.path.join(folder, "table.txt"), "w") as fh:
        print_table(report, fh)
    if not os.environ.get("DTW_PAPER_KEEP"):
        for folder in ("imaging", "imaging_visit2"):
            shutil.rmtree(os.path.join(world_dir, "release", folder), ignore_errors=True)


def test_analyst_view_at_paper_scale(out_dir):
    d = build_world(out_dir, world="all-biases", scale="paper", extra=("cluster=local",))
    report = run(d, ["calibration", "mechanisms", "imaging"])
    _write_report(d, report)
    analyst = [c for c in report["checks"] if c["level"] == "analyst"]
    for prefix in ANALYST_EXPECTED:
        hits = [c for c in analyst if c["name"].startswith(prefix)]
        assert hits, f"no analyst check {prefix!r}"
        for c in hits:
            assert not c["skipped"], f"{c['name']}: {c['detail']}"
            assert c["passed"], f"{c['name']}: measured {c['measured']} band [{c['lower']}, {c['upper']}] {c['detail']}"
    assert report["passed"], [c["name"] for c in report["checks"] if not c["passed"] and not c["skipped"]]


def test_analyst_checks_fail_without_their_mechanisms(out_dir):
    d = build_world(out_dir, world="negative-controls", scale="paper", extra=("cluster=local",))
    report = run(d, ["mechanisms", "imaging"])
    _write_report(d, report)
    for prefix in ANALYST_EXPECTED:
        hits = [c for c in report["checks"] if c["name"].startswith(prefix)]
        assert hits, prefix
        assert all(not c["passed"] and not c["skipped"] for c in hits), [(c["name"], c["detail"]) for c in hits]


@pytest.mark.parametrize("world", ["heldout-dcm-01", "heldout-hcm-01", "heldout-hfpef-01", "heldout-ischemic-01"])
def test_baseline_b_in_range_with_headroom(world, out_dir, tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(yaml.safe_dump({world: hex(secrets.randbits(128) | 1 << 127)}))
    d = build_world(out_dir, world=world, scale="paper", extra=("cluster=local", f"seeds={seeds}"))
    report = run(d, ["imaging"])
    _write_report(d, report)
    by = {c["name"]: c for c in report["checks"]}
    b = [c for n, c in by.items() if n.startswith("baseline b over all imaged")][0]
    assert b["passed"], b
    ceil = by["supervised non-omics phenotype |r| (imaged: images + ECG + CT + EHR + outcomes)"]
    assert ceil["measured"] >= 0.85, ceil
    for c in report["checks"]:
        # T1 and area-emptying trace figures of T3 worlds are reported, not checked
        # (selection on L moves the imaged cohort's T1 and EF by design): the report
        # marks them skipped.
        if (c["name"].startswith("trace figure") or c["name"].startswith("measurability")) and not c["skipped"]:
            assert c["passed"], c
