"""The experiment oracle (Supplement S1.5), its payload schema, the ledger and the CLI.

The equations are checked against ``reference``, a per-subject loop written from
S1.5's text and the draw protocol in pipeline/oracle.py's docstring, sharing no
code with the oracle beyond the named random streams.
"""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from pipeline import oracle
from pipeline.oracle import Ledger, OracleError, load_oracle, read_ledger, run_experiment
from pipeline.seeds import stream

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT_SCHEMA = json.loads((REPO / "schemas" / "experiment.schema.json").read_text())
ORACLE_SCHEMA = json.loads((REPO / "schemas" / "oracle.schema.json").read_text())

KEY = "0x8c1f5e0b3a7d29e4f6c1085b2d9e7a3f"
PROTEINS = [f"PROT_{i:04d}" for i in range(300)]
NEG = "PROT_0160"  # driver, weight -0.38 (the trace's PROT_1606 analogue)
POS = "PROT_0070"  # driver, weight +0.41
SUR = "PROT_0085"  # T8 surrogate
NULLS = ["PROT_0001", "PROT_0123", "PROT_0299"]


def world(**over) -> dict:
    d = {
        "format_version": "1",
        "world_id": "standard-01",
        "oracle_key": KEY,
        "hard": False,
        "latent_residual_sd": 0.55,
        "morphology_residual_sd": 0.35,
        "saturation": 1.6,
        "interaction": None,
        "drivers": [
            {"protein": NEG, "index": 160, "weight": -0.38, "weight_late": -0.38},
            {"protein": POS, "index": 70, "weight": 0.41, "weight_late": 0.41},
        ],
        "surrogate": {"protein": SUR, "index": 85},
        "proteins": PROTEINS,
        "costs": {"cell_perturbation": 150000, "knockdown": 400000},
        "n": {"cell_perturbation": 120, "knockdown": 800},
        "paper_compat": False,
        "realism": False,
    }
    d.update(over)
    return d


def hard_world(coef=None, **over) -> dict:
    d = world(hard=True, latent_residual_sd=0.70, **over)
    if coef is None:
        coef = 0.5 * min(0.38, 0.41)
    d["interaction"] = {"a": NEG, "b": POS, "coef": coef}
    return d


def write(tmp_path: Path, d: dict, name: str = "sealed") -> Path:
    sealed = tmp_path / name
    sealed.mkdir(parents=True, exist_ok=True)
    (sealed / "oracle.json").write_text(json.dumps(d))
    return sealed


def spec_of(tmp_path: Path, d: dict):
    return load_oracle(write(tmp_path, d, f"sealed-{abs(hash(json.dumps(d, sort_keys=True)))}"))


def reference(d: dict, kind: str, protein: str, *, paper_compat: bool = False, realism: bool = False) -> dict:
    key = int(d["oracle_key"], 16)
    q = d["proteins"].index(protein)
    n = d["n"][kind]
    g = stream(key, "oracle/" + kind, q)
    r = g.standard_normal(n).tolist()
    e = g.standard_normal(n).tolist()
    z = g.standard_normal(n).tolist()
    model = [dr["protein"] for dr in d["drivers"]]
    inter = d["interaction"] if d["hard"] else None
    if inter:
        model += [p for p in (inter["a"], inter["b"]) if p not in model]
    V = g.standard_normal((n, len(model))).tolist()
    wkey = "weight" if kind == "cell_perturbation" else "weight_late"
    s = d["saturation"]
    sur = d["surrogate"]["protein"] if d["surrogate"] else None
    off = 0.0
    if realism:
        off = 0.03 * float(stream(key, "oracle/off_target", q).standard_normal())

    sums = {"ctrl": {k: [] for k in oracle.READOUTS}, "int": {k: [] for k in oracle.READOUTS}}
    for i in range(n):
        for arm in ("ctrl", "int"):
            value = dict(zip(model, V[i]))
            if protein in value:
                value[protein] = z[i] if arm == "ctrl" else -1.645
            L = d["latent_residual_sd"] * r[i]
            for dr in d["drivers"]:
                p = value[dr["protein"]]
                L += dr[wkey] * (s * math.tanh(p / s) if d["hard"] else p)
            if inter:
                L += inter["coef"] * value[inter["a"]] * value[inter["b"]]
            if arm == "int":
                L += off
            b = 0.0
            if protein == sur:
                b = z[i] if arm == "ctrl" else -1.645
            ei = d["morphology_residual_sd"] * e[i]
            sums[arm]["cavity_r"].append(10 + 1.9 * L - 0.45 * b + ei)
            sums[arm]["wall_t"].append(4.6 - 0.55 * L + 0.12 * b + 0.5 * ei)
            sums[arm]["ef"].append(min(max(0.62 - 0.09 * L + 0.025 * b + 0.08 * ei, 0.20), 0.78))
            sums[arm]["surv5y"].append(math.exp(-5 * 0.006 * math.exp(0.70 * L + 0.40 * b)))
    delta = {k: round(math.fsum(sums["int"][k]) / n - math.fsum(sums["ctrl"][k]) / n, 4) for k in oracle.READOUTS}
    if kind == "cell_perturbation":
        u = g.standard_normal(4).tolist()
        delta = {k: round(delta[k] + (0.45 * abs(delta[k]) + 0.0225) * u[j], 4) for j, k in enumerate(oracle.READOUTS)}
        if not paper_compat:
            delta["surv5y"] = None
    elif realism:
        u = stream(key, "oracle/assay/knockdown", q).standard_normal(4).tolist()
        floor = {"cavity_r": 0.02, "wall_t": 0.006, "ef": 0.001, "surv5y": 0.0003}
        delta = {k: round(delta[k] + (0.05 * abs(delta[k]) + floor[k]) * u[j], 4) for j, k in enumerate(oracle.READOUTS)}
    return delta


def assert_close(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k in want:
        if want[k] is None:
            assert got[k] is None, k
        else:
            # One unit in the 4th decimal: np.mean's pairwise sums and math.fsum may round a tie differently.
            assert got[k] == pytest.approx(want[k], abs=1.01e-4), (k, got[k], want[k])


def valid_payload(payload: dict) -> None:
    jsonschema.Draft202012Validator(EXPERIMENT_SCHEMA).validate(payload)


# --------------------------------------------------------------------------- equations


@pytest.mark.parametrize("protein", [NEG, POS, SUR, NULLS[0]])
@pytest.mark.parametrize("kind", ["knockdown", "cell_perturbation"])
def test_matches_loop_reference(tmp_path, kind, protein):
    d = world()
    payload = run_experiment(spec_of(tmp_path, d), kind, protein)
    valid_payload(payload)
    assert payload["action"] == kind and payload["status"] == "ok" and payload["protein"] == protein
    assert list(payload) == ["action", "status", "protein", "delta"]
    assert_close(payload["delta"], reference(d, kind, protein))


@pytest.mark.parametrize("protein", [NEG, POS, SUR, NULLS[1]])
@pytest.mark.parametrize("kind", ["knockdown", "cell_perturbation"])
def test_hard_world_matches_loop_reference(tmp_path, kind, protein):
    d = hard_world()
    d["drivers"][0]["weight"] = -0.03  # an A9-like driver: small baseline, large late weight
    d["drivers"][0]["weight_late"] = -0.52
    payload = run_experiment(spec_of(tmp_path, d), kind, protein, paper_compat=True)
    assert_close(payload["delta"], reference(d, kind, protein, paper_compat=True))


@pytest.mark.parametrize("protein", [NEG, NULLS[2], SUR])
@pytest.mark.parametrize("kind", ["knockdown", "cell_perturbation"])
def test_realism_matches_loop_reference(tmp_path, kind, protein):
    d = world()
    payload = run_experiment(spec_of(tmp_path, d), kind, protein, realism=True, paper_compat=True)
    assert_close(payload["delta"], reference(d, kind, protein, realism=True, paper_compat=True))


def test_trace_magnitudes_and_signs(tmp_path):
    spec = spec_of(tmp_path, world())
    neg = run_experiment(spec, "knockdown", NEG)["delta"]
    # 1.9 * 0.38 * 1.645 = 1.188; the control's sample mean of z over 800 has SD 0.035.
    assert neg["cavity_r"] == pytest.approx(1.9 * 0.38 * 1.645, abs=0.12)
    assert neg["wall_t"] == pytest.approx(-0.55 * 0.38 * 1.645, abs=0.04)
    assert neg["ef"] < 0 and neg["surv5y"] < 0 and neg["wall_t"] < 0
    # The paper's trace for a -0.38 driver: cavity +1.1851, ef -0.0552, surv5y -0.0173, wall -0.3431.
    assert neg["ef"] == pytest.approx(-0.0552, abs=0.006)
    assert neg["surv5y"] == pytest.approx(-0.0173, abs=0.004)
    pos = run_experiment(spec, "knockdown", POS)["delta"]
    assert pos["cavity_r"] == pytest.approx(-1.9 * 0.41 * 1.645, abs=0.12)
    assert pos["ef"] > 0 and pos["surv5y"] > 0 and pos["wall_t"] > 0


def test_knockdown_uses_late_weights_and_cell_uses_baseline(tmp_path):
    d = world()
    d["drivers"][0].update(weight=-0.02, weight_late=-0.50)
    spec = spec_of(tmp_path, d)
    kd = run_experiment(spec, "knockdown", NEG)["delta"]
    assert kd["cavity_r"] == pytest.approx(1.9 * 0.50 * 1.645, abs=0.15)
    d2 = world()
    d2["drivers"][0].update(weight=-0.50, weight_late=-0.02)
    kd2 = run_experiment(spec_of(tmp_path, d2), "knockdown", NEG)["delta"]
    assert abs(kd2["cavity_r"]) < 0.15
    # Same key and protein means the same draws, so only the weight in use can tell these worlds apart.
    base0 = world()
    base0["drivers"][0].update(weight=0.0, weight_late=0.0)
    late_only = world()
    late_only["drivers"][0].update(weight=0.0, weight_late=-0.50)
    base_only = world()
    base_only["drivers"][0].update(weight=-0.50, weight_late=0.0)
    cell = {name: run_experiment(spec_of(tmp_path, w), "cell_perturbation", NEG, paper_compat=True)["delta"]
            for name, w in (("none", base0), ("late", late_only), ("base", base_only))}
    assert cell["late"] == cell["none"]
    assert cell["base"] != cell["none"]


def test_hard_saturation_shrinks_the_clamp(tmp_path):
    soft = world()
    hard = world(hard=True)  # same residual SD and no interaction: only f changes
    a = run_experiment(spec_of(tmp_path, soft), "knockdown", NEG)["delta"]["cavity_r"]
    b = run_experiment(spec_of(tmp_path, hard), "knockdown", NEG)["delta"]["cavity_r"]
    # f(-1.645) = 1.6 tanh(-1.028) = -1.237, so the clamp's effect shrinks by about 1.237 / 1.645 = 0.75.
    assert 0.70 < b / a < 0.80
    assert b > 0


def test_interaction_adds_its_exact_term(tmp_path):
    import numpy as np

    with_i = hard_world(coef=0.19)
    without = hard_world(coef=0.0)
    a = run_experiment(spec_of(tmp_path, with_i), "knockdown", NEG)["delta"]["cavity_r"]
    b = run_experiment(spec_of(tmp_path, without), "knockdown", NEG)["delta"]["cavity_r"]
    # cavity_r is linear in L, so the interaction contributes 1.9 * coef * mean((clamp - z) * P_b) exactly.
    g = stream(int(KEY, 16), "oracle/knockdown", 160)
    g.standard_normal(800)
    g.standard_normal(800)
    z = g.standard_normal(800)
    V = g.standard_normal((800, 2))
    expected = 1.9 * 0.19 * float(np.mean((-1.645 - z) * V[:, 1]))
    assert abs(expected) > 0.002  # the test would not see a missing term otherwise
    assert a - b == pytest.approx(expected, abs=2.1e-4)
    # A non-hard world ignores an interaction entry.
    soft = world(interaction={"a": NEG, "b": POS, "coef": 0.19})
    soft0 = world()
    assert run_experiment(spec_of(tmp_path, soft), "knockdown", NEG) == run_experiment(spec_of(tmp_path, soft0), "knockdown", NEG)


def test_interaction_partner_outside_drivers_gets_its_own_abundance(tmp_path):
    d = hard_world()
    d["interaction"] = {"a": NEG, "b": "PROT_0200", "coef": 0.2}
    spec = spec_of(tmp_path, d)
    assert spec.model_proteins == (NEG, POS, "PROT_0200")
    for p in (NEG, "PROT_0200"):
        assert_close(run_experiment(spec, "knockdown", p)["delta"], reference(d, "knockdown", p))
    # Clamping the partner alone moves L only through the product term, whose mean is near zero.
    assert run_experiment(spec, "knockdown", "PROT_0200")["delta"] != {k: 0.0 for k in oracle.READOUTS}


# --------------------------------------------------------------------------- determinism


def test_deterministic_per_world_and_protein(tmp_path):
    d = world()
    s1 = spec_of(tmp_path, d)
    s2 = load_oracle(write(tmp_path, d, "again"))
    for kind in oracle.KINDS:
        assert run_experiment(s1, kind, NEG) == run_experiment(s2, kind, NEG) == run_experiment(s1, kind, NEG)
    # Different proteins draw different cohorts: two identical-weight drivers give different results.
    twin = world()
    twin["drivers"][1].update(weight=-0.38, weight_late=-0.38)
    st = spec_of(tmp_path, twin)
    assert run_experiment(st, "knockdown", NEG)["delta"] != run_experiment(st, "knockdown", POS)["delta"]
    # Null proteins: cell-perturbation noise differs between proteins.
    assert run_experiment(s1, "cell_perturbation", NULLS[0])["delta"] != run_experiment(s1, "cell_perturbation", NULLS[1])["delta"]
    # A different world key changes the draws.
    other = spec_of(tmp_path, world(oracle_key="0x" + "1" * 40))
    assert run_experiment(other, "knockdown", NEG)["delta"] != run_experiment(s1, "knockdown", NEG)["delta"]


def test_kinds_draw_separate_cohorts(tmp_path):
    import numpy as np

    a = stream(int(KEY, 16), "oracle/knockdown", 160).standard_normal(120)
    b = stream(int(KEY, 16), "oracle/cell_perturbation", 160).standard_normal(120)
    assert not np.allclose(a, b)


# --------------------------------------------------------------------------- null proteins, realism, surrogate


def test_null_knockdown_is_exactly_zero_without_realism(tmp_path):
    spec = spec_of(tmp_path, world())
    for p in NULLS:
        payload = run_experiment(spec, "knockdown", p)
        assert payload["delta"] == {"cavity_r": 0.0, "wall_t": 0.0, "ef": 0.0, "surv5y": 0.0}
        assert all(math.copysign(1.0, v) == 1.0 for v in payload["delta"].values())  # no -0.0 in the JSON
        assert "-0.0" not in json.dumps(payload)
    null_world = spec_of(tmp_path, world(drivers=[], surrogate=None))
    assert run_experiment(null_world, "knockdown", NEG)["delta"] == {k: 0.0 for k in oracle.READOUTS}


def test_rounding_never_emits_negative_zero():
    # A cell-perturbation delta a hair below zero rounds to -0.0, which json.dumps prints as "-0.0".
    assert math.copysign(1.0, oracle._round4(-0.00001)) == 1.0
    assert oracle._round4(-0.00006) == -0.0001


def test_realism_gives_small_nonzero_null_results_and_changes_nothing_when_off(tmp_path):
    spec = spec_of(tmp_path, world())
    before = {(k, p): run_experiment(spec, k, p) for k in oracle.KINDS for p in [NEG, SUR] + NULLS}
    nonzero = 0
    for p in NULLS:
        real = run_experiment(spec, "knockdown", p, realism=True)["delta"]
        nonzero += any(v != 0.0 for v in real.values())
        assert abs(real["cavity_r"]) < 0.25 and abs(real["wall_t"]) < 0.08 and abs(real["ef"]) < 0.015 and abs(real["surv5y"]) < 0.005
        assert real == run_experiment(spec, "knockdown", p, realism=True)["delta"]
    assert nonzero == len(NULLS)
    # A driver's result moves only a little under realism.
    real_driver = run_experiment(spec, "knockdown", NEG, realism=True)["delta"]["cavity_r"]
    assert real_driver == pytest.approx(before[("knockdown", NEG)]["delta"]["cavity_r"], abs=0.25)
    after = {(k, p): run_experiment(spec, k, p) for k in oracle.KINDS for p in [NEG, SUR] + NULLS}
    assert before == after
    # The world default comes from oracle.json and the keyword overrides it.
    real_default = spec_of(tmp_path, world(realism=True))
    assert run_experiment(real_default, "knockdown", NULLS[0]) == run_experiment(spec, "knockdown", NULLS[0], realism=True)
    assert run_experiment(real_default, "knockdown", NULLS[0], realism=False) == before[("knockdown", NULLS[0])]


def test_off_target_effect_is_shared_by_both_kinds(tmp_path):
    d = world(drivers=[], surrogate=None)
    spec = spec_of(tmp_path, d)
    off = 0.03 * float(stream(int(KEY, 16), "oracle/off_target", 1).standard_normal())
    kd = run_experiment(spec, "knockdown", NULLS[0], realism=True)["delta"]["cavity_r"]
    assert kd == pytest.approx(1.9 * off, abs=4 * 0.02 + 0.1 * abs(off))


def test_surrogate_knockdown_moves_readouts_in_t8_directions(tmp_path):
    spec = spec_of(tmp_path, world())
    d = run_experiment(spec, "knockdown", SUR)["delta"]
    # Lowering b: cavity up (-0.45 b), wall and EF down (+0.12 b, +0.025 b), hazard down so survival up.
    assert d["cavity_r"] == pytest.approx(0.45 * 1.645, abs=0.05)
    assert d["wall_t"] == pytest.approx(-0.12 * 1.645, abs=0.02)
    assert d["ef"] < 0 and d["surv5y"] > 0
    assert d["wall_t"] < 0


# --------------------------------------------------------------------------- cell perturbation survival


def test_cell_perturbation_survival_null_unless_paper_compat(tmp_path):
    spec = spec_of(tmp_path, world())
    plain = run_experiment(spec, "cell_perturbation", NEG)
    assert plain["delta"]["surv5y"] is None
    compat = run_experiment(spec, "cell_perturbation", NEG, paper_compat=True)
    assert isinstance(compat["delta"]["surv5y"], float)
    assert {k: v for k, v in compat["delta"].items() if k != "surv5y"} == {k: v for k, v in plain["delta"].items() if k != "surv5y"}
    valid_payload(plain)
    valid_payload(compat)
    compat_world = spec_of(tmp_path, world(paper_compat=True))
    assert run_experiment(compat_world, "cell_perturbation", NEG) == compat
    assert run_experiment(compat_world, "cell_perturbation", NEG, paper_compat=False) == plain
    assert isinstance(run_experiment(spec, "knockdown", NEG)["delta"]["surv5y"], float)


def test_cell_perturbation_noise_has_the_stated_scale(tmp_path):
    # Over many null proteins the noise on a zero delta is N(0, 0.0225^2).
    spec = spec_of(tmp_path, world(drivers=[], surrogate=None))
    vals = [run_experiment(spec, "cell_perturbation", p)["delta"]["cavity_r"] for p in PROTEINS[:200]]
    sd = math.sqrt(sum(v * v for v in vals) / len(vals))
    assert 0.0225 * 0.8 < sd < 0.0225 * 1.2


# --------------------------------------------------------------------------- malformed requests


@pytest.mark.parametrize(
    "kind,protein,word",
    [
        ("knockdown", "PROT_9999", "unknown protein"),
        ("knockdown", "prot_0001", "unknown protein"),
        ("knockdown", None, "unknown protein"),
        ("knockdown", 17, "unknown protein"),
        ("crispr", NEG, "unknown experiment kind"),
        (None, NEG, "unknown experiment kind"),
        ("Knockdown", NEG, "unknown experiment kind"),
    ],
)
def test_malformed_requests_are_refused(tmp_path, kind, protein, word):
    payload = run_experiment(spec_of(tmp_path, world()), kind, protein)
    assert payload["status"] == "refused" and payload["delta"] is None and word in payload["reason"]
    valid_payload(payload)
    json.dumps(payload)


def test_payload_schema_rejects_wrong_shapes():
    v = jsonschema.Draft202012Validator(EXPERIMENT_SCHEMA)
    good = {"action": "knockdown", "status": "ok", "protein": NEG, "delta": {"cavity_r": 1.0, "wall_t": -0.3, "ef": -0.05, "surv5y": -0.01}}
    assert v.is_valid(good)
    extra = copy.deepcopy(good)
    extra["control"] = {"cavity_r": 10.0}
    assert not v.is_valid(extra)
    null_kd = copy.deepcopy(good)
    null_kd["delta"]["surv5y"] = None
    assert not v.is_valid(null_kd)
    missing = copy.deepcopy(good)
    del missing["delta"]["ef"]
    assert not v.is_valid(missing)


def test_oracle_schema_and_semantic_checks(tmp_path):
    jsonschema.Draft202012Validator(ORACLE_SCHEMA).validate(world())
    jsonschema.Draft202012Validator(ORACLE_SCHEMA).validate(hard_world())
    bad_cases = [
        (world(oracle_key="0x1234"), "oracle_key"),
        (world(format_version="2"), "format_version"),
        (world(surrogate={"protein": "PROT_0999", "index": 999}), "surrogate"),
        (world(drivers=[{"protein": NEG, "index": 161, "weight": -0.38, "weight_late": -0.38}]), "index 161"),
        (world(n={"cell_perturbation": 0, "knockdown": 800}), "n/cell_perturbation"),
        (world(extra=1), "extra"),
    ]
    for d, word in bad_cases:
        with pytest.raises(OracleError) as err:
            spec_of(tmp_path, d)
        assert word in str(err.value)
    with pytest.raises(OracleError) as err:
        spec_of(tmp_path, world(oracle_key="0xZZ" + "0" * 40))
    assert "ZZ" not in str(err.value)  # the key is never echoed
    with pytest.raises(OracleError, match="not found"):
        load_oracle(tmp_path / "nowhere")
    assert KEY[2:] not in repr(spec_of(tmp_path, world()))


# --------------------------------------------------------------------------- ledger


def test_ledger_charges_refuses_and_records(tmp_path):
    spec = spec_of(tmp_path, world())
    path = tmp_path / "run" / "ledger.jsonl"
    led = Ledger(450000, path, spec)
    first = led.request("knockdown", NEG, 3)
    assert first == run_experiment(spec, "knockdown", NEG)
    assert led.remaining == 50000
    dup = led.request("knockdown", NEG, 4)
    assert dup["status"] == "refused" and "original result remains available" in dup["reason"]
    over = led.request("cell_perturbation", POS, 4)
    assert over["status"] == "refused" and "over budget" in over["reason"]
    bad = led.request("knockdown", "PROT_7777", 5)
    assert bad["status"] == "refused"
    worse = led.request(["knockdown"], {"p": 1}, 5)
    assert worse["status"] == "refused"
    for p in (dup, over, bad, worse):
        valid_payload(p)
    assert led.remaining == 50000
    rows = read_ledger(path)
    assert [r["status"] for r in rows] == ["delivered", "refused", "refused", "refused", "refused"]
    assert [r["turn"] for r in rows] == [3, 4, 4, 5, 5]
    assert rows[0] == {"turn": 3, "kind": "knockdown", "protein": NEG, "status": "delivered", "cost": 400000, "latency_days": 180}
    assert all(r["cost"] == 0 and r["reason"] for r in rows[1:])
    assert led.result("knockdown", NEG) == first and led.result("knockdown", POS) is None


def test_ledger_exact_budget_zero_budget_and_resume(tmp_path):
    spec = spec_of(tmp_path, world())
    path = tmp_path / "ledger.jsonl"
    led = Ledger(550000, path, spec)
    assert led.request("cell_perturbation", NEG, 1)["status"] == "ok"
    assert led.request("knockdown", NEG, 1)["status"] == "ok"  # costs exactly what remains
    assert led.remaining == 0
    # The same protein under the other kind is not a duplicate, but there is no money left.
    assert "over budget" in led.request("knockdown", POS, 2)["reason"]

    resumed = Ledger(550000, path, write(tmp_path, world()))
    assert resumed.spent == 550000 and resumed.remaining == 0
    assert "original result" in resumed.request("cell_perturbation", NEG, 3)["reason"]
    assert len(read_ledger(path)) == 4

    # Resume with a larger budget (the harness decides the budget; the file records spending).
    bigger = Ledger(2_000_000, path, spec)
    assert bigger.request("knockdown", SUR, 4)["status"] == "ok"
    assert bigger.remaining == 2_000_000 - 950000

    broke = Ledger(0, tmp_path / "zero.jsonl", spec)
    assert broke.request("cell_perturbation", NEG, 1)["status"] == "refused"
    assert read_ledger(tmp_path / "zero.jsonl")[0]["status"] == "refused"


def test_ledger_drops_a_row_cut_short_and_refuses_garbage(tmp_path):
    spec = spec_of(tmp_path, world())
    path = tmp_path / "ledger.jsonl"
    Ledger(2_000_000, path, spec).request("knockdown", NEG, 1)
    with open(path, "a") as fh:
        fh.write('{"turn": 2, "kind": "knockdown", "prot')
    assert len(read_ledger(path)) == 1
    led = Ledger(2_000_000, path, spec)
    assert led.spent == 400000
    assert led.request("knockdown", POS, 2)["status"] == "ok"
    assert [r["protein"] for r in read_ledger(path)] == [NEG, POS]

    junk = tmp_path / "junk.jsonl"
    junk.write_text("hello\n")
    with pytest.raises(oracle.LedgerError):
        Ledger(1, junk, spec)
    with pytest.raises(ValueError):
        Ledger(-5, tmp_path / "neg.jsonl", spec)


# --------------------------------------------------------------------------- CLI


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.experiment", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_cli_prints_schema_valid_json(tmp_path):
    d = world()
    sealed = write(tmp_path, d)
    out = cli("--sealed", str(sealed), "--kind", "knockdown", "--protein", NEG)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    valid_payload(payload)
    assert payload == run_experiment(load_oracle(sealed), "knockdown", NEG)

    out = cli("--sealed", str(sealed), "--kind", "cell_perturbation", "--protein", NEG, "--paper-compat", "--realism")
    payload = json.loads(out.stdout)
    valid_payload(payload)
    assert payload == run_experiment(load_oracle(sealed), "cell_perturbation", NEG, paper_compat=True, realism=True)
    assert payload["delta"]["surv5y"] is not None

    out = cli("--sealed", str(sealed), "--kind", "western_blot", "--protein", NEG)
    assert out.returncode == 0
    payload = json.loads(out.stdout)
    valid_payload(payload)
    assert payload["status"] == "refused"


def test_cli_with_ledger_and_errors(tmp_path):
    sealed = write(tmp_path, world())
    ledger = tmp_path / "l.jsonl"
    args = ("--sealed", str(sealed), "--kind", "knockdown", "--protein", NEG, "--ledger", str(ledger), "--budget", "450000")
    first = json.loads(cli(*args, "--turn", "2").stdout)
    second = json.loads(cli(*args, "--turn", "3").stdout)
    assert first["status"] == "ok" and second["status"] == "refused"
    assert [(r["turn"], r["status"]) for r in read_ledger(ledger)] == [(2, "delivered"), (3, "refused")]

    missing = cli("--sealed", str(tmp_path / "nope"), "--kind", "knockdown", "--protein", NEG)
    assert missing.returncode == 2 and "oracle.json" in missing.stderr and missing.stdout == ""
    lonely = cli("--sealed", str(sealed), "--kind", "knockdown", "--protein", NEG, "--budget", "5")
    assert lonely.returncode == 2
