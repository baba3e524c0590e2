"""Raw deflate (RFC 1951) building blocks in Numba, and a fast deterministic
deflater for images.

Why not a C library: ISA-L, the fastest deflate available from Python, does not
give the same bytes for the same input in every process (two builds of one
world differed in one BGZF block of a tabix index and in one MRI file), and a
release must be byte-identical for any scheduler.  zlib and these kernels are
pure functions of their input.

The shared part (code tables, length-limited Huffman codes, the LSB-first bit
writer and the dynamic-block writer) serves both the VCF compressor in
:mod:`kernels.vcf_encode` and :func:`deflate_runs`, which compresses MRI pixels:
after acquisition noise an image is close to incompressible by matching, so
nearly all of zlib's gain comes from entropy coding.  :func:`deflate_runs` codes
literals with a Huffman code fitted to every ``block_size`` bytes (small blocks
follow the local intensity distribution, dark lung against bright blood pool)
and replaces only runs that repeat the previous byte or the previous 4 bytes
(the NaN background of a float32 T1 map) by matches; on rendered cine + T1 it
is as small as zlib level 6 at a tenth of the time.

There are no Python twins: an encoder's output is one of many valid streams,
so the tests check that zlib inflates it back to the input.
"""
from __future__ import annotations

import numpy as np

from .numba_util import njit

WINDOW = 32768

_LENGTH_BASE = np.array([3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83,
                         99, 115, 131, 163, 195, 227, 258], dtype=np.int64)
_LENGTH_EXTRA = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0],
                         dtype=np.int64)
_DIST_BASE = np.array([1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025,
                       1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577], dtype=np.int64)
_DIST_EXTRA = np.array([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12,
                        12, 13, 13], dtype=np.int64)
_CODE_LENGTH_ORDER = np.array([16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15], dtype=np.int64)


def _code_table(base, limit):
    # uint8 keeps the 32 K-entry distance table inside the L2 cache.
    table = np.zeros(limit + 1, dtype=np.uint8)
    for value in range(int(base[0]), limit + 1):
        table[value] = np.searchsorted(base, value, side="right") - 1
    return table


_LENGTH_CODE = _code_table(_LENGTH_BASE, 258)
_DIST_CODE = _code_table(_DIST_BASE, WINDOW)


@njit
def _huffman_lengths(freq, limit, lengths):
    """Code lengths (≤ limit) of a Huffman code for ``freq``; ties break by symbol.

    When the optimal code is too deep, frequencies are halved (keeping used
    symbols used) until it fits.
    """
    n = freq.shape[0]
    f = freq.astype(np.int64)
    while True:
        lengths[:] = 0
        used = np.flatnonzero(f > 0)
        m = used.shape[0]
        if m == 0:
            return
        if m == 1:
            lengths[used[0]] = 1
            return
        leaves = used[np.argsort(f[used] * n + used)]
        weight = np.empty(2 * m - 1, dtype=np.int64)
        parent = np.empty(2 * m - 1, dtype=np.int64)
        for i in range(m):
            weight[i] = f[leaves[i]]
        next_leaf, next_inner, n_nodes = 0, m, m
        for _ in range(m - 1):
            # The two lightest of the unused leaves and the unused inner nodes.
            for k in range(2):
                if next_leaf < m and (next_inner >= n_nodes or weight[next_leaf] <= weight[next_inner]):
                    lightest = next_leaf
                    next_leaf += 1
                else:
                    lightest = next_inner
                    next_inner += 1
                parent[lightest] = n_nodes
                if k == 0:
                    weight[n_nodes] = weight[lightest]
                else:
                    weight[n_nodes] += weight[lightest]
            n_nodes += 1
        depth = np.zeros(n_nodes, dtype=np.int64)
        deepest = 0
        # Parents are created after their children: walk from the root down.
        for node in range(n_nodes - 2, -1, -1):
            depth[node] = depth[parent[node]] + 1
            if node < m and depth[node] > deepest:
                deepest = depth[node]
        if deepest <= limit:
            for i in range(m):
                lengths[leaves[i]] = depth[i]
            return
        for s in range(n):
            if f[s] > 0:
                f[s] = (f[s] + 1) // 2


@njit
def _canonical_codes(lengths, codes):
    """Canonical Huffman codes (RFC 1951 §3.2.2), bit-reversed for LSB-first output."""
    count = np.zeros(16, dtype=np.int64)
    for s in range(lengths.shape[0]):
        count[lengths[s]] += 1
    count[0] = 0
    next_code = np.zeros(16, dtype=np.int64)
    code = 0
    for bits in range(1, 16):
        code = (code + count[bits - 1]) << 1
        next_code[bits] = code
    for s in range(lengths.shape[0]):
        n_bits = lengths[s]
        if n_bits:
            c = next_code[n_bits]
            next_code[n_bits] += 1
            reversed_code = 0
            for _ in range(n_bits):
                reversed_code = (reversed_code << 1) | (c & 1)
                c >>= 1
            codes[s] = reversed_code


@njit(inline="always")
def _put(out, at, acc, n_acc, value, n_bits):
    """Append ``n_bits`` (≤ 32) bits of ``value`` LSB-first; whole bytes go to ``out``
    four at a time (writes past the end of ``out`` are counted, not made)."""
    acc |= np.uint64(value) << np.uint64(n_acc)
    n_acc += n_bits
    if n_acc >= 32:
        if at + 4 <= out.shape[0]:
            out[at] = np.uint8(acc & np.uint64(0xFF))
            out[at + 1] = np.uint8((acc >> np.uint64(8)) & np.uint64(0xFF))
            out[at + 2] = np.uint8((acc >> np.uint64(16)) & np.uint64(0xFF))
            out[at + 3] = np.uint8((acc >> np.uint64(24)) & np.uint64(0xFF))
        at += 4
        acc >>= np.uint64(32)
        n_acc -= 32
    return at, acc, n_acc


@njit
def _flush(out, at, acc, n_acc):
    """Write the remaining bits, padded to a whole byte."""
    while n_acc > 0:
        if at < out.shape[0]:
            out[at] = np.uint8(acc & np.uint64(0xFF))
        at += 1
        acc >>= np.uint64(8)
        n_acc -= 8
    return at




@njit
def write_tree_header(freq_ll, freq_d, final, out, at, acc, n_acc, len_ll, code_ll, len_d, code_d, limit_ll=15):
    """Start a dynamic-Huffman block: fit the codes to the block's symbol counts
    and write the block header with its code trees.

    freq_ll / freq_d count the block's literal-length and distance codes (the
    end-of-block code and the two-code minimum are added here, on copies).
    Fills len_ll, code_ll (286) and len_d, code_d (30) with the codes to use,
    literal/length codes at most ``limit_ll`` (≤ 15) bits long; returns the
    writer state (at, acc, n_acc).
    """
    freq_ll = freq_ll.copy()
    freq_d = freq_d.copy()
    freq_ll[256] = 1
    # Two used codes per tree keep every decoder's completeness checks happy.
    for s in range(2):
        if np.count_nonzero(freq_d) < 2 and freq_d[s] == 0:
            freq_d[s] = 1
    if np.count_nonzero(freq_ll) < 2:
        freq_ll[0] += 1
    _huffman_lengths(freq_ll, limit_ll, len_ll)
    _huffman_lengths(freq_d, 15, len_d)
    code_ll[:] = 0
    code_d[:] = 0
    _canonical_codes(len_ll, code_ll)
    _canonical_codes(len_d, code_d)

    n_ll = 286
    while n_ll > 257 and len_ll[n_ll - 1] == 0:
        n_ll -= 1
    n_d = 30
    while n_d > 1 and len_d[n_d - 1] == 0:
        n_d -= 1
    lengths = np.concatenate((len_ll[:n_ll], len_d[:n_d]))
    # Run-length coding of the code lengths with symbols 16, 17 and 18.
    rle_sym = np.empty(lengths.shape[0], dtype=np.int64)
    rle_extra = np.empty(lengths.shape[0], dtype=np.int64)
    n_rle = 0
    freq_cl = np.zeros(19, dtype=np.int64)
    k = 0
    while k < lengths.shape[0]:
        value = lengths[k]
        repeat = 1
        while k + repeat < lengths.shape[0] and lengths[k + repeat] == value:
            repeat += 1
        if value == 0 and repeat >= 3:
            use = min(repeat, 138)
            rle_sym[n_rle] = 17 if use <= 10 else 18
            rle_extra[n_rle] = use - 3 if use <= 10 else use - 11
            n_rle += 1
        elif value != 0 and repeat >= 4:
            rle_sym[n_rle] = value
            rle_extra[n_rle] = 0
            n_rle += 1
            use = 1 + min(repeat - 1, 6)
            rle_sym[n_rle] = 16
            rle_extra[n_rle] = use - 1 - 3
            n_rle += 1
        else:
            use = 1
            rle_sym[n_rle] = value
            rle_extra[n_rle] = 0
            n_rle += 1
        k += use
    for k in range(n_rle):
        freq_cl[rle_sym[k]] += 1
    len_cl = np.zeros(19, dtype=np.int64)
    code_cl = np.zeros(19, dtype=np.int64)
    _huffman_lengths(freq_cl, 7, len_cl)
    _canonical_codes(len_cl, code_cl)
    n_cl = 19
    while n_cl > 4 and len_cl[_CODE_LENGTH_ORDER[n_cl - 1]] == 0:
        n_cl -= 1

    at, acc, n_acc = _put(out, at, acc, n_acc, 1 if final else 0, 1)  # BFINAL
    at, acc, n_acc = _put(out, at, acc, n_acc, 2, 2)  # BTYPE: dynamic Huffman
    at, acc, n_acc = _put(out, at, acc, n_acc, n_ll - 257, 5)
    at, acc, n_acc = _put(out, at, acc, n_acc, n_d - 1, 5)
    at, acc, n_acc = _put(out, at, acc, n_acc, n_cl - 4, 4)
    for k in range(n_cl):
        at, acc, n_acc = _put(out, at, acc, n_acc, len_cl[_CODE_LENGTH_ORDER[k]], 3)
    for k in range(n_rle):
        s = rle_sym[k]
        at, acc, n_acc = _put(out, at, acc, n_acc, code_cl[s], len_cl[s])
        if s == 16:
            at, acc, n_acc = _put(out, at, acc, n_acc, rle_extra[k], 2)
        elif s == 17:
            at, acc, n_acc = _put(out, at, acc, n_acc, rle_extra[k], 3)
        elif s == 18:
            at, acc, n_acc = _put(out, at, acc, n_acc, rle_extra[k], 7)
    return at, acc, n_acc


@njit
def write_dynamic_block(token_length, token_value, n_tokens, freq_ll, freq_d, final, out, at, acc, n_acc):
    """Append one dynamic-Huffman block of the first ``n_tokens`` tokens.

    token_length[t] 0 means a literal byte ``token_value[t]``; otherwise a match
    of that length (3..258) at distance ``token_value[t]`` (1..32768).
    freq_ll / freq_d count the tokens' literal-length and distance codes.
    Returns the writer state (at, acc, n_acc).
    """
    len_ll = np.zeros(286, dtype=np.int64)
    code_ll = np.zeros(286, dtype=np.int64)
    len_d = np.zeros(30, dtype=np.int64)
    code_d = np.zeros(30, dtype=np.int64)
    at, acc, n_acc = write_tree_header(freq_ll, freq_d, final, out, at, acc, n_acc, len_ll, code_ll, len_d, code_d)
    # The token loop writes its bits inline (a call per token, even an inlined
    # one returning the writer state, costs ten times the work it does) with
    # the branchless flush of _emit_literals_and_runs: each part is <= 28 bits.
    # The words go through a uint32 view, so ``at`` must be a multiple of 4
    # (the bit writer keeps it so) and ``out`` a multiple of 4 long.
    # Every length's code with its extra bits, once per block:
    len_bits = np.zeros(259, dtype=np.uint64)
    len_n = np.zeros(259, dtype=np.uint64)
    for length in range(3, 259):
        lc = np.int64(_LENGTH_CODE[length])
        len_bits[length] = np.uint64(code_ll[257 + lc] | ((length - _LENGTH_BASE[lc]) << len_ll[257 + lc]))
        len_n[length] = np.uint64(len_ll[257 + lc] + _LENGTH_EXTRA[lc])
    out32 = out.view(np.uint32)
    limit = out32.shape[0] - 1
    low = np.uint64(0xFFFFFFFF)
    five = np.uint64(5)
    pending = np.uint64(n_acc)
    w = at >> 2
    for t in range(np.uint64(n_tokens)):  # unsigned indices: no negative-index wraparound
        length = token_length[t]
        if length == 0:
            s = np.uint64(token_value[t])
            v0, n0, v1, n1 = np.uint64(code_ll[s]), np.uint64(len_ll[s]), np.uint64(0), np.uint64(0)
        else:
            distance = token_value[t]
            dc = np.uint64(_DIST_CODE[np.uint64(distance)])
            v0, n0 = len_bits[np.uint64(length)], len_n[np.uint64(length)]
            v1 = np.uint64(code_d[dc] | ((distance - _DIST_BASE[dc]) << len_d[dc]))
            n1 = np.uint64(len_d[dc] + _DIST_EXTRA[dc])
        if pending + n0 + n1 < np.uint64(64):
            # Both parts in one go (nearly always): fewer than 32 bits are
            # pending, and under 64 in all leaves the one-word flush exact.
            v0 |= v1 << n0
            n0 += n1
            n1 = np.uint64(0)
        for part in range(2):
            if part == 1:
                if n1 == 0:
                    break
                v0, n0 = v1, n1
            acc |= v0 << pending
            pending += n0
            out32[min(w, limit)] = np.uint32(acc & low)
            full = pending >> five
            w += np.int64(full)
            acc >>= full << five
            pending -= full << five
    at = w << 2
    n_acc = np.int64(pending)
    at, acc, n_acc = _put(out, at, acc, n_acc, code_ll[256], len_ll[256])
    return at, acc, n_acc


@njit
def write_stored_block(data, start, end, final, out, at, acc, n_acc):
    """Append ``data[start:end]`` (at most 65535 bytes) as a stored block."""
    n = end - start
    at, acc, n_acc = _put(out, at, acc, n_acc, 1 if final else 0, 3)  # BFINAL, BTYPE 00
    at, acc, n_acc = _put(out, at, acc, n_acc, 0, (8 - n_acc % 8) % 8)
    at, acc, n_acc = _put(out, at, acc, n_acc, n | ((0xFFFF ^ n) << 16), 32)
    for p in range(start, end):
        at, acc, n_acc = _put(out, at, acc, n_acc, data[p], 8)
    return at, acc, n_acc


MIN_RUN = 8  # shorter repeats of noisy pixels cost more as matches than as literals


#: Literal/length codes of deflate_member are at most this long, so that four
#: literals (56 bits) and a byte's worth of pending bits fit one 64-bit word.
#: (For 256 pixel values the optimal code rarely wants more; the limit costs
#: nothing measurable.)
LITERAL_LIMIT = 14


@njit(inline="always")
def _store8(out, at, acc):
    # Eight byte stores of one word, which LLVM merges into one unaligned store
    # (only with an unsigned index: a signed one brings Numba's negative-index
    # wraparound, which keeps the stores apart and costs 6x).
    base = np.uint64(at)
    for b in range(8):
        out[base + np.uint64(b)] = np.uint8((acc >> np.uint64(8 * b)) & np.uint64(0xFF))


@njit
def _emit_literals_and_runs(data, b0, b1, literal, match_at, match_len, match_dist, n_matches,
                            code_ll, len_ll, code_d, len_d, out, at, acc, n_acc):
    """Code data[b0:b1] (literals ``literal[c]`` = code | length << 32, codes
    ≤ LITERAL_LIMIT bits, and the block's matches) into ``out`` from the writer
    state (at, acc, n_acc) of :func:`_put`; returns the new state.

    Inside, the writer works in bytes: fewer than 8 bits stay pending, each
    step ORs up to 56 new bits in and stores the whole 64-bit word at the byte
    it has reached, then advances past its complete bytes.  Four literals go
    per step, their codes combined off the critical path (which is the shift
    chain through ``acc``); there is no data-dependent branch (a branch on
    "word full" mispredicts every few literals and costs more than the coding).
    The caller guarantees 8 bytes of room past the last byte written.
    """
    low = np.uint64(0xFFFFFFFF)
    three = np.uint64(3)
    seven = np.uint64(7)
    # The four-line "store, advance past whole bytes" step is written out at each
    # use: an inlined helper returning (b, acc, pending) costs Numba a tuple per
    # step, several times the work of the step itself.
    # Into the byte model: store what is pending and advance past whole bytes.
    pending = np.uint64(n_acc)
    _store8(out, at, acc)
    b = at + np.int64(pending >> three)
    acc >>= (pending >> three) << three
    pending &= seven
    q = b0
    for m in range(n_matches + 1):
        stop = match_at[m] if m < n_matches else b1
        end4 = q + (stop - q) // 4 * 4
        for r in range(q, end4, 4):
            ur = np.uint64(r)  # unsigned: no negative-index wraparound on the loads
            e0 = literal[data[ur]]
            e1 = literal[data[ur + np.uint64(1)]]
            e2 = literal[data[ur + np.uint64(2)]]
            e3 = literal[data[ur + np.uint64(3)]]
            n0 = e0 >> np.uint64(32)
            n01 = n0 + (e1 >> np.uint64(32))
            n012 = n01 + (e2 >> np.uint64(32))
            v = (e0 & low) | ((e1 & low) << n0) | ((e2 & low) << n01) | ((e3 & low) << n012)
            acc |= v << pending
            pending += n012 + (e3 >> np.uint64(32))
            _store8(out, b, acc)
            b += np.int64(pending >> three)
            acc >>= (pending >> three) << three
            pending &= seven
        for r in range(end4, stop):
            e = literal[data[r]]
            acc |= (e & low) << pending
            pending += e >> np.uint64(32)
            _store8(out, b, acc)
            b += np.int64(pending >> three)
            acc >>= (pending >> three) << three
            pending &= seven
        if m == n_matches:
            break
        # A run match: length code + extra (≤ 19 bits) and distance code + extra
        # (≤ 28 bits) in one step.
        length = match_len[m]
        lc = np.int64(_LENGTH_CODE[length])
        dc = np.int64(_DIST_CODE[match_dist[m]])
        n_len = len_ll[257 + lc] + _LENGTH_EXTRA[lc]
        v = np.uint64(code_ll[257 + lc] | ((length - _LENGTH_BASE[lc]) << len_ll[257 + lc]))
        v |= np.uint64(code_d[dc] | ((match_dist[m] - _DIST_BASE[dc]) << len_d[dc])) << np.uint64(n_len)
        acc |= v << pending
        pending += np.uint64(n_len + len_d[dc] + _DIST_EXTRA[dc])
        _store8(out, b, acc)
        b += np.int64(pending >> three)
        acc >>= (pending >> three) << three
        pending &= seven
        q = stop + length
    # Back to _put's model: a multiple of 4 bytes written, under 32 bits pending
    # (the up to 3 bytes past that multiple are taken back into acc).
    at = b - (b & 3)
    for k in range(b - at - 1, -1, -1):
        acc = (acc << np.uint64(8)) | np.uint64(out[at + k])
    return at, acc, np.int64(pending) + 8 * (b - at)


@njit
def count_bytes(data, b0, b1, part):
    """part[k, c] += occurrences of byte c in data[b0:b1], in four interleaved tables
    (``part`` int64 [4, 256]) so that equal neighbouring bytes do not stall on the same counter."""
    end4 = b0 + (b1 - b0) // 4 * 4
    for p in range(b0, end4, 4):
        up = np.uint64(p)  # unsigned: no negative-index wraparound on the loads
        part[0, data[up]] += 1
        part[1, data[up + np.uint64(1)]] += 1
        part[2, data[up + np.uint64(2)]] += 1
        part[3, data[up + np.uint64(3)]] += 1
    for p in range(end4, b1):
        part[0, data[p]] += 1


@njit
def _histogram(data, b0, b1, freq):
    """freq[c] += count of c in data[b0:b1] (:func:`count_bytes`, its four tables summed)."""
    part = np.zeros((4, 256), dtype=np.int64)
    count_bytes(data, b0, b1, part)
    for c in range(256):
        freq[c] += part[0, c] + part[1, c] + part[2, c] + part[3, c]


@njit
def deflate_runs(data, block_size, runs=True):
    """Raw deflate stream of ``data``; see :func:`deflate_member`."""
    return deflate_member(np.empty(0, dtype=np.uint8), data, block_size, runs)


@njit
def deflate_member(prefix, data, block_size, runs):
    """Raw deflate stream of ``prefix`` + ``data`` (uint8[n]): a dynamic-Huffman block per
    ``block_size`` (1..65535) input bytes, matches (if ``runs``) only for runs
    of at least MIN_RUN bytes repeating the byte or the 4 bytes before them; a
    block that would code larger than its bytes is stored.  Returns uint8[c].

    ``runs=False`` codes literals only, about twice as fast: right for noisy
    pixels, where runs are rare (on rendered cine frames literals alone come
    within 1 % of zlib level 6).

    ``prefix`` (uint8, short: e.g. an .npy header) is coded as literals ahead of
    ``data`` in the first block, so a caller need not copy the two together.
    """
    n = data.shape[0]
    n_prefix = prefix.shape[0]
    n_blocks = max(1, (n + block_size - 1) // block_size)
    out = np.empty((n_prefix + n + 5 * n_blocks + 1024 + 3) // 4 * 4, dtype=np.uint8)
    size = out.shape[0]
    # Matches of the current block: start, length, distance (literals are implied).
    match_at = np.empty(block_size // MIN_RUN + 2, dtype=np.int64)
    match_len = np.empty(block_size // MIN_RUN + 2, dtype=np.int64)
    match_dist = np.empty(block_size // MIN_RUN + 2, dtype=np.int64)
    freq_ll = np.zeros(286, dtype=np.int64)
    freq_d = np.zeros(30, dtype=np.int64)
    len_ll = np.zeros(286, dtype=np.int64)
    code_ll = np.zeros(286, dtype=np.int64)
    len_d = np.zeros(30, dtype=np.int64)
    code_d = np.zeros(30, dtype=np.int64)
    literal = np.zeros(256, dtype=np.uint64)  # code | length << 32
    at, acc, n_acc = 0, np.uint64(0), 0
    p = 0
    while True:
        b0 = p
        b1 = min(b0 + block_size, n)
        freq_ll[:] = 0
        freq_d[:] = 0
        n_matches = 0
        first = b0 == 0
        extra = n_prefix if first else 0
        if extra:
            _histogram(prefix, 0, n_prefix, freq_ll)
        if not runs:
            _histogram(data, b0, b1, freq_ll)
            p = b1
        while p < b1:
            c = data[p]
            if p + MIN_RUN <= n and p >= 4 and (c == data[p - 1] or c == data[p - 4]):
                limit = min(258, n - p)
                best, distance = 0, 0
                for d in (4, 1):
                    k = 0
                    while k < limit and data[p + k] == data[p + k - d]:
                        k += 1
                    if k > best:
                        best, distance = k, d
                if best >= MIN_RUN:
                    match_at[n_matches] = p
                    match_len[n_matches] = best
                    match_dist[n_matches] = distance
                    n_matches += 1
                    freq_ll[257 + np.int64(_LENGTH_CODE[best])] += 1
                    freq_d[_DIST_CODE[distance]] += 1
                    p += best
                    continue
            freq_ll[c] += 1
            p += 1
        final = p >= n
        start = (at, acc, n_acc)
        at, acc, n_acc = write_tree_header(freq_ll, freq_d, final, out, at, acc, n_acc,
                                           len_ll, code_ll, len_d, code_d, LITERAL_LIMIT)
        bits = 0
        for c in range(256):
            bits += freq_ll[c] * len_ll[c]
        if at + bits // 8 + 5 * n_matches + 8 >= start[0] + (p - b0) + extra:
            # Not smaller than the bytes themselves: rewind and store them.
            at, acc, n_acc = start
            if extra:
                at, acc, n_acc = write_stored_block(prefix, 0, n_prefix, False, out, at, acc, n_acc)
            at, acc, n_acc = write_stored_block(data, b0, p, final, out, at, acc, n_acc)
        else:
            for c in range(256):
                literal[c] = np.uint64(code_ll[c]) | (np.uint64(len_ll[c]) << np.uint64(32))
            if extra:
                at, acc, n_acc = _emit_literals_and_runs(prefix, 0, n_prefix, literal, match_at, match_len, match_dist,
                                                         0, code_ll, len_ll, code_d, len_d, out, at, acc, n_acc)
            at, acc, n_acc = _emit_literals_and_runs(data, b0, p, literal, match_at, match_len, match_dist, n_matches,
                                                     code_ll, len_ll, code_d, len_d, out, at, acc, n_acc)
            at, acc, n_acc = _put(out, at, acc, n_acc, code_ll[256], len_ll[256])
        if final:
            break
    at = _flush(out, at, acc, n_acc)
    if at > size:
        raise RuntimeError("deflate_runs: output bound exceeded")
    return out[:at]


@njit
def join_gzip_members(header, streams, sizes, crcs, lengths):
    """gzip members, one per raw deflate stream, back to back.

    header : uint8[h], the member header; its last two bytes are set to the
        member's total size minus one (BGZF's BSIZE, little-endian).
    streams : uint8[c], the streams concatenated; stream k is ``sizes[k]`` bytes.
    crcs, lengths : CRC-32 and length of each stream's uncompressed data.
    Returns (bytes uint8[n], starts int64[k + 1]): member k occupies
    ``bytes[starts[k]:starts[k + 1]]``.
    """
    n_members = sizes.shape[0]
    h = header.shape[0]
    starts = np.empty(n_members + 1, dtype=np.int64)
    starts[0] = 0
    for k in range(n_members):
        starts[k + 1] = starts[k] + h + sizes[k] + 8
    out = np.empty(starts[n_members], dtype=np.uint8)
    src = 0
    for k in range(n_members):
        at = starts[k]
        out[at:at + h] = header
        bsize = starts[k + 1] - at - 1
        out[at + h - 2] = bsize & 0xFF
        out[at + h - 1] = (bsize >> 8) & 0xFF
        at += h
        out[at:at + sizes[k]] = streams[src:src + sizes[k]]
        src += sizes[k]
        at += sizes[k]
        for b in range(4):
            out[at + b] = (np.int64(crcs[k]) >> (8 * b)) & 0xFF
            out[at + 4 + b] = (lengths[k] >> (8 * b)) & 0xFF
    return out, starts
