"""A block's molecules as the build makes them (``pipeline.modalities.molecules``,
``measurement.released``): the row-wise kernels give the values of the numpy process they
replaced (``measurement.apply`` is that process for the measurement step), on worlds with
the T9 site, messy missingness and co-regulated pairs."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline import config
from pipeline.model.sampler import sample_world
from pipeline.modalities import measurement, molecules
from pipeline.modalities.population import population_block


@pytest.fixture(scope="module", params=["standard-01", "hard-01", "hard-messy-01"])
def block(request):
    world = sample_world(config.load([f"world={request.param}", "scale=tiny"]))
    b = 1
    pop = population_block(world, b)
    hap = molecules.haplotypes(world, b)
    return world, b, pop, molecules.BlockMolecules(world, b, pop, hap[:, 0] + hap[:, 1])


def test_released_columns_are_the_measurement_process(block):
    world, b, pop, mol = block
    raw = {"proteomics": mol.proteins_raw(), "transcriptomics": mol.transcripts_raw(), "metabolomics": mol.metabolites_raw()}
    t9 = (0.2, 1.4) if world.t9_centre is not None else None
    for table, x in raw.items():
        z = (x - x.mean(0)) / x.std(0)
        want = measurement.apply(world, b, z, pop, table, t9=t9 if table == "proteomics" else None).astype(np.float32)
        got = measurement.released(world, b, z.copy(), pop, table, t9=t9 if table == "proteomics" else None)
        assert got.flags.c_contiguous and got.tobytes() == np.ascontiguousarray(want.T).tobytes()
    rows = np.flatnonzero(np.random.default_rng(0).random(len(pop["age"])) < 0.2)
    v2, _ = mol.proteins_visit2_raw(rows, np.full(len(rows), 5.0), pop["bmi"][rows] + 0.3)
    z = (v2 - raw["proteomics"].mean(0)) / raw["proteomics"].std(0)
    pop2 = {k: v[rows] for k, v in pop.items()}
    want = measurement.apply(world, b, z, pop2, "proteomics_visit2", rows=rows, t9=t9).astype(np.float32)
    got = measurement.released(world, b, z.copy(), pop2, "proteomics_visit2", rows=rows, t9=t9)
    assert got.tobytes() == np.ascontiguousarray(want.T).tobytes()


def test_the_fused_protein_kernel_is_the_step_by_step_path(block):
    """The block's proteins (``kernels.omics.proteins``, row by row) are what the separate
    steps give: the biological part, the covariate terms, ``pathway_values`` and
    ``add_pathways`` (which visit 2 and the test-only leaks call)."""
    world, b, pop, mol = block
    bio = mol._bio(mol.dosage, world.protein_cis, np.sqrt(world.protein_h2), world.protein_master, mol.factors,
                   world.protein_loadings, mol.protein_resid, molecules.residual_scale(world))
    raw = mol._with_covariates(bio, molecules.covariate_matrix(pop), world.protein_cov)
    assert mol._n_pathways() > 0
    k, late = molecules.pathway_values(world, raw, mol.pathway_eps, mol.dosage, pop, mol.anchor_assay_noise())
    molecules.add_pathways(world, raw, bio, k, late)
    for got, want in ((mol.protein_bio, bio), (mol.proteins_raw(), raw), (mol.pathway_k, k), (mol.pathway_late, late)):
        assert np.array_equal(got, want)
    if world.coregulated.size and mol.anchor_assay_noise():  # anchors are read as their abundance
        k_assay, _ = molecules.pathway_values(world, raw, mol.pathway_eps, mol.dosage, pop, {})
        assert not np.array_equal(k_assay, k)


def test_visit2_rows_must_be_ascending(block):
    world, b, pop, mol = block
    with pytest.raises(ValueError):
        mol.proteins_visit2_raw(np.array([5, 2]), np.full(2, 5.0), pop["bmi"][[5, 2]])
