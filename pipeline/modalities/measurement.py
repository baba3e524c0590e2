"""The measurement process of the molecular assays: missingness, the T9 unit
mixture at one site, metabolite concentration units, and (hard-messy worlds)
the data problems of a real biobank.  Applied per block to standardised values.

``released`` is what a build calls: ``apply``'s values as the float32 columns of a
block partition, the missingness drawn and applied and the columns transposed in one
pass of ``kernels.omics.released_columns``; ``apply`` is the same process in numpy
(the reference the tests hold ``released`` to).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import seeds, streams

if TYPE_CHECKING:  # annotations only: no import at run time
    from ..model.world import World

MISSING_RATE = {"transcriptomics": 0.002, "metabolomics": 0.01}
# Metabolites are released as concentrations (mmol/L): value = mu exp(sigma z).
# In hard-messy worlds one laboratory (a fixed set of centres) reports mg/dL.
MESSY_LAB_CENTRES = (1, 4, 7)


def metabolite_units(world: World) -> tuple:
    rng = seeds.stream(world.seed, streams.METABOLITE_UNITS)
    mu = np.round(np.exp(rng.normal(-0.5, 1.0, world.n_metabolites)), 4)
    sigma = rng.uniform(0.2, 0.5, world.n_metabolites)
    molar_mass = rng.uniform(60.0, 400.0, world.n_metabolites)  # g/mol, for mmol/L -> mg/dL
    return mu, sigma, molar_mass


def t9_moments(world: World, true_values: np.ndarray, centre: np.ndarray) -> tuple:
    """Mean and SD over the cohort of the decoy as the mixed-unit assay reports it.
    The released column is re-standardised with them, so the column as a whole
    looks like every other standardised protein; the site stays on its own scale."""
    t9 = world.params["bias_params"]["T9"]
    x = np.where(centre == world.t9_centre, t9["scale"] * true_values + t9["offset"], true_values)
    return float(x.mean()), float(x.std())


def _mix_t9_units(world: World, values: np.ndarray, pop: dict, table: str, t9: tuple | None) -> None:
    """T9's planted unit mixing, in place: the decoy's values at the mixing site become
    ``scale * x + offset`` (then standardised by the cohort moments ``t9`` when given)."""
    if not table.startswith("proteomics") or world.t9_centre is None:
        return
    at_site = pop["centre"] == world.t9_centre
    p = world.roles.decoys["T9"]
    t9p = world.params["bias_params"]["T9"]
    values[at_site, p] = t9p["scale"] * values[at_site, p] + t9p["offset"]
    if t9 is not None:
        values[:, p] = (values[:, p] - t9[0]) / t9[1]


def apply(world: World, b: int, values: np.ndarray, pop: dict, table: str, rows: np.ndarray | None = None,
          t9: tuple | None = None) -> np.ndarray:
    """Return the released values for one block (``rows`` selects visit-2 members);
    ``t9`` holds the cohort moments of the mixed-unit decoy (``t9_moments``)."""
    values = values.copy()
    lo, hi = world.block_range(b)
    n_block = hi - lo
    _mix_t9_units(world, values, pop, table, t9)
    rate = world.params["protein_missing"] if table.startswith("proteomics") else MISSING_RATE[table]
    u = seeds.stream(world.seed, streams.MISSING.format(table=table), b).random((n_block, values.shape[1]))
    if rows is not None:
        u = u[rows]
    if world.messy and table.startswith("proteomics"):
        # heavier and not at random: samples from heavier participants fail more often
        m = world.params["bias_params"]["messy"]
        z_bmi = (pop["bmi"] - 28.3) / 5.1
        logit = np.log(m["protein_missing_base"] / (1 - m["protein_missing_base"])) + m["protein_missing_bmi"] * z_bmi
        missing = u < (1.0 / (1.0 + np.exp(-logit)))[:, None]
    else:
        missing = u < rate
    if table == "metabolomics":
        mu, sigma, molar_mass = metabolite_units(world)
        values = mu * np.exp(sigma * values)
        if world.messy:
            lab = np.isin(pop["centre"], MESSY_LAB_CENTRES)
            values[lab] = values[lab] * molar_mass / 10.0
        values = np.round(values, 4)
    values[missing] = np.nan
    return values


def released(world: World, b: int, values: np.ndarray, pop: dict, table: str, rows: np.ndarray | None = None,
             t9: tuple | None = None) -> np.ndarray:
    """``apply(...).astype(np.float32).T`` as a C-contiguous float32 [columns, rows] array.
    ``values`` (float64 [rows, columns]) is the caller's scratch: it may be changed."""
    from kernels.omics import released_columns

    from .molecules import kernel_array

    lo, hi = world.block_range(b)
    n_block = hi - lo
    _mix_t9_units(world, values, pop, table, t9)
    rate = world.params["protein_missing"] if table.startswith("proteomics") else MISSING_RATE[table]
    rows = np.arange(n_block, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if np.any(np.diff(rows) <= 0) or len(rows) != len(values):
        raise ValueError("rows: ascending block rows, one per row of values")
    if world.messy and table.startswith("proteomics"):
        m = world.params["bias_params"]["messy"]
        z_bmi = (pop["bmi"] - 28.3) / 5.1
        logit = np.log(m["protein_missing_base"] / (1 - m["protein_missing_base"])) + m["protein_missing_bmi"] * z_bmi
        threshold = 1.0 / (1.0 + np.exp(-logit))
    else:
        threshold = np.full(len(rows), rate, dtype=np.float64)
    if table == "metabolomics":
        mu, sigma, molar_mass = metabolite_units(world)
        values = mu * np.exp(sigma * values)
        if world.messy:
            lab = np.isin(pop["centre"], MESSY_LAB_CENTRES)
            values[lab] = values[lab] * molar_mass / 10.0
        values = np.round(values, 4)
    out = np.empty((values.shape[1], len(rows)), np.float32)
    released_columns(kernel_array(values), seeds.stream(world.seed, streams.MISSING.format(table=table), b), n_block,
                     kernel_array(rows, np.int64), kernel_array(threshold), out)
    return out
