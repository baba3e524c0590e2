"""Genotype release I/O: VCF text kernel, BGZF, tabix, the VCF writer, the VCF
Zarr store and the dosage loader, checked against real clients (bcftools,
tabix, bgzip, pysam, cyvcf2, scikit-allel, vcztools, bio2zarr)."""
from __future__ import annotations

import functools
import gzip
import json
import multiprocessing
import shutil
import struct
import subprocess
import zlib
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest
import zarr

import pipeline

from kernels import deflate
from kernels.reference import vcf as twin
from kernels.vcf_encode import (allele_counts, deflate_vcf_chunk, format_and_deflate_vcf_chunk, format_vcf_records,
                                 vcf_record_ends)
from pipeline.genotypes_io import load_genotypes, read_haplotype_blocks, read_haplotypes
from pipeline.writers.release import bgzf, genozarr, tabix
from pipeline.writers.release.vcf import vcf_header, write_vcf


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed on this machine")
    return path


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


# --------------------------------------------------------------------------- data

def _make_inputs(seed: int, contigs, counts, n_samples: int, af_low=0.02, af_high=0.5):
    rng = np.random.default_rng(seed)
    rows, k = [], 0
    for (name, length), n in zip(contigs, counts):
        positions = np.sort(rng.choice(np.arange(1, length + 1), n, replace=False))
        for p in positions:
            ref, alt = rng.choice(list("ACGT"), 2, replace=False)
            rows.append((name, int(p), f"rs{100000 + 7 * k}", str(ref), str(alt)))
            k += 1
    variants = pd.DataFrame(rows, columns=["contig", "position", "id", "ref", "alt"])
    af = rng.uniform(af_low, af_high, len(variants))
    haplotypes = (rng.random((len(variants), n_samples, 2)) < af[:, None, None]).astype(np.int8)
    samples = [f"SUBJ_{i:05d}" for i in range(n_samples)]
    return variants, samples, haplotypes


def _info(calls: np.ndarray) -> str:
    """INFO as bcftools +fill-tags computes it: AC, AN, and AF = float(AC) / AN printed with %g."""
    ac, an = int((calls == 1).sum()), int((calls >= 0).sum())
    af = "." if an == 0 else "%g" % (np.float32(ac) / np.float32(an))
    return f"AC={ac};AF={af};AN={an}"


def _allele(a) -> str:
    return "." if a < 0 else str(a)


def _expected_body(variants: pd.DataFrame, haplotypes: np.ndarray) -> list[str]:
    lines = []
    for i, row in enumerate(variants.itertuples(index=False)):
        calls = [f"{_allele(a)}|{_allele(b)}" for a, b in haplotypes[i]]
        lines.append("\t".join([row.contig, str(row.position), row.id, row.ref, row.alt, ".", "PASS",
                                 _info(haplotypes[i]), "GT", *calls]))
    return lines


class Release:
    def __init__(self, root: Path, contigs, variants, samples, haplotypes, chunk_size, variant_chunk, sample_chunk):
        self.root, self.contigs, self.variants = root, contigs, variants
        self.samples, self.haplotypes, self.chunk_size = samples, haplotypes, chunk_size
        self.vcf = root / "genotypes.vcf.gz"
        self.zarr = root / "genotypes.zarr"
        genozarr.init_store(str(self.zarr), variants, samples, contigs, variant_chunk, sample_chunk)
        for s0 in range(0, len(samples), sample_chunk):
            genozarr.write_sample_block(str(self.zarr), s0, haplotypes[:, s0:s0 + sample_chunk])
        genozarr.finalise(str(self.zarr))
        self.summary = write_vcf(
            str(self.vcf), variants, samples, contigs, functools.partial(read_haplotypes, str(self.zarr)),
            chunk_size=chunk_size,
        )

    def expected_region(self, contig: str, start: int, end: int) -> list[str]:
        body = _expected_body(self.variants, self.haplotypes)
        keep = (self.variants["contig"] == contig) & self.variants["position"].between(start, end)
        return [body[i] for i in np.flatnonzero(keep.to_numpy())]


SMALL_CONTIGS = [("1", 2_000_000), ("2", 3_000_000), ("3", 1_000_000)]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Release:
    """3 contigs, 300 variants, 57 samples, 9 chunks of 37 records (one BGZF block each)."""
    variants, samples, haplotypes = _make_inputs(11, SMALL_CONTIGS, (120, 100, 80), 57)
    # Crowd contig 2's start so the region query below has many records.
    start = variants.index[variants["contig"] == "2"][:30]
    variants.loc[start, "position"] = np.sort(np.random.default_rng(5).choice(np.arange(1000, 50001), 30, replace=False))
    variants.loc[variants["contig"] == "2", "position"] = np.sort(variants.loc[variants["contig"] == "2", "position"].to_numpy())
    return Release(tmp_path_factory.mktemp("small"), SMALL_CONTIGS, variants, samples, haplotypes, 37, 64, 20)


WIDE_CONTIGS = [("1", 400_000), ("2", 300_000)]


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> Release:
    """1,500 samples: 6 kB records, chunks of 25 records spanning 3 BGZF blocks, so
    records straddle block boundaries."""
    variants, samples, haplotypes = _make_inputs(12, WIDE_CONTIGS, (70, 50), 1500)
    return Release(tmp_path_factory.mktemp("wide"), WIDE_CONTIGS, variants, samples, haplotypes, 25, 32, 500)


@pytest.fixture(scope="module")
def gappy(tmp_path_factory) -> Release:
    """75 variants, 45 samples, about 3 % of alleles missing and one variant with no call at all."""
    variants, samples, haplotypes = _make_inputs(13, SMALL_CONTIGS, (30, 25, 20), 45)
    haplotypes[np.random.default_rng(14).random(haplotypes.shape) < 0.03] = -1
    haplotypes[10] = -1
    return Release(tmp_path_factory.mktemp("gappy"), SMALL_CONTIGS, variants, samples, haplotypes, 16, 32, 20)


# --------------------------------------------------------------------------- kernel

@pytest.mark.parametrize("ploidy", [1, 2, 3])
def test_format_kernel_matches_twin(ploidy):
    rng = np.random.default_rng(ploidy)
    n_variants, n_samples = 23, 41
    prefixes = [("x" * int(rng.integers(1, 40)) + f"\t{i}").encode() for i in range(n_variants)]
    offsets = np.zeros(n_variants + 1, dtype=np.int64)
    np.cumsum([len(p) for p in prefixes], out=offsets[1:])
    prefix_bytes = np.frombuffer(b"".join(prefixes), dtype=np.uint8)
    haplotypes = rng.integers(-1, 10, size=(n_variants, n_samples, ploidy)).astype(np.int8)

    text, ends = format_vcf_records(prefix_bytes, offsets, haplotypes)
    expected_text, expected_ends = twin.format_vcf_records(prefix_bytes, offsets, haplotypes)
    assert bytes(text) == bytes(expected_text)
    np.testing.assert_array_equal(ends, expected_ends)
    np.testing.assert_array_equal(vcf_record_ends(offsets, n_samples, ploidy), twin.vcf_record_ends(offsets, n_samples, ploidy))


def test_format_kernel_writes_phased_calls():
    prefix = b"1\t5\trs1\tA\tG\t.\tPASS\t.\tGT"
    offsets = np.array([0, len(prefix)], dtype=np.int64)
    haplotypes = np.array([[[0, 1], [1, 1], [-1, 0]]], dtype=np.int8)
    text, ends = format_vcf_records(np.frombuffer(prefix, dtype=np.uint8), offsets, haplotypes)
    assert bytes(text) == prefix + b"\t0|1\t1|1\t.|0\n"
    assert ends.tolist() == [len(text)]


@pytest.mark.parametrize(("blocks", "block", "n_samples"), [(1, 57, 57), (3, 20, 57), (4, 9, 30), (2, 3, 1), (1, 2000, 1999)])
def test_allele_count_kernel_matches_twin(blocks, block, n_samples):
    rng = np.random.default_rng(blocks * 1000 + block)
    calls = rng.choice(np.array([0, 1, -1], dtype=np.int8), size=(blocks, 7, block, 2), p=[0.6, 0.35, 0.05])
    ac, an = allele_counts(calls, n_samples)
    expected_ac, expected_an = twin.allele_counts(calls, n_samples)
    assert ac.dtype == an.dtype == np.int32
    np.testing.assert_array_equal(ac, expected_ac)
    np.testing.assert_array_equal(an, expected_an)
    with pytest.raises(ValueError, match="fewer samples"):
        allele_counts(calls, blocks * block + 1)


@pytest.mark.parametrize("bad", [10, -2, 127])
def test_format_kernel_rejects_multicharacter_alleles(bad):
    haplotypes = np.zeros((2, 3, 2), dtype=np.int8)
    haplotypes[1, 2, 0] = bad
    with pytest.raises(ValueError, match="allele index"):
        format_vcf_records(np.frombuffer(b"ab", dtype=np.uint8), np.array([0, 1, 2], dtype=np.int64), haplotypes)


def _record_text(haplotypes, prefixes):
    offsets = np.zeros(len(prefixes) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in prefixes], out=offsets[1:])
    text, ends = format_vcf_records(np.frombuffer(b"".join(prefixes), dtype=np.uint8), offsets, haplotypes)
    samples_begin = np.concatenate(([0], ends[:-1])) + np.diff(offsets)
    return text, samples_begin, ends


def _inflate_blocks(text, streams, sizes, block_size):
    at = 0
    for k, size in enumerate(sizes.tolist()):
        assert size > 0, f"block {k} did not fit"
        block = text[k * block_size:(k + 1) * block_size].tobytes()
        assert zlib.decompress(streams[at:at + size].tobytes(), -15) == block, f"block {k} inflates wrongly"
        at += size
    assert at == len(streams)


@pytest.mark.parametrize(
    ("n_variants", "n_samples", "block_size", "af", "missing"),
    [
        (40, 3, 1000, 0.3, 0.0),  # blocks spanning many short records
        (12, 2000, 65280, 0.2, 0.0),  # records spanning blocks
        (6, 5000, 65280, 0.0, 0.0),  # one genotype: the longest matches, overlapping copies
        (6, 5000, 65280, 1.0, 0.0),
        (10, 3000, 20000, 0.4, 0.05),  # missing alleles interrupt runs of clean samples
        (3, 17, 7, 0.5, 0.0),  # blocks smaller than a sample
    ],
)
def test_sample_deflate_inflates_to_the_text(n_variants, n_samples, block_size, af, missing):
    rng = np.random.default_rng(n_samples)
    haplotypes = (rng.random((n_variants, n_samples, 2)) < af).astype(np.int8)
    haplotypes[rng.random(haplotypes.shape) < missing] = -1
    prefixes = [f"{1 + i % 3}\t{100 + 9 * i}\trs{i}\tA\tC\t.\tPASS\t.\tGT".encode() for i in range(n_variants)]
    text, samples_begin, ends = _record_text(haplotypes, prefixes)
    streams, sizes = deflate_vcf_chunk(text, samples_begin, ends, n_samples, block_size)
    assert len(sizes) == -(-len(text) // block_size)
    _inflate_blocks(text, streams, sizes, block_size)


def test_sample_deflate_is_exact_on_text_that_breaks_the_sample_layout():
    rng = np.random.default_rng(4)
    haplotypes = (rng.random((8, 900, 2)) < 0.3).astype(np.int8)
    text, samples_begin, ends = _record_text(haplotypes, [b"x\tGT"] * 8)
    text = text.copy()
    # Calls that look almost right, and tabs where alleles should be.
    for at in rng.integers(0, len(text), 400):
        text[at] = rng.choice(np.frombuffer(b"01|\t.2\n", dtype=np.uint8))
    streams, sizes = deflate_vcf_chunk(text, samples_begin, ends, 900, 4096)
    _inflate_blocks(text, streams, sizes, 4096)


def test_sample_deflate_compresses_genotypes_like_zlib():
    rng = np.random.default_rng(9)
    haplotypes = (rng.random((24, 8000, 2)) < rng.uniform(0.05, 0.5, (24, 1, 1))).astype(np.int8)
    text, samples_begin, ends = _record_text(haplotypes, [b"1\t1\trs1\tA\tG\t.\tPASS\t.\tGT"] * 24)
    streams, sizes = deflate_vcf_chunk(text, samples_begin, ends, 8000, bgzf.BLOCK_DATA_SIZE)
    zlib_size = sum(
        len(zlib.compress(text[k:k + bgzf.BLOCK_DATA_SIZE].tobytes(), 6)) for k in range(0, len(text), bgzf.BLOCK_DATA_SIZE)
    )
    assert sizes.sum() < 1.15 * zlib_size


def _sample_blocked(haplotypes, block):
    """int8[v, s, 2] as int8[k, v, block, 2] (sample j at [j // block, :, j % block]), the tail padded with 7s."""
    n_variants, n_samples, _ = haplotypes.shape
    k = -(-n_samples // block)
    padded = np.full((n_variants, k * block, 2), 7, dtype=np.int8)
    padded[:, :n_samples] = haplotypes
    return np.ascontiguousarray(padded.reshape(n_variants, k, block, 2).transpose(1, 0, 2, 3))


@pytest.mark.parametrize(
    ("n_variants", "n_samples", "sample_block", "block_size", "missing"),
    [
        (40, 3, 3, 1000, 0.0),  # blocks spanning many short records, one sample block
        (12, 2000, 300, 65280, 0.0),  # records spanning blocks; sample blocks not aligned to 32-call groups
        (10, 3000, 1000, 20000, 0.05),  # missing alleles and alleles 2-9 (text written call by call)
        (3, 17, 5, 7, 0.2),  # blocks smaller than a call: calls straddle every block boundary
        (6, 64, 64, 4096, 0.0),  # segments that are whole multiples of 32 calls
    ],
)
def test_fused_format_and_deflate_equals_the_two_steps(n_variants, n_samples, sample_block, block_size, missing):
    rng = np.random.default_rng(n_samples + sample_block)
    haplotypes = (rng.random((n_variants, n_samples, 2)) < 0.3).astype(np.int8)
    haplotypes[rng.random(haplotypes.shape) < missing] = -1
    haplotypes[rng.random(haplotypes.shape) < missing] = rng.integers(2, 10)
    prefixes = [f"{1 + i % 3}\t{100 + 9 * i}\trs{i}\tA\tC\t.\tPASS\t.\tGT".encode() for i in range(n_variants)]
    offsets = np.zeros(n_variants + 1, dtype=np.int64)
    np.cumsum([len(p) for p in prefixes], out=offsets[1:])
    prefix_bytes = np.frombuffer(b"".join(prefixes), dtype=np.uint8)
    expected_text, expected_ends = format_vcf_records(prefix_bytes, offsets, haplotypes)
    buffer = np.full(len(expected_text) + 13, 255, dtype=np.uint8)
    text, ends, streams, sizes = format_and_deflate_vcf_chunk(
        prefix_bytes, offsets, _sample_blocked(haplotypes, sample_block), n_samples, buffer, block_size)
    assert bytes(text) == bytes(expected_text)
    np.testing.assert_array_equal(ends, expected_ends)
    assert np.shares_memory(text, buffer)  # written into the caller's buffer
    _inflate_blocks(expected_text, streams, sizes, block_size)
    # The same streams as compressing the finished text.
    samples_begin = np.concatenate(([0], ends[:-1])) + np.diff(offsets)
    streams2, sizes2 = deflate_vcf_chunk(expected_text, samples_begin, ends, n_samples, block_size)
    assert bytes(streams) == bytes(streams2) and sizes.tolist() == sizes2.tolist()


def test_fused_format_and_deflate_rejects_bad_calls():
    offsets = np.array([0, 2, 4], dtype=np.int64)
    prefix = np.frombuffer(b"GTGT", dtype=np.uint8)
    calls = np.zeros((1, 2, 3, 2), dtype=np.int8)
    calls[0, 1, 2, 0] = 10
    with pytest.raises(ValueError, match="allele index"):
        format_and_deflate_vcf_chunk(prefix, offsets, calls, 3, np.empty(100, dtype=np.uint8), 1000)
    with pytest.raises(ValueError, match="too small"):
        format_and_deflate_vcf_chunk(prefix, offsets, np.zeros((1, 2, 3, 2), np.int8), 3, np.empty(10, np.uint8), 1000)
    with pytest.raises(ValueError, match="fewer samples"):
        format_and_deflate_vcf_chunk(prefix, offsets, np.zeros((1, 2, 3, 2), np.int8), 4, np.empty(100, np.uint8), 1000)


def test_huffman_lengths_respect_the_limit_and_kraft():
    fibonacci = np.array([1, 1], dtype=np.int64)
    while len(fibonacci) < 30:
        fibonacci = np.append(fibonacci, fibonacci[-1] + fibonacci[-2])
    for freq, limit in ((fibonacci, 15), (fibonacci[:19], 7), (np.array([5, 0, 0, 3]), 15), (np.array([0, 9, 0]), 7)):
        lengths = np.zeros(len(freq), dtype=np.int64)
        deflate._huffman_lengths(freq, limit, lengths)
        used = freq > 0
        assert (lengths[used] >= 1).all() and (lengths[~used] == 0).all()
        assert lengths.max() <= limit
        if used.sum() > 1:
            assert sum(2.0 ** -lengths[used]) == 1.0


# --------------------------------------------------------------------------- BGZF

def _members(data: bytes):
    """(offset, member bytes) of every gzip member, using each one's BC subfield."""
    at = 0
    while at < len(data):
        magic, method, flags, xlen = data[at:at + 2], data[at + 2], data[at + 3], struct.unpack_from("<H", data, at + 10)[0]
        assert magic == b"\x1f\x8b" and method == 8 and flags == 4 and xlen == 6
        si1, si2, slen, bsize = struct.unpack_from("<BBHH", data, at + 12)
        assert (si1, si2, slen) == (66, 67, 2)
        yield at, data[at:at + bsize + 1]
        at += bsize + 1


def _block_text():
    rng = np.random.default_rng(7)
    genotype_text = "".join(f"\t{a}|{b}" for a, b in rng.integers(0, 2, (30_000, 2))).encode()
    # Random bytes do not compress: their blocks must fall back to stored deflate.
    noise = rng.integers(0, 256, 150_000, dtype=np.uint8).tobytes()
    return genotype_text + noise + b"tail\n"


def test_bgzf_blocks_are_valid_bgzf(tmp_path):
    _require("bgzip")
    data = _block_text()
    path = tmp_path / "blocks.gz"
    path.write_bytes(bgzf.compress_file(data))
    subprocess.run(["bgzip", "-t", str(path)], check=True)
    assert subprocess.run(["gzip", "-dc", str(path)], check=True, capture_output=True).stdout == data

    compressed = path.read_bytes()
    assert compressed.endswith(bgzf.EOF_BLOCK)
    members = list(_members(compressed))
    assert members[-1][1] == bgzf.EOF_BLOCK
    restored = b""
    for _, member in members[:-1]:
        assert len(member) <= bgzf.MAX_BLOCK_SIZE
        payload = zlib.decompress(member[18:-8], -15)
        crc, isize = struct.unpack("<II", member[-8:])
        assert 0 < isize == len(payload) <= bgzf.BLOCK_DATA_SIZE
        assert crc == zlib.crc32(payload)
        restored += payload
    assert restored == data


def test_bgzf_chunks_concatenate_and_virtual_offsets_point_at_the_data(tmp_path):
    rng = np.random.default_rng(8)
    first, second = _block_text()[:170_000], b"second chunk\n" * 12_000
    c1, starts1 = bgzf.compress_chunk(first)
    c2, starts2 = bgzf.compress_chunk(second)
    whole = c1 + c2 + bgzf.EOF_BLOCK
    assert gzip.decompress(whole) == first + second
    assert starts1[-1] == len(c1) and starts2[-1] == len(c2)

    for chunk, starts, offset in ((first, starts1, 0), (second, starts2, len(c1))):
        positions = np.concatenate((rng.integers(0, len(chunk), 200), [0, bgzf.BLOCK_DATA_SIZE, len(chunk) - 1]))
        voffsets = bgzf.virtual_offsets(positions, starts, offset, len(chunk))
        for position, voffset in zip(positions, voffsets):
            coffset, within = int(voffset) >> 16, int(voffset) & 0xFFFF
            bsize = struct.unpack_from("<H", whole, coffset + 16)[0] + 1
            block = zlib.decompress(whole[coffset + 18:coffset + bsize - 8], -15)
            assert block[within] == chunk[position]
        end = bgzf.virtual_offsets([len(chunk)], starts, offset, len(chunk))[0]
        assert int(end) == (offset + len(c1 if offset == 0 else c2)) << 16


def test_bgzf_empty_chunk_has_no_blocks():
    compressed, starts = bgzf.compress_chunk(b"")
    assert compressed == b"" and starts.tolist() == [0]
    assert gzip.decompress(bgzf.compress_file(b"")) == b""


def test_bgzf_block_falls_back_when_a_given_stream_does_not_fit():
    data = np.random.default_rng(1).integers(0, 256, bgzf.BLOCK_DATA_SIZE, dtype=np.uint8).tobytes()
    block = bgzf.compress_block(data, payload=b"\0" * 70_000)
    assert gzip.decompress(block) == data
    assert len(block) <= bgzf.MAX_BLOCK_SIZE


def test_bgzf_chunk_from_streams_is_the_same_bytes_assembled_either_way():
    rng = np.random.default_rng(3)
    data = (rng.random(3 * bgzf.BLOCK_DATA_SIZE + 1234) < 0.2).astype(np.uint8) + 48
    n_blocks = 4
    payloads = [zlib.compressobj(1, zlib.DEFLATED, -15) for _ in range(n_blocks)]
    payloads = [p.compress(data[k * bgzf.BLOCK_DATA_SIZE:(k + 1) * bgzf.BLOCK_DATA_SIZE].tobytes()) + p.flush()
                for k, p in enumerate(payloads)]
    streams = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    sizes = np.array([len(p) for p in payloads], dtype=np.int64)
    fast, fast_starts = bgzf.compress_chunk(data, streams, sizes)  # compiled assembly
    one_by_one = [bgzf.compress_block(data[k * bgzf.BLOCK_DATA_SIZE:(k + 1) * bgzf.BLOCK_DATA_SIZE], p)
                  for k, p in enumerate(payloads)]
    assert fast == b"".join(one_by_one)
    assert fast_starts.tolist() == np.concatenate(([0], np.cumsum([len(b) for b in one_by_one]))).tolist()
    assert gzip.decompress(fast + bgzf.EOF_BLOCK) == data.tobytes()
    # A block without a stream (-1) is compressed here; the others keep theirs.
    sizes_gap = sizes.copy()
    sizes_gap[1] = -1
    streams_gap = np.frombuffer(b"".join(p for k, p in enumerate(payloads) if k != 1), dtype=np.uint8)
    mixed, _ = bgzf.compress_chunk(data, streams_gap, sizes_gap)
    assert gzip.decompress(mixed + bgzf.EOF_BLOCK) == data.tobytes()
    assert mixed.startswith(one_by_one[0]) and mixed.endswith(one_by_one[2] + one_by_one[3])
    with pytest.raises(ValueError, match="stream sizes"):
        bgzf.compress_chunk(data, streams, sizes[:2])


def test_bgzf_rejects_oversized_block():
    with pytest.raises(ValueError, match="at most"):
        bgzf.compress_block(b"x" * (bgzf.BLOCK_DATA_SIZE + 1))


# --------------------------------------------------------------------------- tabix

def test_reg2bin_matches_the_specification_examples():
    assert tabix.reg2bin(0, 1) == 4681
    assert tabix.reg2bin(16383, 16385) == 585
    assert tabix.reg2bin((1 << 14) * 5, (1 << 14) * 5 + 1) == 4686
    assert tabix.reg2bin(0, 1 << 29) == 0
    assert tabix.PSEUDO_BIN == 37450


def _parse_tbi(path: Path):
    data = gzip.decompress(path.read_bytes())
    assert data[:4] == b"TBI\1"
    n_ref, *conf, l_nm = struct.unpack_from("<8i", data, 4)
    at = 36
    names = data[at:at + l_nm].split(b"\0")[:-1]
    at += l_nm
    refs = []
    for _ in range(n_ref):
        (n_bin,) = struct.unpack_from("<i", data, at)
        at += 4
        bins = {}
        for _ in range(n_bin):
            bin_id, n_chunk = struct.unpack_from("<Ii", data, at)
            at += 8
            bins[bin_id] = [struct.unpack_from("<QQ", data, at + 16 * c) for c in range(n_chunk)]
            at += 16 * n_chunk
        (n_intv,) = struct.unpack_from("<i", data, at)
        at += 4
        refs.append((bins, list(struct.unpack_from(f"<{n_intv}Q", data, at + 0))))
        at += 8 * n_intv
    return conf, [n.decode() for n in names], refs, data[at:]


@pytest.mark.parametrize("release", ["small", "wide"])
def test_tabix_index_equals_the_one_tabix_builds(release, request, tmp_path):
    _require("tabix")
    rel = request.getfixturevalue(release)
    copy = tmp_path / "copy.vcf.gz"
    shutil.copy(rel.vcf, copy)
    subprocess.run(["tabix", "-f", "-p", "vcf", str(copy)], check=True)
    ours, theirs = _parse_tbi(Path(str(rel.vcf) + ".tbi")), _parse_tbi(Path(str(copy) + ".tbi"))
    assert ours[0] == [2, 1, 2, 0, ord("#"), 0]
    assert ours == theirs


def test_tabix_index_rejects_unsorted_records():
    with pytest.raises(ValueError, match="sorted"):
        tabix.build_tabix_index(["1"], [0, 0], [10, 5], [11, 6], [0, 100], [100, 200])


# --------------------------------------------------------------------------- VCF

def test_vcf_header_has_nothing_that_varies(small):
    header = [line for line in gzip.decompress(small.vcf.read_bytes()).decode().splitlines() if line.startswith("#")]
    assert header == vcf_header(small.samples, SMALL_CONTIGS).splitlines()
    assert header[:2] == ["##fileformat=VCFv4.3", f"##source=drugtargetworld-{pipeline.__version__}"]
    assert header[-1] == "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *small.samples])
    assert '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">' in header
    assert [h for h in header if h.startswith("##INFO")] == [
        '##INFO=<ID=AC,Number=A,Type=Integer,Description="Allele count in genotypes">',
        '##INFO=<ID=AF,Number=A,Type=Float,Description="Allele frequency">',
        '##INFO=<ID=AN,Number=1,Type=Integer,Description="Total number of alleles in called genotypes">',
    ]
    assert [h for h in header if h.startswith("##contig")] == [f"##contig=<ID={n},length={n_}>" for n, n_ in SMALL_CONTIGS]
    allowed = ("##fileformat=", "##source=", "##INFO=<ID=A", "##FILTER=<ID=PASS,", "##contig=", "##FORMAT=<ID=GT,",
               "#CHROM")
    assert all(h.startswith(allowed) for h in header)


@pytest.mark.parametrize("release", ["small", "wide"])
def test_vcf_body_is_the_expected_text(release, request):
    rel = request.getfixturevalue(release)
    _require("bgzip")
    subprocess.run(["bgzip", "-t", str(rel.vcf)], check=True)
    text = gzip.decompress(rel.vcf.read_bytes()).decode()
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == _expected_body(rel.variants, rel.haplotypes)
    assert rel.summary["chunks"] == -(-len(rel.variants) // rel.chunk_size)


def test_bcftools_reads_every_record(small):
    _require("bcftools")
    body = _run("bcftools", "view", "-H", str(small.vcf)).splitlines()
    assert body == _expected_body(small.variants, small.haplotypes)
    stats = _run("bcftools", "stats", str(small.vcf))
    summary = {line.split("\t")[2]: int(line.split("\t")[3]) for line in stats.splitlines() if line.startswith("SN\t")}
    assert summary["number of samples:"] == 57
    assert summary["number of records:"] == 300
    assert summary["number of SNPs:"] == 300
    index_stats = [line.split("\t") for line in _run("bcftools", "index", "--stats", str(small.vcf)).splitlines()]
    assert [(name, int(n)) for name, _, n in index_stats] == [("1", 120), ("2", 100), ("3", 80)]


@pytest.mark.parametrize("release", ["small", "gappy"])
def test_info_fields_are_those_bcftools_fill_tags_computes(release, request, tmp_path):
    """bcftools accepts the INFO fields, and recomputing them with +fill-tags gives the same text."""
    rel = request.getfixturevalue(release)
    _require("bcftools")
    stripped, filled = tmp_path / "stripped.vcf.gz", tmp_path / "filled.vcf.gz"
    subprocess.run(["bcftools", "annotate", "-x", "INFO", "-Oz", "-o", str(stripped), str(rel.vcf)], check=True)
    subprocess.run(["bcftools", "+fill-tags", str(stripped), "-Oz", "-o", str(filled), "--", "-t", "AC,AN,AF"],
                   check=True, capture_output=True)
    query = ["bcftools", "query", "-f", "%ID\t%AC\t%AN\t%AF\n"]
    ours = _run(*query, str(rel.vcf)).splitlines()
    assert ours == _run(*query, str(filled)).splitlines()
    assert len(ours) == len(rel.variants)
    assert _run("bcftools", "view", "-H", str(rel.vcf)).splitlines() == _expected_body(rel.variants, rel.haplotypes)


def test_cyvcf2_reads_the_info_fields(gappy):
    import cyvcf2

    for i, variant in enumerate(cyvcf2.VCF(str(gappy.vcf))):
        calls = gappy.haplotypes[i]
        ac, an = int((calls == 1).sum()), int((calls >= 0).sum())
        assert (variant.INFO["AC"], variant.INFO["AN"]) == (ac, an)
        if an:
            assert variant.INFO["AF"] == pytest.approx(ac / an, rel=1e-5)
        else:
            assert variant.INFO.get("AF") is None
    assert i == len(gappy.variants) - 1


def test_region_queries_return_exactly_the_records(small):
    _require("bcftools")
    _require("tabix")
    expected = small.expected_region("2", 1000, 50000)
    assert len(expected) >= 25
    assert _run("bcftools", "view", "-H", "-r", "2:1000-50000", str(small.vcf)).splitlines() == expected
    assert _run("tabix", str(small.vcf), "2:1000-50000").splitlines() == expected
    assert _run("tabix", str(small.vcf), "3").splitlines() == small.expected_region("3", 1, 10**9)


def test_region_queries_across_block_boundaries(wide):
    _require("tabix")
    import pysam

    rng = np.random.default_rng(3)
    regions = [("1", 1, 400_000), ("2", 1, 300_000), ("2", 150_000, 150_000)]
    for _ in range(25):
        contig, length = WIDE_CONTIGS[int(rng.integers(0, 2))]
        start = int(rng.integers(1, length))
        regions.append((contig, start, start + int(rng.integers(0, 60_000))))
    with pysam.TabixFile(str(wide.vcf)) as indexed:
        for contig, start, end in regions:
            expected = wide.expected_region(contig, start, end)
            assert _run("tabix", str(wide.vcf), f"{contig}:{start}-{end}").splitlines() == expected
            assert list(indexed.fetch(contig, start - 1, end)) == expected


def test_pysam_and_cyvcf2_see_phased_calls_equal_to_input(small):
    import cyvcf2
    import pysam

    with pysam.VariantFile(str(small.vcf)) as vf:
        assert list(vf.header.samples) == small.samples
        for i, record in enumerate(vf):
            assert (record.chrom, record.pos, record.id) == tuple(small.variants.iloc[i][["contig", "position", "id"]])
            assert all(record.samples[s].phased for s in small.samples)
            assert [record.samples[s]["GT"] for s in small.samples] == [tuple(h) for h in small.haplotypes[i].tolist()]
        assert i == len(small.variants) - 1
        region = [r.pos for r in vf.fetch("2", 999, 50000)]
    assert region == [int(line.split("\t")[1]) for line in small.expected_region("2", 1000, 50000)]

    reader = cyvcf2.VCF(str(small.vcf))
    for i, variant in enumerate(reader):
        assert variant.gt_phases.all()
        np.testing.assert_array_equal(variant.genotype.array()[:, :2], small.haplotypes[i])
    assert i == len(small.variants) - 1


def test_scikit_allel_reads_the_same_genotypes(small):
    import allel

    callset = allel.read_vcf(str(small.vcf), fields=["samples", "variants/*", "calldata/GT"])
    np.testing.assert_array_equal(callset["calldata/GT"], small.haplotypes)
    assert callset["samples"].tolist() == small.samples
    assert callset["variants/CHROM"].tolist() == small.variants["contig"].tolist()
    np.testing.assert_array_equal(callset["variants/POS"], small.variants["position"].to_numpy())
    assert callset["variants/ID"].tolist() == small.variants["id"].tolist()
    assert callset["variants/REF"].tolist() == small.variants["ref"].tolist()
    assert callset["variants/ALT"][:, 0].tolist() == small.variants["alt"].tolist()


def _reversed_map(fn, tasks):
    tasks = list(tasks)
    return list(reversed([fn(task) for task in reversed(tasks)]))


def test_vcf_bytes_do_not_depend_on_how_chunks_are_run(small, tmp_path):
    read_chunk = functools.partial(read_haplotypes, str(small.zarr))
    args = (small.variants, small.samples, SMALL_CONTIGS, read_chunk)
    reference = small.vcf.read_bytes(), Path(str(small.vcf) + ".tbi").read_bytes()
    outputs = {}
    write_vcf(str(tmp_path / "reversed.vcf.gz"), *args, chunk_size=small.chunk_size, map_fn=_reversed_map)
    outputs["reversed"] = tmp_path / "reversed.vcf.gz"
    with ThreadPoolExecutor(3) as pool:
        write_vcf(str(tmp_path / "threads.vcf.gz"), *args, chunk_size=small.chunk_size, map_fn=pool.map)
    outputs["threads"] = tmp_path / "threads.vcf.gz"
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        write_vcf(str(tmp_path / "processes.vcf.gz"), *args, chunk_size=small.chunk_size, map_fn=pool.map)
    outputs["processes"] = tmp_path / "processes.vcf.gz"
    for how, path in outputs.items():
        assert (path.read_bytes(), Path(str(path) + ".tbi").read_bytes()) == reference, how


def test_sample_blocked_reads_write_the_same_file(small, tmp_path):
    path = tmp_path / "blocked.vcf.gz"
    write_vcf(str(path), small.variants, small.samples, SMALL_CONTIGS, functools.partial(read_haplotype_blocks, str(small.zarr)),
              chunk_size=small.chunk_size)
    assert path.read_bytes() == small.vcf.read_bytes()
    assert Path(str(path) + ".tbi").read_bytes() == Path(str(small.vcf) + ".tbi").read_bytes()
    for compression in ("samples", "zlib"):
        other = tmp_path / f"blocked-{compression}.vcf.gz"
        write_vcf(str(other), small.variants, small.samples, SMALL_CONTIGS,
                  lambda v0, v1: _sample_blocked(small.haplotypes[v0:v1], 16), chunk_size=small.chunk_size,
                  compression=compression)
        assert gzip.decompress(other.read_bytes()) == gzip.decompress(small.vcf.read_bytes())


def test_zlib_compression_writes_the_same_text(small, tmp_path):
    _require("bcftools")
    path = tmp_path / "zlib.vcf.gz"
    write_vcf(str(path), small.variants, small.samples, SMALL_CONTIGS, lambda v0, v1: small.haplotypes[v0:v1],
              chunk_size=small.chunk_size, compression="zlib")
    subprocess.run(["bgzip", "-t", str(path)], check=True)
    assert path.read_bytes() != small.vcf.read_bytes()
    assert gzip.decompress(path.read_bytes()) == gzip.decompress(small.vcf.read_bytes())
    assert _run("bcftools", "view", "-H", "-r", "2:1000-50000", str(path)).splitlines() == small.expected_region(
        "2", 1000, 50000)
    with pytest.raises(ValueError, match="compression"):
        write_vcf(str(tmp_path / "x.vcf.gz"), small.variants, small.samples, SMALL_CONTIGS,
                  lambda v0, v1: small.haplotypes[v0:v1], compression="zstd")


def test_vcf_to_an_fsspec_url_is_the_same_file(small):
    url = "memory://genotype-io-test/genotypes.vcf.gz"
    write_vcf(url, small.variants, small.samples, SMALL_CONTIGS, lambda v0, v1: small.haplotypes[v0:v1],
              chunk_size=small.chunk_size)
    fs = fsspec.filesystem("memory")
    assert fs.cat_file(url) == small.vcf.read_bytes()
    assert fs.cat_file(url + ".tbi") == Path(str(small.vcf) + ".tbi").read_bytes()
    assert sorted(fs.ls("memory://genotype-io-test", detail=False)) == [
        "/genotype-io-test/genotypes.vcf.gz", "/genotype-io-test/genotypes.vcf.gz.tbi"]
    fs.rm("memory://genotype-io-test", recursive=True)


def test_a_failed_write_leaves_nothing_behind(small, tmp_path):
    def failing(v0, v1):
        if v0 >= 100:
            raise RuntimeError("simulated worker failure")
        return small.haplotypes[v0:v1]

    with pytest.raises(RuntimeError, match="simulated"):
        write_vcf(str(tmp_path / "genotypes.vcf.gz"), small.variants, small.samples, SMALL_CONTIGS, failing,
                  chunk_size=small.chunk_size)
    assert list(tmp_path.iterdir()) == []


def test_write_vcf_rejects_bad_inputs(small, tmp_path):
    out = str(tmp_path / "bad.vcf.gz")
    read = lambda v0, v1: small.haplotypes[v0:v1]  # noqa: E731
    unsorted = small.variants.iloc[::-1].reset_index(drop=True)
    with pytest.raises(ValueError, match="grouped by contig|sorted"):
        write_vcf(out, unsorted, small.samples, SMALL_CONTIGS, read)
    with pytest.raises(ValueError, match="absent from contigs"):
        write_vcf(out, small.variants, small.samples, SMALL_CONTIGS[:2], read)
    with pytest.raises(ValueError, match="expected int8"):
        write_vcf(out, small.variants, small.samples[:-1], SMALL_CONTIGS, read)
    with pytest.raises(ValueError, match="expected int8"):
        write_vcf(out, small.variants, small.samples, SMALL_CONTIGS,
                  lambda v0, v1: _sample_blocked(small.haplotypes[v0:v1], 16)[:, :, :3])  # too few samples
    with pytest.raises(ValueError, match="not allow"):
        write_vcf(out, small.variants, small.samples[:-1] + ["a b"], SMALL_CONTIGS, read)
    with pytest.raises(ValueError, match="empty"):
        write_vcf(out, small.variants, small.samples[:-1] + [""], SMALL_CONTIGS, read)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- Zarr

_REQUIRED_ARRAYS = {
    "contig_id": (["contigs"], "O"),
    "contig_length": (["contigs"], "i"),
    "filter_id": (["filters"], "O"),
    "filter_description": (["filters"], "O"),
    "sample_id": (["samples"], "O"),
    "variant_contig": (["variants"], "i"),
    "variant_position": (["variants"], "i"),
    "variant_length": (["variants"], "i"),
    "variant_id": (["variants"], "O"),
    "variant_id_mask": (["variants"], "b"),
    "variant_allele": (["variants", "alleles"], "O"),
    "variant_quality": (["variants"], "f"),
    "variant_filter": (["variants", "filters"], "b"),
    "variant_AC": (["variants", "alt_alleles"], "i"),
    "variant_AF": (["variants", "alt_alleles"], "f"),
    "variant_AN": (["variants"], "i"),
    "call_genotype": (["variants", "samples", "ploidy"], "i"),
    "call_genotype_mask": (["variants", "samples", "ploidy"], "b"),
    "call_genotype_phased": (["variants", "samples"], "b"),
    "region_index": (["region_index_values", "region_index_fields"], "i"),
}


def _zarr_metadata(root: Path) -> tuple[dict, dict]:
    """(group attributes, {array: (.zarray, .zattrs)}) of a Zarr-2 store."""
    arrays = {p.parent.name: (json.loads(p.read_text()), json.loads((p.parent / ".zattrs").read_text()))
              for p in root.glob("*/.zarray")}
    return json.loads((root / ".zattrs").read_text()), arrays


def test_zarr_store_follows_the_vcf_zarr_specification(small):
    root = small.zarr
    assert json.loads((root / ".zgroup").read_text()) == {"zarr_format": 2}
    attrs, arrays = _zarr_metadata(root)
    assert attrs == {"vcf_zarr_version": "0.5", "source": f"drugtargetworld-{pipeline.__version__}",
                     "vcf_meta_information": [["fileformat", "VCFv4.3"], ["source", f"drugtargetworld-{pipeline.__version__}"]]}
    assert "metadata" in json.loads((root / ".zmetadata").read_text())
    assert set(arrays) == set(_REQUIRED_ARRAYS)
    for name, (dims, kind) in _REQUIRED_ARRAYS.items():
        meta, array_attrs = arrays[name]
        assert array_attrs["_ARRAY_DIMENSIONS"] == dims, name
        assert np.dtype(meta["dtype"]).kind == kind, name
    sizes, variant_chunks = {}, set()
    for name, (meta, array_attrs) in arrays.items():
        dims = array_attrs["_ARRAY_DIMENSIONS"]
        assert len(dims) == len(meta["shape"]), name
        for dim, size in zip(dims, meta["shape"]):
            assert sizes.setdefault(dim, size) == size, f"{name}: dimension {dim} size disagrees"
        if dims[0] == "variants":
            variant_chunks.add(meta["chunks"][0])
        if meta["dtype"] == "|O":
            assert meta["filters"] == [{"id": "vlen-utf8"}], name
        elif name != "contig_length":
            # A numeric fill value makes xarray (and so sgkit) decode the array as floats with NaN.
            assert meta["fill_value"] is None, name
    assert len(variant_chunks) == 1
    assert sizes["variants"] == 300 and sizes["samples"] == 57 and sizes["ploidy"] == 2 and sizes["alleles"] == 2
    assert sizes["alt_alleles"] == 1


@pytest.mark.parametrize("release", ["small", "gappy"])
def test_zarr_store_is_what_bio2zarr_writes_for_the_vcf(release, request, tmp_path):
    """Array for array, the metadata vcf2zarr gives the release's VCF (same chunk sizes asked for):
    names, dimensions, dtypes, fill values, filters, descriptions and the group's attributes.  The
    only differences are ``source`` (the writer) and the calls' compression level."""
    from bio2zarr import vcf as vcf2zarr

    rel = request.getfixturevalue(release)
    theirs_path = tmp_path / "bio2zarr.vcz"
    chunks = zarr.open_group(str(rel.zarr), mode="r")["call_genotype"].chunks
    vcf2zarr.convert([str(rel.vcf)], str(theirs_path), variants_chunk_size=chunks[0], samples_chunk_size=chunks[1],
                     worker_processes=0, zarr_format=2)
    ours, theirs = _zarr_metadata(rel.zarr), _zarr_metadata(theirs_path)
    assert {k: v for k, v in ours[0].items() if k != "source"} == {k: v for k, v in theirs[0].items() if k != "source"}
    assert theirs[0]["source"].startswith("bio2zarr-")
    assert set(ours[1]) == set(theirs[1])
    for name in ours[1]:
        meta, attrs = ours[1][name]
        their_meta, their_attrs = theirs[1][name]
        assert attrs == their_attrs, name
        if name == "call_genotype":
            assert meta["compressor"]["clevel"] == 3 and their_meta["compressor"]["clevel"] == 7
            meta = dict(meta, compressor=their_meta["compressor"])
        assert meta == their_meta, name
    # ... and the same values.
    ours_group, theirs_group = zarr.open_group(str(rel.zarr), mode="r"), zarr.open_group(str(theirs_path), mode="r")
    for name in ours[1]:
        a, b = np.asarray(ours_group[name][...]), np.asarray(theirs_group[name][...])
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32), err_msg=name)  # missing-value bits too
        else:
            assert a.tolist() == b.tolist(), name


def test_zarr_store_passes_bio2zarr_verification(small):
    from bio2zarr.vcz_verification import verify

    verify(str(small.vcf), str(small.zarr))


def test_xarray_decodes_the_calls_as_integers(gappy):
    """xarray (sgkit's reader) sees int8 calls with -1 for a missing allele, not floats with NaN."""
    import xarray as xr

    ds = xr.open_zarr(str(gappy.zarr), consolidated=True)
    assert ds["call_genotype"].dtype == np.int8
    np.testing.assert_array_equal(ds["call_genotype"].values, gappy.haplotypes)
    np.testing.assert_array_equal(ds["call_genotype_mask"].values, gappy.haplotypes < 0)
    assert ds["call_genotype_phased"].dtype == bool and ds["call_genotype_phased"].values.all()
    assert ds["variant_AN"].dtype.kind == "i" and ds["variant_AC"].dims == ("variants", "alt_alleles")
    np.testing.assert_array_equal(ds["variant_AC"].values[:, 0], (gappy.haplotypes == 1).sum(axis=(1, 2)))
    np.testing.assert_array_equal(ds["variant_AN"].values, (gappy.haplotypes >= 0).sum(axis=(1, 2)))
    assert ds["sample_id"].values.tolist() == gappy.samples


def _vcztools_af(line: str) -> str:
    """A record as vcztools writes it: floats with at most 3 decimals (trailing zeros dropped), a
    missing INFO value left out, and a record without a called allele with "." for FORMAT and calls."""
    fields = line.split("\t")
    info = dict(item.split("=") for item in fields[7].split(";"))
    if info["AF"] == ".":
        del info["AF"]
    else:
        info["AF"] = f"{float(info['AF']):.3f}".rstrip("0").rstrip(".")
    fields[7] = ";".join(f"{k}={v}" for k, v in info.items())
    if all(call == ".|." for call in fields[9:]):
        fields[8:] = ["."] * len(fields[8:])
    return "\t".join(fields)


@pytest.mark.parametrize("release", ["small", "gappy"])
def test_vcztools_view_gives_back_the_vcf(release, request):
    """Header and records round-trip: vcztools adds only its command line and prints AF to 3 decimals."""
    rel = request.getfixturevalue(release)
    _require("bcftools")
    vcztools = _require("vcztools")
    text = _run(vcztools, "view", str(rel.zarr)).splitlines()
    header = [line for line in text if line.startswith("#") and not line.startswith("##vcztools_viewCommand=")]
    assert header == vcf_header(rel.samples, SMALL_CONTIGS).splitlines()
    body = [line for line in text if not line.startswith("#")]
    assert body == [_vcztools_af(line) for line in _run("bcftools", "view", "-H", str(rel.vcf)).splitlines()]
    region = [line for line in _run(vcztools, "view", "-r", "2:1000-50000", str(rel.zarr)).splitlines()
              if not line.startswith("#")]
    assert region == [_vcztools_af(line) for line in rel.expected_region("2", 1000, 50000)]


def test_zarr_store_bytes_are_reproducible(small, tmp_path):
    copy = tmp_path / "genotypes.zarr"
    genozarr.init_store(str(copy), small.variants, small.samples, SMALL_CONTIGS, 64, 20)
    # Blocks written in another order, as concurrent workers would.
    for s0 in (40, 0, 20):
        genozarr.write_sample_block(str(copy), s0, small.haplotypes[:, s0:s0 + 20])
    genozarr.finalise(str(copy))

    def files(root: Path):
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert files(copy) == files(small.zarr)


def test_write_sample_block_refuses_ranges_that_share_chunks(small, tmp_path):
    store = str(tmp_path / "g.zarr")
    genozarr.init_store(store, small.variants, small.samples, SMALL_CONTIGS, 64, 20)
    with pytest.raises(ValueError, match="aligned"):
        genozarr.write_sample_block(store, 10, small.haplotypes[:, 10:30])
    with pytest.raises(ValueError, match="aligned"):
        genozarr.write_sample_block(store, 0, small.haplotypes[:, 0:15])
    with pytest.raises(ValueError, match="int8"):
        genozarr.write_sample_block(store, 0, small.haplotypes[:, 0:20].astype(np.int16))


@pytest.mark.parametrize(("v0", "v1"), [(0, 300), (60, 70), (63, 64), (64, 128), (250, 300), (5, 5)])
def test_read_haplotypes_returns_the_written_calls(small, v0, v1):
    got = read_haplotypes(str(small.zarr), v0, v1)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, small.haplotypes[v0:v1])


@pytest.mark.parametrize(("v0", "v1"), [(0, 64), (64, 100), (63, 64), (250, 300), (60, 70), (0, 300), (5, 5)])
def test_read_haplotype_blocks_hold_the_written_calls(small, v0, v1):
    got = read_haplotype_blocks(str(small.zarr), v0, v1)
    assert got.dtype == np.int8 and got.ndim == 4 and got.shape[1] == v1 - v0
    flat = np.concatenate(list(got), axis=1)[:, :len(small.samples)]
    np.testing.assert_array_equal(flat, small.haplotypes[v0:v1])
    if (v0 // 64) == ((v1 - 1) // 64) and v1 > v0:
        assert got.shape[0] == -(-len(small.samples) // 20) and got.shape[2] == 20  # the store's chunks, uncopied


def test_reading_chunks_never_written_is_an_error(small, tmp_path):
    store = str(tmp_path / "g.zarr")
    genozarr.init_store(store, small.variants, small.samples, SMALL_CONTIGS, 64, 20)
    genozarr.write_sample_block(store, 0, small.haplotypes[:, 0:20])
    with pytest.raises(ValueError, match=r"chunk 0\.1\.0 is missing: the genotype store is incomplete"):
        read_haplotype_blocks(store, 0, 64)


def test_load_genotypes_returns_labelled_dosages(small):
    dosage = load_genotypes(str(small.root))
    assert dosage.index.name == "subject_id"
    assert dosage.index.tolist() == small.samples
    assert dosage.columns.tolist() == small.variants["id"].tolist()
    assert (dosage.dtypes == np.int8).all()
    np.testing.assert_array_equal(dosage.to_numpy(), small.haplotypes.sum(axis=2).T)
    assert load_genotypes(str(small.root), threads=1).equals(dosage)


def test_load_genotypes_marks_missing_calls_and_reads_fsspec_urls(small):
    haplotypes = small.haplotypes.copy()
    haplotypes[3, 7, 1] = -1
    haplotypes[200, 56, 0] = -1
    url = "memory://genotype-io-test-zarr/release"
    genozarr.init_store(f"{url}/genotypes.zarr", small.variants, small.samples, SMALL_CONTIGS, 64, 20)
    for s0 in range(0, 57, 20):
        genozarr.write_sample_block(f"{url}/genotypes.zarr", s0, haplotypes[:, s0:s0 + 20])
    genozarr.finalise(f"{url}/genotypes.zarr")
    dosage = load_genotypes(url)
    expected = haplotypes.sum(axis=2).T
    expected[7, 3] = expected[56, 200] = -1
    np.testing.assert_array_equal(dosage.to_numpy(), expected)
    fsspec.filesystem("memory").rm("memory://genotype-io-test-zarr", recursive=True)
