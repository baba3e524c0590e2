"""Warm-up: every worker loads (or compiles) the Numba kernels before the timed
build starts, so no task's timing includes a compilation."""
from __future__ import annotations

import numpy as np


def warm_up() -> bool:
    """Load (or compile) the Numba kernels in this process, so the first real task
    of a fresh worker does not pay for it.  Returns True once done."""
    from kernels import genotypes, linalg, omics, vcf_encode  # noqa: F401

    rho = np.zeros(4)
    genotypes.simulate_haplotypes(np.uint64(1), 2, rho, np.zeros(4))
    genotypes.to_variant_major(np.zeros((2, 2, 4), dtype=np.int8))
    linalg.dot(np.ones((2, 2)), np.ones((2, 2)))
    d = np.zeros((2, 4), dtype=np.int8)
    out = np.empty((2, 3))
    omics.molecule_bio(d, np.full(4, 0.5), np.ones(4), np.zeros(3, np.int64), np.ones(3), np.full(3, -1, np.int64), 0.1,
                       np.ones((2, 2)), np.ones((3, 2)), np.ones((2, 3)), 0.8, out)
    omics.mix_transcripts(out, out, np.full(3, 0.5), np.ones((2, 1)), np.ones((3, 1)), np.empty((2, 3)))
    calls = np.zeros((1, 1, 2, 2), dtype=np.int8)
    offsets = np.array([0, 2], dtype=np.int64)
    vcf_encode.vcf_record_ends(offsets, 2, 2)
    vcf_encode.format_and_deflate_vcf_chunk(np.array([71, 84], dtype=np.uint8), offsets, calls, 2,
                                            np.empty(16, dtype=np.uint8), 0xFF00)
    from ..imaging.writer import npz_bytes

    # both member kinds of an image file (8-bit cine, float32 T1 map)
    npz_bytes({"cine": np.zeros((1, 2, 4, 4), np.uint8), "t1map": np.zeros((1, 4, 4), np.float32)})
    return True
