"""Warm-up: every worker loads (or compiles) the Numba kernels before the timed
build starts, so no task's timing includes a compilation; and whether a build will
compile them (a cold on-disk cache), so that it can say so before it sits waiting.

A build does not warm up (``scripts/bench.py`` does): each kernel compiles in the
first task that calls it, on every worker, and is cached on disk (``cache=True``,
``kernels/numba_util.py``) for every later process.  On two cores the first build
of an installation spends about 90 s compiling, mostly in its ``vcf`` and
``imaging`` stages; :func:`kernels_cached` tells that case apart.
"""
from __future__ import annotations

import hashlib
import importlib
from typing import Optional

import numpy as np

def compile_note(release) -> str:
    """The line a build says before compiling the kernels for ``release`` (a cold cache)."""
    stages = [name for name, on in (("vcf", release.vcf), ("imaging", release.imaging != "none")) if on]
    where = f", mostly in {' and '.join(stages)}" if stages else ""
    return ("compiling the numba kernels as the stages first use them (first build on this machine: up to about 90 s "
            f"more on two cores{where}; cached afterwards)")


def build_kernels(release) -> list:
    """(module, name) of the kernels a biobank build with ``release`` (the ``release``
    config group) calls from Python, each compiling the kernels it calls with it: the
    cold-cache test looks at these.  Only kernels every such build calls are listed, so a
    build never reports a compilation it will not do."""
    names = [("kernels.genotypes", "haplotype_chains"), ("kernels.linalg", "matmul_ordered"),
             ("kernels.omics", "molecule_bio_scaled"), ("kernels.omics", "transcript_block")]
    if release.vcf or release.genotype_zarr:
        names.append(("kernels.genotypes", "sample_major_to_variant_major"))
    if release.vcf:
        names.append(("kernels.vcf_encode", "format_and_deflate_vcf_chunk"))
    if release.imaging != "none":
        names.append(("kernels.mri", "render_batch"))
        names.append(("kernels.measure_features", "measure_core"))
    if release.imaging == "npz":
        names.append(("kernels.deflate", "deflate_member"))
    return names


def kernels_cached(names: list) -> Optional[bool]:
    """Whether every kernel of ``names`` ((module, name) pairs) has a compiled version in
    its on-disk cache that this process would load: one for this machine's CPU and the
    kernel's current bytecode, in an index numba reads (its version, the source file's
    stamp).  False when one has none (the build will compile it); None when it cannot be
    told (numba's cache internals, which this reads, have changed)."""
    import numba

    if numba.config.DISABLE_JIT:
        return True  # nothing compiles
    try:
        for module, name in names:
            dispatcher = getattr(importlib.import_module(module), name)
            index = dispatcher._cache._cache_file._load_index()  # {} when absent, stale or another numba's
            magic = dispatcher.targetctx.codegen().magic_tuple()
            code = hashlib.sha256(dispatcher.py_func.__code__.co_code).hexdigest()
            if not any(key[1] == magic and key[2][0] == code for key in index):
                return False
    except Exception:  # noqa: BLE001 - private numba API: any change means "cannot tell"
        return None
    return True


def warm_up() -> bool:
    """Load (or compile) the Numba kernels in this process, so the first real task
    of a fresh worker does not pay for it.  Returns True once done."""
    from kernels import genotypes, linalg, omics, vcf_encode  # noqa: F401

    rho = np.zeros(4)
    genotypes.simulate_haplotypes(np.uint64(1), 2, rho, np.zeros(4))
    genotypes.to_variant_major(np.zeros((2, 2, 4), dtype=np.int8))
    linalg.dot(np.ones((2, 2)), np.ones((2, 2)))
    omics.warm_up()
    calls = np.zeros((1, 1, 2, 2), dtype=np.int8)
    offsets = np.array([0, 2], dtype=np.int64)
    vcf_encode.vcf_record_ends(offsets, 2, 2)
    vcf_encode.format_and_deflate_vcf_chunk(np.array([71, 84], dtype=np.uint8), offsets, calls, 2,
                                            np.empty(16, dtype=np.uint8), 0xFF00)
    from ..imaging.writer import npz_bytes

    # both member kinds of an image file (8-bit cine, float32 T1 map)
    npz_bytes({"cine": np.zeros((1, 2, 4, 4), np.uint8), "t1map": np.zeros((1, 4, 4), np.float32)})
    from ..imaging.measure import measure_subjects
    from ..imaging.render import example_traits, render_subjects

    # the renderer (parallel) and the baseline measurement's kernels, on one subject
    cine, t1map = render_subjects(example_traits(np.random.default_rng(0), 1), np.zeros((1, 1)))
    measure_subjects(cine, t1map)
    return True
