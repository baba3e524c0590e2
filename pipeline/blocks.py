"""Fixed participant blocks and per-block random draws.

Population-level vectors are built by concatenating per-block draws in block
order, so a value depends only on (seed, stream name, block), never on how the
blocks were grouped into Dask tasks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from . import seeds

if TYPE_CHECKING:  # annotations only: no import at run time
    from .model.world import World


def per_block(world: World, name: str, draw: Callable[[np.random.Generator, int], np.ndarray], subset: np.ndarray | None = None) -> np.ndarray:
    """Concatenate ``draw(rng, n_in_block)`` over blocks for stream ``name``.

    With ``subset`` (a boolean mask over all participants), each block draws for
    its own members of the subset only, so the values for a participant do not
    depend on membership elsewhere in the cohort.
    """
    parts = []
    for b in range(world.n_blocks):
        lo, hi = world.block_range(b)
        n = int(subset[lo:hi].sum()) if subset is not None else hi - lo
        parts.append(draw(seeds.stream(world.seed, name, b), n))
    return np.concatenate(parts) if parts else np.empty(0)


def normal(world: World, name: str, shape: tuple = (), subset: np.ndarray | None = None) -> np.ndarray:
    return per_block(world, name, lambda rng, n: rng.standard_normal((n, *shape)), subset)


def uniform(world: World, name: str, shape: tuple = (), subset: np.ndarray | None = None) -> np.ndarray:
    return per_block(world, name, lambda rng, n: rng.random((n, *shape)), subset)


def exponential(world: World, name: str, shape: tuple = (), subset: np.ndarray | None = None) -> np.ndarray:
    return per_block(world, name, lambda rng, n: rng.standard_exponential((n, *shape)), subset)


def zscore(x: np.ndarray) -> np.ndarray:
    """Standardise within the population (NaN-free input)."""
    x = np.asarray(x, dtype=np.float64)
    sd = x.std()
    return (x - x.mean()) / (sd if sd > 0 else 1.0)
