"""Twin of ``kernels.linalg.matmul_ordered``: the same ordered sums in Python."""
import numpy as np


def matmul_ordered(a, b):
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for k in range(b.shape[1]):
            s = 0.0
            for j in range(a.shape[1]):
                s += a[i, j] * b[j, k]
            out[i, k] = s
    return out
