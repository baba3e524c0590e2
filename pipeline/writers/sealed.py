"""The sealed bundle (SPEC section 6): everything only the scorer and the oracle
may read, and the one writer of everything under ``sealed/`` (the truth, the
oracle's spec, the hidden model and participants, the latent severity, the
evaluation mask, the world's config).  This module never writes under
``release/``; the release writers never import it, nor it them.
"""
from __future__ import annotations

import io
import posixpath
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import yaml

from .. import bundle
from ..buildrecord import world_determining
from ..config import DECOY_MECHANISM
from ..manifest import build_manifest
from ..modalities.population import ANCESTRY_BMI
from ..model.world import World
from .parquet import table_bytes

if TYPE_CHECKING:  # annotations only: no import at run time
    from ..modalities.cohort import Cohort


def direction_of(weight: float) -> str:
    """`inhibit` when raising the protein raises L, `activate` when it lowers L."""
    return "inhibit" if weight > 0 else "activate"


def truth(world: World) -> dict:
    """sealed/truth.json: the roles the scorer reads (drivers with their directions, decoys, pairs, the surrogate)."""
    r = world.roles
    pid = world.protein_ids
    drivers = [
        {"protein": pid[p], "direction": direction_of(wl), "weight": round(float(wb), 6),
         "weight_late": round(float(wl), 6), "delayed": bool(d)}
        for p, wb, wl, d in zip(r.drivers, r.weights, r.weights_late, r.delayed)
    ]
    drivers.sort(key=lambda d: d["protein"])
    decoys = [{"protein": pid[p], "bias": b, "mechanism": DECOY_MECHANISM[b]} for b, p in r.decoys.items()]
    decoys.sort(key=lambda d: d["protein"])
    pairs = []
    if r.t4_partner is not None:
        pairs.append({"kind": "T4", "causal": pid[r.t4_causal], "partner": pid[r.t4_partner],
                      "variant": str(world.variant_id[world.protein_cis[r.t4_causal]])})
    if r.a9_partner is not None:
        pairs.append({"kind": "A9", "causal": pid[r.a9_causal], "partner": pid[r.a9_partner], "variant": None})
    return {
        "world_id": world.id,
        "archetype": world.archetype,
        "hard": world.hard,
        "biases": list(world.biases),
        "drivers": drivers,
        "surrogate": pid[r.surrogate] if r.surrogate is not None else None,
        "decoys": decoys,
        "pairs": pairs,
    }


def oracle_spec(world: World, oracle_cfg: dict) -> dict:
    """sealed/oracle.json: what the experiment oracle needs of the world, and its key."""
    r = world.roles
    pid = world.protein_ids
    inter = None
    if r.interaction is not None:
        a, b, coef = r.interaction
        inter = {"a": pid[a], "b": pid[b], "coef": round(float(coef), 6)}
    return {
        "format_version": bundle.FORMAT_VERSION,
        "world_id": world.id,
        "oracle_key": world.oracle_key,
        "hard": world.hard,
        "latent_residual_sd": world.latent_residual,
        "morphology_residual_sd": float(world.params["morphology_residual"]),
        "saturation": float(world.params["bias_params"]["hard"]["saturation"]),
        "interaction": inter,
        "drivers": [{"protein": pid[p], "index": int(p), "weight": round(float(wb), 6), "weight_late": round(float(wl), 6)}
                    for p, wb, wl in sorted(zip(r.drivers, r.weights, r.weights_late))],
        "surrogate": ({"protein": pid[r.surrogate], "index": int(r.surrogate)} if r.surrogate is not None else None),
        "proteins": pid,
        "costs": {"cell_perturbation": 150000, "knockdown": 400000},
        "n": {"cell_perturbation": 120, "knockdown": 800},
        "paper_compat": bool(oracle_cfg.get("paper_compat", False)),
        "realism": bool(oracle_cfg.get("realism", False)),
    }


def hidden_model(world: World, cohort: Cohort) -> dict:
    """World-level hidden parameters the validation report needs (never released)."""
    r = world.roles
    pid = world.protein_ids
    return {
        "format_version": bundle.FORMAT_VERSION,
        "world_id": world.id,
        "protein_cis_variant": [str(world.variant_id[v]) for v in world.protein_cis],
        "protein_h2": [round(float(h), 6) for h in world.protein_h2],
        "protein_trans_variant": [str(world.variant_id[v]) if v >= 0 else None for v in world.protein_master],
        # a follower's own loadings plus what its path carries (pipeline.pathways): its share of the factors
        "protein_loading_ss": [round(float(x), 6) for x in np.square(
            world.protein_loadings if world.pathways is None else world.pathways.total_loadings).sum(axis=1)],
        "transcript_concordance": [round(float(c), 6) for c in world.transcript_concordance],
        "direct_variant": str(world.variant_id[world.direct_variant]),
        "coregulated_pairs": [[pid[int(a)], pid[int(m)]] for a, m in world.coregulated],
        "cis_placement": world.cis_placement,
        # every variant that moves L and its effect per SD of genotype on standardised L and
        # L_late (pipeline.linkage): what the linkage bound is drawn for
        "movers": [{"variant": str(world.variant_id[int(m["variant"])]), "kind": m["kind"],
                    "protein": None if m.get("protein") is None else pid[int(m["protein"])],
                    "beta_l": round(float(m["beta_l"]), 6), "beta_late": round(float(m["beta_late"]), 6)}
                   for m in world.extras.get("movers", [])],
        "polygenic_variants": [str(world.variant_id[int(v)]) for v in world.polygenic_variants],
        "protein_covariates": {"columns": ["age_minus_55", "sex", "bmi_minus_27", "smoking"],
                               "coef": [[round(float(x), 6) for x in row] for row in world.protein_cov]},
        "pathways": None if world.pathways is None else world.pathways.summary(pid),
        "test_leaks": sorted(world.leaks),
        "t3_protein": pid[r.decoys["T3"]] if "T3" in r.decoys else None,
        "t9_centre_index": world.t9_centre,
        "interaction": (None if r.interaction is None else
                        {"a": pid[r.interaction[0]], "b": pid[r.interaction[1]], "coef": r.interaction[2]}),
        "site_fields": None if world.site_fields is None else np.asarray(world.site_fields).tolist(),
        "latent_residual": world.latent_residual,
        "latent_raw_sd": cohort.extras["latent_raw_sd"],
        "latent_late_raw_sd": cohort.extras["latent_late_raw_sd"],
        "special_raw_sd": {pid[p]: float(m[1]) for p, m in cohort.extras["special_moments"].items()},
        "roles": {
            "drivers": [pid[p] for p in r.drivers], "weights": [float(x) for x in r.weights],
            "weights_late": [float(x) for x in r.weights_late],
            "decoys": {b: pid[p] for b, p in r.decoys.items()},
            "t4_causal": None if r.t4_causal is None else pid[r.t4_causal],
            "t4_partner": None if r.t4_partner is None else pid[r.t4_partner],
            "a9_causal": None if r.a9_causal is None else pid[r.a9_causal],
            "a9_partner": None if r.a9_partner is None else pid[r.a9_partner],
            "surrogate": None if r.surrogate is None else pid[r.surrogate],
        },
        "centre_selection": world.centre_selection.tolist(),
        "ancestry_selection": world.ancestry_selection.tolist(),
        "centre_p": world.centre_p.tolist(),
        "centre_age_shift": world.centre_age_shift.tolist(),
        "centre_bmi_shift": world.centre_bmi_shift.tolist(),
        "ancestry_bmi": ANCESTRY_BMI.tolist(),
        "ld_decay_kb": float(world.params["ld_decay_kb"]),
        "af_beta": list(world.params["af_beta"]),
        "standardisation": {
            "age_mean": cohort.age_mean, "age_sd": cohort.age_sd,
            "bmi_mean": float(cohort.pop["bmi"].mean()), "bmi_sd": float(cohort.pop["bmi"].std()),
        },
    }


def hidden_participants(world: World, cohort: Cohort, traits_z: dict | None, traits_clinical: dict | None = None) -> pd.DataFrame:
    """Per-participant hidden variables for the fidelity checks: the imaging
    selection score, true (pre-measurement) abundances of role proteins, the
    standardised morphology traits and the standardised covariates used in L."""
    pid = world.protein_ids
    cols = {
        "selection_score": cohort.selection_score,
        "z_age": cohort.z_age, "z_bmi": cohort.z_bmi, "z_exercise": cohort.z_exercise,
        "g_direct": cohort.extras["g_direct"],
        "g_poly": cohort.extras["g_poly"],
    }
    for p in world.tracked_proteins():
        cols[f"true_{pid[p]}"] = cohort.proteins[int(p)]
        cols[f"gcis_{pid[p]}"] = cohort.g_cis[int(p)]
    for p, v in cohort.extras.get("special_systematic", {}).items():
        # the bias equation's ordinary part other than its residual (cis, trans, factors,
        # covariate terms), on the released column's scale: the fidelity checks regress on it
        cols[f"systematic_{pid[p]}"] = v
    for k, v in (traits_z or {}).items():
        cols[f"trait_{k}"] = v
    for k, v in (traits_clinical or {}).items():
        cols[f"render_{k}"] = np.asarray(v, dtype=np.float64)
    return pd.DataFrame(cols, index=pd.Index(world.subject_ids(), name="subject_id", dtype=object))


def latent_table(world: World, cohort: Cohort) -> pd.DataFrame:
    return pd.DataFrame({"latent": cohort.latent, "latent_late": cohort.latent_late},
                        index=pd.Index(world.subject_ids(), name="subject_id", dtype=object))


def world_record(resolved_plain: dict, seed: int) -> dict:
    """sealed/world.yaml: the world-determining config only (``pipeline.buildrecord.world_determining``:
    where it ran and where it was written change no byte of the world), with the seed and the
    generator's version (``pipeline.config.RECORD_ONLY``)."""
    from .. import __version__

    doc = world_determining(resolved_plain)
    doc["seed_int"] = str(seed)
    doc["generator_version"] = __version__
    return doc


def write_sealed(output: Any, world: World, cohort: Cohort, resolved_plain: dict, oracle_cfg: dict, baseline: dict | None,
                 traits_z: dict | None = None, traits_clinical: dict | None = None,
                 imaging_features: pd.DataFrame | None = None) -> None:
    """Every file of ``sealed/``, its manifest last."""
    s = output.sealed
    output.makedirs(s)
    output.write_json(posixpath.join(s, bundle.TRUTH), truth(world))
    output.write_bytes(posixpath.join(s, bundle.LATENT), table_bytes(latent_table(world, cohort)))
    buf = io.BytesIO()
    np.save(buf, cohort.eval_mask.astype(bool), allow_pickle=False)
    output.write_bytes(posixpath.join(s, bundle.EVAL_MASK), buf.getvalue())
    output.write_json(posixpath.join(s, bundle.ORACLE), oracle_spec(world, oracle_cfg))
    output.write_json(posixpath.join(s, bundle.HIDDEN_MODEL), hidden_model(world, cohort))
    output.write_bytes(posixpath.join(s, bundle.HIDDEN_PARTICIPANTS), table_bytes(hidden_participants(world, cohort, traits_z, traits_clinical)))
    output.write_text(posixpath.join(s, bundle.WORLD_CONFIG), yaml.safe_dump(world_record(resolved_plain, world.seed),
                                                                            sort_keys=True))
    if baseline is not None:
        output.write_json(posixpath.join(s, bundle.PHENOTYPE_BASELINE), baseline)
    if imaging_features is not None:
        # the environment's own measurement of the released baseline pixels (baseline pipeline)
        output.write_bytes(posixpath.join(s, bundle.IMAGING_FEATURES), table_bytes(imaging_features))
    output.write_json(posixpath.join(s, bundle.MANIFEST),
                      build_manifest(output, s, extra={"world_id": world.id, "bundle": bundle.SEALED}))

