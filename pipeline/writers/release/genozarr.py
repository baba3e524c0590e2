"""The release's ``genotypes.zarr``: VCF Zarr (specification v0.5) in Zarr format 2,
written as bio2zarr 0.2.1 writes the same VCF.

Format 2 because sgkit reads nothing else.  Every array has the name,
``_ARRAY_DIMENSIONS``, dtype, fill value (none, but ``""`` for the strings
bio2zarr writes whole and 0 for ``contig_length``), filters and
``description`` that ``vcf2zarr convert`` gives the release's VCF, and the
group carries ``vcf_zarr_version``, ``source`` and ``vcf_meta_information``
as it does (tests compare the two stores array by array).  Why the fill values
matter: xarray decodes an integer array with a ``_FillValue`` as floats with
NaN, so sgkit could not use ``call_genotype`` when its fill value was -1.
Layout: contig, filter and sample arrays, the fixed VCF fields per variant,
the INFO fields AC, AF and AN, ``call_genotype`` [variants, samples, ploidy]
int8, ``call_genotype_mask`` and ``call_genotype_phased``, plus
``variant_length`` and ``region_index`` so that ``vcztools view -r`` can
answer region queries.  Integer dtypes are the smallest that hold the values,
as bio2zarr chooses them.

Writing happens in two steps so sample blocks can be filled by several
processes at once: :func:`init_store` creates every array and writes everything
that is not per-call; :func:`write_sample_block` writes the calls of a range of
samples aligned to the sample chunk, touching only that range's chunks.
:func:`finalise` adds the INFO arrays, which need every sample's calls, and
consolidates the metadata once all blocks are in.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numcodecs
import numpy as np
import pandas as pd
import zarr

from .vcf import DEFAULT_CHUNK_SIZE, INFO_FIELDS, SOURCE, meta_information

#: Variants per genotype-store chunk (part of the format): the VCF writer's chunk, so each
#: VCF chunk decodes exactly one store chunk.
VARIANT_CHUNK = DEFAULT_CHUNK_SIZE

VCF_ZARR_VERSION = "0.5"
PLOIDY = 2
FILTERS = (("PASS", "All filters passed"),)
# Fixed codec settings: the same arrays give the same chunk bytes on every build.
# bio2zarr's: zstd level 7 with byte shuffling, bit shuffling for flags and
# calls, level 9 unshuffled for the region index.  The calls are the exception:
# bit-shuffled 0/1 calls compress within 2 % at level 3 and encode five times
# faster than at 7, which is most of the genotype store's write time.  Blosc's
# own threads are off: each Dask worker is one thread, and Blosc threads would
# contend with the other worker for the cores.
numcodecs.blosc.use_threads = False
_DEFAULT_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=7, shuffle=numcodecs.Blosc.SHUFFLE)
_FLAG_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=7, shuffle=numcodecs.Blosc.BITSHUFFLE)
_CALL_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE)
_INDEX_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=9, shuffle=numcodecs.Blosc.NOSHUFFLE)
# The VCF Zarr "missing" float (BCF's signalling NaN); built as bits because a
# float conversion may quiet the NaN and turn it into another value.
_FLOAT32_MISSING_BITS = 0x7F800001
# Every chunk file exists, whatever its content, so the set of files in the
# store does not depend on the data.
_ARRAY_CONFIG = {"write_empty_chunks": True}
_INFO_ARRAYS = ("variant_AC", "variant_AF", "variant_AN")


def _open_group(url: str, mode: str):
    return zarr.open_group(url, mode=mode, zarr_format=2)


# bio2zarr's descriptions: its text for the fixed fields, "" for the flags and
# calls, and no attribute at all on the arrays it writes whole (None here).
_DESCRIPTIONS = {
    "contig_id": None,
    "contig_length": None,
    "filter_id": None,
    "filter_description": None,
    "sample_id": None,
    "region_index": None,
    "variant_contig": "An identifier from the reference genome or an angle-bracketed ID string pointing to a contig "
                      "in the assembly file",
    "variant_position": "The reference position",
    "variant_length": "The length of the variant measured in bases",
    "variant_id": "List of unique identifiers where applicable",
    "variant_id_mask": "",
    "variant_allele": "List of the reference and alternate alleles",
    "variant_quality": "Phred-scaled quality score",
    "variant_filter": "Filter status of the variant",
    "call_genotype": "",
    "call_genotype_mask": "",
    "call_genotype_phased": "",
    **{f"variant_{name}": text for name, _, _, text in INFO_FIELDS},
}


def min_int_dtype(lo: int, hi: int) -> np.dtype:
    """The narrowest signed integer dtype holding ``lo`` … ``hi`` (bio2zarr's rule)."""
    for candidate in (np.int8, np.int16, np.int32, np.int64):
        info = np.iinfo(candidate)
        if info.min <= lo and hi <= info.max:
            return np.dtype(candidate)
    raise OverflowError(f"integers {lo} … {hi} do not fit in 64 bits")


def _create(group, name, dims, chunks, compressor, *, data=None, shape=None, dtype=None, whole=False):
    """Create array ``name`` with its ``_ARRAY_DIMENSIONS`` and description and, given ``data``, fill it.

    ``whole``: an array bio2zarr writes in one piece, which keeps zarr's default
    fill value ("" for strings, 0 for numbers); every other array has none.
    """
    if data is not None:
        shape = data.shape
        dtype = str if data.dtype == object else data.dtype
    kwargs = {} if whole else {"fill_value": None}
    array = group.create_array(
        name,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        compressor=compressor,
        config=_ARRAY_CONFIG,
        **kwargs,
    )
    attrs = {"_ARRAY_DIMENSIONS": list(dims)}
    if _DESCRIPTIONS[name] is not None:
        attrs["description"] = _DESCRIPTIONS[name]
    array.attrs.update(attrs)
    if data is not None:
        array[...] = data
    return array


def _strings(values) -> np.ndarray:
    return np.array([str(v) for v in values], dtype=object)


def _region_index(variant_contig, variant_position, variant_length, variant_chunk) -> np.ndarray:
    """Rows (chunk, contig, first position, last position, max end, records), one per contig run in a chunk.

    The table vcztools uses to find the chunks overlapping a region, in the
    positions' dtype as bio2zarr writes it.
    """
    rows = []
    dtype = variant_position.dtype
    variant_position = variant_position.astype(np.int64)
    end = variant_position + variant_length.astype(np.int64) - 1
    for c0 in range(0, len(variant_position), variant_chunk):
        c1 = min(c0 + variant_chunk, len(variant_position))
        contig = variant_contig[c0:c1]
        run_ends = np.flatnonzero(np.diff(contig, append=-1))
        run_start = 0
        for run_end in run_ends:
            rows.append((
                c0 // variant_chunk,
                contig[run_start],
                variant_position[c0 + run_start],
                variant_position[c0 + run_end],
                end[c0 + run_start:c0 + run_end + 1].max(),
                run_end - run_start + 1,
            ))
            run_start = run_end + 1
    return np.array(rows, dtype=dtype).reshape(-1, 6)


def init_store(url: str, variants: pd.DataFrame, sample_ids, contigs, variant_chunk: int, sample_chunk: int) -> None:
    """Create the store at ``url`` (replacing one that is there) with every array.

    variants : DataFrame with contig, position, id, ref, alt as for the VCF writer.
    contigs : list of (name, length).
    variant_chunk : chunk length along ``variants`` for every array with that dimension.
    sample_chunk : chunk length along ``samples``; :func:`write_sample_block`
        ranges must start on a multiple of it.
    The call arrays have no chunks until sample blocks are written.
    """
    if variant_chunk < 1 or sample_chunk < 1:
        raise ValueError(f"chunk sizes must be positive, got variant_chunk={variant_chunk}, sample_chunk={sample_chunk}")
    n_variants, n_samples = len(variants), len(sample_ids)
    if n_variants == 0 or n_samples == 0:
        raise ValueError("a genotype store needs at least one variant and one sample")
    names = [str(name) for name, _ in contigs]
    contig_codes = variants["contig"].astype(str).map({name: i for i, name in enumerate(names)})
    if contig_codes.isna().any():
        raise ValueError("variants on contigs absent from contigs")
    variant_contig = contig_codes.to_numpy(dtype=np.int64).astype(min_int_dtype(0, len(names)))
    position = variants["position"].to_numpy(dtype=np.int64)
    variant_position = position.astype(min_int_dtype(int(position.min()), int(position.max())))
    ref = variants["ref"].astype(str)
    length = ref.str.len().to_numpy(dtype=np.int64)
    variant_length = length.astype(min_int_dtype(int(length.min()), int(length.max())))
    alleles = np.empty((n_variants, 2), dtype=object)
    alleles[:, 0] = ref.to_numpy(dtype=object)
    alleles[:, 1] = variants["alt"].astype(str).to_numpy(dtype=object)

    group = _open_group(url, "w")
    group.attrs.update({"vcf_zarr_version": VCF_ZARR_VERSION, "source": SOURCE,
                        "vcf_meta_information": [list(pair) for pair in meta_information()]})
    vc, sc = min(variant_chunk, n_variants), min(sample_chunk, n_samples)
    n_contigs, n_filters = len(names), len(FILTERS)
    wide, flags, calls = _DEFAULT_COMPRESSOR, _FLAG_COMPRESSOR, _CALL_COMPRESSOR

    lengths = np.array([int(length) for _, length in contigs], dtype=np.int64)
    _create(group, "contig_id", ["contigs"], (n_contigs,), wide, data=_strings(names), whole=True)
    _create(group, "contig_length", ["contigs"], (n_contigs,), wide, data=lengths, whole=True)
    _create(group, "filter_id", ["filters"], (n_filters,), wide, data=_strings([f for f, _ in FILTERS]), whole=True)
    _create(group, "filter_description", ["filters"], (n_filters,), wide, data=_strings([d for _, d in FILTERS]),
            whole=True)
    _create(group, "sample_id", ["samples"], (sc,), wide, data=_strings(sample_ids), whole=True)

    _create(group, "variant_contig", ["variants"], (vc,), wide, data=variant_contig)
    _create(group, "variant_position", ["variants"], (vc,), wide, data=variant_position)
    _create(group, "variant_length", ["variants"], (vc,), wide, data=variant_length)
    _create(group, "variant_id", ["variants"], (vc,), wide, data=_strings(variants["id"]))
    _create(group, "variant_id_mask", ["variants"], (vc,), flags, data=np.zeros(n_variants, dtype=bool))
    _create(group, "variant_allele", ["variants", "alleles"], (vc, 2), wide, data=alleles)
    _create(group, "variant_quality", ["variants"], (vc,), wide,
            data=np.full(n_variants, _FLOAT32_MISSING_BITS, dtype=np.int32).view(np.float32))
    _create(group, "variant_filter", ["variants", "filters"], (vc, n_filters), flags,
            data=np.ones((n_variants, n_filters), dtype=bool))
    region_index = _region_index(variant_contig, variant_position, variant_length, vc)
    _create(group, "region_index", ["region_index_values", "region_index_fields"], region_index.shape,
            _INDEX_COMPRESSOR, data=region_index)

    _create(group, "call_genotype", ["variants", "samples", "ploidy"], (vc, sc, PLOIDY), calls,
            shape=(n_variants, n_samples, PLOIDY), dtype=np.int8)
    _create(group, "call_genotype_mask", ["variants", "samples", "ploidy"], (vc, sc, PLOIDY), flags,
            shape=(n_variants, n_samples, PLOIDY), dtype=bool)
    _create(group, "call_genotype_phased", ["variants", "samples"], (vc, sc), flags,
            shape=(n_variants, n_samples), dtype=bool)


def write_sample_block(url: str, sample_start: int, haplotypes: np.ndarray) -> None:
    """Write the phased calls of samples ``sample_start … sample_start + s``.

    haplotypes : int8[variants, s, ploidy], allele indices (0 REF, 1 ALT, -1 missing).
    The range must start on a sample-chunk boundary and be a whole number of
    chunks long (or end at the last sample), so concurrent writers of other
    ranges never share a chunk.
    """
    group = _open_group(url, "r+")
    genotype = group["call_genotype"]
    n_variants, n_samples, ploidy = genotype.shape
    sample_chunk = genotype.chunks[1]
    haplotypes = np.asarray(haplotypes)
    if haplotypes.dtype != np.int8:
        raise ValueError(f"haplotypes must be int8, got {haplotypes.dtype}")
    if haplotypes.ndim != 3 or haplotypes.shape[0] != n_variants or haplotypes.shape[2] != ploidy:
        raise ValueError(f"haplotypes shape {haplotypes.shape} does not fit [{n_variants}, s, {ploidy}]")
    sample_stop = sample_start + haplotypes.shape[1]
    if sample_start % sample_chunk or sample_stop > n_samples or (
        sample_stop != n_samples and sample_stop % sample_chunk
    ):
        raise ValueError(
            f"samples {sample_start}:{sample_stop} are not aligned to the sample chunk {sample_chunk} "
            f"of {n_samples} samples"
        )
    if not _write_direct(url, group, sample_start, sample_stop, haplotypes):
        genotype[:, sample_start:sample_stop, :] = haplotypes
        group["call_genotype_mask"][:, sample_start:sample_stop, :] = haplotypes < 0
        group["call_genotype_phased"][:, sample_start:sample_stop] = np.ones(haplotypes.shape[:2], dtype=bool)


def _write_direct(url, group, sample_start, sample_stop, haplotypes) -> bool:
    """Write the block's chunk files of the three call arrays straight to storage.

    For Zarr-2 arrays in C order with a compressor and no filters a chunk file is
    just the compressed chunk, padded past the array's edges with zeros (zarr's
    padding when there is no fill value), which is what zarr itself would write
    (``pipeline.genotypes_io`` reads them back the same way).  The mask and phase
    flags are the same chunk over and over, so each distinct one is compressed
    once.  Returns False (the caller then goes through zarr) for other layouts.
    """
    import fsspec
    from zarr.core.metadata.v2 import ArrayV2Metadata

    arrays = {name: group[name] for name in ("call_genotype", "call_genotype_mask", "call_genotype_phased")}
    metas = {name: a.metadata for name, a in arrays.items()}
    if not all(isinstance(m, ArrayV2Metadata) and not m.filters and m.order == "C" and m.compressor is not None
               for m in metas.values()):
        return False
    fs, root = fsspec.core.url_to_fs(str(url).rstrip("/"))
    n_variants, _, ploidy = arrays["call_genotype"].shape
    vc, sc, _ = arrays["call_genotype"].chunks
    encoded_flags: dict = {}

    def put(name, key_parts, chunk):
        meta = metas[name]
        key = meta.dimension_separator.join(str(k) for k in key_parts)
        fs.pipe_file(f"{root}/{name}/{key}", meta.compressor.encode(np.ascontiguousarray(chunk)))

    def put_flag(name, key_parts, chunk):
        meta = metas[name]
        sig = (name, chunk.shape, chunk.tobytes() if not (chunk.all() or not chunk.any()) else bool(chunk.any()),
               chunk.sum())
        if sig not in encoded_flags:
            encoded_flags[sig] = meta.compressor.encode(np.ascontiguousarray(chunk))
        key = meta.dimension_separator.join(str(k) for k in key_parts)
        fs.pipe_file(f"{root}/{name}/{key}", encoded_flags[sig])

    for j in range(sample_start // sc, -(-sample_stop // sc)):
        s0, s1 = j * sc, min((j + 1) * sc, sample_stop)
        for i in range(-(-n_variants // vc)):
            v0, v1 = i * vc, min((i + 1) * vc, n_variants)
            calls = np.zeros((vc, sc, ploidy), dtype=np.int8)
            calls[: v1 - v0, : s1 - s0] = haplotypes[v0:v1, s0 - sample_start:s1 - sample_start]
            put("call_genotype", (i, j, 0), calls)
            mask = np.zeros((vc, sc, ploidy), dtype=bool)
            mask[: v1 - v0, : s1 - s0] = calls[: v1 - v0, : s1 - s0] < 0
            put_flag("call_genotype_mask", (i, j, 0), mask)
            phased = np.zeros((vc, sc), dtype=bool)
            phased[: v1 - v0, : s1 - s0] = True
            put_flag("call_genotype_phased", (i, j), phased)
    return True


def allele_counts(url: str, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """INFO ``AC`` and ``AN`` of every variant from the store's calls, as int32 arrays.

    Chunks are decoded on ``threads`` threads (default: one per CPU), each
    counted by the same kernel the VCF writer uses, and summed per variant.
    """
    from kernels.vcf_encode import allele_counts as count

    from ...genotypes_io import CallChunks

    chunks = CallChunks(url)
    n_variants = chunks.shape[0]
    v_ranges, s_ranges = chunks.ranges(0), chunks.ranges(1)
    ac = np.zeros((len(s_ranges), n_variants), dtype=np.int32)
    an = np.zeros((len(s_ranges), n_variants), dtype=np.int32)
    buffers = threading.local()

    def tally(ij: tuple[int, int]) -> None:
        i, j = ij
        if not hasattr(buffers, "chunk"):
            buffers.chunk = np.empty(chunks.chunks, dtype=np.int8)
        calls = np.ascontiguousarray(chunks.read(i, j, buffers.chunk))
        (v0, v1), (s0, s1) = v_ranges[i], s_ranges[j]
        ac[j, v0:v1], an[j, v0:v1] = count(calls[np.newaxis], s1 - s0)

    blocks = [(i, j) for i in range(len(v_ranges)) for j in range(len(s_ranges))]
    with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as pool:
        for _ in pool.map(tally, blocks):
            pass
    # Integer sums: the same totals in any order.
    return ac.sum(axis=0, dtype=np.int32), an.sum(axis=0, dtype=np.int32)


def _write_info(group, ac: np.ndarray, an: np.ndarray) -> None:
    """``variant_AC``, ``variant_AF`` [variants, alt_alleles] and ``variant_AN`` [variants], as for the VCF's INFO."""
    vc = group["variant_position"].chunks[0]
    af = np.full(len(ac), _FLOAT32_MISSING_BITS, dtype=np.int32).view(np.float32)
    called = an > 0
    # The value the VCF's text says (6 significant digits), as a reader of the
    # VCF (bio2zarr among them) stores it, rather than AC / AN to full float precision.
    exact = ac[called].astype(np.float32) / an[called].astype(np.float32)
    af[called] = np.array([float("%g" % x) for x in exact.tolist()], dtype=np.float32)
    for name in _INFO_ARRAYS:
        if name in group:
            del group[name]
    _create(group, "variant_AC", ["variants", "alt_alleles"], (vc, 1), _DEFAULT_COMPRESSOR,
            data=ac.astype(min_int_dtype(int(ac.min()), int(ac.max())))[:, np.newaxis])
    _create(group, "variant_AF", ["variants", "alt_alleles"], (vc, 1), _DEFAULT_COMPRESSOR, data=af[:, np.newaxis])
    _create(group, "variant_AN", ["variants"], (vc,), _DEFAULT_COMPRESSOR,
            data=an.astype(min_int_dtype(int(an.min()), int(an.max()))))


def finalise(url: str) -> None:
    """Write the INFO arrays (AC, AF, AN) from the calls and consolidate the
    store's metadata into ``.zmetadata`` (call after every block is written)."""
    ac, an = allele_counts(url)
    _write_info(_open_group(url, "r+"), ac, an)
    zarr.consolidate_metadata(url, zarr_format=2)
