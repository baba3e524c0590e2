"""Planted mechanisms: fidelity at small scale for three seeds, every negative
control failing, and the hard, hard-messy and null worlds building and validating.
The analyst-view checks at paper scale are in test_paper_scale.py (marked slow)."""
import pytest

from worlds import build_worlds
from pipeline.validate import run

SEEDS = ["0x9e3d1a7c55b24f0e8a61c3f7d9b20e4b", "0xc0ffee1234567890abcdef0123456789", "0x8badf00d8badf00d8badf00d8badf00d"]
# The primary check of each mechanism: each must fail when its mechanism is switched off.
PRIMARY = {
    "drivers": "|weight| in L with the truth's sign",
    "T1": "T1: decoy loading on z(BMI)",
    "T2": "T2: decoy loading on L",
    "T3": "T3: selection-score coefficient on L",
    "T3b": "T3: selection-score coefficient on P_sel",
    "T4": "T4: partner and driver share one cis variant",
    "T4a": "T4: one variant moves both members",
    "T6": "T6: exercise loading on z(EDV)",
    "T6b": "T6: exercise loading on z(ESV)",
    "T7": "T7: decoy's instrument has a direct path to L",
    "T8": "T8: surrogate's imaging effect against disease",
    "T8b": "T8: cardiac log-hazard coefficient on P_T8",
    "T9": "T9: scale of the decoy at the unit-mixing site",
    "T9a": "T9: one site on another affine scale",
    "A9": "A9: |w_late| / max other |w|",
    "A9b": "A9: |w_base| / |w_late|",
    "A9c": "A9: partner tracks later disease (loading on L_late)",
}


@pytest.fixture(scope="module")
def small_built(tmp_path_factory, local_cluster):
    """The three seeds and the negative controls at small scale, built concurrently on
    the session's cluster: {"seeds": [folder, ...], "negative": folder}."""
    specs = [(tmp_path_factory.mktemp(f"seed{i}"), "all-biases", "small",
              ("release=noimaging", f"world.seed={seed}", f"world.id=all-biases-s{i}")) for i, seed in enumerate(SEEDS)]
    specs.append((tmp_path_factory.mktemp("neg"), "negative-controls", "small", ("release=noimaging",)))
    *seeds, negative = build_worlds(specs, local_cluster)
    return {"seeds": seeds, "negative": negative}


@pytest.fixture(scope="module")
def small_worlds(small_built):
    return [run(d, ["calibration", "mechanisms"]) for d in small_built["seeds"]]


def test_fidelity_passes_for_three_seeds(small_worlds):
    for report in small_worlds:
        fid = [c for c in report["checks"] if c["level"] == "fidelity"]
        assert len(fid) >= 35
        bad = [(c["name"], c["measured"], c["lower"], c["upper"]) for c in fid if not c["passed"]]
        assert not bad, f"{report['world_id']}: {bad}"


def test_validate_passes_on_small_worlds(small_worlds):
    for report in small_worlds:
        bad = [c["name"] for c in report["checks"] if not c["passed"] and not c["skipped"]]
        assert report["passed"], f"{report['world_id']}: {bad}"


def test_every_negative_control_fails(small_built):
    report = run(small_built["negative"], ["mechanisms"])
    by_name = {c["name"]: c for c in report["checks"]}
    for key, prefix in PRIMARY.items():
        matches = [c for n, c in by_name.items() if prefix in n]
        assert matches, f"no check named like {prefix!r}"
        for c in matches:
            assert not c["passed"] and not c["skipped"], f"{key}: {c['name']} did not fail with its mechanism off"


@pytest.mark.parametrize("world", ["hard-01", "hard-messy-01", "null-01"])
def test_hard_messy_and_null_worlds_build_and_validate(world, tiny_built):
    d = tiny_built(world)
    report = run(d, ["calibration", "mechanisms"])
    bad = [(c["name"], c["measured"], c["lower"], c["upper"]) for c in report["checks"] if not c["passed"] and not c["skipped"]]
    assert report["passed"], bad
    names = " ".join(c["name"] for c in report["checks"])
    if world.startswith("hard"):
        assert "hard: driver interaction" in names and "hard: polygenic background" in names
    if world == "null-01":
        assert "driver" not in names.replace("drivers", "")
