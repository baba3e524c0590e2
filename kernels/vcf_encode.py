"""VCF record text from per-variant fixed columns and phased haplotypes, and
its raw deflate compression.

The fixed columns (CHROM … FORMAT) vary in length and are cheap to build in
Python once per chunk; the sample columns are fixed width (``2 * ploidy`` bytes
per sample: a tab, the alleles and their ``|`` separators) and dominate the
text, so only they are worth compiling.

:func:`deflate_vcf_chunk` compresses that text about as well as bgzip's
default level at several times its speed by searching for repeats sample by
sample (see the section below).  It has no Python twin: an encoder's output is
one of many valid streams, so tests check that zlib inflates it back.
"""
# v = variants, s = samples, p = ploidy, b = bytes of text
from __future__ import annotations

import numpy as np

from .deflate import _DIST_CODE, _LENGTH_CODE, WINDOW, _flush, write_dynamic_block
from .numba_util import njit

_TAB = 9
_NEWLINE = 10
_PIPE = 124
_DOT = 46
_ZERO = 48


@njit
def vcf_record_ends(prefix_offsets, n_samples, ploidy):
    """End offset (exclusive) of every record line in the chunk's text.

    prefix_offsets : int64[v + 1], prefix of record i is bytes
        ``prefix_offsets[i]:prefix_offsets[i + 1]`` of the concatenated prefixes.
    Returns int64[v]; the text length is the last entry.
    """
    n_variants = prefix_offsets.shape[0] - 1
    per_record_calls = n_samples * 2 * ploidy + 1
    ends = np.empty(n_variants, dtype=np.int64)
    end = 0
    for i in range(n_variants):
        end += prefix_offsets[i + 1] - prefix_offsets[i] + per_record_calls
        ends[i] = end
    return ends


@njit
def format_vcf_records(prefix_bytes, prefix_offsets, haplotypes):
    """Tab-separated VCF record lines with phased GT calls.

    prefix_bytes : uint8[b], the fixed columns of every record concatenated,
        each ending with the FORMAT column (``GT``) and no trailing tab.
    prefix_offsets : int64[v + 1], record i's prefix is
        ``prefix_bytes[prefix_offsets[i]:prefix_offsets[i + 1]]``.
    haplotypes : int8[v, s, p], allele indices 0–9, or -1 for a missing allele.
    Returns (text uint8[n], record_ends int64[v]) where record i occupies
    ``text[record_ends[i - 1]:record_ends[i]]`` including its newline.
    Raises ValueError on an allele index outside -1..9 (it would need more
    than one character and break the fixed-width layout).
    """
    n_variants = haplotypes.shape[0]
    n_samples = haplotypes.shape[1]
    ploidy = haplotypes.shape[2]
    if prefix_offsets.shape[0] != n_variants + 1:
        raise ValueError("prefix_offsets must have one more entry than haplotypes has variants")
    ends = vcf_record_ends(prefix_offsets, n_samples, ploidy)
    n_bytes = ends[n_variants - 1] if n_variants > 0 else 0
    text = np.empty(n_bytes, dtype=np.uint8)
    at = 0
    for i in range(n_variants):
        for k in range(prefix_offsets[i], prefix_offsets[i + 1]):
            text[at] = prefix_bytes[k]
            at += 1
        for j in range(n_samples):
            text[at] = _TAB
            at += 1
            for q in range(ploidy):
                allele = haplotypes[i, j, q]
                if allele >= 0 and allele <= 9:
                    text[at] = _ZERO + allele
                elif allele == -1:
                    text[at] = _DOT
                else:
                    raise ValueError("allele index outside -1..9 cannot be written as one VCF character")
                if q + 1 < ploidy:
                    text[at + 1] = _PIPE
                    at += 2
                else:
                    at += 1
        text[at] = _NEWLINE
        at += 1
    return text, ends


# --------------------------------------------------------------------------
# Raw deflate (RFC 1951) of VCF text whose sample columns are diploid phased
# calls: the match finder works on whole "\tA|B" samples instead of bytes, so
# it looks at a quarter of the positions a byte-level compressor does and
# compares one symbol per sample.  Everything else (prefix columns, newlines,
# calls that are not 0/1) goes out as literals.  Any text is accepted: the
# sample structure only steers the search, and every match is checked on the
# samples' full 4-byte text.
# t = tokens, l = local samples (those whole inside the block)

MAX_MATCH_SAMPLES = 64  # 256 bytes; deflate's longest match is 258
KEY_SAMPLES = 6  # samples behind one hash key: 4**6 exact keys, no collisions
CHAIN_DEPTH = 4
OTHER = 4  # symbol of a sample that is not "\t[01]|[01]"

_DEBRUIJN64 = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    _DEBRUIJN_INDEX[(((1 << _bit) * 0x03F79D71B4CB0A89) & 0xFFFFFFFFFFFFFFFF) >> 58] = _bit


@njit(inline="always")
def _trailing_zeros(x):
    """Index of the lowest set bit of a nonzero uint64."""
    lowest = x & (~x + np.uint64(1))
    return _DEBRUIJN_INDEX[(lowest * _DEBRUIJN64) >> np.uint64(58)]


@njit(inline="always")
def _common_samples(packed, i, c, limit):
    """How many samples from i and from c agree, up to ``limit`` (≤ 64)."""
    k = 0
    while k < limit:
        x = packed[i + k] ^ packed[c + k]
        if x == 0:
            k += 32
        else:
            k += _trailing_zeros(x) >> 1
            break
    return min(k, limit)


@njit
def _deflate_block(text, block_start, block_end, samples_begin, record_ends, n_samples,
                   pos, sym, run, packed, head, chain, token_length, token_value, out):
    """One block's raw deflate stream into ``out``; its length, or -1 if it does not fit."""
    # Samples lying whole inside the block, in text order, with their symbol,
    # the count of clean samples from each to the end of its record's run, and
    # the symbols of the next 32 samples packed 2 bits each (0 past the run).
    first_record = np.searchsorted(record_ends, block_start, side="right")
    n_local = 0
    r = first_record
    while r < record_ends.shape[0] and samples_begin[r] < block_end:
        begin = samples_begin[r]
        j0 = 0 if begin >= block_start else (block_start - begin + 3) // 4
        j1 = min(n_samples, (block_end - begin) // 4)
        if j1 > j0:
            following = 0
            following_packed = np.uint64(0)
            # Backwards, so each sample sees the run that follows it.
            for j in range(j1 - 1, j0 - 1, -1):
                i = n_local + j - j0
                p = begin + 4 * j
                a = np.int32(text[p + 1]) - 48
                b = np.int32(text[p + 3]) - 48
                clean = (text[p] == 9) & (text[p + 2] == 124) & (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)
                pos[i] = p
                if clean:
                    s = 2 * a + b
                    following += 1
                    following_packed = (following_packed << np.uint64(2)) | np.uint64(s)
                else:
                    s = OTHER
                    following = 0
                    following_packed = np.uint64(0)
                sym[i] = s
                run[i] = following
                packed[i] = following_packed
            n_local += j1 - j0
        r += 1

    key_mask = np.uint64((1 << (2 * KEY_SAMPLES)) - 1)
    head[:] = -1
    last_same = np.full(4, -1, dtype=np.int64)
    freq_ll = np.zeros(286, dtype=np.int64)
    freq_d = np.zeros(30, dtype=np.int64)
    n_tokens = 0
    p = block_start
    i = 0
    while p < block_end:
        if i < n_local and pos[i] == p:
            best_k, best_c = 0, -1
            if run[i] >= KEY_SAMPLES:
                c = head[packed[i] & key_mask]
                depth = 0
                while c >= 0 and depth < CHAIN_DEPTH and p - pos[c] <= WINDOW:
                    limit = min(run[i], run[c], MAX_MATCH_SAMPLES)
                    if limit > best_k:
                        k = _common_samples(packed, i, c, limit)
                        if k > best_k:
                            best_k, best_c = k, c
                            if k == MAX_MATCH_SAMPLES:
                                break
                    c = chain[c]
                    depth += 1
            if best_k == 0 and sym[i] != OTHER:
                c = last_same[sym[i]]
                if c >= 0 and p - pos[c] <= WINDOW:
                    best_k = _common_samples(packed, i, c, min(run[i], run[c], MAX_MATCH_SAMPLES))
                    best_c = c
            if best_k > 0:
                length, distance = 4 * best_k, p - pos[best_c]
                token_length[n_tokens] = length
                token_value[n_tokens] = distance
                n_tokens += 1
                freq_ll[257 + np.int64(_LENGTH_CODE[length])] += 1
                freq_d[_DIST_CODE[distance]] += 1
                step = best_k
            else:
                for q in range(4):
                    token_length[n_tokens] = 0
                    token_value[n_tokens] = text[p + q]
                    n_tokens += 1
                    freq_ll[text[p + q]] += 1
                step = 1
            for m in range(i, i + step):
                if run[m] >= KEY_SAMPLES:
                    h = packed[m] & key_mask
                    chain[m] = head[h]
                    head[h] = m
                if sym[m] != OTHER:
                    last_same[sym[m]] = m
            i += step
            p += 4 * step
        else:
            token_length[n_tokens] = 0
            token_value[n_tokens] = text[p]
            n_tokens += 1
            freq_ll[text[p]] += 1
            p += 1

    at, acc, n_acc = write_dynamic_block(token_length, token_value, n_tokens, freq_ll, freq_d, True,
                                         out, 0, np.uint64(0), 0)
    at = _flush(out, at, acc, n_acc)
    if at > out.shape[0]:
        return -1
    return at


@njit
def deflate_vcf_chunk(text, samples_begin, record_ends, n_samples, block_size):
    """Raw deflate streams of ``text`` cut into blocks of ``block_size`` bytes.

    text : uint8[b], VCF record lines, each with ``n_samples`` diploid calls.
    samples_begin : int64[v], offset in ``text`` of record i's first sample (its
        leading tab); sample j is the 4 bytes at ``samples_begin[i] + 4 j``.
    record_ends : int64[v], offset after record i's newline.
    block_size : uncompressed bytes per block (the last may be shorter), ≤ 65536.
    Returns (streams uint8[c], sizes int64[k]): block k's stream is the next
    ``sizes[k]`` bytes of ``streams``; a size of -1 means the stream would not
    fit in 65536 bytes and the block is left for a generic compressor.
    """
    n_bytes = text.shape[0]
    n_blocks = (n_bytes + block_size - 1) // block_size
    capacity = block_size // 4 + 1
    pos = np.empty(capacity, dtype=np.int64)
    sym = np.empty(capacity, dtype=np.int8)
    run = np.empty(capacity, dtype=np.int32)
    packed = np.empty(capacity, dtype=np.uint64)
    head = np.empty(1 << (2 * KEY_SAMPLES), dtype=np.int32)
    chain = np.empty(capacity, dtype=np.int32)
    token_length = np.empty(block_size, dtype=np.int32)
    token_value = np.empty(block_size, dtype=np.int32)
    scratch = np.empty(1 << 16, dtype=np.uint8)
    # Untouched pages of this upper bound cost nothing until written.
    streams = np.empty(n_blocks * (1 << 16), dtype=np.uint8)
    sizes = np.empty(n_blocks, dtype=np.int64)
    at = 0
    for k in range(n_blocks):
        b0 = k * block_size
        b1 = min(b0 + block_size, n_bytes)
        n = _deflate_block(text, b0, b1, samples_begin, record_ends, n_samples,
                           pos, sym, run, packed, head, chain, token_length, token_value, scratch)
        sizes[k] = n
        if n > 0:
            streams[at:at + n] = scratch[:n]
            at += n
    return streams[:at].copy(), sizes
