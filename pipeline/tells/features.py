"""Role-blind per-protein statistics of one release: what an analyst can compute
about each protein without ever looking at disease, outcomes, imaging or the
latent severity (SPEC section 3).

``protein_statistics(release, genotypes)`` returns one row per protein and one
column per statistic, named ``group.name``.  The same functions serve the tell
scan (``pipeline.tells.scan``, many worlds, sealed roles known) and the exploit
agent (``pipeline.agents.tells``, one release inside the sandbox): the agent
emits their source with ``inspect.getsource``, so every function here is
self-contained (imports inside, no module-level names, helpers passed in the
emitted library) and reads only the release.

Three views of the proteins are used:

* *site-normalised* values (each protein standardised within each assessment
  centre): the default view.  A per-site unit or scale problem (T9's planted
  signal) disappears in it, so every other statistic of the T9 decoy is
  compared fairly;
* *raw* values (cohort-standardised, as released): shape and centre statistics
  and a few raw twins of the default ones, which T9's site scale moves by
  design (exempt for T9 in the scan);
* *adjusted* values: site-normalised values with the measured covariates
  (age, sex, BMI, smoking, activity, centre, ancestry) regressed out, for the
  correlation structure (communality, transcript agreement beyond covariates).

Genetics: each protein's lead variant is found by the analyst's own scan (the
variant with the largest |r| with the protein over all variants); the release
carries no cis annotation.  Variant positions come from the genotype Zarr store
(or the VCF when the store is absent).

This module assembles the statistics (``protein_statistics``) and emits the library
(``LIBRARY``, ``library_source``); the views are ``pipeline.tells.views``, the genetics
``pipeline.tells.genetics`` and the per-group statistics ``pipeline.tells.statistics``
(every name importable from here too).
"""
from __future__ import annotations

import inspect
import os

from .genetics import genotype_matrix, instrument_statistics, lead_scan, variant_positions
from .statistics import (change_statistics, communality_statistics, covariate_statistics, cross_omics_statistics,
                         flag_association, group_statistics, partial_statistics, pc_membership,
                         targetability_statistics, visit2_statistics)
from .views import (covariate_design, residualise, shape_statistics, standardise_columns, standardise_within,
                    top_component_share)


def protein_statistics(release, genotypes, max_subjects=None):
    """One row per protein (index: protein id), one column per role-blind statistic."""
    import os
    import re

    import numpy as np
    import pandas as pd

    read = lambda name: pd.read_parquet(os.path.join(release, name))  # noqa: E731
    covariates = read("covariates.parquet")
    covariates.index = covariates.index.astype(str)
    proteins = read("proteomics.parquet")
    proteins.index = proteins.index.astype(str)
    subjects = covariates.index.intersection(proteins.index)
    if max_subjects is not None and len(subjects) > max_subjects:
        subjects = subjects[:max_subjects]
    covariates = covariates.loc[subjects]
    ids = [str(c) for c in proteins.columns]
    raw = np.array(proteins.loc[subjects], dtype=np.float64)
    del proteins
    design, main, centre = covariate_design(covariates)
    n, p = raw.shape
    stats = {}

    # --- views of the proteins
    site = standardise_within(raw, centre)
    cohort = standardise_columns(raw)
    adjusted = standardise_columns(residualise(site, design))

    # --- transcripts (paired TRANS_n <-> PROT_n)
    transcripts = read("transcriptomics.parquet")
    transcripts.index = transcripts.index.astype(str)
    names = [re.sub(r"^PROT_", "TRANS_", c) for c in ids]
    traw = np.array(transcripts.reindex(index=subjects, columns=names), dtype=np.float64)
    del transcripts
    tsite = standardise_within(traw, centre)
    tadjusted = standardise_columns(residualise(tsite, design))
    stats["transcript.r"] = (site * tsite).mean(axis=0)
    stats["transcript.r_raw"] = (cohort * standardise_columns(traw)).mean(axis=0)
    stats["transcript.r_adjusted"] = (adjusted * tadjusted).mean(axis=0)
    ranks = lambda x: standardise_columns(np.argsort(np.argsort(x, axis=0), axis=0).astype(np.float64))  # noqa: E731
    rank_r = np.empty(p)
    for start in range(0, p, 256):  # in column blocks (each column on its own)
        sl = slice(start, start + 256)
        rank_r[sl] = (ranks(site[:, sl]) * ranks(tsite[:, sl])).mean(axis=0)
    stats["transcript.rank_minus_linear_r"] = rank_r - stats["transcript.r"]
    cross = adjusted.T @ tadjusted / n
    np.fill_diagonal(cross, 0.0)
    stats["transcript.best_other_abs_r"] = np.abs(cross).max(axis=1)
    stats["transcript.pc12"] = top_component_share(tadjusted, 12)
    for name, values in covariate_statistics(tsite, design, main).items():
        if name in ("age", "sex", "bmi", "smoking", "r2"):
            stats[f"transcript.covariate_{name}"] = values
    t_missing = ~np.isfinite(traw)
    stats["transcript.missing_rate"] = t_missing.mean(axis=0)
    del traw
    tsite = tsite.astype(np.float32)  # kept for the transcripts' own genotype scan (float32 there anyway)

    # --- correlation structure and other assays
    for name, values in communality_statistics(adjusted).items():
        stats[f"communality.{name}"] = values
    partial, partner = partial_statistics(adjusted)
    for name, values in partial.items():
        stats[f"partial.{name}"] = values
    for name, values in pc_membership(adjusted).items():
        stats[f"pcs.{name}"] = values
    if "imaged" in covariates.columns:
        imaged = np.array(pd.to_numeric(covariates["imaged"], errors="coerce"), dtype=np.float64)
        stats["imaging.flag_z"] = flag_association(adjusted, np.nan_to_num(imaged), design)
    stats["communality.raw_pc12"] = top_component_share(cohort, 12)
    for name, values in cross_omics_statistics(adjusted, tadjusted, "transcriptome").items():
        stats[f"communality.{name}"] = values
    try:
        metabolites = read("metabolomics.parquet")
        metabolites.index = metabolites.index.astype(str)
        mraw = np.array(metabolites.reindex(subjects), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            mlog = np.log(np.where(mraw > 0, mraw, np.nan))  # concentrations are log-normal
        madjusted = standardise_columns(residualise(standardise_within(mlog, centre), design))
        for name, values in cross_omics_statistics(adjusted, madjusted, "metabolome", pcs=10).items():
            stats[f"communality.{name}"] = values
    except FileNotFoundError:
        pass

    # --- covariate signature (site view) and centre heterogeneity (raw view)
    for name, values in covariate_statistics(site, design, main).items():
        stats[f"covariates.{name}"] = values
    for name, values in group_statistics(cohort, centre).items():
        stats[f"covariates.{name}_raw"] = values
    if "p21000_i0" in covariates.columns:
        ancestry = covariates["p21000_i0"].astype(str).to_numpy()
        stats["covariates.ancestry_mean_F"] = group_statistics(site, ancestry)["centre_mean_F"]
    if "p53_i0" in covariates.columns:
        day = np.array(pd.to_datetime(covariates["p53_i0"], errors="coerce").astype("int64"), dtype=np.float64)
        stats["covariates.assessment_date_r"] = (site * standardise_columns(day[:, None])).mean(axis=0)

    # --- distribution shape
    for name, values in shape_statistics(site).items():
        stats[f"shape.{name}"] = values
    for name, values in shape_statistics(cohort).items():
        stats[f"shape.{name}_raw"] = values
    del cohort
    finite = np.isfinite(raw)
    stats["shape.unique_fraction"] = np.array([len(np.unique(raw[finite[:, j], j])) / max(finite[:, j].sum(), 1)
                                               for j in range(p)])

    # --- missingness
    missing = ~finite
    stats["missing.rate"] = missing.mean(axis=0)
    zb = main["bmi"]
    n_missing = missing.sum(axis=0)
    mean_missing = (missing * zb[:, None]).sum(axis=0) / np.maximum(n_missing, 1)
    mean_present = (~missing * zb[:, None]).sum(axis=0) / np.maximum(n - n_missing, 1)
    se = np.sqrt(1.0 / np.maximum(n_missing, 1) + 1.0 / np.maximum(n - n_missing, 1))
    stats["missing.bmi_shift_z"] = np.where(n_missing >= 2, (mean_missing - mean_present) / se, 0.0)
    stats["missing.with_transcript"] = ((missing & t_missing).sum(axis=0) / np.maximum(n_missing, 1))

    # --- visit 2
    try:
        v2 = read("proteomics_visit2.parquet")
        v2.index = v2.index.astype(str)
        attendees = v2.index.intersection(subjects)
        rows = pd.Index(subjects).get_indexer(attendees)
        base2 = raw[rows]
        later = np.array(v2.loc[attendees, ids], dtype=np.float64)
        for name, values in visit2_statistics(base2, later, centre[rows]).items():
            stats[f"visit2.{name}"] = values

        def adjusted_view(x):  # residuals on the attendees' baseline covariates (gaps at the mean)
            x = np.where(np.isfinite(x), x, np.nanmean(np.where(np.isfinite(x), x, np.nan), axis=0))
            return residualise(np.nan_to_num(x), design[rows])

        stats["visit2.r_adjusted"] = visit2_statistics(adjusted_view(base2), adjusted_view(later), centre[rows])["r"]
        stats["visit2.missing_rate"] = (~np.isfinite(later)).mean(axis=0)
        bmi_change = np.full(len(attendees), np.nan)
        try:
            cov2 = read("covariates_visit2.parquet")
            cov2.index = cov2.index.astype(str)
            if "p21001_i0" in cov2.columns or "p21001_i2" in cov2.columns:
                col = "p21001_i2" if "p21001_i2" in cov2.columns else "p21001_i0"
                b2 = np.array(pd.to_numeric(cov2.reindex(attendees)[col], errors="coerce"), dtype=np.float64)
                b1 = np.array(pd.to_numeric(covariates.loc[attendees, "p21001_i0"], errors="coerce"), dtype=np.float64)
                b1[b1 < 0], b2[b2 < 0] = np.nan, np.nan
                bmi_change = b2 - b1
        except FileNotFoundError:
            pass
        for name, values in change_statistics(base2, later, partner, bmi_change, centre[rows]).items():
            stats[f"visit2.{name}"] = values
    except FileNotFoundError:
        pass

    # --- genetics: the analyst's own lead-variant scan
    del adjusted, tadjusted
    gz, q, variant_ids = genotype_matrix(genotypes, subjects)
    contig, position = variant_positions(release, variant_ids)
    inst, lead, lead_r = instrument_statistics(gz, q, contig, position, site)
    for name, values in inst.items():
        stats[f"instrument.{name}"] = values
    tlead, tlead_r = lead_scan(gz, tsite)
    stats["transcript.lead_r2"] = tlead_r ** 2
    stats["transcript.protein_lead_r2"] = np.array([float(np.mean(gz[:, v].astype(np.float64) * tsite[:, j]))
                                                     for j, v in enumerate(lead)]) ** 2

    # --- targetability and identifiers
    try:
        for name, values in targetability_statistics(read("targetability.parquet"), ids).items():
            stats[f"targetability.{name}"] = values
    except FileNotFoundError:
        pass
    stats["order.id_number"] = np.array([float(re.sub(r"\D", "", c) or 0) for c in ids])
    stats["order.column"] = np.arange(p, dtype=np.float64)

    table = pd.DataFrame(stats, index=pd.Index(ids, name="protein"))
    table["instrument.lead_variant"] = np.asarray(variant_ids)[lead]
    return table


LIBRARY = (standardise_columns, standardise_within, residualise, covariate_design, top_component_share,
           shape_statistics, genotype_matrix, lead_scan, variant_positions, instrument_statistics,
           communality_statistics, partial_statistics, pc_membership, cross_omics_statistics, covariate_statistics,
           group_statistics, visit2_statistics, flag_association, change_statistics, targetability_statistics,
           protein_statistics)


def library_source() -> str:
    """The statistics as source code, for an agent to emit into the sandbox."""
    return "\n\n".join(inspect.getsource(f) for f in LIBRARY)


def source_files() -> list:
    """The files of the library's functions (the tell scan's cache key reads them)."""
    return sorted({os.path.abspath(inspect.getsourcefile(f)) for f in LIBRARY})
