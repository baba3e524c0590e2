"""Hard-messy worlds: the data problems of a real biobank, each documented in
data_dictionary.md (sentinel codes, heavier non-random missingness, mixed units,
implausible values).  The measurement-level problems of the molecular tables
live in ``measurement.py``; this module handles the clinical tables."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .. import blocks, streams

if TYPE_CHECKING:  # annotations only: no import at run time
    from ..model.world import World

SENTINEL_COLUMNS = {"p20116_i0": (-3,), "p22040_i0": (-1, -3), "p21000_i0": (-3,)}
# Implausible entries: data-entry errors an analyst must catch.
IMPLAUSIBLE = {
    "ecg_features": {"hr": (0.0, 999.0), "qrs": (9999.0,), "qt": (0.0, 2000.0), "pr": (-1.0,)},
    "coronary_ct": {"cac_agatston": (-5.0, 99999.0), "stenosis_max_pct": (250.0,)},
}
CLINICAL_MISSING = 0.02


def covariate_sentinels(world: World) -> dict:
    rate = float(world.params["bias_params"]["messy"]["sentinel_rate"])
    out = {}
    for col, codes in SENTINEL_COLUMNS.items():
        u = blocks.uniform(world, streams.MESSY_SENTINEL.format(column=col), (2,))
        rows = np.flatnonzero(u[:, 0] < rate)
        pick = np.minimum((u[rows, 1] * len(codes)).astype(int), len(codes) - 1)
        out[col] = (rows, np.asarray(codes)[pick])
    return out


def corrupt_table(world: World, name: str, df: pd.DataFrame) -> pd.DataFrame:
    """Some cells missing and a few implausible values, reproducibly per participant."""
    df = df.astype({c: np.float64 for c in df.columns if df[c].dtype.kind in "iub"})
    m = world.params["bias_params"]["messy"]
    u = blocks.uniform(world, streams.MESSY.format(table=name), (len(df.columns), 3))
    for j, col in enumerate(df.columns):
        missing = u[:, j, 0] < CLINICAL_MISSING
        values = df[col].to_numpy(copy=True)
        values[missing] = np.nan
        bad = IMPLAUSIBLE.get(name, {}).get(col)
        if bad:
            hit = (~missing) & (u[:, j, 1] < float(m["implausible_rate"]))
            pick = np.minimum((u[hit, j, 2] * len(bad)).astype(int), len(bad) - 1)
            values[hit] = np.asarray(bad)[pick]
        df[col] = values
    return df
