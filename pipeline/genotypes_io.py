"""Reading the release's genotypes: the dosage matrix for analysts, haplotype
blocks for the VCF writer.

Both read ``call_genotype`` chunk by chunk.  For the stores this project writes
(Zarr format 2, C order, a compressor and no filters) a chunk's file is read and
decoded directly with its numcodecs compressor, which is several times faster
than going through zarr's indexing machinery and releases the GIL, so threads
decode in parallel; any other layout goes through zarr.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import fsspec
import numpy as np
import pandas as pd
import zarr
from zarr.core.metadata.v2 import ArrayV2Metadata

try:
    from .bundle import GENOTYPE_STORE
except ImportError:  # the agent sandbox's copy (dtw_genotypes.py), beside its copy of the contract
    from dtw_bundle import GENOTYPE_STORE  # type: ignore[no-redef]


def _open_store(url: str):
    try:
        return zarr.open_consolidated(url, mode="r", zarr_format=2)
    except (ValueError, KeyError, FileNotFoundError, zarr.errors.NodeNotFoundError):
        # A store still being written has no consolidated metadata yet.
        return zarr.open_group(url, mode="r", zarr_format=2)


def _strings(array) -> list[str]:
    # Under zarr 3 with numpy 2 strings come back as StringDType.
    return array[:].tolist()


def _ranges(length: int, step: int) -> list[tuple[int, int]]:
    return [(start, min(start + step, length)) for start in range(0, length, step)]


class CallChunks:
    """Decoded chunks of a store's ``call_genotype`` array, trimmed at the array's edges."""

    def __init__(self, store_url: str):
        store_url = str(store_url).rstrip("/")
        self.root = _open_store(store_url)
        self.array = self.root["call_genotype"]
        self.shape = self.array.shape
        self.chunks = self.array.chunks
        meta = self.array.metadata
        self._direct = (
            isinstance(meta, ArrayV2Metadata)
            and not meta.filters
            and meta.order == "C"
            and meta.compressor is not None
        )
        if self._direct:
            self._fs, root = fsspec.core.url_to_fs(store_url)
            self._prefix = f"{root}/call_genotype/"
            self._separator = meta.dimension_separator
            self._compressor = meta.compressor

    def ranges(self, axis: int) -> list[tuple[int, int]]:
        return _ranges(self.shape[axis], self.chunks[axis])

    def read(self, i: int, j: int, buffer: np.ndarray | None = None) -> np.ndarray:
        """Chunk (i, j) as int8[variants in chunk, samples in chunk, ploidy].

        ``buffer`` (int8, one full chunk) is decoded into and returned as a
        view when given: reusing it spares a fresh allocation, and its page
        faults, per chunk.
        """
        (v0, v1), (s0, s1) = self.ranges(0)[i], self.ranges(1)[j]
        if not self._direct:
            return np.asarray(self.array[v0:v1, s0:s1])
        key = self._separator.join((str(i), str(j), "0"))
        try:
            raw = self._fs.cat_file(self._prefix + key)
        except FileNotFoundError:
            # The array has no fill value (as VCF Zarr writers leave it), and a
            # finished store has every chunk: a missing one means no calls.
            raise ValueError(f"call_genotype chunk {key} is missing: the genotype store is incomplete") from None
        if buffer is None:
            buffer = np.empty(self.chunks, dtype=np.int8)
        self._compressor.decode(raw, out=buffer)
        return buffer.reshape(self.chunks)[: v1 - v0, : s1 - s0]


def read_haplotypes(url: str, v0: int, v1: int) -> np.ndarray:
    """Phased haplotypes int8[v1 - v0, samples, ploidy] of variants v0..v1 from the genotype store at ``url``."""
    chunks = CallChunks(url)
    n_variants, n_samples, ploidy = chunks.shape
    if not 0 <= v0 <= v1 <= n_variants:
        raise ValueError(f"variant range {v0}:{v1} outside the store's {n_variants} variants")
    out = np.empty((v1 - v0, n_samples, ploidy), dtype=np.int8)
    for i, (c0, c1) in enumerate(chunks.ranges(0)):
        lo, hi = max(c0, v0), min(c1, v1)
        if lo >= hi:
            continue
        for j, (s0, s1) in enumerate(chunks.ranges(1)):
            out[lo - v0:hi - v0, s0:s1] = chunks.read(i, j)[lo - c0:hi - c0]
    return out


def read_haplotype_blocks(url: str, v0: int, v1: int) -> np.ndarray:
    """Phased haplotypes of variants v0..v1 as int8[k, v1 - v0, S, ploidy]:
    the store's k sample chunks of S samples side by side, sample j at
    ``[j // S, :, j % S]`` (the last chunk's tail past the sample count is
    padding).  When v0..v1 lies in one variant chunk each store chunk is
    decoded straight into place, sparing :func:`read_haplotypes`' copy;
    otherwise this is that copy, as one block.
    """
    chunks = CallChunks(url)
    n_variants, n_samples, ploidy = chunks.shape
    if not 0 <= v0 <= v1 <= n_variants:
        raise ValueError(f"variant range {v0}:{v1} outside the store's {n_variants} variants")
    v_chunk, s_chunk = chunks.chunks[0], chunks.chunks[1]
    i = v0 // v_chunk
    if not chunks._direct or v1 == v0 or (v1 - 1) // v_chunk != i:
        return read_haplotypes(url, v0, v1)[np.newaxis]
    s_ranges = chunks.ranges(1)
    out = np.empty((len(s_ranges), v_chunk, s_chunk, ploidy), dtype=np.int8)
    for j in range(len(s_ranges)):
        chunks.read(i, j, out[j])
    lo = v0 - i * v_chunk
    return out[:, lo:lo + v1 - v0]


def read_sample_dosage(url: str, s0: int, s1: int) -> np.ndarray:
    """ALT dosages int8[s1 - s0, variants] of samples s0..s1 (aligned to the sample chunk)."""
    chunks = CallChunks(url)
    n_variants = chunks.shape[0]
    out = np.empty((n_variants, s1 - s0), dtype=np.int8)
    for j, (c0, c1) in enumerate(chunks.ranges(1)):
        lo, hi = max(c0, s0), min(c1, s1)
        if lo >= hi:
            continue
        for i, (v0, v1) in enumerate(chunks.ranges(0)):
            calls = chunks.read(i, j)[:, lo - c0:hi - c0]
            np.add(calls[..., 0], calls[..., 1], out=out[v0:v1, lo - s0:hi - s0])
    return np.ascontiguousarray(out.T)


def load_genotypes(release_dir: str, threads: int | None = None) -> pd.DataFrame:
    """ALT-allele dosages (0, 1, 2) as int8, one row per subject, one column per variant.

    Reads ``<release_dir>/genotypes.zarr``.  Index: subject ids (named
    ``subject_id``); columns: variant ids in release order.  A call with a
    missing allele has dosage -1.  Chunks are decoded on ``threads`` threads
    (default: one per CPU) straight into the frame's memory.
    """
    chunks = CallChunks(f"{str(release_dir).rstrip('/')}/{GENOTYPE_STORE}")
    n_variants, n_samples, ploidy = chunks.shape
    if ploidy != 2:
        raise ValueError(f"load_genotypes handles diploid calls; the store has ploidy {ploidy}")
    subject_ids = _strings(chunks.root["sample_id"])
    variant_ids = _strings(chunks.root["variant_id"])
    if len(subject_ids) != n_samples or len(variant_ids) != n_variants:
        raise ValueError("sample_id / variant_id lengths do not match call_genotype's shape")

    # Variant-major: its transpose is the (subjects × variants) frame's single
    # column-major block, which pandas takes without copying.
    dosage = np.empty((n_variants, n_samples), dtype=np.int8)
    v_ranges, s_ranges = chunks.ranges(0), chunks.ranges(1)

    buffers = threading.local()

    def decode(ij: tuple[int, int]) -> None:
        i, j = ij
        if not hasattr(buffers, "chunk"):
            buffers.chunk = np.empty(chunks.chunks, dtype=np.int8)
        calls = chunks.read(i, j, buffers.chunk)
        (v0, v1), (s0, s1) = v_ranges[i], s_ranges[j]
        target = dosage[v0:v1, s0:s1]
        np.add(calls[..., 0], calls[..., 1], out=target)
        if calls.max() > 1:
            raise ValueError(f"call_genotype chunk {i}.{j} has allele indices above 1; dosage needs biallelic sites")
        if calls.min() < 0:
            target[(calls < 0).any(axis=2)] = -1

    blocks = [(i, j) for i in range(len(v_ranges)) for j in range(len(s_ranges))]
    with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as pool:
        for _ in pool.map(decode, blocks):
            pass
    return pd.DataFrame(
        dosage.T,
        index=pd.Index(subject_ids, name="subject_id"),
        columns=pd.Index(variant_ids),
        copy=False,
    )
