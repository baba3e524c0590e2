"""V2000 molfile text of many molecules in one compiled pass (the screening world's SDF shards).

Dimension key: m = molecules, a = atoms (offsets ``atom_offset`` [m+1]),
b = bonds (offsets ``bond_offset`` [m+1]).  The output is byte-for-byte what
``kernels.reference.sdf.format_sdf`` (Python string formatting) writes.
The field writers are ordinary compiled functions, not ``inline="always"``:
Numba's IR inlining retypes a helper at each of its dozen call sites, which
made this formatter's first compile take longer than writing a paper-scale
world's SDF shards.
"""
from __future__ import annotations

import math

import numpy as np

from .numba_util import njit


@njit
def _put(out, pos, src):
    for i in range(src.shape[0]):
        out[pos + i] = src[i]
    return pos + src.shape[0]


@njit
def _int_field(out, pos, value, width):
    """``value`` right-aligned in ``width`` characters (as "%{width}d")."""
    digits = np.empty(20, dtype=np.uint8)
    v = -value if value < 0 else value
    n = 0
    while True:
        digits[n] = 48 + v % 10
        v //= 10
        n += 1
        if v == 0:
            break
    if value < 0:
        digits[n] = 45
        n += 1
    for i in range(width - n):
        out[pos + i] = 32
    pos += max(0, width - n)
    for i in range(n):
        out[pos + i] = digits[n - 1 - i]
    return pos + n


@njit
def _coord_field(out, pos, x):
    """``x`` as "%10.4f" (x already rounded to 4 decimals)."""
    k = int(np.rint(x * 10000.0))
    negative = x < 0 or (x == 0 and math.copysign(1.0, x) < 0)
    if k < 0:
        k = -k
    whole, frac = k // 10000, k % 10000
    digits = np.empty(24, dtype=np.uint8)
    n = 0
    for _ in range(4):
        digits[n] = 48 + frac % 10
        frac //= 10
        n += 1
    digits[n] = 46
    n += 1
    while True:
        digits[n] = 48 + whole % 10
        whole //= 10
        n += 1
        if whole == 0:
            break
    if negative:
        digits[n] = 45
        n += 1
    for i in range(10 - n):
        out[pos + i] = 32
    pos += max(0, 10 - n)
    for i in range(n):
        out[pos + i] = digits[n - 1 - i]
    return pos + n


@njit
def format_sdf(titles, title_offset, header, z, charge, atom_offset, xyz, bond_offset, bonds, symbols, out):
    """Write the SD file into ``out`` (uint8, large enough); returns its length.

    titles uint8 [*] with title_offset int64 [m+1]; header uint8: the program
    line and the blank comment line ("...\\n\\n"); z, charge int8 [a]; xyz
    float64 [a, 3]; bonds int64 [b, 3] (molecule-local i, j, order);
    symbols uint8 [elements, 3]: each element's symbol padded with spaces.
    """
    atom_tail = np.frombuffer(b" 0  0  0  0  0  0  0  0  0  0  0  0\n", dtype=np.uint8)
    counts_tail = np.frombuffer(b"  0  0  0  0  0  0  0  0999 V2000\n", dtype=np.uint8)
    end = np.frombuffer(b"M  END\n$$$$\n", dtype=np.uint8)
    chg = np.frombuffer(b"M  CHG", dtype=np.uint8)
    # typed int64, not as literals: each literal width (or an int8 charge) would compile its own
    # copy of the field writer
    w3, w4 = np.int64(3), np.int64(4)
    pos = np.int64(0)
    for m in range(atom_offset.shape[0] - 1):
        pos = _put(out, pos, titles[title_offset[m]:title_offset[m + 1]])
        out[pos] = 10
        pos += 1
        pos = _put(out, pos, header)
        lo, hi = atom_offset[m], atom_offset[m + 1]
        blo, bhi = bond_offset[m], bond_offset[m + 1]
        pos = _int_field(out, pos, hi - lo, w3)
        pos = _int_field(out, pos, bhi - blo, w3)
        pos = _put(out, pos, counts_tail)
        n_charged = 0
        for a in range(lo, hi):
            for d in range(3):
                pos = _coord_field(out, pos, xyz[a, d])
            out[pos] = 32
            pos += 1
            pos = _put(out, pos, symbols[z[a]])
            pos = _put(out, pos, atom_tail)
            if charge[a] != 0:
                n_charged += 1
        for b in range(blo, bhi):
            pos = _int_field(out, pos, bonds[b, 0] + 1, w3)
            pos = _int_field(out, pos, bonds[b, 1] + 1, w3)
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
        pos = _put(out, pos, end)
    return pos
