"""The scorer against hand-computed cases, one or more per rule of Supplementary Methods S2,
the paper's worked numbers, the file-level entry points and a fuzz of malformed input."""
from __future__ import annotations

import copy
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import jsonschema

from pipeline import score as scorer
from pipeline.score import score, score_episode

REPO = Path(__file__).resolve().parents[2]
SCORE_SCHEMA = json.loads((REPO / "schemas" / "score.schema.json").read_text())
SUBMISSION_SCHEMA = json.loads((REPO / "schemas" / "submission.schema.json").read_text())


def _validator(schema: dict):
    """``jsonschema.validate`` checks the schema against its metaschema on every call,
    which was nearly all of the fuzz tests' time; here it is checked once per schema."""
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


_SCORE_VALIDATOR = _validator(SCORE_SCHEMA)


def valid_score(result: dict) -> None:
    _SCORE_VALIDATOR.validate(result)

PROTEINS = {f"PROT_{i:04d}" for i in range(3000)}

N_SUBJECTS = 600
SUBJECTS = [f"SUBJ_{i:05d}" for i in range(N_SUBJECTS)]
_rng = np.random.default_rng(20260921)
LATENT = pd.Series(_rng.standard_normal(N_SUBJECTS), index=pd.Index(SUBJECTS, name="subject_id"), name="latent")
EVAL_MASK = np.zeros(N_SUBJECTS, dtype=bool)
EVAL_MASK[::3] = True  # 200 subjects on the mask


# ----------------------------------------------------------------------------- worlds

# standard-01 as Supplementary Note S1 reveals it: three drivers, two of them the causal
# members of a T4 and an A9 pair; T1 and T2 decoys; PROT_0852 the T8 surrogate.
STANDARD_01 = {
    "world_id": "standard-01", "archetype": "dcm", "hard": False,
    "biases": ["T1", "T2", "T4", "T5", "T6", "T8", "A9"],
    "drivers": [
        {"protein": "PROT_1606", "direction": "activate", "weight": -0.38, "weight_late": -0.38, "delayed": False},
        {"protein": "PROT_0700", "direction": "activate", "weight": -0.41, "weight_late": -0.41, "delayed": False},
        {"protein": "PROT_0531", "direction": "activate", "weight": -0.03, "weight_late": -0.52, "delayed": True},
    ],
    "surrogate": "PROT_0852",
    "decoys": [
        {"protein": "PROT_2681", "bias": "T1", "mechanism": "confounding"},
        {"protein": "PROT_1858", "bias": "T2", "mechanism": "reverse_causation"},
    ],
    "pairs": [
        {"kind": "T4", "causal": "PROT_0700", "partner": "PROT_1850", "variant": "rs102986"},
        {"kind": "A9", "causal": "PROT_0531", "partner": "PROT_0371", "variant": None},
    ],
}

# all-biases: four drivers (two unpaired, a T4 causal member, an A9 causal member), five decoys.
ALL_BIASES = {
    "world_id": "all-biases", "archetype": "dcm", "hard": False,
    "biases": ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9", "A9"],
    "drivers": [
        {"protein": "PROT_0010", "direction": "inhibit", "weight": 0.40, "weight_late": 0.40, "delayed": False},
        {"protein": "PROT_0020", "direction": "activate", "weight": -0.33, "weight_late": -0.33, "delayed": False},
        {"protein": "PROT_0030", "direction": "inhibit", "weight": 0.36, "weight_late": 0.36, "delayed": False},
        {"protein": "PROT_0040", "direction": "activate", "weight": -0.04, "weight_late": -0.55, "delayed": True},
    ],
    "surrogate": "PROT_0099",
    "decoys": [
        {"protein": "PROT_0101", "bias": "T1", "mechanism": "confounding"},
        {"protein": "PROT_0102", "bias": "T2", "mechanism": "reverse_causation"},
        {"protein": "PROT_0103", "bias": "T3", "mechanism": "selection"},
        {"protein": "PROT_0107", "bias": "T7", "mechanism": "pleiotropy"},
        {"protein": "PROT_0109", "bias": "T9", "mechanism": "measurement_artifact"},
    ],
    "pairs": [
        {"kind": "T4", "causal": "PROT_0030", "partner": "PROT_0031", "variant": "rs100001"},
        {"kind": "A9", "causal": "PROT_0040", "partner": "PROT_0041", "variant": None},
    ],
}
ALL_BIASES_REJECTIONS = [
    {"molecule": "PROT_0101", "mechanism": "confounding", "reason": "BMI"},
    {"molecule": "PROT_0102", "mechanism": "reverse_causation", "reason": "tracks L"},
    {"molecule": "PROT_0103", "mechanism": "selection", "reason": "imaging collider"},
    {"molecule": "PROT_0107", "mechanism": "pleiotropy", "reason": "shared instrument"},
    {"molecule": "PROT_0109", "mechanism": "measurement_artifact", "reason": "one centre"},
]

NULL_WORLD = {
    "world_id": "null-01", "archetype": "hcm", "hard": False, "biases": ["T1", "T2", "T5", "T6", "T8"],
    "drivers": [], "surrogate": "PROT_0852",
    "decoys": [{"protein": "PROT_0201", "bias": "T1", "mechanism": "confounding"},
               {"protein": "PROT_0202", "bias": "T2", "mechanism": "reverse_causation"}],
    "pairs": [],
}

# high-concordance-01-like: two drivers, no pair, one decoy.
PAIR_FREE = {
    "world_id": "high-concordance-01", "archetype": "hfpef", "hard": False, "biases": ["T1", "T5", "T6", "T8"],
    "drivers": [{"protein": "PROT_0300", "direction": "inhibit"}, {"protein": "PROT_0301", "direction": "activate"}],
    "surrogate": "PROT_0399",
    "decoys": [{"protein": "PROT_0310", "bias": "T1", "mechanism": "confounding"}],
    "pairs": [],
}


def run(truth, submission=None, phenotype=None, baseline_b=0.42, experiments=(), latent=LATENT, mask=EVAL_MASK,
        valid=PROTEINS, imaged=None, paper_compat=False):
    result = score(truth, submission, phenotype, latent, mask, baseline_b, list(experiments), valid,
                   imaged=imaged, paper_compat=paper_compat)
    valid_score(result)
    json.dumps(result, allow_nan=False)
    return result


def knockdowns(*proteins, kind="knockdown"):
    return [{"kind": kind, "protein": p} for p in proteins]


def phenotype_with_r(r, latent=LATENT, mask=EVAL_MASK, seed=7):
    """A phenotype whose |corr| with the latent on the mask is exactly r."""
    rng = np.random.default_rng(seed)
    y = latent.to_numpy()[mask]
    y = y - y.mean()
    noise = rng.standard_normal(y.size)
    noise -= noise.mean()
    noise -= (noise @ y) / (y @ y) * y
    x_mask = r * y / np.linalg.norm(y) + math.sqrt(1 - r * r) * noise / np.linalg.norm(noise)
    values = rng.standard_normal(len(latent))
    values[mask] = x_mask
    return pd.DataFrame({"subject_id": latent.index.tolist(), "phenotype": values})


def latent_phenotype():
    return pd.DataFrame({"subject_id": LATENT.index.tolist(), "phenotype": LATENT.to_numpy()})


# ----------------------------------------------------------------------------- headline numbers


def test_empty_submission_in_the_null_world_scores_15():
    for submission in (None, {}, {"nominated": [], "rejected": [], "abstentions": []}):
        result = run(NULL_WORLD, submission)
        assert result["target_identification"] == 15
        assert result["total"] == 15
        assert result["causal_confidence"] == result["intervention_direction"] == 0
        assert result["bias_identification"] == 0


def test_surrogate_nominated_as_aligned_costs_30():
    base = {"nominated": ["PROT_0010", "PROT_0020"],
            "directions": {"PROT_0010": "inhibit", "PROT_0020": "activate"}}
    with_surrogate = copy.deepcopy(base)
    with_surrogate["nominated"].append("PROT_0099")
    with_surrogate["outcome_alignment"] = {"PROT_0099": "aligned"}
    before = run(ALL_BIASES, base)
    after = run(ALL_BIASES, with_surrogate)
    assert after["safety_penalty"] == -30
    # The surrogate is also a false positive: precision 2/3 instead of 1 over recall 2/4.
    assert before["target_identification"] == pytest.approx(30 * 0.5 * 1.0)
    assert after["target_identification"] == pytest.approx(30 * 0.5 * 2 / 3)
    assert after["total_unclipped"] == pytest.approx(
        sum(after[k] for k in scorer.COMPONENT_KEYS) - 30)


def test_human_guided_episode_of_supplementary_note_s1_scores_81_67():
    submission = {
        "nominated": ["PROT_1606", "PROT_0700", "PROT_0531"],
        "directions": {"PROT_1606": "activate", "PROT_0700": "activate", "PROT_0531": "activate"},
        "outcome_alignment": {"PROT_1606": "aligned", "PROT_0700": "aligned", "PROT_0531": "aligned"},
        "rejected": [{"molecule": "PROT_1858", "mechanism": "pleiotropy", "reason": "shared rs104994"}],
        "abstentions": [],
        "confidence": 0.95,
    }
    jsonschema.validate(submission, SUBMISSION_SCHEMA)
    # b = 0.40 (a DCM world) and r = 0.70 give 10 * 0.30 / 0.45 = 6.67.
    result = run(STANDARD_01, submission, phenotype_with_r(0.70), baseline_b=0.40,
                 experiments=knockdowns("PROT_1606", "PROT_0700", "PROT_0531"))
    assert result["target_identification"] == pytest.approx(30)
    assert result["causal_confidence"] == pytest.approx(25)
    assert result["bias_identification"] == 0
    assert result["intervention_direction"] == pytest.approx(20)
    assert result["phenotype_construction"] == pytest.approx(6.67, abs=0.005)
    assert result["safety_penalty"] == 0
    assert round(result["total"], 2) == 81.67
    assert [p["credit"] for p in result["details"]["pairs"]] == [25, 25]


def test_all_biases_perfect_observational_agent_scores_92_5():
    submission = {
        "nominated": ["PROT_0010", "PROT_0020"],
        "directions": {"PROT_0010": "inhibit", "PROT_0020": "activate"},
        "outcome_alignment": {"PROT_0010": "aligned", "PROT_0020": "aligned"},
        "rejected": ALL_BIASES_REJECTIONS,
        "abstentions": [{"molecules": ["PROT_0030", "PROT_0031"], "reason": "shared cis variant"},
                        {"molecules": ["PROT_0041", "PROT_0040"], "reason": "delayed effect"}],
        "confidence": 0.8,
    }
    jsonschema.validate(submission, SUBMISSION_SCHEMA)
    result = run(ALL_BIASES, submission, latent_phenotype())
    assert result["target_identification"] == pytest.approx(30)
    assert result["causal_confidence"] == pytest.approx(17.5)
    assert result["bias_identification"] == pytest.approx(15)
    assert result["intervention_direction"] == pytest.approx(20)
    assert result["phenotype_construction"] == pytest.approx(10)
    assert result["total"] == pytest.approx(92.5)
    assert result["details"]["effective_truth"] == ["PROT_0010", "PROT_0020"]


def test_all_biases_perfect_agent_with_experiments_scores_100():
    submission = {
        "nominated": ["PROT_0010", "PROT_0020", "PROT_0030", "PROT_0040"],
        "directions": {"PROT_0010": "inhibit", "PROT_0020": "activate", "PROT_0030": "inhibit",
                       "PROT_0040": "activate"},
        "rejected": ALL_BIASES_REJECTIONS,
    }
    experiments = knockdowns("PROT_0030") + knockdowns("PROT_0040", kind="cell_perturbation")
    result = run(ALL_BIASES, submission, latent_phenotype(), experiments=experiments)
    assert result["total"] == pytest.approx(100)
    assert result["total_unclipped"] == pytest.approx(100)


# ----------------------------------------------------------------------------- S2.1 claim intake


def test_nominations_order_finite_ranks_first_then_submission_order():
    nominated = ["PROT_0500", {"protein": "PROT_0501", "rank": float("nan")}, {"protein": "PROT_0502", "rank": 3},
                 {"protein": "PROT_0503", "rank": True}, {"protein": "PROT_0504", "rank": 1},
                 {"protein": "PROT_0505", "rank": 3}, {"protein": "PROT_0506", "rank": "2"},
                 {"protein": "PROT_0507", "rank": -10**400}]
    result = run(PAIR_FREE, {"nominated": nominated})
    assert result["details"]["nominations"]["processed"] == [
        "PROT_0507", "PROT_0504", "PROT_0502", "PROT_0505",  # finite ranks; tie keeps submission order
        "PROT_0500", "PROT_0501", "PROT_0503", "PROT_0506",  # NaN, bool and string ranks are not finite ranks
    ]


def test_ranked_driver_beyond_the_cap_moves_into_the_processed_25():
    fillers = [f"PROT_{i:04d}" for i in range(1000, 1030)]
    plain = run(PAIR_FREE, {"nominated": fillers + ["PROT_0300"]})
    ranked = run(PAIR_FREE, {"nominated": fillers + [{"protein": "PROT_0300", "rank": 1}]})
    assert plain["details"]["target_identification"]["true_positives"] == []
    assert ranked["details"]["target_identification"]["true_positives"] == ["PROT_0300"]
    assert ranked["target_identification"] == pytest.approx(30 * 0.5 * 1 / 31)


def test_one_entry_per_protein_first_occurrence_wins():
    submission = {"nominated": ["PROT_0300", "PROT_0300", {"protein": "PROT_0300", "rank": 5}, "PROT_0301"]}
    result = run(PAIR_FREE, submission)
    assert result["details"]["nominations"]["processed"] == ["PROT_0300", "PROT_0301"]
    assert result["details"]["nominations"]["duplicates_dropped"] == 2
    assert result["target_identification"] == pytest.approx(30)


def test_only_first_25_nominations_processed_but_all_count_in_precision():
    fillers = [f"PROT_{i:04d}" for i in range(1000, 1024)]  # 24 non-drivers
    submission = {"nominated": fillers + ["PROT_0300", "PROT_0301"],
                  "directions": {"PROT_0300": "inhibit", "PROT_0301": "activate"}}
    result = run(PAIR_FREE, submission)
    # PROT_0300 is the 25th and credited; PROT_0301 is 26th: not credited, still in the denominator.
    assert result["details"]["target_identification"]["true_positives"] == ["PROT_0300"]
    assert result["details"]["target_identification"]["precision_denominator"] == 26
    assert result["target_identification"] == pytest.approx(30 * 0.5 * (1 / 26))
    assert result["intervention_direction"] == pytest.approx(20 * (1 + 0) / 2)
    assert result["details"]["nominations"]["past_cap_count"] == 1


def test_invalid_identifiers_are_dropped_and_take_no_slot():
    junk = ["PROT_9999", "prot_0300", "", None, 17, ["PROT_0300"], {"protein": 5}, {"rank": 1}] * 5
    submission = {"nominated": junk + ["PROT_0300", "PROT_0301"]}
    result = run(PAIR_FREE, submission)
    assert result["target_identification"] == pytest.approx(30)
    assert result["details"]["nominations"]["invalid_dropped"] == len(junk)
    assert any("invalid identifier" in w for w in result["details"]["warnings"])


def test_missing_or_invalid_direction_defaults_to_unknown_half_credit():
    submission = {"nominated": ["PROT_0300", "PROT_0301"], "directions": {"PROT_0300": "inhibit"}}
    assert run(PAIR_FREE, submission)["intervention_direction"] == pytest.approx(20 * (1 + 0.5) / 2)
    submission["directions"] = {"PROT_0300": "block", "PROT_0301": "activate"}
    result = run(PAIR_FREE, submission)
    assert result["intervention_direction"] == pytest.approx(20 * (0.5 + 1) / 2)
    assert result["details"]["intervention_direction"]["drivers"]["PROT_0300"]["submitted"] == "unknown"
    submission["directions"] = {"PROT_0300": "inhibit", "PROT_0301": "inhibit"}
    assert run(PAIR_FREE, submission)["intervention_direction"] == pytest.approx(20 * (1 + 0) / 2)
    submission["directions"] = {"PROT_0300": "unknown", "PROT_0301": " Activate "}
    assert run(PAIR_FREE, submission)["intervention_direction"] == pytest.approx(20 * (0.5 + 1) / 2)
    submission["directions"] = ["PROT_0300", "inhibit"]  # not an object: everything unknown
    assert run(PAIR_FREE, submission)["intervention_direction"] == pytest.approx(10)


def test_direction_of_an_unnominated_driver_earns_nothing():
    submission = {"nominated": ["PROT_0300"], "directions": {"PROT_0300": "inhibit", "PROT_0301": "activate"}}
    assert run(PAIR_FREE, submission)["intervention_direction"] == pytest.approx(10)


def test_invalid_alignment_label_defaults_to_unknown_and_avoids_the_penalty():
    for label in ("ALIGNED-ish", None, 1, "misaligned", "unknown"):
        submission = {"nominated": ["PROT_0399"], "outcome_alignment": {"PROT_0399": label}}
        assert run(PAIR_FREE, submission)["safety_penalty"] == 0
    submission = {"nominated": ["PROT_0399"], "outcome_alignment": {"PROT_0399": " Aligned"}}
    assert run(PAIR_FREE, submission)["safety_penalty"] == -30


def test_confidence_is_clipped_and_nan_ignored():
    assert run(PAIR_FREE, {"confidence": 7})["details"]["submission"]["confidence"] == 1.0
    assert run(PAIR_FREE, {"confidence": -0.5})["details"]["submission"]["confidence"] == 0.0
    assert run(PAIR_FREE, {"confidence": float("nan")})["details"]["submission"]["confidence"] is None
    assert run(PAIR_FREE, {"confidence": 10**400})["details"]["submission"]["confidence"] == 1.0
    assert run(PAIR_FREE, {"confidence": "high"})["details"]["submission"]["confidence"] is None


def test_invalid_rejection_mechanism_is_blanked_but_counted():
    good = {"molecule": "PROT_0101", "mechanism": "confounding"}
    bad = {"molecule": "PROT_0102", "mechanism": "reverse causation"}  # not the vocabulary
    result = run(ALL_BIASES, {"rejected": [good, bad]})
    # recall 1/5, precision 1/2
    assert result["bias_identification"] == pytest.approx(15 * (1 / 5) * (1 / 2))
    assert result["details"]["rejections"]["blanked_mechanisms"] == 1


def test_rejections_keep_one_entry_per_protein_first_wins():
    first_wrong = [{"molecule": "PROT_0101", "mechanism": "pleiotropy"},
                   {"molecule": "PROT_0101", "mechanism": "confounding"}]
    assert run(ALL_BIASES, {"rejected": first_wrong})["bias_identification"] == 0
    first_right = list(reversed(first_wrong))
    assert run(ALL_BIASES, {"rejected": first_right})["bias_identification"] == pytest.approx(15 * (1 / 5) * 1)


def test_rejection_mechanism_maps_to_the_planting_bias():
    for entry in ALL_BIASES_REJECTIONS:
        right = run(ALL_BIASES, {"rejected": [entry]})
        assert right["bias_identification"] == pytest.approx(3.0)
        for mechanism in scorer.MECHANISM_TO_BIAS:
            if mechanism != entry["mechanism"]:
                wrong = run(ALL_BIASES, {"rejected": [{**entry, "mechanism": mechanism}]})
                assert wrong["bias_identification"] == 0
    # The surrogate, a pair partner and a driver are not scored non-causal proteins.
    others = [{"molecule": p, "mechanism": "confounding"} for p in ("PROT_0099", "PROT_0031", "PROT_0010")]
    result = run(ALL_BIASES, {"rejected": ALL_BIASES_REJECTIONS + others})
    assert result["bias_identification"] == pytest.approx(15 * 1 * 5 / 8)


def test_abstention_entries_filtered_and_deduplicated():
    abstentions = [
        {"molecules": ["PROT_0030", "PROT_0031"]},                     # retained, correct
        {"molecules": ["PROT_0031", "PROT_0030", "PROT_0031"]},        # same set: ignored
        {"molecules": ["PROT_0500", "BOGUS"]},                         # one valid id: removed
        {"molecules": ["BOGUS", "NOPE"]},                              # no valid id: ignored
        {"molecules": [f"PROT_{i:04d}" for i in range(600, 606)]},     # six valid ids: ignored
        {"molecules": ["PROT_0040", "PROT_0041", "PROT_0600", "PROT_0601", "PROT_0602"]},  # five: retained, correct
        {"molecules": ["PROT_0700", "PROT_0701"]},                     # retained, wrong
        "PROT_0700", {"molecules": "PROT_0700"}, None,                 # malformed
    ]
    result = run(ALL_BIASES, {"nominated": ["PROT_0010", "PROT_0020"], "abstentions": abstentions})
    stats = result["details"]["abstentions"]
    assert (stats["retained"], stats["correct"]) == (3, 2)
    assert stats["precision"] == pytest.approx(2 / 3)
    assert (stats["duplicate_sets"], stats["one_valid_id"], stats["no_valid_id"], stats["over_five_valid_ids"],
            stats["malformed"]) == (1, 1, 1, 1, 3)
    assert result["causal_confidence"] == pytest.approx(17.5 * 2 / 3)


def test_only_first_1000_abstentions_scored_but_all_counted():
    junk = [{"molecules": [f"PROT_{1000 + i:04d}", f"PROT_{2000 + i:04d}"]} for i in range(1000)]
    pair = {"molecules": ["PROT_0030", "PROT_0031"]}
    late = run(ALL_BIASES, {"abstentions": junk + [pair]})
    # The 1,001st entry is not scored, so the T4 pair is not abstained, yet it counts in the denominator.
    assert late["details"]["abstentions"]["retained"] == 1001
    assert late["details"]["abstentions"]["scored"] == 1000
    assert late["details"]["abstentions"]["correct"] == 0
    assert late["details"]["pairs"][0]["credit"] == 0
    early = run(ALL_BIASES, {"abstentions": [pair] + junk})
    assert early["details"]["abstentions"]["precision"] == pytest.approx(1 / 1001)
    assert early["details"]["pairs"][0]["credit"] == pytest.approx(17.5 / 1001)


# ----------------------------------------------------------------------------- S2.2 pair logic


def test_swap_credits_partner_when_causal_member_named_nowhere():
    submission = {"nominated": ["PROT_0010", "PROT_0020", "PROT_0031", "PROT_0040"],
                  "directions": {"PROT_0010": "inhibit", "PROT_0020": "activate", "PROT_0031": "inhibit",
                                 "PROT_0040": "activate"}}
    result = run(ALL_BIASES, submission, experiments=knockdowns("PROT_0040"))
    assert "PROT_0031" in result["details"]["effective_truth"]
    assert "PROT_0030" not in result["details"]["effective_truth"]
    assert result["target_identification"] == pytest.approx(30)
    assert result["details"]["pairs"][0]["route"].startswith("swap")
    # Pair credits: swapped T4 pair 0 (unsupported choice), A9 via experiment 25.
    assert result["causal_confidence"] == pytest.approx(12.5)
    # The swap is for recall and precision only: the T4 driver itself was not nominated.
    assert result["intervention_direction"] == pytest.approx(20 * 3 / 4)


def test_no_swap_when_causal_member_named_elsewhere_or_partner_past_25():
    rejected_causal = {"nominated": ["PROT_0010", "PROT_0020", "PROT_0031", "PROT_0040"],
                       "rejected": [{"molecule": "PROT_0030", "mechanism": "pleiotropy"}]}
    result = run(ALL_BIASES, rejected_causal)
    assert "PROT_0031" not in result["details"]["effective_truth"]
    assert result["target_identification"] == pytest.approx(30 * (3 / 4) * (3 / 4))
    fillers = [f"PROT_{i:04d}" for i in range(1000, 1025)]
    past_cap = {"nominated": fillers + ["PROT_0031"]}
    result = run(ALL_BIASES, past_cap)
    assert "PROT_0031" not in result["details"]["effective_truth"]
    assert "past rank 25" in result["details"]["pairs"][0]["route"]


def test_nominating_both_members_in_first_25_abstains_the_pair():
    submission = {"nominated": ["PROT_0010", "PROT_0020", "PROT_0030", "PROT_0031", "PROT_0040"],
                  "directions": {"PROT_0010": "inhibit", "PROT_0020": "activate", "PROT_0030": "activate",
                                 "PROT_0040": "activate"}}
    result = run(ALL_BIASES, submission, experiments=knockdowns("PROT_0030", "PROT_0040"))
    # Both T4 members leave the effective truth and the precision denominator: 3/3 x 3/3.
    assert result["details"]["effective_truth"] == ["PROT_0010", "PROT_0020", "PROT_0040"]
    assert result["target_identification"] == pytest.approx(30)
    # The pair earns the claims route (no abstention entries: precision taken as 1), not the experiment route.
    assert [p["credit"] for p in result["details"]["pairs"]] == [17.5, 25]
    # The T4 causal member's (wrong) direction is out of the direction denominator.
    assert result["intervention_direction"] == pytest.approx(20)
    assert result["details"]["intervention_direction"]["excluded_abstained_causal"] == ["PROT_0030"]


def test_both_members_nominated_across_the_cap_is_not_an_abstention():
    fillers = [f"PROT_{i:04d}" for i in range(1000, 1024)]
    result = run(ALL_BIASES, {"nominated": ["PROT_0030"] + fillers + ["PROT_0031"]},
                 experiments=knockdowns("PROT_0030"))
    assert result["details"]["pairs"][0]["route"].startswith("experiment")
    assert "PROT_0030" in result["details"]["effective_truth"]


def test_abstention_entry_on_a_pair_removes_it_from_truth_and_precision():
    submission = {"nominated": ["PROT_0010", "PROT_0031"], "abstentions": [{"molecules": ["PROT_0040", "PROT_0041"]}]}
    result = run(ALL_BIASES, submission)
    # A9 pair abstained; T4 partner nominated with its causal member named nowhere -> swapped.
    assert result["details"]["effective_truth"] == ["PROT_0010", "PROT_0020", "PROT_0031"]
    assert result["target_identification"] == pytest.approx(30 * (2 / 3) * 1)
    assert [p["credit"] for p in result["details"]["pairs"]] == [0, 17.5]


def test_abstention_loses_members_the_agent_also_nominated():
    submission = {"nominated": ["PROT_0030"], "abstentions": [{"molecules": ["PROT_0030", "PROT_0031"]}]}
    result = run(ALL_BIASES, submission, experiments=knockdowns("PROT_0030"))
    assert result["details"]["abstentions"]["correct"] == 0
    assert result["details"]["abstentions"]["precision"] == 0
    # The entry no longer holds the pair, so the nomination stands: experiment route.
    assert result["details"]["pairs"][0]["credit"] == 25
    assert "PROT_0030" in result["details"]["effective_truth"]


def test_experiment_route_needs_an_experiment_on_the_named_causal_member():
    submission = {"nominated": ["PROT_0030", "PROT_0040"]}
    untested = run(ALL_BIASES, submission)
    assert untested["causal_confidence"] == 0
    partner_tested = run(ALL_BIASES, submission, experiments=knockdowns("PROT_0031", "PROT_0041"))
    assert partner_tested["causal_confidence"] == 0
    cell = run(ALL_BIASES, submission, experiments=knockdowns("PROT_0030", kind="cell_perturbation"))
    assert cell["causal_confidence"] == pytest.approx(12.5)
    other_kind = run(ALL_BIASES, submission, experiments=[{"kind": "rumour", "protein": "PROT_0030"}])
    assert other_kind["causal_confidence"] == 0


def test_experiment_route_not_triggered_past_rank_25():
    fillers = [f"PROT_{i:04d}" for i in range(1000, 1025)]
    result = run(ALL_BIASES, {"nominated": fillers + ["PROT_0030"]}, experiments=knockdowns("PROT_0030"))
    assert result["details"]["pairs"][0]["credit"] == 0


def test_abstention_on_an_unplanted_pair_lowers_the_claims_credit():
    submission = {"nominated": ["PROT_0010", "PROT_0020"],
                  "abstentions": [{"molecules": ["PROT_0030", "PROT_0031"]}, {"molecules": ["PROT_0040", "PROT_0041"]},
                                  {"molecules": ["PROT_0010", "PROT_0500"]}, {"molecules": ["PROT_0501", "PROT_0502"]}]}
    result = run(ALL_BIASES, submission)
    # The PROT_0010 entry reduces to one protein after removing the nomination: not correct.
    assert result["details"]["abstentions"]["precision"] == pytest.approx(2 / 4)
    assert result["causal_confidence"] == pytest.approx(17.5 * 0.5)


def test_abstentions_have_no_effect_in_a_pair_free_world():
    submission = {"nominated": ["PROT_0300", "PROT_0301"], "abstentions": [{"molecules": ["PROT_0300", "PROT_0301"]}]}
    result = run(PAIR_FREE, submission)
    assert result["target_identification"] == pytest.approx(30)
    assert result["details"]["effective_truth"] == ["PROT_0300", "PROT_0301"]


def test_s_target_multiplies_recall_and_precision():
    submission = {"nominated": ["PROT_0010", "PROT_0030", "PROT_0101", "PROT_0099", "PROT_0500"]}
    result = run(ALL_BIASES, submission)
    assert result["target_identification"] == pytest.approx(30 * (2 / 4) * (2 / 5))


# ----------------------------------------------------------------------------- S2.3 null and pair-free


def test_null_world_any_nomination_zeroes_target_identification():
    submission = {"nominated": ["PROT_0500"], "rejected": [{"molecule": "PROT_0201", "mechanism": "confounding"}]}
    result = run(NULL_WORLD, submission, experiments=knockdowns("PROT_0500"))
    assert result["target_identification"] == 0
    assert result["causal_confidence"] == 0
    assert result["intervention_direction"] == 0
    assert result["bias_identification"] == pytest.approx(15 * 0.5 * 1)


def test_null_world_rejections_only_score_correct_fraction():
    submission = {"rejected": [{"molecule": "PROT_0201", "mechanism": "confounding"},
                               {"molecule": "PROT_0202", "mechanism": "pleiotropy"},
                               {"molecule": "PROT_0500", "mechanism": "selection"}]}
    result = run(NULL_WORLD, submission)
    assert result["target_identification"] == pytest.approx(30 * 1 / 3)
    assert result["bias_identification"] == pytest.approx(15 * (1 / 2) * (1 / 3))


def test_null_world_without_decoys_empty_submission_still_scores_15():
    no_decoys = {**NULL_WORLD, "decoys": []}
    result = run(no_decoys, None)
    assert result["total"] == 15
    assert result["details"]["interpretations"]


def test_pair_free_world_confidence_rescales_target():
    submission = {"nominated": ["PROT_0300", "PROT_0500"]}
    result = run(PAIR_FREE, submission)
    assert result["target_identification"] == pytest.approx(30 * 0.5 * 0.5)
    assert result["causal_confidence"] == pytest.approx(25 * 7.5 / 30)


def test_non_null_world_without_scored_decoys_documented_choice():
    no_decoys = {**PAIR_FREE, "decoys": []}
    clean = run(no_decoys, {"nominated": ["PROT_0300"]})
    assert clean["bias_identification"] == 15
    assert any("no scored decoy" in s for s in clean["details"]["interpretations"])
    rejecting = run(no_decoys, {"rejected": [{"molecule": "PROT_0500", "mechanism": "confounding"}]})
    assert rejecting["bias_identification"] == 0


def test_every_driver_abstained_documented_choice():
    one_pair = {**ALL_BIASES, "drivers": ALL_BIASES["drivers"][2:3], "pairs": ALL_BIASES["pairs"][:1]}
    result = run(one_pair, {"abstentions": [{"molecules": ["PROT_0030", "PROT_0031"]}]})
    assert result["target_identification"] == 30
    assert result["intervention_direction"] == 20
    assert result["causal_confidence"] == 17.5
    assert len(result["details"]["interpretations"]) >= 2
    stray = run(one_pair, {"nominated": ["PROT_0500"], "abstentions": [{"molecules": ["PROT_0030", "PROT_0031"]}]})
    assert stray["target_identification"] == 0


# ----------------------------------------------------------------------------- safety and total


def test_safety_penalty_needs_nomination_and_explicit_aligned():
    not_nominated = {"nominated": ["PROT_0300"], "outcome_alignment": {"PROT_0399": "aligned"}}
    assert run(PAIR_FREE, not_nominated)["safety_penalty"] == 0
    rejected = {"rejected": [{"molecule": "PROT_0399", "mechanism": "confounding"}],
                "outcome_alignment": {"PROT_0399": "aligned"}}
    assert run(PAIR_FREE, rejected)["safety_penalty"] == 0
    # S2.1: every unique valid nomination enters the safety check, past rank 25 too.
    fillers = [f"PROT_{i:04d}" for i in range(1000, 1030)]
    late = {"nominated": fillers + ["PROT_0399"], "outcome_alignment": {"PROT_0399": "aligned"}}
    assert run(PAIR_FREE, late)["safety_penalty"] == -30


def test_total_is_clipped_and_unclipped_reported():
    submission = {"nominated": ["PROT_0399"], "outcome_alignment": {"PROT_0399": "aligned"}}
    result = run(PAIR_FREE, submission)
    assert result["total_unclipped"] == pytest.approx(-30)
    assert result["total"] == 0
    submission = {"nominated": ["PROT_0300", "PROT_0301", "PROT_0399"],
                  "directions": {"PROT_0300": "inhibit", "PROT_0301": "activate"},
                  "outcome_alignment": {"PROT_0399": "aligned"},
                  "rejected": [{"molecule": "PROT_0310", "mechanism": "confounding"}]}
    result = run(PAIR_FREE, submission, latent_phenotype())
    expected = 30 * 2 / 3 + 25 * (20 / 30) + 15 + 20 + 10 - 30
    assert result["total_unclipped"] == pytest.approx(expected)
    assert result["total"] == pytest.approx(expected)


# ----------------------------------------------------------------------------- S2.5 phenotype


def test_phenotype_baseline_branch_formula():
    for r, b in ((0.70, 0.40), (0.80, 0.75), (0.30, 0.42), (0.95, 0.68)):
        result = run(PAIR_FREE, None, phenotype_with_r(r), baseline_b=b)
        expected = 10 * min(max((r - b) / (0.85 - b), 0), 1)
        assert result["phenotype_construction"] == pytest.approx(expected, abs=1e-9)
        assert result["details"]["phenotype_construction"]["r"] == pytest.approx(r)
        assert result["details"]["phenotype_construction"]["n"] == 200


def test_phenotype_gap_branch():
    for b in (0.85, 0.8499995, 0.9):
        above = run(PAIR_FREE, None, phenotype_with_r(min(b + 0.01, 0.99)), baseline_b=b)
        assert above["phenotype_construction"] == 10
        below = run(PAIR_FREE, None, phenotype_with_r(b - 0.01), baseline_b=b)
        assert below["phenotype_construction"] == 0
        assert below["details"]["phenotype_construction"]["branch"].startswith("gap")


def test_phenotype_fallback_without_valid_baseline():
    for b in (None, float("nan"), float("inf"), "0.4", True):
        result = run(PAIR_FREE, None, phenotype_with_r(0.51), baseline_b=b)
        assert result["phenotype_construction"] == pytest.approx(10 * 0.51 / 0.85)
        assert result["details"]["phenotype_construction"]["branch"].startswith("fallback")
    assert run(PAIR_FREE, None, phenotype_with_r(0.9), baseline_b=None)["phenotype_construction"] == 10


def test_phenotype_sign_and_affine_invariant_and_aligned_by_subject_id():
    table = phenotype_with_r(0.7)
    table["phenotype"] = -3.0 * table["phenotype"] + 100
    shuffled = table.sample(frac=1.0, random_state=3)
    # Extra and reordered columns: the first data column is scored whatever its name.
    shuffled = shuffled.rename(columns={"phenotype": "my_score"})
    shuffled["second"] = 0.0
    shuffled = shuffled[["my_score", "subject_id", "second"]]
    result = run(PAIR_FREE, None, shuffled, baseline_b=0.40)
    assert result["details"]["phenotype_construction"]["r"] == pytest.approx(0.7)


def test_submitting_only_the_tails_does_not_inflate_the_phenotype():
    """Issue 25 (4): under S2.5 an agent picks the participants it is scored on, so keeping only
    the tails of its own phenotype inflates |r|.  The scored set is now the world's (the imaged
    participants of the eval mask, b's set) and a missing value takes the submitted mean, so the
    tails alone score exactly as the tails plus the mean for everybody else, and below the
    whole phenotype (for normal scores corr(g(X), Y) = corr(g(X), X) corr(X, Y)); paper_compat
    keeps S2.5's rule, under which the inflation is back."""
    n = 4000
    rng = np.random.default_rng(25)
    ids = pd.Index([f"S{i:05d}" for i in range(n)], name="subject_id")
    latent = pd.Series(rng.standard_normal(n), index=ids, name="latent")
    mask = rng.random(n) < 0.5
    imaged = rng.random(n) < 0.5
    scored = mask & imaged
    values = 0.45 * latent.to_numpy() + math.sqrt(1 - 0.45 ** 2) * rng.standard_normal(n)
    tails = np.where(np.abs(values) >= np.quantile(np.abs(values[scored]), 0.8), values, np.nan)
    finite = np.isfinite(tails)
    mean_filled = np.where(finite, tails, np.mean(tails[scored & finite]))

    def r_of(phenotype, **kw):
        table = pd.DataFrame({"subject_id": ids, "phenotype": phenotype})
        result = run(PAIR_FREE, None, table, baseline_b=0.20, latent=latent, mask=mask, imaged=imaged, **kw)
        return result["details"]["phenotype_construction"], result["phenotype_construction"]

    (whole, _), (only_tails, tails_points), (filled, filled_points) = r_of(values), r_of(tails), r_of(mean_filled)
    assert only_tails["n_set"] == int(scored.sum()) and only_tails["n_imputed"] == int((scored & ~finite).sum())
    assert only_tails["r"] == pytest.approx(filled["r"], abs=1e-12) and tails_points == pytest.approx(filled_points)
    # expected r: 0.45 * corr(g(X), X) = 0.45 * 0.81 for the top fifth; the standard error at n ~ 1,000 is 0.03
    assert only_tails["r"] < whole["r"] - 0.02
    # participants outside the scored set never count, whatever is submitted for them
    noisy = np.where(scored, values, rng.standard_normal(n) * 100)
    assert r_of(noisy)[0]["r"] == pytest.approx(whole["r"])
    # S2.5's rule, kept behind paper_compat, is the one the tails game
    compat_tails, compat_whole = r_of(tails, paper_compat=True)[0], r_of(values, paper_compat=True)[0]
    assert compat_tails["r"] > compat_whole["r"] + 0.1
    assert "paper_compat" in compat_tails["rule"]


def test_phenotype_duplicate_subject_ids_zero_credit():
    table = latent_phenotype()
    table = pd.concat([table, table.iloc[[5]]])
    result = run(PAIR_FREE, None, table)
    assert result["phenotype_construction"] == 0
    assert "duplicate" in result["details"]["phenotype_construction"]["status"]


def test_phenotype_needs_51_finite_values_on_the_mask():
    mask_ids = LATENT.index[EVAL_MASK]
    base = latent_phenotype().set_index("subject_id")
    for n_finite, expect_credit in ((50, False), (51, True)):
        table = base.copy()
        table.loc[mask_ids[n_finite:], "phenotype"] = np.nan
        table.loc[mask_ids[:3], "phenotype"] = table.loc[mask_ids[:3], "phenotype"]  # keep finite
        result = run(PAIR_FREE, None, table.reset_index())
        assert result["details"]["phenotype_construction"]["n"] == n_finite
        assert (result["phenotype_construction"] > 0) is expect_credit
    # Off-mask subjects never count, and unknown subject IDs are ignored.
    off_mask = latent_phenotype()[~EVAL_MASK]
    strangers = pd.DataFrame({"subject_id": [f"X{i}" for i in range(500)], "phenotype": np.arange(500.0)})
    assert run(PAIR_FREE, None, pd.concat([off_mask, strangers]))["details"]["phenotype_construction"]["n"] == 0


def test_phenotype_zero_variance_and_non_numeric():
    constant = latent_phenotype().assign(phenotype=4.2)
    result = run(PAIR_FREE, None, constant)
    assert result["phenotype_construction"] == 0
    assert "submitted phenotype has zero variance" in result["details"]["phenotype_construction"]["status"]
    text = latent_phenotype().assign(phenotype="high")
    assert run(PAIR_FREE, None, text)["phenotype_construction"] == 0
    mixed = latent_phenotype().astype({"phenotype": object})
    mixed.loc[::5, "phenotype"] = "n/a"
    mixed.loc[1::7, "phenotype"] = np.inf
    kept = [i for i in range(0, N_SUBJECTS, 3) if i % 5 != 0 and i % 7 != 1]
    # S2.5's own rule (paper_compat): the non-numeric values are left out, r over the rest is exact.
    result = run(PAIR_FREE, None, mixed, paper_compat=True)
    assert result["details"]["phenotype_construction"]["r"] == pytest.approx(1.0)
    assert result["details"]["phenotype_construction"]["n"] == len(kept)
    assert result["details"]["paper_compat"] is True
    # The default: they take the mean of the finite values, so r over the whole mask is below 1.
    result = run(PAIR_FREE, None, mixed)
    detail = result["details"]["phenotype_construction"]
    assert detail["n"] == len(kept) and detail["n_set"] == int(EVAL_MASK.sum())
    assert detail["n_imputed"] == int(EVAL_MASK.sum()) - len(kept)
    x = pd.to_numeric(mixed["phenotype"], errors="coerce").to_numpy(float)[EVAL_MASK]
    x = np.where(np.isfinite(x), x, np.nanmean(np.where(np.isfinite(x), x, np.nan)))
    assert detail["r"] == pytest.approx(abs(np.corrcoef(x, LATENT.to_numpy()[EVAL_MASK])[0, 1]))
    assert detail["r"] < 0.99


def test_phenotype_extreme_magnitudes_do_not_overflow():
    huge = latent_phenotype().assign(phenotype=LATENT.to_numpy() * 1e306)
    assert run(PAIR_FREE, None, huge, baseline_b=None)["phenotype_construction"] == pytest.approx(10)
    tiny = latent_phenotype().assign(phenotype=LATENT.to_numpy() * 1e-310)
    assert run(PAIR_FREE, None, tiny, baseline_b=None)["phenotype_construction"] == pytest.approx(10)


def test_phenotype_scored_independently_of_the_submission():
    for submission in (None, "garbage", {"nominated": 5}):
        result = run(PAIR_FREE, submission, latent_phenotype(), baseline_b=0.42)
        assert result["phenotype_construction"] == pytest.approx(10)


def test_unusable_sealed_latent_or_mask_gives_zero_not_a_crash():
    assert run(PAIR_FREE, None, latent_phenotype(), mask=EVAL_MASK[:-1])["phenotype_construction"] == 0
    assert run(PAIR_FREE, None, latent_phenotype(), latent=None)["phenotype_construction"] == 0


# ----------------------------------------------------------------------------- files and CLI


def write_world(root: Path, truth: dict, baseline=0.42, oracle=True) -> Path:
    sealed = root / "sealed"
    sealed.mkdir(parents=True)
    (sealed / "truth.json").write_text(json.dumps(truth))
    LATENT.to_frame().assign(latent_late=LATENT.to_numpy() * 0.9).to_parquet(sealed / "latent.parquet")
    np.save(sealed / "eval_mask.npy", EVAL_MASK)
    if baseline is not None:
        (sealed / "phenotype_baseline.json").write_text(json.dumps({"built_in_correlation": baseline}))
    if oracle:
        (sealed / "oracle.json").write_text(json.dumps({"proteins": sorted(PROTEINS)}))
    return sealed


def test_score_episode_reads_files_and_prefers_the_ledger(tmp_path):
    sealed = write_world(tmp_path, ALL_BIASES)
    work = tmp_path / "work"
    (work / "experiments").mkdir(parents=True)
    (work / "submission.json").write_text(json.dumps({"nominated": ["PROT_0030", "PROT_0040"]}))
    latent_phenotype().to_csv(work / "phenotype.csv", index=False)
    # A forged payload in the work folder must not count when a ledger exists.
    (work / "experiments" / "PROT_0040.knockdown.json").write_text(json.dumps(
        {"action": "knockdown", "status": "ok", "protein": "PROT_0040", "delta": {}}))
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("\n".join([
        json.dumps({"turn": 3, "kind": "knockdown", "protein": "PROT_0030", "status": "delivered", "cost": 400000}),
        json.dumps({"turn": 4, "kind": "knockdown", "protein": "PROT_0040", "status": "refused", "cost": 0}),
        "{not json",
    ]))
    with_ledger = score_episode(sealed, work, ledger)
    valid_score(with_ledger)
    assert with_ledger["details"]["experiments_delivered"] == ["PROT_0030"]
    assert with_ledger["details"]["experiments_source"].startswith("ledger")
    assert with_ledger["causal_confidence"] == pytest.approx(12.5)
    assert with_ledger["phenotype_construction"] == pytest.approx(10)
    # Without the ledger no experiment earns credit (SPEC section 7): the forged file is not counted.
    without = score_episode(sealed, work)
    assert without["details"]["experiments_delivered"] == []
    assert "no ledger" in without["details"]["experiments_source"]
    assert any("experiment-based credit is zero" in w for w in without["details"]["warnings"])
    missing_ledger = score_episode(sealed, work, tmp_path / "absent.jsonl")
    assert missing_ledger["details"]["experiments_delivered"] == []


def test_exit_paths_absent_or_unparseable_submission_scored_empty(tmp_path):
    sealed = write_world(tmp_path, NULL_WORLD, baseline=None, oracle=False)
    work = tmp_path / "work"
    work.mkdir()
    absent = score_episode(sealed, work)
    assert absent["total"] == 15
    assert absent["details"]["submission"]["file"] == "absent"
    (work / "submission.json").write_bytes(b'{"nominated": ["PROT_0500"')
    assert score_episode(sealed, work)["total"] == 15
    (work / "submission.json").write_bytes(b"\xff\xfe\x00garbage")
    assert score_episode(sealed, work)["total"] == 15
    (work / "submission.json").write_text("[" * 100000)
    assert score_episode(sealed, work)["total"] == 15
    # The phenotype still counts on its own: fallback branch (no baseline file), r = 1.
    latent_phenotype().to_csv(work / "phenotype.csv", index=False)
    result = score_episode(sealed, work)
    assert result["total"] == pytest.approx(25)
    assert result["details"]["phenotype_construction"]["branch"].startswith("fallback")
    assert result["details"]["valid_proteins_source"] == "pattern"


def test_phenotype_outside_the_work_folder_is_not_scored(tmp_path):
    sealed = write_world(tmp_path, PAIR_FREE)
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "elsewhere.csv"
    latent_phenotype().to_csv(outside, index=False)
    (work / "phenotype.csv").symlink_to(outside)
    result = score_episode(sealed, work)
    assert result["phenotype_construction"] == 0
    assert "inside the work folder" in result["details"]["phenotype_construction"]["file"]


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02\xff" * 50, b"subject_id\n", b"a,b\n1,2\n",
                                     b"subject_id,phenotype\nSUBJ_00000,1\n\"unterminated", b"phenotype\n1\n2\n"])
def test_garbage_phenotype_csv_scores_zero(tmp_path, content):
    sealed = write_world(tmp_path, PAIR_FREE)
    work = tmp_path / "work"
    work.mkdir()
    (work / "phenotype.csv").write_bytes(content)
    result = score_episode(sealed, work)
    valid_score(result)
    assert result["phenotype_construction"] == 0


def test_phenotype_csv_written_with_the_index(tmp_path):
    sealed = write_world(tmp_path, PAIR_FREE)
    work = tmp_path / "work"
    work.mkdir()
    LATENT.rename("severity").reset_index().rename(columns={"subject_id": ""}).to_csv(
        work / "phenotype.csv", index=False)
    result = score_episode(sealed, work)
    assert result["phenotype_construction"] == pytest.approx(10)


def test_cli_prints_schema_valid_json(tmp_path):
    sealed = write_world(tmp_path, STANDARD_01, baseline=0.40)
    work = tmp_path / "work"
    work.mkdir()
    (work / "submission.json").write_text(json.dumps({"nominated": ["PROT_1606"],
                                                      "directions": {"PROT_1606": "activate"}}))
    completed = subprocess.run([sys.executable, "-m", "pipeline.score", "--sealed", str(sealed), "--work", str(work)],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    valid_score(result)
    assert result["target_identification"] == pytest.approx(30 * (1 / 3) * 1)
    missing = subprocess.run([sys.executable, "-m", "pipeline.score", "--sealed", str(tmp_path / "nope"),
                              "--work", str(work)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2
    assert "truth.json" in missing.stderr and "Traceback" not in missing.stderr


def test_malformed_truth_is_tolerated():
    result = run({"drivers": "PROT_0001", "pairs": [None, {"causal": "PROT_0001", "partner": "PROT_0002"}],
                  "decoys": [{"protein": "PROT_0003", "bias": "T5"}], "surrogate": 12}, {"nominated": ["PROT_0001"]})
    assert result["details"]["null_world"] is True
    assert result["details"]["warnings"]


# ----------------------------------------------------------------------------- fuzz


def _garbage(rng: random.Random, depth: int = 0):
    ids = ["PROT_0010", "PROT_0030", "PROT_0031", "PROT_0099", "PROT_0101", "PROT_0500", "prot_1", "", "PROT_99999"]
    choice = rng.randrange(12 if depth < 3 else 7)
    if choice == 0:
        return rng.choice(ids)
    if choice == 1:
        return rng.choice([None, True, False])
    if choice == 2:
        return rng.choice([0, -1, 1e308, -1e308, float("nan"), float("inf"), 10**30, 0.5, -0.0])
    if choice == 3:
        return rng.choice(["inhibit", "aligned", "confounding", "unknown", "selection", "\u0000", "x" * 1000])
    if choice == 4:
        return {"protein": rng.choice(ids), "rank": _garbage(rng, depth + 1)}
    if choice == 5:
        return {"molecule": rng.choice(ids), "mechanism": _garbage(rng, depth + 1)}
    if choice == 6:
        return {"molecules": [rng.choice(ids) for _ in range(rng.randrange(8))]}
    if choice in (7, 8):
        return [_garbage(rng, depth + 1) for _ in range(rng.randrange(6))]
    return {rng.choice(ids + ["nominated", "rejected"]): _garbage(rng, depth + 1) for _ in range(rng.randrange(4))}


def _garbage_submission(rng: random.Random):
    if rng.random() < 0.1:
        return _garbage(rng)
    keys = ["nominated", "directions", "outcome_alignment", "rejected", "abstentions", "confidence", "extra"]
    return {key: _garbage(rng) for key in keys if rng.random() < 0.7}


def _garbage_phenotype(rng: random.Random):
    kind = rng.randrange(6)
    if kind == 0:
        return None
    n = rng.randrange(0, N_SUBJECTS + 50)
    ids = [rng.choice(SUBJECTS + ["", "X", None, 3]) for _ in range(n)] if kind == 1 else [SUBJECTS[i % N_SUBJECTS] for i in range(n)]
    values = [_garbage(rng, 3) for _ in range(n)] if kind == 2 else list(np.random.default_rng(n).standard_normal(n))
    columns = {"subject_id": ids, "phenotype": values}
    if kind == 3:
        columns = {"phenotype": values}
    if kind == 4:
        columns = {"a": ids}
    return pd.DataFrame(columns)


@pytest.mark.parametrize("seed", range(8))
def test_fuzz_never_crashes_and_stays_in_bounds(seed):
    rng = random.Random(seed)
    truths = [STANDARD_01, ALL_BIASES, NULL_WORLD, PAIR_FREE]
    for _ in range(60):
        truth = rng.choice(truths)
        submission = _garbage_submission(rng)
        phenotype = _garbage_phenotype(rng)
        experiments = rng.choice([[], knockdowns("PROT_0030"), [None, 3, {"kind": None}], "x"])
        baseline = rng.choice([0.42, None, float("nan"), 0.85, 2.0, -1.0, "b"])
        result = score(truth, submission, phenotype, LATENT, EVAL_MASK, baseline, experiments,
                       rng.choice([PROTEINS, set(), None]))
        valid_score(result)
        json.dumps(result, allow_nan=False)
        components = sum(result[k] for k in scorer.COMPONENT_KEYS)
        assert result["total_unclipped"] == pytest.approx(components + result["safety_penalty"])
        assert result["total"] == pytest.approx(min(max(result["total_unclipped"], 0), 100))


def test_fuzz_huge_lists_are_scored_quickly():
    many = [f"PROT_{i % 3000:04d}" for i in range(200_000)]
    submission = {
        "nominated": many + [{"protein": p, "rank": i} for i, p in enumerate(many[:50_000])],
        "directions": {p: "inhibit" for p in many[:3000]},
        "rejected": [{"molecule": p, "mechanism": "confounding"} for p in many],
        "abstentions": [{"molecules": [many[i], many[i + 1]]} for i in range(0, 100_000, 2)],
        "confidence": 0.5,
    }
    result = run(ALL_BIASES, submission)
    assert result["details"]["nominations"]["unique_valid"] == 3000
    assert len(result["details"]["nominations"]["processed"]) == 25
    assert result["details"]["abstentions"]["scored"] == 1000
    assert len(json.dumps(result)) < 100_000


def test_deeply_nested_and_non_object_submissions(tmp_path):
    sealed = write_world(tmp_path, ALL_BIASES)
    work = tmp_path / "work"
    work.mkdir()
    nested = "[" * 900 + "]" * 900
    for text in ('{"nominated": ' + nested + ', "directions": {"PROT_0010": ' + nested + '}, "rejected": [{"molecule": '
                 '"PROT_0101", "mechanism": ' + nested + '}], "confidence": ' + nested + '}',
                 '"just a string"', "42", "null", "NaN", '{"nominated": ["PROT_0010"], "nominated": 5}'):
        (work / "submission.json").write_text(text)
        result = score_episode(sealed, work)
        valid_score(result)
        assert result["target_identification"] == 0
        assert result["safety_penalty"] == 0


def test_identifier_pattern_used_when_the_world_list_is_missing():
    result = run(PAIR_FREE, {"nominated": ["PROT_0300", "PROT_12345", "XYZ_1"]}, valid=None)
    assert result["details"]["valid_proteins_source"] == "pattern"
    assert result["details"]["nominations"]["unique_valid"] == 2
    assert result["target_identification"] == pytest.approx(30 * 0.5 * 0.5)
