"""Counter-seeded random numbers usable inside Numba kernels.

A kernel never touches a global generator: it receives a 64-bit ``key`` (from
:func:`pipeline.seeds.block_key`) and derives an independent xoshiro256** state
for every row it owns from ``(key, row)`` with splitmix64.  Results therefore
depend only on the key and the row, never on thread count or task order.
"""
from __future__ import annotations

import math

import numpy as np

from .numba_util import njit

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(inline="always")
def splitmix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15))
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x, z ^ (z >> np.uint64(31))


@njit(inline="always")
def seed_state(key, row, state):
    """Fill ``state`` (uint64[4]) for stream ``(key, row)``."""
    x = np.uint64(key) ^ (np.uint64(row) * np.uint64(0xD1B54A32D192ED03))
    for i in range(4):
        x, z = splitmix64(x)
        state[i] = z


@njit(inline="always")
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(inline="always")
def next_u64(state):
    result = _rotl(state[1] * np.uint64(5), 7) * np.uint64(9)
    t = state[1] << np.uint64(17)
    state[2] ^= state[0]
    state[3] ^= state[1]
    state[1] ^= state[2]
    state[0] ^= state[3]
    state[2] ^= t
    state[3] = _rotl(state[3], 45)
    return result


@njit(inline="always")
def next_double(state):
    """Uniform on [0, 1) with 53 random bits."""
    return (next_u64(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(inline="always")
def next_normal_pair(state):
    """Two independent standard normals (Marsaglia polar method)."""
    while True:
        u = 2.0 * next_double(state) - 1.0
        v = 2.0 * next_double(state) - 1.0
        s = u * u + v * v
        if s > 0.0 and s < 1.0:
            f = math.sqrt(-2.0 * math.log(s) / s)
            return u * f, v * f
