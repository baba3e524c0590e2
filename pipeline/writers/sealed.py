"""The sealed bundle (SPEC section 6): everything only the scorer and the oracle
may read.  This module never writes under ``release/``; the release writers
never import it.
"""
from __future__ import annotations

import io
import json
import posixpath

import numpy as np
import pandas as pd
import yaml

from ..modalities.population import ANCESTRY_BMI
from ..world import World, oracle_spec, truth
from .release.parquet import table_bytes


def hidden_model(world: World, cohort) -> dict:
    """World-level hidden parameters the validation report needs (never released)."""
    r = world.roles
    pid = world.protein_ids
    return {
        "format_version": "1",
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


def hidden_participants(world: World, cohort, traits_z: dict | None, traits_clinical: dict | None = None) -> pd.DataFrame:
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


def latent_table(world: World, cohort) -> pd.DataFrame:
    return pd.DataFrame({"latent": cohort.latent, "latent_late": cohort.latent_late},
                        index=pd.Index(world.subject_ids(), name="subject_id", dtype=object))


def write_sealed(output, world: World, cohort, resolved_plain: dict, oracle_cfg: dict, baseline: dict | None,
                 traits_z: dict | None = None, traits_clinical: dict | None = None) -> None:
    s = output.sealed
    output.makedirs(s)
    output.write_json(posixpath.join(s, "truth.json"), truth(world))
    output.write_bytes(posixpath.join(s, "latent.parquet"), table_bytes(latent_table(world, cohort)))
    buf = io.BytesIO()
    np.save(buf, cohort.eval_mask.astype(bool), allow_pickle=False)
    output.write_bytes(posixpath.join(s, "eval_mask.npy"), buf.getvalue())
    output.write_json(posixpath.join(s, "oracle.json"), oracle_spec(world, oracle_cfg))
    output.write_json(posixpath.join(s, "hidden_model.json"), hidden_model(world, cohort))
    output.write_bytes(posixpath.join(s, "hidden_participants.parquet"), table_bytes(hidden_participants(world, cohort, traits_z, traits_clinical)))
    # The world-determining config only: where it ran (cluster) and where it was
    # written (out, seeds path) do not change a byte of the world.
    resolved = {k: v for k, v in resolved_plain.items() if k not in ("cluster", "out", "seeds")}
    resolved["seed_int"] = str(world.seed)
    from .. import __version__

    resolved["generator_version"] = __version__
    output.write_text(posixpath.join(s, "world.yaml"), yaml.safe_dump(resolved, sort_keys=True))
    if baseline is not None:
        output.write_json(posixpath.join(s, "phenotype_baseline.json"), baseline)


def read_truth(sealed_dir: str) -> dict:
    with open(posixpath.join(sealed_dir, "truth.json")) as fh:
        return json.load(fh)
