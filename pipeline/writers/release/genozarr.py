"""The release's ``genotypes.zarr``: VCF Zarr (specification v0.4) in Zarr format 2.

Format 2 because the VCF Zarr specification is written against it and sgkit
reads nothing else.  Layout: contig, filter and sample arrays, the fixed VCF
fields per variant, ``call_genotype`` [variants, samples, ploidy] int8 and
``call_genotype_phased`` [variants, samples] bool, ``call_genotype_mask`` (which
sgkit expects), plus ``variant_length`` and
``region_index`` so that ``vcztools view -r`` can answer region queries.

Writing happens in two steps so sample blocks can be filled by several
processes at once: :func:`init_store` creates every array and writes everything
that is not per-call; :func:`write_sample_block` writes the calls of a range of
samples aligned to the sample chunk, touching only that range's chunks.
:func:`finalise` consolidates the metadata once all blocks are in.
"""
from __future__ import annotations

import numcodecs
import numpy as np
import pandas as pd
import zarr

VCF_ZARR_VERSION = "0.4"
PLOIDY = 2
FILTERS = (("PASS", "All filters passed"),)
# Fixed codec settings: the same arrays give the same chunk bytes on every build.
# Bit-shuffled 0/1 calls compress about as well at zstd level 3 as at 7, at a
# fraction of the cost.  Blosc's own threads are off: each Dask worker is one
# thread, and Blosc threads would contend with the other worker for the cores.
numcodecs.blosc.use_threads = False
_WIDE_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE)
_NARROW_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE)
# The VCF Zarr "missing" float (BCF's signalling NaN); built as bits because a
# float conversion may quiet the NaN and turn it into another value.
_FLOAT32_MISSING_BITS = 0x7F800001
# Every chunk file exists, whatever its content, so the set of files in the
# store does not depend on the data.
_ARRAY_CONFIG = {"write_empty_chunks": True}


def _open_group(url: str, mode: str):
    return zarr.open_group(url, mode=mode, zarr_format=2)


_DESCRIPTIONS = {
    "contig_id": "Contig names, in header order",
    "contig_length": "Contig lengths in bases",
    "filter_id": "Filter names; PASS first",
    "filter_description": "Filter descriptions",
    "sample_id": "Subject identifiers",
    "variant_contig": "Index into contig_id of the variant's contig",
    "variant_position": "The reference position (1-based)",
    "variant_length": "The length of the variant measured in bases",
    "variant_id": "List of unique identifiers where applicable",
    "variant_id_mask": "True where variant_id is missing",
    "variant_allele": "List of the reference and alternate alleles",
    "variant_quality": "Phred-scaled quality score (missing: none is given)",
    "variant_filter": "Filter status of the variant",
    "region_index": "Per chunk and contig: chunk, contig, first position, last position, max end, records",
    "call_genotype": "Allele indices of each call (0 REF, 1 ALT, -1 missing)",
    "call_genotype_mask": "True where an allele of call_genotype is missing",
    "call_genotype_phased": "True where the call is phased",
}


def _create(group, name, dims, chunks, *, data=None, shape=None, dtype=None, fill_value=None):
    """Create array ``name`` with its ``_ARRAY_DIMENSIONS`` and, given ``data``, fill it."""
    if data is not None:
        shape = data.shape
        dtype = str if data.dtype == object else data.dtype
    # Bit shuffling packs flags and small allele codes densely; byte shuffling
    # suits wider numbers.
    narrow = dtype is not str and np.dtype(dtype).itemsize == 1
    compressor = _NARROW_COMPRESSOR if narrow else _WIDE_COMPRESSOR
    array = group.create_array(
        name,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        compressor=compressor,
        fill_value=fill_value,
        config=_ARRAY_CONFIG,
    )
    array.attrs.update({"_ARRAY_DIMENSIONS": list(dims), "description": _DESCRIPTIONS[name]})
    if data is not None:
        array[...] = data
    return array


def _strings(values) -> np.ndarray:
    return np.array([str(v) for v in values], dtype=object)


def _region_index(variant_contig, variant_position, variant_length, variant_chunk) -> np.ndarray:
    """Rows (chunk, contig, first position, last position, max end, records), one per contig run in a chunk.

    The table vcztools uses to find the chunks overlapping a region.
    """
    rows = []
    end = variant_position + variant_length - 1
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
    return np.array(rows, dtype=variant_position.dtype).reshape(-1, 6)


def init_store(url: str, variants: pd.DataFrame, sample_ids, contigs, variant_chunk: int, sample_chunk: int) -> None:
    """Create the store at ``url`` (replacing one that is there) with every array.

    variants : DataFrame with contig, position, id, ref, alt as for the VCF writer.
    contigs : list of (name, length).
    variant_chunk : chunk length along ``variants`` for every array with that dimension.
    sample_chunk : chunk length along ``samples``; :func:`write_sample_block`
        ranges must start on a multiple of it.
    The call arrays are created filled with "missing" until sample blocks are written.
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
    contig_codes = contig_codes.to_numpy(dtype=np.int64)
    contig_dtype = np.int8 if len(names) <= np.iinfo(np.int8).max else np.int16
    variant_contig = contig_codes.astype(contig_dtype)
    variant_position = variants["position"].to_numpy(dtype=np.int32)
    ref = variants["ref"].astype(str)
    variant_length = ref.str.len().to_numpy(dtype=np.int32)
    alleles = np.empty((n_variants, 2), dtype=object)
    alleles[:, 0] = ref.to_numpy(dtype=object)
    alleles[:, 1] = variants["alt"].astype(str).to_numpy(dtype=object)

    group = _open_group(url, "w")
    group.attrs.update({"vcf_zarr_version": VCF_ZARR_VERSION})
    vc, sc = min(variant_chunk, n_variants), min(sample_chunk, n_samples)
    n_contigs, n_filters = len(names), len(FILTERS)

    lengths = np.array([int(length) for _, length in contigs], dtype=np.int64)
    _create(group, "contig_id", ["contigs"], (n_contigs,), data=_strings(names))
    _create(group, "contig_length", ["contigs"], (n_contigs,), data=lengths)
    _create(group, "filter_id", ["filters"], (n_filters,), data=_strings([f for f, _ in FILTERS]))
    _create(group, "filter_description", ["filters"], (n_filters,), data=_strings([d for _, d in FILTERS]))
    _create(group, "sample_id", ["samples"], (sc,), data=_strings(sample_ids))

    _create(group, "variant_contig", ["variants"], (vc,), data=variant_contig)
    _create(group, "variant_position", ["variants"], (vc,), data=variant_position)
    _create(group, "variant_length", ["variants"], (vc,), data=variant_length)
    _create(group, "variant_id", ["variants"], (vc,), data=_strings(variants["id"]))
    _create(group, "variant_id_mask", ["variants"], (vc,), data=np.zeros(n_variants, dtype=bool))
    _create(group, "variant_allele", ["variants", "alleles"], (vc, 2), data=alleles)
    _create(group, "variant_quality", ["variants"], (vc,),
            data=np.full(n_variants, _FLOAT32_MISSING_BITS, dtype=np.int32).view(np.float32))
    _create(group, "variant_filter", ["variants", "filters"], (vc, n_filters),
            data=np.ones((n_variants, n_filters), dtype=bool))
    region_index = _region_index(variant_contig.astype(np.int32), variant_position, variant_length, vc)
    _create(group, "region_index", ["region_index_values", "region_index_fields"], region_index.shape,
            data=region_index)

    _create(group, "call_genotype", ["variants", "samples", "ploidy"], (vc, sc, PLOIDY),
            shape=(n_variants, n_samples, PLOIDY), dtype=np.int8, fill_value=-1)
    _create(group, "call_genotype_mask", ["variants", "samples", "ploidy"], (vc, sc, PLOIDY),
            shape=(n_variants, n_samples, PLOIDY), dtype=bool, fill_value=True)
    _create(group, "call_genotype_phased", ["variants", "samples"], (vc, sc),
            shape=(n_variants, n_samples), dtype=bool, fill_value=False)


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
    just the compressed, fill-padded chunk, which is what zarr itself would write
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
            calls = np.full((vc, sc, ploidy), metas["call_genotype"].fill_value, dtype=np.int8)
            calls[: v1 - v0, : s1 - s0] = haplotypes[v0:v1, s0 - sample_start:s1 - sample_start]
            put("call_genotype", (i, j, 0), calls)
            mask = np.full((vc, sc, ploidy), bool(metas["call_genotype_mask"].fill_value), dtype=bool)
            mask[: v1 - v0, : s1 - s0] = calls[: v1 - v0, : s1 - s0] < 0
            put_flag("call_genotype_mask", (i, j, 0), mask)
            phased = np.full((vc, sc), bool(metas["call_genotype_phased"].fill_value), dtype=bool)
            phased[: v1 - v0, : s1 - s0] = True
            put_flag("call_genotype_phased", (i, j), phased)
    return True


def finalise(url: str) -> None:
    """Consolidate the store's metadata into ``.zmetadata`` (call after every block is written)."""
    zarr.consolidate_metadata(url, zarr_format=2)
