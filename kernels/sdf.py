"""V2000 molfile text of many molecules in one compiled pass, and its deflate stream (the
screening world's SDF shards).

Dimension key: m = molecules, a = atoms (offsets ``atom_offset`` [m+1]),
b = bonds (offsets ``bond_offset`` [m+1]), h = match hints.  The text is
byte-for-byte what ``kernels.reference.sdf.format_sdf`` (Python string
formatting) writes.  The field writers are ordinary compiled functions, not
``inline="always"``: Numba's IR inlining retypes a helper at each of its dozen
call sites, which made this formatter's first compile take longer than writing
a paper-scale world's SDF shards.

Compression (:func:`deflate_sdf`).  A molfile repeats itself at places the
formatter knows: an atom line's symbol and its twelve zero fields are those of
the last atom line of the same element, a bond line's order and stereo field
those of the last bond of the same order, the header, the counts line's tail
and ``M  END``/``$$$$`` (running into the next title) those of the molecule
before.  The formatter records each such place and its earlier twin as a
*hint*; the compressor tries exactly those matches (extended while the bytes
agree, up to 258) and Huffman-codes everything else as literals, a
dynamic-Huffman block per ``SDF_BLOCK`` bytes (``kernels.deflate``'s block
writer).  That is a standard deflate stream any inflater reads; on a
5,000-molecule shard it is 1.04x the size of zlib level 4 at a fifth of its
time (no hash chains: the coordinates' digits, which are most of the bytes,
hardly repeat).
"""
from __future__ import annotations

import math

import numpy as np

from .deflate import _DIST_CODE, _LENGTH_CODE, LITERAL_LIMIT, WINDOW, _emit_literals_and_runs, _flush, count_bytes
from .deflate import _put as _put_bits
from .deflate import write_tree_header
from .numba_util import njit

SDF_BLOCK = 262144  # text bytes per dynamic-Huffman block
MIN_MATCH = 4  # shorter agreements at a hint are coded as literals


@njit
def _put(out, pos, src):
    for i in range(src.shape[0]):
        out[pos + i] = src[i]
    return pos + src.shape[0]


@njit
def _int_field(out, pos, value, width):
    """``value`` right-aligned in ``width`` characters (as "%{width}d"), written right to left."""
    v = -value if value < 0 else value
    n = 1
    t = v
    while t >= 10:
        t //= 10
        n += 1
    if value < 0:
        n += 1
    end = pos + max(width, n)
    p = end - 1
    while True:
        out[p] = 48 + v % 10
        v //= 10
        p -= 1
        if v == 0:
            break
    if value < 0:
        out[p] = 45
        p -= 1
    while p >= pos:
        out[p] = 32
        p -= 1
    return end


@njit
def _coord_field(out, pos, x):
    """``x`` as "%10.4f" (x already rounded to 4 decimals), written right to left."""
    k = int(np.rint(x * 10000.0))
    negative = x < 0 or (x == 0 and math.copysign(1.0, x) < 0)
    if k < 0:
        k = -k
    whole, frac = k // 10000, k % 10000
    n = 6  # four decimals, the point, one whole digit
    t = whole
    while t >= 10:
        t //= 10
        n += 1
    if negative:
        n += 1
    end = pos + max(10, n)
    p = end - 1
    for _ in range(4):
        out[p] = 48 + frac % 10
        frac //= 10
        p -= 1
    out[p] = 46
    p -= 1
    while True:
        out[p] = 48 + whole % 10
        whole //= 10
        p -= 1
        if whole == 0:
            break
    if negative:
        out[p] = 45
        p -= 1
    while p >= pos:
        out[p] = 32
        p -= 1
    return end


def hint_bound(n_molecules: int, n_atoms: int, n_bonds: int) -> int:
    """Room format_sdf needs in hint_at / hint_from."""
    return 3 * n_molecules + 2 * n_atoms + 2 * n_bonds


@njit
def format_sdf(titles, title_offset, header, z, charge, atom_offset, xyz, bond_offset, bonds, symbols, out,
               hint_at, hint_from):
    """Write the SD file into ``out`` (uint8, large enough); returns (its length, hints).

    titles uint8 [*] with title_offset int64 [m+1]; header uint8: the program
    line and the blank comment line ("...\\n\\n"); z, charge int8 [a]; xyz
    float64 [a, 3]; bonds int64 [b, 3] (molecule-local i, j, order);
    symbols uint8 [elements, 3]: each element's symbol padded with spaces.
    hint_at, hint_from int64 [hint_bound(m, a, b)]: filled with the match hints
    for :func:`deflate_sdf`, ascending in hint_at (hint_from -1: no twin yet).
    """
    atom_tail = np.frombuffer(b" 0  0  0  0  0  0  0  0  0  0  0  0\n", dtype=np.uint8)
    counts_tail = np.frombuffer(b"  0  0  0  0  0  0  0  0999 V2000\n", dtype=np.uint8)
    end = np.frombuffer(b"M  END\n$$$$\n", dtype=np.uint8)
    chg = np.frombuffer(b"M  CHG", dtype=np.uint8)
    # typed int64, not as literals: each literal width (or an int8 charge) would compile its own
    # copy of the field writer
    w3, w4 = np.int64(3), np.int64(4)
    pos = np.int64(0)
    # where each kind of line last had its repeating part (-1: not yet)
    header_at, counts_at, end_at, atom_at, bond_at = -1, -1, -1, -1, -1
    element_at = np.full(256, -1, dtype=np.int64)
    order_at = np.full(256, -1, dtype=np.int64)
    h = 0
    for m in range(atom_offset.shape[0] - 1):
        pos = _put(out, pos, titles[title_offset[m]:title_offset[m + 1]])
        out[pos] = 10
        pos += 1
        hint_at[h], hint_from[h] = pos, header_at
        header_at = pos
        h += 1
        pos = _put(out, pos, header)
        lo, hi = atom_offset[m], atom_offset[m + 1]
        blo, bhi = bond_offset[m], bond_offset[m + 1]
        pos = _int_field(out, pos, hi - lo, w3)
        pos = _int_field(out, pos, bhi - blo, w3)
        hint_at[h], hint_from[h] = pos, counts_at
        counts_at = pos
        h += 1
        pos = _put(out, pos, counts_tail)
        n_charged = 0
        for a in range(lo, hi):
            for d in range(3):
                pos = _coord_field(out, pos, xyz[a, d])
            # " C   0  0 ...\n" as in the last line of this element, else "  0  0 ...\n" as in the last line
            e = np.int64(z[a]) & 255
            hint_at[h], hint_from[h] = pos, element_at[e]
            element_at[e] = pos
            hint_at[h + 1], hint_from[h + 1] = pos + 4, atom_at
            atom_at = pos + 4
            h += 2
            out[pos] = 32
            pos += 1
            pos = _put(out, pos, symbols[z[a]])
            pos = _put(out, pos, atom_tail)
            if charge[a] != 0:
                n_charged += 1
        for b in range(blo, bhi):
            pos = _int_field(out, pos, bonds[b, 0] + 1, w3)
            pos = _int_field(out, pos, bonds[b, 1] + 1, w3)
            # "  1  0\n" as in the last bond of this order, else "  0\n" as in the last bond
            o = bonds[b, 2] & 255
            hint_at[h], hint_from[h] = pos, order_at[o]
            order_at[o] = pos
            hint_at[h + 1], hint_from[h + 1] = pos + 3, bond_at
            bond_at = pos + 3
            h += 2
            pos = _int_field(out, pos, bonds[b, 2], w3)
            out[pos] = 32
            out[pos + 1] = 32
            out[pos + 2] = 48
            out[pos + 3] = 10
            pos += 4
        done = 0
        a = lo
        while done < n_charged:
            chunk = min(8, n_charged - done)
            pos = _put(out, pos, chg)
            pos = _int_field(out, pos, chunk, w3)
            written = 0
            while written < chunk:
                if charge[a] != 0:
                    pos = _int_field(out, pos, a - lo + 1, w4)
                    pos = _int_field(out, pos, np.int64(charge[a]), w4)
                    written += 1
                a += 1
            out[pos] = 10
            pos += 1
            done += chunk
        hint_at[h], hint_from[h] = pos, end_at
        end_at = pos
        h += 1
        pos = _put(out, pos, end)
    return pos, h


def deflate_bound(n: int) -> int:
    """Room deflate_sdf may need for ``n`` text bytes (a match costs at most 48 bits for its 4+ bytes)."""
    return (n * 3 // 2 + 400 * (n // SDF_BLOCK + 1) + 1024 + 3) // 4 * 4


@njit
def deflate_sdf(data, n, hint_at, hint_from, n_hints, out):
    """Raw deflate stream of data[:n] (format_sdf's text) into ``out`` (uint8,
    ``deflate_bound(n)`` long); returns its length.

    At each hint (in order, unless an earlier match covers it) the text is
    compared with its twin ``hint_from`` (within deflate's 32 KiB window): an
    agreement of MIN_MATCH or more bytes is a match, everything else a literal.
    Blocks end at the first match boundary after every SDF_BLOCK bytes.
    """
    match_at = np.empty(n_hints + 1, dtype=np.int64)
    match_len = np.empty(n_hints + 1, dtype=np.int64)
    match_dist = np.empty(n_hints + 1, dtype=np.int64)
    cursor = 0
    n_matches = 0
    for k in range(n_hints):
        p, c = hint_at[k], hint_from[k]
        if p < cursor or c < 0 or p - c > WINDOW or p >= n:
            continue
        limit = min(258, n - p)
        length = 0
        while length < limit and data[c + length] == data[p + length]:
            length += 1
        if length >= MIN_MATCH:
            match_at[n_matches] = p
            match_len[n_matches] = length
            match_dist[n_matches] = p - c
            n_matches += 1
            cursor = p + length
    freq_ll = np.zeros(286, dtype=np.int64)
    freq_d = np.zeros(30, dtype=np.int64)
    len_ll = np.zeros(286, dtype=np.int64)
    code_ll = np.zeros(286, dtype=np.int64)
    len_d = np.zeros(30, dtype=np.int64)
    code_d = np.zeros(30, dtype=np.int64)
    literal = np.zeros(256, dtype=np.uint64)  # code | length << 32
    part = np.zeros((4, 256), dtype=np.int64)
    at, acc, n_acc = 0, np.uint64(0), 0
    b0, m0 = 0, 0
    while True:
        b1 = min(n, b0 + SDF_BLOCK)
        m1 = m0
        while m1 < n_matches and match_at[m1] < b1:
            b1 = max(b1, match_at[m1] + match_len[m1])
            m1 += 1
        freq_d[:] = 0
        part[:] = 0
        q = b0
        for m in range(m0, m1):
            count_bytes(data, q, match_at[m], part)
            q = match_at[m] + match_len[m]
        count_bytes(data, q, b1, part)
        for c in range(256):
            freq_ll[c] = part[0, c] + part[1, c] + part[2, c] + part[3, c]
        freq_ll[256:] = 0
        for m in range(m0, m1):
            freq_ll[257 + np.int64(_LENGTH_CODE[match_len[m]])] += 1
            freq_d[_DIST_CODE[match_dist[m]]] += 1
        final = b1 >= n
        at, acc, n_acc = write_tree_header(freq_ll, freq_d, final, out, at, acc, n_acc, len_ll, code_ll, len_d, code_d,
                                           LITERAL_LIMIT)
        for c in range(256):
            literal[c] = np.uint64(code_ll[c]) | (np.uint64(len_ll[c]) << np.uint64(32))
        at, acc, n_acc = _emit_literals_and_runs(data, b0, b1, literal, match_at[m0:m1], match_len[m0:m1],
                                                 match_dist[m0:m1], m1 - m0, code_ll, len_ll, code_d, len_d, out, at,
                                                 acc, n_acc)
        at, acc, n_acc = _put_bits(out, at, acc, n_acc, code_ll[256], len_ll[256])
        if final:
            break
        b0, m0 = b1, m1
    at = _flush(out, at, acc, n_acc)
    if at + 8 > out.shape[0]:
        raise RuntimeError("deflate_sdf: output bound exceeded")
    return at
