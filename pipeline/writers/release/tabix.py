"""Tabix (``.tbi``) index of a BGZF-compressed, position-sorted VCF.

Built from what the VCF writer learns while writing each record (its contig,
its span and the virtual offsets of its first and one-past-last byte), never by
reading the file back.  Layout as in the tabix specification (hts-specs
``tabix.tex``): the UCSC binning index (16 kb leaf bins, 5 levels) and a linear
index of the lowest record offset per 16 kb window, per sequence, plus the
htslib pseudo-bin carrying the sequence's offset span and record counts (what
``bcftools index --stats`` reads).
"""
from __future__ import annotations

import struct

import numpy as np

from . import bgzf

MIN_SHIFT = 14
DEPTH = 5
# Coordinates the 5-level binning scheme can address (2**29 = 512 Mbp).
MAX_COORDINATE = 1 << (MIN_SHIFT + 3 * DEPTH)
PSEUDO_BIN = ((1 << (3 * DEPTH + 3)) - 1) // 7 + 1

FORMAT_VCF = 2
COL_SEQ, COL_BEG, COL_END = 1, 2, 0
META_CHAR = ord("#")
SKIP_LINES = 0


def reg2bin(beg: int, end: int) -> int:
    """Smallest UCSC bin holding the 0-based half-open interval [beg, end)."""
    end -= 1
    for level_shift, first_bin in ((14, 4681), (17, 585), (20, 73), (23, 9), (26, 1)):
        if beg >> level_shift == end >> level_shift:
            return first_bin + (beg >> level_shift)
    return 0


def _merge_chunks(chunks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    # Two chunks that touch the same BGZF block cost one block read either way.
    merged = [chunks[0]]
    for start, end in chunks[1:]:
        last_start, last_end = merged[-1]
        if start >> 16 <= last_end >> 16:
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def _sequence_index(beg, end, vstart, vend) -> bytes:
    bins: dict[int, list[tuple[int, int]]] = {}
    current_bin = -1
    for i in range(len(beg)):
        b = reg2bin(int(beg[i]), int(end[i]))
        if b == current_bin:
            bins[b][-1] = (bins[b][-1][0], int(vend[i]))
        else:
            bins.setdefault(b, []).append((int(vstart[i]), int(vend[i])))
            current_bin = b

    n_windows = int((end.max() - 1) >> MIN_SHIFT) + 1
    unset = np.uint64(np.iinfo(np.uint64).max)
    linear = np.full(n_windows, unset, dtype=np.uint64)
    for i in range(len(beg)):
        window = slice(int(beg[i]) >> MIN_SHIFT, ((int(end[i]) - 1) >> MIN_SHIFT) + 1)
        np.minimum(linear[window], vstart[i], out=linear[window])
    # An empty window takes the offset of the next window that has one: no record
    # overlapping it can start earlier, since every record sets all the windows
    # it overlaps.  htslib fills them the same way.
    for w in range(n_windows - 2, -1, -1):
        if linear[w] == unset:
            linear[w] = linear[w + 1]

    parts = [struct.pack("<i", len(bins) + 1)]
    for b in sorted(bins):
        chunks = _merge_chunks(bins[b])
        parts.append(struct.pack("<Ii", b, len(chunks)))
        parts.append(np.array(chunks, dtype="<u8").tobytes())
    parts.append(struct.pack("<Ii", PSEUDO_BIN, 2))
    parts.append(struct.pack("<QQQQ", int(vstart[0]), int(vend[-1]), len(beg), 0))
    parts.append(struct.pack("<i", n_windows))
    parts.append(linear.astype("<u8").tobytes())
    return b"".join(parts)


def build_tabix_index(sequence_names, record_sequence, record_beg, record_end, record_vstart, record_vend) -> bytes:
    """Uncompressed ``.tbi`` content for a VCF.

    sequence_names : list[str], the sequences in the order their records appear.
    record_sequence : int[n], index into ``sequence_names`` per record, nondecreasing.
    record_beg, record_end : int64[n], 0-based half-open span (POS-1, POS-1+len(REF)),
        record_beg nondecreasing within a sequence.
    record_vstart, record_vend : uint64[n], virtual offsets of the record's first byte
        and of the byte after its newline.
    """
    record_sequence = np.asarray(record_sequence, dtype=np.int64)
    record_beg = np.asarray(record_beg, dtype=np.int64)
    record_end = np.asarray(record_end, dtype=np.int64)
    record_vstart = np.asarray(record_vstart, dtype=np.uint64)
    record_vend = np.asarray(record_vend, dtype=np.uint64)
    n = len(record_sequence)
    if not (len(record_beg) == len(record_end) == len(record_vstart) == len(record_vend) == n):
        raise ValueError("tabix record arrays differ in length")
    if n and (record_sequence.min() < 0 or record_sequence.max() >= len(sequence_names)):
        raise ValueError("record sequence index outside sequence_names")
    if np.any(np.diff(record_sequence) < 0):
        raise ValueError("records are not grouped by sequence in sequence_names order")
    same_sequence = np.diff(record_sequence) == 0
    if np.any(np.diff(record_beg)[same_sequence] < 0):
        raise ValueError("records are not sorted by position within a sequence")
    if n and (record_beg.min() < 0 or np.any(record_end <= record_beg) or record_end.max() > MAX_COORDINATE):
        raise ValueError(f"record spans must be non-empty and within [0, {MAX_COORDINATE}) for a tabix index")
    if np.any(record_vend <= record_vstart) or np.any(record_vstart[1:] < record_vend[:-1]):
        raise ValueError("record virtual offsets are not increasing in file order")

    names = b"".join(name.encode("ascii") + b"\0" for name in sequence_names)
    parts = [
        b"TBI\1",
        struct.pack("<8i", len(sequence_names), FORMAT_VCF, COL_SEQ, COL_BEG, COL_END, META_CHAR, SKIP_LINES, len(names)),
        names,
    ]
    bounds = np.searchsorted(record_sequence, np.arange(len(sequence_names) + 1))
    for s in range(len(sequence_names)):
        lo, hi = bounds[s], bounds[s + 1]
        if lo == hi:
            parts.append(struct.pack("<ii", 0, 0))
            continue
        parts.append(_sequence_index(record_beg[lo:hi], record_end[lo:hi], record_vstart[lo:hi], record_vend[lo:hi]))
    # Records without coordinates: a VCF has none.
    parts.append(struct.pack("<Q", 0))
    return b"".join(parts)


def tabix_index_file(*args) -> bytes:
    """The BGZF-compressed ``.tbi`` file for :func:`build_tabix_index`'s arguments."""
    return bgzf.compress_file(build_tabix_index(*args))
