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

from numba.cpython.unsafe.numbers import trailing_zeros

from .deflate import _DIST_CODE, _LENGTH_CODE, WINDOW, _flush, write_dynamic_block
from .numba_util import njit

_TAB = 9
_NEWLINE = 10
_PIPE = 124
_DOT = 46
_ZERO = 48
# "\tA|B" with A, B in {0, 1} as a little-endian word, with the alleles' low bits masked.
_CALL_MASK = np.uint32(0xFEFFFEFF)
_CALL_BITS = np.uint32(0x307C3009)


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



# Byte lanes of a uint64 word: bit 0 of each byte, and the even bytes.
_LANE_BIT = np.uint64(0x0101010101010101)
_EVEN_BYTES = np.uint64(0x00FF00FF00FF00FF)


@njit(inline="always")
def _lane_sum(acc):
    """Sum of the 8 byte lanes of ``acc`` (each at most 255)."""
    pairs = (acc & _EVEN_BYTES) + ((acc >> np.uint64(8)) & _EVEN_BYTES)
    return (pairs * np.uint64(0x0001000100010001)) >> np.uint64(48)


@njit
def allele_counts(calls, n_samples):
    """INFO ``AC`` and ``AN`` of each biallelic record: ALT alleles called, and alleles called.

    calls : C-contiguous int8[k, v, S, p], the calls in blocks of S samples
        as for :func:`format_and_deflate_vcf_chunk` (``[np.newaxis]`` of an
        int8[v, s, p] array is the one-block case), each allele 0 (REF), 1
        (ALT) or -1 (missing); samples past ``n_samples`` are padding.
    Returns (ac int32[v], an int32[v]).

    Eight alleles at a time: as bytes, 0, 1 and -1 (0xFF) differ in bits 0
    and 7, so bit 0 counts ALT plus missing alleles and bit 7 missing ones.
    The per-byte counters of up to 255 words are summed at once (about twice
    the time of ``np.count_nonzero`` over the same bytes).
    """
    n_blocks, n_variants, block, ploidy = calls.shape
    if n_blocks * block < n_samples:
        raise ValueError("calls holds fewer samples than n_samples")
    ac = np.empty(n_variants, dtype=np.int32)
    an = np.empty(n_variants, dtype=np.int32)
    for r in range(n_variants):
        bit0 = np.uint64(0)
        bit7 = np.uint64(0)
        for jc in range(n_blocks):
            n = min(block, n_samples - jc * block) * ploidy
            if n <= 0:
                break
            row = calls[jc, r].reshape(block * ploidy).view(np.uint8)
            n_words = n // 8
            words = row[:n_words * 8].view(np.uint64)
            w0 = 0
            while w0 < n_words:
                m = min(n_words - w0, 255)
                low = np.uint64(0)
                high = np.uint64(0)
                for u in range(m):
                    w = words[w0 + u]
                    low += w & _LANE_BIT
                    high += (w >> np.uint64(7)) & _LANE_BIT
                bit0 += _lane_sum(low)
                bit7 += _lane_sum(high)
                w0 += m
            for t in range(n_words * 8, n):
                bit0 += row[t] & np.uint8(1)
                bit7 += row[t] >> np.uint8(7)
        ac[r] = np.int32(bit0 - bit7)
        an[r] = np.int32(n_samples * ploidy - bit7)
    return ac, an

@njit
def _word_views(text):
    """``text`` as four uint32 arrays, the k-th starting at byte k, so that the
    4 bytes at any offset p are element ``p >> 2`` of view ``p & 3``."""
    n = text.shape[0]
    return (text[0: (n // 4) * 4].view(np.uint32), text[1: 1 + (max(n - 1, 0) // 4) * 4].view(np.uint32),
            text[2: 2 + (max(n - 2, 0) // 4) * 4].view(np.uint32), text[3: 3 + (max(n - 3, 0) // 4) * 4].view(np.uint32))


@njit(inline="always")
def _allele_char(allele):
    if allele >= 0 and allele <= 9:
        return _ZERO + allele
    if allele == -1:
        return _DOT
    raise ValueError("allele index outside -1..9 cannot be written as one VCF character")


@njit(inline="always")
def _write_calls(text, words, calls, r, j0, j1, p):
    """Text of record r's diploid calls j0..j1 from text position p on;
    ``calls`` is sample-blocked: call j is ``calls[j // S, r, j % S]``."""
    view = words[p & 3]  # every call of the record has the same alignment
    q = p >> 2
    block = calls.shape[2]
    j = j0
    while j < j1:
        # The calls of one sample block: two alleles 0/1 each make one word.
        jc = j // block
        jo = j - jc * block
        n = min(j1 - j, block - jo)
        own = calls[jc, r]
        unusual = np.uint32(0)
        # Unsigned indices: Numba then skips negative-index wraparound, which
        # otherwise keeps LLVM from vectorising the loop.
        for k in range(np.uint64(n)):
            a = np.uint32(np.uint8(own[np.uint64(jo) + k, 0]))
            b = np.uint32(np.uint8(own[np.uint64(jo) + k, 1]))
            unusual |= (a | b) & np.uint32(0xFE)
            view[np.uint64(q) + k] = _CALL_BITS | (a << np.uint32(8)) | (b << np.uint32(24))
        if unusual != 0:
            for k in range(n):
                a = own[jo + k, 0]
                b = own[jo + k, 1]
                if ((a | b) & np.int8(-2)) != 0:
                    at = p + 4 * k
                    text[at] = _TAB
                    text[at + 1] = _allele_char(a)
                    text[at + 2] = _PIPE
                    text[at + 3] = _allele_char(b)
        j += n
        q += n
        p += 4 * n


@njit
def format_vcf_records(prefix_bytes, prefix_offsets, haplotypes, buffer=None):
    """Tab-separated VCF record lines with phased GT calls.

    prefix_bytes : uint8[b], the fixed columns of every record concatenated,
        each ending with the FORMAT column (``GT``) and no trailing tab.
    prefix_offsets : int64[v + 1], record i's prefix is
        ``prefix_bytes[prefix_offsets[i]:prefix_offsets[i + 1]]``.
    haplotypes : int8[v, s, p], allele indices 0–9, or -1 for a missing allele.
    buffer : optional uint8 array to write the text into when it is large
        enough (reusing one spares the page faults of fresh memory, which on
        a virtual machine cost more than the formatting); the returned text is
        then a view of it.
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
    if buffer is None or buffer.shape[0] < n_bytes:
        text = np.empty(n_bytes, dtype=np.uint8)
    else:
        text = buffer[:n_bytes]
    # Diploid calls go through _write_calls (whole 4-byte words for alleles 0/1),
    # as one sample block.
    calls = np.ascontiguousarray(haplotypes).reshape((1, n_variants, n_samples, ploidy))
    words = _word_views(text)
    at = 0
    for i in range(n_variants):
        for k in range(prefix_offsets[i], prefix_offsets[i + 1]):
            text[at] = prefix_bytes[k]
            at += 1
        if ploidy == 2:
            _write_calls(text, words, calls, i, 0, n_samples, at)
            at += 4 * n_samples
        else:
            for j in range(n_samples):
                text[at] = _TAB
                at += 1
                for q in range(ploidy):
                    text[at] = _allele_char(haplotypes[i, j, q])
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
# compares 32 samples per 64-bit word (2 bits a sample).  Everything else
# (prefix columns, newlines, calls that are not 0/1) goes out as literals.
# Any text is accepted: the sample structure only steers the search, and a
# match covers only samples whose 4 bytes its 2-bit symbols determine.

MAX_MATCH_SAMPLES = 64  # 256 bytes (deflate's longest match is 258): what 64 stop bits can see
KEY_SAMPLES = 5  # samples behind one hash key: 4**5 exact keys, no collisions


@njit(inline="always")
def _trailing_zeros(x):
    """Index of the lowest set bit of a nonzero uint64 (LLVM's cttz: one instruction)."""
    return np.int64(trailing_zeros(x))


@njit(inline="always")
def _symbols_at(pk, i):
    """The 32 symbols from local sample i, 2 bits each, first in the low bits."""
    shift = np.uint64(2 * (i & 31))
    w = np.uint64(i >> 5)  # unsigned indices spare Numba's negative-index wraparound
    # Shifting by 1 and then by 63 - shift is 0 when shift is 0 (a shift by 64 is undefined).
    return (pk[w] >> shift) | ((pk[w + np.uint64(1)] << np.uint64(1)) << (np.uint64(63) - shift))


@njit(inline="always")
def _clean_ahead(stops, i):
    """How many samples from local slot i come before the next stop, capped at MAX_MATCH_SAMPLES."""
    shift = np.uint64(i & 31)
    w = np.uint64(i >> 5)
    one, two = np.uint64(1), np.uint64(2)
    x = ((np.uint64(stops[w]) | (np.uint64(stops[w + one]) << np.uint64(32))) >> shift) \
        | ((np.uint64(stops[w + two]) << one) << (np.uint64(63) - shift))
    if x == 0:
        return MAX_MATCH_SAMPLES
    return _trailing_zeros(x)


@njit(inline="always")
def _common_samples(pk, i, c, first, limit):
    """How many samples from i and from c agree, up to ``limit`` (≤ 64);
    ``first`` is ``_symbols_at(pk, i)``."""
    x = first ^ _symbols_at(pk, c)
    if x != 0:
        return min(_trailing_zeros(x) >> 1, limit)
    if limit <= 32:
        return limit
    x = _symbols_at(pk, i + 32) ^ _symbols_at(pk, c + 32)
    if x != 0:
        return min(32 + (_trailing_zeros(x) >> 1), limit)
    return limit


# Inside a long match only the last samples are entered in the hash table: in a
# run of one genotype they all share a key, and the latest entry wins anyway.
INSERT_TAIL = 16


@njit(inline="always")
def _group(words, q, count, pk, stops, i):
    """Slots i..i+31 (i a multiple of 32) from the first ``count`` (≤ 32) words
    at ``words[q]``; the remaining slots are stops."""
    bits = np.uint64(0)
    stop = np.uint32(0)
    for k in range(32):
        word = words[np.uint64(q + min(k, count - 1))] if count > 0 else np.uint32(0)
        clean = ((word & _CALL_MASK) == _CALL_BITS) and k < count
        s = ((word >> np.uint32(7)) & np.uint32(2)) | ((word >> np.uint32(24)) & np.uint32(1))
        bits |= np.uint64(s if clean else 0) << np.uint64(2 * k)
        stop |= np.uint32(0 if clean else 1) << np.uint32(k)
    pk[i >> 5] = bits
    stops[i >> 5] = stop


@njit
def _deflate_block(text, words, calls, block_start, block_end, samples_begin, record_ends, n_samples,
                   pk, stops, group_seg, head, seg_start, seg_first, seg_count, token_length, token_value, out):
    """One block's raw deflate stream into ``out``; its length, or -1 if it does not fit.

    With ``calls`` (int8[k, v, S, 2] sample-blocked, empty for none) the text
    of every call that starts in the block is first written from them.
    """
    # Segments: the samples of one record lying whole inside the block.  Each
    # starts at a local slot that is a multiple of 32 and leaves at least one
    # slot empty after it; ``group_seg`` names the segment of every 32 slots.
    # Slot i has its symbol in 2 bits of ``pk`` (0-3 for "\t[01]|[01]"), and
    # ``stops`` a bit for every other sample and every empty slot, so no match
    # runs past one.
    first_record = np.searchsorted(record_ends, block_start, side="right")
    n_seg = 0
    i = 0
    r = first_record
    while r < record_ends.shape[0] and samples_begin[r] < block_end:
        begin = samples_begin[r]
        j0 = 0 if begin >= block_start else (block_start - begin + 3) // 4
        j1 = min(n_samples, (block_end - begin) // 4)
        if calls.shape[0] > 0:
            # The text of every call starting in the block, before it is read.
            _write_calls(text, words, calls, r, j0, min(n_samples, (block_end - begin + 3) // 4), begin + 4 * j0)
        if j1 > j0:
            p = begin + 4 * j0
            count = j1 - j0
            seg_start[n_seg] = p
            seg_first[n_seg] = i
            seg_count[n_seg] = count
            n_seg += 1
            view = words[p & 3]
            q = p >> 2
            full = count // 32
            for w in range(full):
                _group(view, q + 32 * w, 32, pk, stops, i + 32 * w)
            # The last group is partial or, when count is a multiple of 32, empty.
            _group(view, q + 32 * full, count - 32 * full, pk, stops, i + 32 * full)
            group_seg[i >> 5: (i >> 5) + full + 1] = n_seg - 1
            i += 32 * (full + 1)
        r += 1
    # Guard groups: reads up to two groups past the last slot see stops.
    for g in range(2):
        pk[(i >> 5) + g] = 0
        stops[(i >> 5) + g] = np.uint32(0xFFFFFFFF)

    key_mask = np.uint64((1 << (2 * KEY_SAMPLES)) - 1)
    head[:] = -1
    last_same = np.full(4, -1, dtype=np.int64)
    freq_ll = np.zeros(286, dtype=np.int64)
    freq_d = np.zeros(30, dtype=np.int64)
    n_tokens = 0
    p = block_start
    for g in range(n_seg + 1):
        literal_end = seg_start[g] if g < n_seg else block_end
        while p < literal_end:
            token_length[n_tokens] = 0
            token_value[n_tokens] = text[p]
            n_tokens += 1
            freq_ll[text[p]] += 1
            p += 1
        if g == n_seg:
            break
        first = seg_first[g]
        i = first
        i_end = i + seg_count[g]
        while i < i_end:
            # Candidates: the latest earlier sample opening with the same
            # KEY_SAMPLES symbols, else the latest with the same symbol.
            ahead = _symbols_at(pk, i)
            clean = _clean_ahead(stops, i)
            best_k = 0
            distance = 0
            if clean > 0:
                for attempt in range(2):
                    if attempt == 0:
                        c = head[ahead & key_mask] if clean >= KEY_SAMPLES else -1
                    elif best_k == 0:
                        c = last_same[ahead & np.uint64(3)]
                    else:
                        break
                    if c < 0:
                        continue
                    # Slots of one segment are consecutive samples.
                    if c >= first:
                        d = 4 * (i - c)
                    else:
                        cg = group_seg[c >> 5]
                        d = p - (seg_start[cg] + 4 * (c - seg_first[cg]))
                    if d <= WINDOW:
                        best_k = _common_samples(pk, i, c, ahead, min(clean, _clean_ahead(stops, c)))
                        distance = d
            if best_k > 0:
                length = 4 * best_k
                token_length[np.uint64(n_tokens)] = length
                token_value[np.uint64(n_tokens)] = distance
                n_tokens += 1
                freq_ll[np.uint64(257) + np.uint64(_LENGTH_CODE[np.uint64(length)])] += 1
                freq_d[np.uint64(_DIST_CODE[np.uint64(distance)])] += 1
                step = best_k
            else:
                for q in range(4):
                    token_length[n_tokens] = 0
                    token_value[n_tokens] = text[p + q]
                    n_tokens += 1
                    freq_ll[text[p + q]] += 1
                step = 1
            if clean > 0:
                # Every sample of a match (or the one literal sample) is clean.
                start = max(i, i + step - INSERT_TAIL)
                window = ahead if start == i else _symbols_at(pk, start)
                for t in range(i + step - start):
                    shifted = window >> np.uint64(2 * t)
                    head[shifted & key_mask] = start + t
                    last_same[shifted & np.uint64(3)] = start + t
            i += step
            p += 4 * step

    at, acc, n_acc = write_dynamic_block(token_length, token_value, n_tokens, freq_ll, freq_d, True,
                                         out, 0, np.uint64(0), 0)
    at = _flush(out, at, acc, n_acc)
    if at > out.shape[0]:
        return -1
    return at


@njit
def _deflate_blocks(text, samples_begin, record_ends, n_samples, block_size, calls):
    """:func:`deflate_vcf_chunk`, writing the calls' text first when ``calls`` is not empty."""
    n_bytes = text.shape[0]
    n_blocks = (n_bytes + block_size - 1) // block_size
    capacity = block_size // 4 + 1  # samples whole inside one block
    # Each segment holds at least one sample and takes at most 32 slots more.
    n_groups = (33 * capacity + 96) >> 5
    pk = np.empty(n_groups + 4, dtype=np.uint64)
    stops = np.empty(n_groups + 4, dtype=np.uint32)
    group_seg = np.empty(n_groups + 4, dtype=np.int64)
    head = np.empty(1 << (2 * KEY_SAMPLES), dtype=np.int32)
    seg_start = np.empty(capacity + 1, dtype=np.int64)
    seg_first = np.empty(capacity + 1, dtype=np.int64)
    seg_count = np.empty(capacity + 1, dtype=np.int64)
    words = _word_views(text)
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
        n = _deflate_block(text, words, calls, b0, b1, samples_begin, record_ends, n_samples,
                           pk, stops, group_seg, head, seg_start, seg_first, seg_count, token_length, token_value, scratch)
        sizes[k] = n
        if n > 0:
            streams[at:at + n] = scratch[:n]
            at += n
    return streams[:at].copy(), sizes


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
    return _deflate_blocks(text, samples_begin, record_ends, n_samples, block_size,
                           np.zeros((0, 0, 0, 2), dtype=np.int8))


@njit
def format_and_deflate_vcf_chunk(prefix_bytes, prefix_offsets, haplotypes, n_samples, buffer, block_size):
    """:func:`format_vcf_records` and :func:`deflate_vcf_chunk` in one pass for
    diploid calls: each block's calls are written and compressed while the
    block is in cache.

    haplotypes : int8[k, v, S, 2], the calls in blocks of S samples, sample j
        of variant i at ``[j // S, i, j % S]`` (a store's chunks decoded side by
        side, not copied together); ``[np.newaxis]`` of an int8[v, s, 2] array
        is the one-block case.  Samples past ``n_samples`` are ignored.
    buffer : uint8, at least the text's length; the text is written into it.
    Other arguments as for those two; returns (text, record_ends, streams, sizes).
    """
    n_variants = haplotypes.shape[1]
    if haplotypes.shape[3] != 2:
        raise ValueError("format_and_deflate_vcf_chunk writes diploid calls only")
    if haplotypes.shape[0] * haplotypes.shape[2] < n_samples:
        raise ValueError("haplotypes holds fewer samples than n_samples")
    if prefix_offsets.shape[0] != n_variants + 1:
        raise ValueError("prefix_offsets must have one more entry than haplotypes has variants")
    ends = vcf_record_ends(prefix_offsets, n_samples, 2)
    n_bytes = ends[n_variants - 1] if n_variants > 0 else 0
    if buffer.shape[0] < n_bytes:
        raise ValueError("buffer is too small for the chunk's text")
    text = buffer[:n_bytes]
    samples_begin = np.empty(n_variants, dtype=np.int64)
    start = 0
    for i in range(n_variants):
        length = prefix_offsets[i + 1] - prefix_offsets[i]
        text[start:start + length] = prefix_bytes[prefix_offsets[i]:prefix_offsets[i + 1]]
        samples_begin[i] = start + length
        text[ends[i] - 1] = _NEWLINE
        start = ends[i]
    streams, sizes = _deflate_blocks(text, samples_begin, ends, n_samples, block_size, haplotypes)
    return text, ends, streams, sizes
