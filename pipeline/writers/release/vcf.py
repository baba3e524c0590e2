"""The release's ``genotypes.vcf.gz`` (BGZF, phased GT, INFO AC/AF/AN) and its tabix index.

Variants are cut into chunks of ``chunk_size`` records.  Each chunk is formatted
and BGZF-compressed on its own (by whatever ``map_fn`` runs the work) and starts
a fresh BGZF block, so the file is the same bytes whoever compressed which
chunk; ``chunk_size`` is therefore part of the output format and fixed by the
caller's configuration, never by a scheduler.
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

import fsspec
import numpy as np
import pandas as pd

from ... import __version__
from . import bgzf, tabix

DEFAULT_CHUNK_SIZE = 256
# "samples": the sample-aware Numba deflate (about bgzip's size at a fraction
# of its time); "zlib": zlib level 6 block by block (slower, for comparison).
COMPRESSIONS = ("samples", "zlib")
FILE_FORMAT = "VCFv4.3"
#: ``##source``: the generator and its version (the same for every build of a world).
SOURCE = f"drugtargetworld-{__version__}"
GT_DESCRIPTION = "Genotype"  # the VCF specification's own wording, and what vcztools writes back
#: INFO fields of every record, in the order written (GATK's alphabetical order,
#: which is also the order ``vcztools view`` writes them in); the descriptions
#: are bcftools +fill-tags' own, so its output matches ours field for field.
INFO_FIELDS = (
    ("AC", "A", "Integer", "Allele count in genotypes"),
    ("AF", "A", "Float", "Allele frequency"),
    ("AN", "1", "Integer", "Total number of alleles in called genotypes"),
)
_FIXED_COLUMNS = ("CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT")
_FORBIDDEN_IN_FIELDS = ("\t", "\n", "\r", " ", ";", ",")


# Each worker thread formats its chunks into one reused buffer: a chunk's text
# is tens to hundreds of MB, and faulting in fresh pages for every chunk cost
# more than formatting it on the machines measured (a virtual machine).
_scratch = threading.local()


@dataclass(frozen=True)
class ChunkTask:
    """Everything one worker needs to produce one compressed chunk."""

    read_chunk: Callable[[int, int], np.ndarray]
    v0: int
    v1: int
    n_samples: int
    head_bytes: np.ndarray  # CHROM … FILTER of each record, concatenated
    head_offsets: np.ndarray
    compression: str


@dataclass(frozen=True)
class EncodedChunk:
    compressed: bytes
    block_starts: np.ndarray
    record_ends: np.ndarray
    data_length: int


def meta_information() -> list[tuple[str, str]]:
    """The header's ``##key=value`` lines other than contig, FILTER, INFO and
    FORMAT, as (key, value) pairs (the genotype store's ``vcf_meta_information``)."""
    return [("fileformat", FILE_FORMAT), ("source", SOURCE)]


def vcf_header(sample_ids, contigs) -> str:
    """The header text, ``##fileformat`` to the ``#CHROM`` line inclusive.

    Holds nothing that varies between builds of the same world: no date, no
    command line, no paths; the generator's version (``##source``) is the only
    one.  The lines come in the order ``vcztools view`` writes them from the
    genotype store, so its header differs only by its own command line.
    """
    lines = [f"##{key}={value}" for key, value in meta_information()]
    lines += [f'##INFO=<ID={name},Number={number},Type={kind},Description="{text}">'
              for name, number, kind, text in INFO_FIELDS]
    lines.append('##FILTER=<ID=PASS,Description="All filters passed">')
    lines.append(f'##FORMAT=<ID=GT,Number=1,Type=String,Description="{GT_DESCRIPTION}">')
    lines += [f"##contig=<ID={name},length={int(length)}>" for name, length in contigs]
    lines.append("#" + "\t".join(_FIXED_COLUMNS + tuple(sample_ids)))
    return "\n".join(lines) + "\n"


def _check_field(values: pd.Series, column: str) -> None:
    text = values.astype(str)
    if (text.str.len() == 0).any():
        raise ValueError(f"variants column {column!r} has empty values")
    for ch in _FORBIDDEN_IN_FIELDS:
        if text.str.contains(ch, regex=False).any():
            raise ValueError(f"variants column {column!r} contains {ch!r}, which VCF does not allow there")


def _validate(variants: pd.DataFrame, sample_ids, contigs) -> np.ndarray:
    """Check the inputs; returns each variant's index into ``contigs``."""
    missing = {"contig", "position", "id", "ref", "alt"} - set(variants.columns)
    if missing:
        raise ValueError(f"variants lacks columns {sorted(missing)}")
    if len(variants) == 0:
        raise ValueError("variants is empty; a VCF release needs at least one record")
    if len(sample_ids) == 0:
        raise ValueError("sample_ids is empty")
    if len(set(sample_ids)) != len(sample_ids):
        raise ValueError("sample_ids has duplicates")
    joined = "".join(str(sample) for sample in sample_ids)  # one scan instead of one per sample
    if any(ch in joined for ch in _FORBIDDEN_IN_FIELDS):
        bad = next(s for s in sample_ids if any(ch in str(s) for ch in _FORBIDDEN_IN_FIELDS))
        raise ValueError(f"sample id {bad!r} contains a character VCF does not allow")
    if any(len(str(sample)) == 0 for sample in sample_ids):
        raise ValueError("a sample id is empty")
    names = [str(name) for name, _ in contigs]
    if len(set(names)) != len(names):
        raise ValueError("contigs has duplicate names")
    lengths = np.array([int(length) for _, length in contigs], dtype=np.int64)
    contig_index = variants["contig"].astype(str).map({name: i for i, name in enumerate(names)})
    if contig_index.isna().any():
        unknown = sorted(set(variants["contig"].astype(str)) - set(names))
        raise ValueError(f"variants on contigs absent from contigs: {unknown[:5]}")
    contig_index = contig_index.to_numpy(dtype=np.int64)
    if np.any(np.diff(contig_index) < 0):
        raise ValueError("variants are not grouped by contig in the order of contigs")
    position = variants["position"].to_numpy(dtype=np.int64)
    if position.min() < 1:
        raise ValueError("variant positions must be 1-based (≥ 1)")
    same_contig = np.diff(contig_index) == 0
    if np.any(np.diff(position)[same_contig] < 0):
        raise ValueError("variant positions are not sorted within a contig")
    ref_length = variants["ref"].astype(str).str.len().to_numpy()
    if np.any(position + ref_length - 1 > lengths[contig_index]):
        raise ValueError("a variant extends past the end of its contig's length")
    for column in ("id", "ref", "alt"):
        _check_field(variants[column], column)
    return contig_index


def record_heads(variants: pd.DataFrame) -> list[bytes]:
    """CHROM … FILTER columns of each record, tab-joined, without a trailing tab
    (INFO depends on the calls and is added where they are read)."""
    text = (
        variants["contig"].astype(str) + "\t"
        + variants["position"].astype(np.int64).astype(str) + "\t"
        + variants["id"].astype(str) + "\t"
        + variants["ref"].astype(str) + "\t"
        + variants["alt"].astype(str) + "\t.\tPASS"
    )
    return [line.encode("ascii") for line in text.tolist()]


def info_values(ac: np.ndarray, an: np.ndarray) -> list[bytes]:
    """The INFO column of each record from its AC and AN.

    AF is float32(AC) / float32(AN) printed with 6 significant digits (``%g``),
    which is how htslib writes the float that bcftools +fill-tags computes;
    with no allele called AF is missing.
    """
    af = np.divide(ac.astype(np.float32), an.astype(np.float32), out=np.full(len(ac), np.nan, dtype=np.float32),
                   where=an > 0)
    return [b"AC=%d;AF=%s;AN=%d" % (c, b"." if n == 0 else b"%g" % f, n)
            for c, f, n in zip(ac.tolist(), af.tolist(), an.tolist())]


def _prefixes(head_bytes: np.ndarray, head_offsets: np.ndarray, infos: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Each record's CHROM … FORMAT columns (its head, INFO, ``GT``), concatenated, and their offsets."""
    heads = head_bytes.tobytes()
    parts = []
    for i, info in enumerate(infos):
        parts += (heads[head_offsets[i]:head_offsets[i + 1]], b"\t", info, b"\tGT")
    lengths = np.diff(head_offsets) + np.array([len(info) + 4 for info in infos], dtype=np.int64)
    offsets = np.zeros(len(infos) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


def encode_chunk(task: ChunkTask) -> EncodedChunk:
    """Read, format and BGZF-compress one chunk of records (runs on a worker)."""
    from kernels.vcf_encode import allele_counts, format_and_deflate_vcf_chunk, format_vcf_records, vcf_record_ends

    calls = np.asarray(task.read_chunk(task.v0, task.v1))
    n_variants = task.v1 - task.v0
    # A flat read must hold exactly the samples; a sample-blocked one at least them (its last block is padded).
    flat = calls.ndim == 3 and calls.shape == (n_variants, task.n_samples, 2)
    blocked = (calls.ndim == 4 and calls.shape[1] == n_variants and calls.shape[3] == 2
               and calls.shape[0] * calls.shape[2] >= task.n_samples)
    if calls.dtype != np.int8 or not (flat or blocked):
        raise ValueError(
            f"read_chunk({task.v0}, {task.v1}) returned {calls.dtype}{list(calls.shape)}; expected "
            f"int8[{n_variants}, {task.n_samples}, 2] or its sample-blocked form int8[k, {n_variants}, S, 2]"
        )
    if flat:
        calls = calls[np.newaxis]
    calls = np.ascontiguousarray(calls)
    prefix_bytes, prefix_offsets = _prefixes(task.head_bytes, task.head_offsets,
                                             info_values(*allele_counts(calls, task.n_samples)))
    n_bytes = int(vcf_record_ends(prefix_offsets, task.n_samples, 2)[-1])
    buffer = getattr(_scratch, "text", None)
    if buffer is None or buffer.shape[0] < n_bytes:
        _scratch.text = None  # freed before its successor is allocated
        # Headroom for the next chunks' slightly longer fixed columns.
        buffer = _scratch.text = np.empty(n_bytes + n_bytes // 16, dtype=np.uint8)
    if task.compression == "samples":
        # Each block's calls are formatted and compressed while in cache.
        # A block whose stream would not fit (size -1) is left to zlib.
        text, record_ends, streams, sizes = format_and_deflate_vcf_chunk(
            prefix_bytes, prefix_offsets, calls, task.n_samples, buffer, bgzf.BLOCK_DATA_SIZE)
    else:
        haplotypes = np.concatenate(list(calls), axis=1)[:, :task.n_samples]
        text, record_ends = format_vcf_records(prefix_bytes, prefix_offsets, np.ascontiguousarray(haplotypes), buffer)
        streams = sizes = None
    compressed, block_starts = bgzf.compress_chunk(text, streams, sizes)
    return EncodedChunk(compressed, block_starts, record_ends, int(text.nbytes))


def _chunk_tasks(heads: list[bytes], read_chunk, n_samples: int, chunk_size: int,
                 compression: str) -> list[ChunkTask]:
    tasks = []
    for v0 in range(0, len(heads), chunk_size):
        v1 = min(v0 + chunk_size, len(heads))
        lengths = [len(p) for p in heads[v0:v1]]
        offsets = np.zeros(v1 - v0 + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        head_bytes = np.frombuffer(b"".join(heads[v0:v1]), dtype=np.uint8)
        tasks.append(ChunkTask(read_chunk, v0, v1, n_samples, head_bytes, offsets, compression))
    return tasks


def _temporary_name(path: str) -> str:
    return f"{path}.partial-{uuid.uuid4().hex}"


def write_vcf(
    path: str,
    variants: pd.DataFrame,
    sample_ids,
    contigs,
    read_chunk: Callable[[int, int], np.ndarray],
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    map_fn: Callable[[Callable, Iterable], Iterable] = map,
    compression: str = "samples",
) -> dict:
    """Write ``path`` (a BGZF VCF) and ``path + ".tbi"``; returns a small summary.

    path : local path or fsspec URL of the ``.vcf.gz`` to create.
    variants : DataFrame with contig (str), position (int, 1-based), id, ref, alt,
        grouped by contig in ``contigs`` order and sorted by position within one.
    sample_ids : sequence of str, the sample columns.
    contigs : list of (name, length), the header's contigs in order.
    read_chunk : ``read_chunk(v0, v1)`` → int8[v1 - v0, n_samples, 2] phased
        haplotypes of variants v0..v1, or the same sample-blocked as
        int8[k, v1 - v0, S, 2] (sample j at ``[j // S, :, j % S]``, as
        :func:`pipeline.genotypes_io.read_haplotype_blocks` returns a store's
        chunks); must pickle if ``map_fn`` ships work to other processes.
    chunk_size : records per independently compressed chunk (part of the format).
    map_fn : ``map_fn(func, tasks)`` → results in task order (builtin ``map``, an
        executor's ``map``, or a Dask client's map followed by gather).
    compression : one of COMPRESSIONS; like ``chunk_size`` it is part of the
        format (the bytes differ, the text does not).
    Both files appear under their final names only when complete, the index
    first, so a present ``.vcf.gz`` always has its index beside it.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    sample_ids = [str(s) for s in sample_ids]
    contig_index = _validate(variants, sample_ids, contigs)
    names = [str(name) for name, _ in contigs]
    header = bgzf.compress_chunk(vcf_header(sample_ids, contigs).encode("ascii"))[0]
    tasks = _chunk_tasks(record_heads(variants), read_chunk, len(sample_ids), chunk_size, compression)

    n_records = len(variants)
    vstart = np.empty(n_records, dtype=np.uint64)
    vend = np.empty(n_records, dtype=np.uint64)
    fs, fs_path = fsspec.core.url_to_fs(path)
    vcf_tmp, tbi_tmp = _temporary_name(fs_path), _temporary_name(fs_path + ".tbi")
    try:
        with fs.open(vcf_tmp, "wb") as out:
            out.write(header)
            offset = len(header)
            for task, chunk in zip(tasks, map_fn(encode_chunk, tasks), strict=True):
                if len(chunk.record_ends) != task.v1 - task.v0:
                    raise RuntimeError(f"chunk {task.v0}:{task.v1} came back with {len(chunk.record_ends)} records")
                starts = np.concatenate(([0], chunk.record_ends[:-1]))
                vstart[task.v0:task.v1] = bgzf.virtual_offsets(starts, chunk.block_starts, offset, chunk.data_length)
                vend[task.v0:task.v1] = bgzf.virtual_offsets(
                    chunk.record_ends, chunk.block_starts, offset, chunk.data_length
                )
                out.write(chunk.compressed)
                offset += len(chunk.compressed)
            out.write(bgzf.EOF_BLOCK)
            compressed_size = offset + len(bgzf.EOF_BLOCK)

        used = np.unique(contig_index)
        record_sequence = np.searchsorted(used, contig_index)
        beg = variants["position"].to_numpy(dtype=np.int64) - 1
        end = beg + variants["ref"].astype(str).str.len().to_numpy(dtype=np.int64)
        index = tabix.tabix_index_file([names[i] for i in used], record_sequence, beg, end, vstart, vend)
        with fs.open(tbi_tmp, "wb") as out:
            out.write(index)
        fs.mv(tbi_tmp, fs_path + ".tbi")
        fs.mv(vcf_tmp, fs_path)
    finally:
        for leftover in (vcf_tmp, tbi_tmp):
            if fs.exists(leftover):
                fs.rm(leftover)
    return {"path": path, "records": n_records, "samples": len(sample_ids), "chunks": len(tasks),
            "compressed_bytes": compressed_size}
