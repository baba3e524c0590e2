"""The instrument check (issue 29): ``python -m pipeline.audit --instruments`` finds each
protein's lead instrument from the release and tests it against the sealed L and L_late.

Two tiny worlds (300 proteins, 1,024 variants) with 30,000 participants, so that a leak of
the size the pre-issue-29 generator allowed is visible as it is at paper scale: one built
with ``world.test_leaks=[trans_hubs,weak_ld]`` (a driver on a master-regulator hub that
ordinary proteins with weaker cis instruments take as their lead, and an ordinary protein
whose cis variant is in LD with the strongest driver's at r^2 just under 0.05, the old
rule's bound), and its clean twin.  The check must catch both traps, name what ties each
to L, and find nothing in the twin.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from worlds import build_world
from pipeline.audit import instruments

REPO = Path(__file__).resolve().parents[2]
N = "scale.participants=30000"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("instruments")
    leaky = build_world(root / "leaky", "standard-01", extra=(N, "release=noimaging", "world.test_leaks=[trans_hubs,weak_ld]"))
    clean = build_world(root / "clean", "standard-01", extra=(N, "release=noimaging"))
    return leaky, clean


def test_catches_the_trans_hub_and_weak_ld_traps(pair):
    leaky, _ = pair
    res = instruments.analyse_world(leaky)
    ties = [f["tie"] for f in res["findings"]]
    assert res["findings"] and all(not f["exempt"] for f in res["findings"])
    hub = [t for t in ties if t.startswith("trans variant of driver") and "hub shared by" in t]
    ld = [t for t in ties if t.startswith("LD with driver cis")]
    assert len(hub) >= 2, ties  # the forced weak-cis members of the driver's hub take it as their lead
    assert len(ld) == 1 and "model r2 0.05" in ld[0], ties
    # every finding is over the Bonferroni bar of the world's instrumented proteins
    assert all(max(abs(f["z_l"]), abs(f["z_l_late"])) > res["bar"] for f in res["findings"])
    assert res["bar"] == pytest.approx(float(__import__("scipy.stats").stats.norm.isf(0.05 / (2 * res["instrumented"]))), abs=1e-3)


def test_finds_nothing_in_the_clean_twin_and_the_pool_is_null(pair):
    _, clean = pair
    report = instruments.run([clean])
    assert report["passed"], report["findings"]
    w = report["worlds"][0]
    assert w["instrumented"] >= 290 and w["max_expected_z_ordinary"] < 1.0
    # the exempt instruments (the drivers', the T4 partner's) are over the bar and named
    exempt = [r for r in w["over_bar"] if r["exempt"]]
    assert exempt and all(r["tie"].startswith("cis variant of driver") for r in exempt if r["kind"] != "T7")
    pool = report["pooled"]
    assert pool["k"] >= 280 and pool["passed"] and pool["beyond_3"] <= 6


def test_pooled_test_catches_a_common_small_leak():
    """Ordinary |z| from N(0.6, 1) in every world (a leak too weak for the per-protein bar
    but common) fails the pooled test; N(0, 1) passes it."""
    rng = np.random.default_rng(3)
    null = [{"ordinary_z": list(rng.standard_normal(2900))} for _ in range(3)]
    leak = [{"ordinary_z": list(rng.standard_normal(2900) + 0.6)} for _ in range(3)]
    assert instruments.pooled(null, 0.05)["passed"]
    assert not instruments.pooled(leak, 0.05)["passed"]


def test_a_reversed_trap_is_exempt_only_through_a_variant_that_moves_l():
    """The T2 decoy and the A9 partner are consequences of L in the hidden model, so a lead
    that is a driver's variant reaches them through their planted reverse path (paper scale:
    an A9 partner whose own cis instrument is weak takes the T4 driver's variant, z_L -63.7);
    any other tie stays a finding, and an ordinary protein is never exempt by its tie."""
    row = lambda kind, tie: {"protein": "P", "kind": kind, "variant": "rs1", "F": 50.0, "z_l": 9.0,  # noqa: E731
                             "z_l_late": 9.0, "tie": tie}
    judged = instruments.judge([row("a9_partner", "cis variant of driver PROT_1078"),
                                row("T2", "trans variant of driver PROT_0002 (private)"),
                                row("a9_partner", "none (its own cis variant; expected z 0.01)"),
                                row("T2", "LD with driver cis PROT_0003 rs2 (model r2 0.01, 5 kb; expected z 2.0)"),
                                row("ordinary", "cis variant of driver PROT_1078"),
                                row("T1", "cis variant of driver PROT_1078"),
                                row("t4_partner", "cis variant of driver PROT_1078")])
    assert [r["exempt"] for r in judged] == [True, True, False, False, False, False, True]
    assert "reverse path" in judged[0]["exempt_why"]


def test_cli_exit_codes(pair):
    leaky, clean = pair
    run = lambda *a: subprocess.run([sys.executable, "-m", "pipeline.audit", "--instruments", *a],  # noqa: E731
                                    capture_output=True, text=True, cwd=REPO, timeout=600)
    bad = run(leaky)
    assert bad.returncode == 1 and "FINDING" in bad.stdout and "FAILED" in bad.stdout
    good = run(clean, "--json-out", str(Path(clean).parent / "inst.json"))
    assert good.returncode == 0 and "PASSED" in good.stdout and (Path(clean).parent / "inst.json").exists()
    assert run(str(Path(clean).parent / "nothing-here")).returncode == 2
