"""The analyst reference agent: its MRI segmentation, its honesty about the hidden
model, and full episodes through the real harness."""
from __future__ import annotations

import io
import json
import tokenize
from pathlib import Path

import numpy as np
import pytest

from pipeline.agents import REGISTRY, create_agent
from pipeline.agents.analyst import LIB_DIR
from pipeline.agents.analyst.lib import imaging
from pipeline.harness import BUDGETS, run_episode

AGENT_DIR = LIB_DIR.parent

# Coefficients of the hidden model (Supplement S1.2-S1.5 and the SPEC's parameter table)
# that an honest agent has no way to know: none may appear as a number in its code.
HIDDEN_CONSTANTS = (
    2.2, 1.1,            # T9 affine scale
    0.55, 0.14,          # T1 BMI loading / T3 selection, T7 direct effect
    0.22, 0.12,          # T6 remodelling
    0.45, 1.9, 1.645,    # oracle readouts and clamp
    0.006, 0.0225,       # cardiac base hazard, cell noise floor
    0.35, 1.15, 1.45,    # late driver term, A9 late ratio
    0.7, 0.4, 0.15,      # hazard on L, T8 hazard, BMI term in L
    1.6, 0.8, 0.75,      # saturation, protein residual, late carry
    1.35, 0.24, 0.52,    # T3 selection score
)


def _numbers(path: Path) -> set:
    """Every numeric literal in the file's code (docstrings and comments excluded)."""
    out = set()
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.NUMBER:
            try:
                out.add(float(tok.string.replace("_", "")))
            except ValueError:
                pass
    return out


def test_no_hidden_model_constant_in_the_agents_code():
    files = sorted(AGENT_DIR.rglob("*.py"))
    assert len(files) >= 5
    found = {}
    for path in files:
        hits = sorted(c for c in HIDDEN_CONSTANTS if any(abs(c - v) < 1e-12 for v in _numbers(path)))
        if hits:
            found[str(path.relative_to(AGENT_DIR))] = hits
    assert not found, f"hidden-model coefficients in the agent's code: {found}"


def test_the_agent_never_names_the_sealed_side():
    for path in sorted(AGENT_DIR.rglob("*.py")):
        text = path.read_text()
        for word in ("sealed", "truth.json", "latent.parquet", "oracle.json", "hidden_", "eval_mask",
                     "imaging_features"):
            code = "\n".join(line for line in text.splitlines() if not line.strip().startswith("#"))
            assert word not in code.replace('"""', ""), f"{path.name} mentions {word}"


def test_segmentation_recovers_cavity_wall_and_t1_on_rendered_phantoms():
    from pipeline.imaging.render import example_traits, render_subjects
    from pipeline.imaging.site_fields import sample_site_fields
    from pipeline.imaging.templates import DEFAULT_TEMPLATE as T

    rng = np.random.default_rng(7)
    traits = example_traits(rng, 12, n_sites=3)
    # A strong site field (three times the worlds' amplitude) must not move the measurements.
    cine, t1 = render_subjects(traits, sample_site_fields(np.random.default_rng(8), 3, amplitude=0.36))
    rows = [imaging.measure_subject(cine[i], t1[i]) for i in range(len(cine))]
    cavity = np.array([r["mid_cav_ed"] for r in rows])
    expected = T.cavity_area_ref_px * (traits["lv_edv_ml"] / T.edv_ref_ml) ** (2 / 3)
    assert np.all(np.abs(cavity / expected - 1) < 0.05), cavity / expected
    wall = np.array([r["mid_wall_ed"] for r in rows])
    assert np.all(np.abs(wall - traits["lv_wall_mm"]) < 1.0), wall - traits["lv_wall_mm"]
    t1_median = np.array([r["mid_t1_median"] for r in rows])
    # The rendered texture (smooth, tens of ms) moves a slice's median a little off the level.
    assert np.all(np.abs(t1_median / traits["t1_ms"] - 1) < 0.1)
    assert np.corrcoef(t1_median, traits["t1_ms"])[0, 1] > 0.9
    # Systolic emptying follows the volumes (Spearman: the template maps ESV/EDV monotonically).
    from scipy.stats import spearmanr

    ratio = np.array([r["stack_es"] / r["stack_ed"] for r in rows])
    assert spearmanr(ratio, traits["lv_esv_ml"] / traits["lv_edv_ml"]).correlation > 0.8


def test_registered_as_a_reference_agent():
    spec = REGISTRY["analyst"]
    assert spec.reference and not spec.privileged
    agent = create_agent("analyst")
    assert agent.name == "analyst"


def _check_episode(result: dict, budget: int) -> Path:
    summary = result["episode"]
    assert summary["exit_reason"] == "submitted", summary
    assert result["safety_penalty"] == 0.0
    assert summary["spent"] <= budget
    assert result["details"]["phenotype_construction"]["status"] == "scored"
    work = Path(summary["episode_dir"]) / "work"
    assert (work / "evidence.csv").exists() and (work / "report.md").exists()
    header = (work / "evidence.csv").read_text().splitlines()[0]
    for column in ("MR estimate", "MR SE", "instrument F", "decision", "why", "experiment"):
        assert column in header
    transcript = json.loads(Path(summary["transcript"]).read_text())
    assert "submission:" in json.dumps(transcript)  # the evidence and the claims are shown, not only saved
    return work


def test_full_tiny_episode_with_pixels(tiny_world, tmp_path):
    """Segments the scans itself, buys experiments and reports, inside the sandbox."""
    budget = BUDGETS[-1]
    result = run_episode(tiny_world, create_agent("analyst"), budget=budget, agent_name="analyst",
                         out=tmp_path / "analyst", timeout=150)
    work = _check_episode(result, budget)
    assert len(list((work / "analyst").glob("img_*.parquet"))) >= 1
    assert result["details"]["phenotype_construction"]["r"] > 0.5


@pytest.mark.parametrize("budget", BUDGETS[:-1])
def test_tiny_episodes_without_pixels(tiny_world_noimaging, tmp_path, budget):
    result = run_episode(tiny_world_noimaging, create_agent("analyst"), budget=budget, agent_name="analyst",
                         out=tmp_path / f"analyst-{budget}", timeout=150)
    _check_episode(result, budget)
    if budget == 0:
        assert result["episode"]["spent"] == 0


def _claims_of(result: dict, findings: dict) -> dict:
    import pandas as pd

    from pipeline.agents.analyst.lib import claims

    return claims.claims_from(result, pd.DataFrame(index=sorted(result["verdict"])), findings)


def _delayed_world() -> dict:
    verdict = {
        "D": {"label": "delayed_candidate", "reason": "forward", "direction": "inhibit"},
        "M": {"label": "late_marker", "reason": "runs ahead"},
        "R": {"label": "reverse_causation", "reason": "follows disease"},
    }
    pair = {"kind": "delayed", "members": ["D", "M", "R"], "candidates": ["D"], "guess": ["M"]}
    return {"verdict": verdict, "pairs": [pair]}


def test_delayed_set_claims_follow_the_evidence():
    """Abstain on candidates and possible markers while untested; a knockdown decides;
    followers beyond the best guess keep their own verdicts; no conviction by elimination."""
    result = _delayed_world()
    untested = _claims_of(result, {})
    assert untested["abstentions"][0]["molecules"] == ["D", "M", "R"]
    assert untested["nominated"] == [] and [r["molecule"] for r in untested["rejected"]] == ["R"]

    hit = {"D": {"kind": "knockdown", "effect": True, "direction": "inhibit", "alignment": "aligned"}}
    claims = _claims_of(result, hit)
    assert claims["nominated"] == ["D"] and claims["directions"]["D"] == "inhibit" and not claims["abstentions"]
    assert [r["molecule"] for r in claims["rejected"]] == ["R"]

    null = {"D": {"kind": "knockdown", "effect": False, "direction": "inhibit", "alignment": "unknown"}}
    claims = _claims_of(result, null)
    assert claims["nominated"] == [] and not claims["abstentions"]


def test_delayed_candidates_alone_are_knocked_down():
    from pipeline.agents.analyst.lib import experiments

    costs = {"cell_perturbation": 150000, "knockdown": 400000}
    plan = experiments.next_requests(_delayed_world(), {}, [], 450000, costs)
    assert plan == [("knockdown", "D")]
    assert experiments.next_requests(_delayed_world(), {}, [], 300000, costs) == []


def _linked_locus(n: int, seed: int, causal_protein: bool):
    """Twenty biallelic variants along a chromosome (thresholded AR(1) latent haplotypes):
    the protein's cis variant (column 8) in weak LD with a disease variant (column 12)."""
    rng = np.random.default_rng(seed)
    haps = []
    for _ in range(2):
        z = np.empty((n, 20))
        z[:, 0] = rng.standard_normal(n)
        for j in range(1, 20):
            rho = 0.55 if j == 12 else 0.9
            z[:, j] = rho * z[:, j - 1] + np.sqrt(1 - rho * rho) * rng.standard_normal(n)
        haps.append(z < -0.5)
    G = (haps[0].astype(np.int8) + haps[1].astype(np.int8))
    g = (G - G.mean(0)) / G.std(0)
    protein = 0.3 * g[:, 8] + rng.standard_normal(n)
    disease = 0.3 * protein if causal_protein else 0.15 * g[:, 12]
    y = disease + rng.standard_normal(n)
    return G, np.ones((n, 1)), protein, y


def test_colocalisation_tells_a_borrowed_mr_signal_from_the_proteins_own():
    """A protein whose cis variant is in weak LD with a variant that moves disease gets a
    significant MR estimate at scale; conditional analysis at the locus shows the signal is
    the neighbour's.  A protein that causes disease keeps its signal given any neighbour."""
    from pipeline.agents.analyst.lib import evidence

    G, D, p, y = _linked_locus(40000, 1, causal_protein=False)
    r_lead = np.corrcoef(G[:, 8], y)[0, 1]
    assert abs(r_lead) * np.sqrt(len(y)) > 4  # the naive MR signal is there
    peak, z_lead, z_peak, z_peak_p = evidence.neighbour_signal(y, G, D, p, 8, width=10)
    assert peak == 12 and abs(z_peak) > 10 and abs(z_lead) < 3 and abs(z_peak_p) < 3

    G, D, p, y = _linked_locus(40000, 2, causal_protein=True)
    found = evidence.neighbour_signal(y, G, D, p, 8, width=10)
    assert found is None or abs(found[1]) > 10


def _genetic_table():
    """A proteome of unremarkable proteins with four MR-significant ones: an instrument
    borrowing a neighbour's disease signal, a pleiotropic one, a driver whose direct-effect
    test is slightly biased (significant at scale, a small share of the effect) and a
    clean driver."""
    import pandas as pd

    names = [f"P{i:02d}" for i in range(40)]
    t = pd.DataFrame(0.0, index=names, columns=[
        "F", "r_obs", "mr", "mr_se", "mr_z", "mr_p", "mr_event_z", "z_direct", "direct_share", "z_obs_vs_mr",
        "z_reverse_mr", "z_obs", "z_crude", "z_crude_adj", "z_event", "z_event_adj", "z_imaging", "z_nonimaging",
        "z_participation", "z_site", "z_site_rest", "z_forward_comb", "z_hf_beyond", "z_early_event_beyond",
        "z_nonimaging_e", "z_obs_e", "z_change_e", "z_lead_given_peak", "z_peak_given_lead", "z_peak_on_protein"])
    t["F"], t["mr_p"], t["mr_se"] = 100.0, 1.0, 0.02
    t[["z_lead_given_peak", "z_peak_given_lead", "z_peak_on_protein"]] = np.nan
    for col in ("mr_sig", "z_obs_flag", "z_participation_flag"):
        t[col] = False
    t["lead_id"], t["locus_members"], t["coloc_peak"] = [f"rs{i}" for i in range(40)], "", ""
    rows = {
        "P00": dict(mr=0.2, mr_z=5.0, z_direct=5.0, direct_share=0.9, z_obs_vs_mr=-5.0, coloc_peak="rs99",
                    z_lead_given_peak=0.3, z_peak_given_lead=25.0, z_peak_on_protein=0.1),
        "P01": dict(mr=0.2, mr_z=9.0, z_direct=8.0, direct_share=0.95, z_obs_vs_mr=-7.0),
        "P02": dict(mr=-0.3, mr_z=-30.0, z_direct=-4.5, direct_share=0.16, z_obs_vs_mr=3.5, mr_event_z=-13.0,
                    r_obs=-0.26),
        "P03": dict(mr=0.3, mr_z=20.0, z_direct=0.5, direct_share=0.02, z_obs_vs_mr=0.3, mr_event_z=9.0, r_obs=0.3),
    }
    for prot, values in rows.items():
        t.loc[prot, "mr_sig"] = True
        for col, value in values.items():
            t.at[prot, col] = value
    return t


def test_genetic_verdicts_borrowed_pleiotropic_and_biased_drivers():
    from pipeline.agents.analyst.lib import claims, verdicts

    verdict = verdicts.classify(_genetic_table(), {"z_screen": 3.5})["verdict"]
    assert verdict["P00"]["label"] == "ld_neighbour"
    assert verdict["P01"]["label"] == "pleiotropy"
    assert verdict["P02"]["label"] == "driver" and verdict["P02"]["direction"] == "activate"
    assert "16%" in verdict["P02"]["reason"]
    assert verdict["P03"]["label"] == "driver" and verdict["P03"]["direction"] == "inhibit"
    submission = claims.claims_from({"verdict": verdict, "pairs": []}, _genetic_table(), {})
    assert sorted(submission["nominated"]) == ["P02", "P03"]
    assert [r["molecule"] for r in submission["rejected"]] == ["P01"]
    # A knockdown without effect refutes a driver; how its instrument moved disease is not
    # established, so it is neither nominated nor rejected with a guessed mechanism.
    null = {"P03": {"kind": "knockdown", "effect": False, "direction": "inhibit", "alignment": "unknown"}}
    submission = claims.claims_from({"verdict": verdict, "pairs": []}, _genetic_table(), null)
    assert submission["nominated"] == ["P02"] and [r["molecule"] for r in submission["rejected"]] == ["P01"]


def test_weak_forward_evidence_is_tested_with_budget_left_and_claimed_only_on_an_effect():
    """Forward evidence under the proteome-wide bar makes no claim; with budget left after
    the planned experiments such proteins are knocked down, strongest first, and one whose
    knockdown moves disease is nominated (a null knockdown leaves it unclaimed)."""
    from pipeline.agents.analyst.lib import claims, experiments, verdicts

    table = _genetic_table()
    forward = {"P10": (2.6, 1.0, 0.4), "P11": (-2.2, -1.0, 0.1), "P12": (3.0, 1.0, 3.5), "P13": (5.0, 2.0, 0.2),
               "P14": (2.4, -1.0, 0.0)}
    for prot, (z_fwd, z_hf, z_early) in forward.items():
        table.loc[prot, ["z_forward_comb", "z_hf_beyond", "z_early_event_beyond"]] = z_fwd, z_hf, z_early
    result = verdicts.classify(table, {"z_screen": 3.5})
    verdict = result["verdict"]
    assert verdict["P13"]["label"] == "delayed_candidate"  # over the proteome-wide bar
    assert [q for q, v in verdict.items() if v["label"] == "forward_nominal"] == ["P10", "P11"]
    # P12: early events in excess (a harmful marker's profile); P14: later disease falls short.
    assert "P12" not in verdict and "P14" not in verdict
    costs = {"cell_perturbation": 150000, "knockdown": 400000}
    plan = experiments.next_requests(result, {}, [], 2_000_000, costs)
    # The delayed set, the strongest weak forward signal, the drivers (weakest MR first), the rest.
    assert plan == [("knockdown", q) for q in ("P13", "P10", "P03", "P02", "P11")]
    assert experiments.next_requests(result, {}, [], 800_000, costs) == [("knockdown", "P13"), ("knockdown", "P10")]

    untested = claims.claims_from(result, table, {})
    assert not {"P10", "P11"} & (set(untested["nominated"]) | {r["molecule"] for r in untested["rejected"]})
    findings = {"P10": {"kind": "knockdown", "effect": True, "direction": "activate", "alignment": "aligned",
                        "cavity_r": 0.9},
                "P11": {"kind": "knockdown", "effect": False, "direction": "inhibit", "alignment": "unknown",
                        "cavity_r": 0.0},
                "P03": {"kind": "knockdown", "effect": True, "direction": "inhibit", "alignment": "aligned",
                        "cavity_r": -1.1}}
    tested = claims.claims_from(result, table, findings)
    assert "P10" in tested["nominated"] and tested["directions"]["P10"] == "activate"
    assert "P11" not in tested["nominated"] and "P11" not in {r["molecule"] for r in tested["rejected"]}
    # A small change beside the episode's effects (a reagent's off-target action) is no cause.
    findings["P10"]["cavity_r"] = 0.06
    assert "P10" not in claims.claims_from(result, table, findings)["nominated"]
