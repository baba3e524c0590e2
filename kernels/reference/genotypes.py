"""Twin of ``kernels.genotypes.haplotype_chains``: one participant, one haplotype,
one variant at a time."""
import math

import numpy as np

from .rng import Xoshiro


def haplotype_chains(key, n_samples, rho, threshold):
    n_variants = len(rho)
    out = np.zeros((n_samples, 2, n_variants), dtype=np.int8)
    for s in range(n_samples):
        gen = Xoshiro(key, s)
        for h in range(2):
            normals = []  # a pair's unused half is dropped at the end of a haplotype, as in the kernel
            z = 0.0
            for v in range(n_variants):
                if not normals:
                    normals.extend(reversed(gen.next_normal_pair()))
                e = normals.pop()
                if rho[v] == 0.0:
                    z = e
                else:
                    z = rho[v] * z + math.sqrt(1.0 - rho[v] ** 2) * e
                out[s, h, v] = 1 if z < threshold[v] else 0
    return out
