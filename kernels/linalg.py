"""A matrix product whose bits do not depend on the process, thread count or
memory alignment: each output element accumulates the inner dimension in order.
Vectorisation only runs across independent output elements, never across the
sum, so the result is the same wherever it is computed."""
from __future__ import annotations

import numpy as np

from .numba_util import njit

# i = rows of a, j = inner dimension, k = columns of b


@njit
def matmul_ordered(a, b, out):
    """out[i, k] = sum_j a[i, j] b[j, k], j ascending.  float64 [i, j], [j, k] -> [i, k]."""
    n_i, n_j = a.shape
    n_k = b.shape[1]
    for i in range(n_i):
        for k in range(n_k):
            out[i, k] = 0.0
        for j in range(n_j):
            aij = a[i, j]
            for k in range(n_k):
                out[i, k] += aij * b[j, k]


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    out = np.empty((a.shape[0], b.shape[1]))
    matmul_ordered(a, b, out)
    return out
