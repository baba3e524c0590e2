"""Release and sealed file formats of a screening world.

Release (what an agent reads)::

    library.parquet     id, smiles, elements (list<string>), coordinates (list<[x, y, z] float32>, Å, pocket frame)
                        one row per conformation; the atoms of ``elements``/``coordinates`` are in the order
                        RDKit parses ``smiles`` (heavy atoms only); one row group per 5,000-row shard
    sdf/library_NNNN.sdf.gz   the same conformations as V2000 molfiles (heavy atoms, Kekulé bonds,
                        M  CHG lines), 5,000 per shard, one gzip member with a zero timestamp
                        (the deflate stream of kernels.sdf.deflate_sdf)
    README.md           what the files hold and the rules (budget, top-K, submissions)
    MANIFEST.json       every file with size and SHA-256, written last

Sealed (scorer and oracle only)::

    scores.parquet      id, score, and its parts (target, off-targets, property penalty, hidden term)
    topk.json           the top-K ids by score (descending) and the threshold
    pockets.json        the target and off-target pockets
    oracle.json         budget, top-K, submission size, submissions allowed, time limit
    world.yaml          the world-determining config with the seed
    MANIFEST.json
"""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ELEMENTS = ("", "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S", "Cl", "Ar",
            "K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br")
RELEASE_COLUMNS = ("id", "smiles", "elements", "coordinates")
COORD_DECIMALS = 4  # Å; the SDF's precision, applied to every released and scored coordinate
SDF_PROGRAM_LINE = "  DTWSCRN 01012600003D"  # fixed: the molfile header carries no build time
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def conformation_ids(lo: int, hi: int, n: int) -> list[str]:
    width = max(6, len(str(n - 1)))
    return [f"C{i:0{width}d}" for i in range(lo, hi)]


def conformation_id_array(lo: int, hi: int, n: int) -> pa.Array:
    """``conformation_ids(lo, hi, n)`` as an Arrow string array, built from digit arithmetic
    (a million ids in milliseconds instead of a second of Python strings)."""
    width = max(6, len(str(n - 1)))
    rows = np.arange(lo, hi, dtype=np.int64)
    chars = np.empty((len(rows), width + 1), dtype=np.uint8)
    chars[:, 0] = ord("C")
    for k in range(width):
        chars[:, width - k] = 48 + (rows // 10 ** k) % 10
    offsets = np.arange(len(rows) + 1, dtype=np.int32) * (width + 1)
    return pa.StringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(chars.reshape(-1)))


def release_table(ids: list, smiles: list, z: np.ndarray, atom_offset: np.ndarray, xyz: np.ndarray) -> pa.Table:
    """One shard's rows of ``library.parquet``.  The list children are named ``element``, as a
    Parquet reader names them, so a part's footer (its Arrow schema) is the library's."""
    symbols = pa.array(ELEMENTS, type=pa.string())
    elements = pa.DictionaryArray.from_arrays(pa.array(z.astype(np.int32)), symbols)
    offsets = pa.array(atom_offset.astype(np.int32))
    coords = pa.FixedSizeListArray.from_arrays(pa.array(xyz.astype(np.float32).reshape(-1)),
                                               type=pa.list_(pa.field("element", pa.float32()), 3))
    return pa.table({
        "id": pa.array(ids, type=pa.string()),
        "smiles": pa.array(smiles, type=pa.string()),
        "elements": pa.ListArray.from_arrays(offsets, elements.cast(pa.string()),
                                             type=pa.list_(pa.field("element", pa.string()))),
        "coordinates": pa.ListArray.from_arrays(offsets, coords, type=pa.list_(pa.field("element", coords.type))),
    })


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", compression_level=3, row_group_size=max(1, table.num_rows))
    return buf.getvalue()


# --------------------------------------------------------------------------- library.parquet from the parts
# A part is a one-row-group Parquet file of the library's schema; the library is the parts' row groups
# back to back.  Its column chunks are the parts' bytes unchanged (pyarrow writes the same bytes for a
# row group alone or among others), so the library is assembled at the byte level: the parts' data,
# then a footer that lists every part's row group with its offsets moved by where the part landed.
# The footer is Thrift's compact protocol (parquet.thrift FileMetaData), read and written field by
# field in the order it came, so every field this code does not change is written as pyarrow wrote it.

_THRIFT_STRUCT, _THRIFT_LIST = 12, 9
# absolute file offsets (a ColumnChunk's deprecated file_offset only when set: pyarrow writes 0)
_MOVED = {"row_group": (5,), "column_chunk": (2, 4, 6), "column_meta": (9, 10, 11, 14)}


def _varint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _put_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _thrift_value(buf, pos: int, kind: int):
    if kind in (1, 2):  # a struct field's bool lives in its type nibble
        return kind == 1, pos
    if kind == 3:
        return struct.unpack_from("b", buf, pos)[0], pos + 1
    if kind in (4, 5, 6):
        v, pos = _varint(buf, pos)
        return (v >> 1) ^ -(v & 1), pos
    if kind == 7:
        return struct.unpack_from("<d", buf, pos)[0], pos + 8
    if kind == 8:
        n, pos = _varint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if kind == _THRIFT_LIST:
        head = buf[pos]
        pos += 1
        n, item = head >> 4, head & 0x0F
        if n == 15:
            n, pos = _varint(buf, pos)
        items = []
        for _ in range(n):
            if item in (1, 2):
                items.append(buf[pos] == 1)
                pos += 1
            else:
                v, pos = _thrift_value(buf, pos, item)
                items.append(v)
        return (item, items), pos
    if kind == _THRIFT_STRUCT:
        fields, last = [], 0
        while True:
            head = buf[pos]
            pos += 1
            if head == 0:
                return fields, pos
            if head >> 4:
                fid = last + (head >> 4)
            else:
                v, pos = _varint(buf, pos)
                fid = (v >> 1) ^ -(v & 1)
            value, pos = _thrift_value(buf, pos, head & 0x0F)
            fields.append([fid, head & 0x0F, value])
            last = fid
    raise ValueError(f"Parquet footer: Thrift compact type {kind} is not one a footer uses")


def _put_thrift(out: bytearray, kind: int, value) -> None:
    if kind == 3:
        out += struct.pack("b", value)
    elif kind in (4, 5, 6):
        _put_varint(out, (value << 1) ^ (value >> 63))
    elif kind == 7:
        out += struct.pack("<d", value)
    elif kind == 8:
        _put_varint(out, len(value))
        out += value
    elif kind == _THRIFT_LIST:
        item, items = value
        if len(items) < 15:
            out.append((len(items) << 4) | item)
        else:
            out.append(0xF0 | item)
            _put_varint(out, len(items))
        for v in items:
            if item in (1, 2):
                out.append(1 if v else 2)
            else:
                _put_thrift(out, item, v)
    elif kind == _THRIFT_STRUCT:
        last = 0
        for fid, k, v in value:
            k = (1 if v else 2) if k in (1, 2) else k
            if 0 < fid - last <= 15:
                out.append(((fid - last) << 4) | k)
            else:
                out.append(k)
                _put_varint(out, (fid << 1) ^ (fid >> 63))
            if k not in (1, 2):
                _put_thrift(out, k, v)
            last = fid
        out.append(0)
    else:
        raise ValueError(f"Parquet footer: Thrift compact type {kind} is not one a footer uses")


def _field(fields: list, fid: int):
    return next((f[2] for f in fields if f[0] == fid), None)


def _moved(fields: list, shift: int, which: str, ordinal: int = 0) -> list:
    """A copy of a footer struct with its absolute offsets (and those of its children) moved by
    ``shift``; a row group's ordinal, when written, becomes ``ordinal``."""
    out = []
    for fid, kind, value in fields:
        if fid in _MOVED[which] and kind == 6 and value:
            value += shift
        elif which == "row_group" and fid == 7:
            value = ordinal
        elif which == "row_group" and fid == 1:  # columns: list<ColumnChunk>
            value = (value[0], [_moved(c, shift, "column_chunk") for c in value[1]])
        elif which == "column_chunk" and fid == 3:  # meta_data: ColumnMetaData
            value = _moved(value, shift, "column_meta")
        out.append([fid, kind, value])
    return out


def parquet_footer(data) -> tuple[int, list]:
    """(where the footer starts, its FileMetaData fields) of a whole Parquet file's bytes."""
    if bytes(data[:4]) != b"PAR1" or bytes(data[-4:]) != b"PAR1":
        raise ValueError("not a Parquet file (no PAR1 magic)")
    size = struct.unpack_from("<I", data, len(data) - 8)[0]
    start = len(data) - 8 - size
    fields, end = _thrift_value(data, start, _THRIFT_STRUCT)
    if end != len(data) - 8:
        raise ValueError("Parquet footer: trailing bytes after FileMetaData")
    return start, fields


def concat_parquet(parts, write) -> None:
    """Write (through ``write(bytes)``) the Parquet file whose row groups are those of ``parts``
    (whole files' bytes of one schema, in order): the file a ``pq.ParquetWriter`` writes when it
    is given each part's table in turn as one row group."""
    at, meta, row_groups, rows = 4, None, [], 0
    write(b"PAR1")
    for data in parts:
        start, fields = parquet_footer(data)
        if meta is None:
            meta = fields
        elif [f for f in fields if f[0] not in (3, 4)] != [f for f in meta if f[0] not in (3, 4)]:
            raise ValueError("concat_parquet: the parts' schemas or writers differ")
        row_groups += [_moved(g, at - 4, "row_group", len(row_groups) + k) for k, g in enumerate(_field(fields, 4)[1])]
        rows += _field(fields, 3)
        write(memoryview(data)[4:start])
        at += start - 4
    if meta is None:
        raise ValueError("concat_parquet: no parts")
    footer = bytearray()
    _put_thrift(footer, _THRIFT_STRUCT, [[fid, kind, rows if fid == 3 else (_THRIFT_STRUCT, row_groups) if fid == 4 else v]
                                         for fid, kind, v in meta])
    write(bytes(footer) + struct.pack("<I", len(footer)) + b"PAR1")


def sdf_bytes(ids: list, z: np.ndarray, charge: np.ndarray, atom_offset: np.ndarray, xyz: np.ndarray,
              bond_offset: np.ndarray, bonds: np.ndarray) -> bytes:
    """Gzip-compressed V2000 SD file of the molecules (heavy atoms; RDKit and Open Babel add implicit H):
    one gzip member, zero timestamp, its deflate stream from ``kernels.sdf.deflate_sdf``."""
    from kernels.sdf import deflate_bound, deflate_sdf, format_sdf, hint_bound

    titles = "".join(ids).encode("ascii")
    title_offset = np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64)
    header = (SDF_PROGRAM_LINE + "\n\n").encode("ascii")
    symbols = np.frombuffer("".join(f"{e:<3}" for e in ELEMENTS).encode("ascii"), dtype=np.uint8).reshape(-1, 3)
    n_atoms, n_bonds = int(atom_offset[-1]), int(bond_offset[-1])
    bound = len(titles) + len(ids) * (len(header) + 60) + n_atoms * 80 + n_bonds * 13 + int((charge != 0).sum()) * 20
    text = np.empty(bound, dtype=np.uint8)
    hint_at = np.empty(hint_bound(len(ids), n_atoms, n_bonds), dtype=np.int64)
    hint_from = np.empty_like(hint_at)
    size, n_hints = format_sdf(np.frombuffer(titles, dtype=np.uint8), title_offset, np.frombuffer(header, dtype=np.uint8),
                               z, charge, atom_offset, np.ascontiguousarray(xyz, dtype=np.float64), bond_offset,
                               np.ascontiguousarray(bonds, dtype=np.int64), symbols, text, hint_at, hint_from)
    stream = np.empty(deflate_bound(size), dtype=np.uint8)
    n_stream = deflate_sdf(text, size, hint_at, hint_from, n_hints, stream)
    # RFC 1952 member: no name, mtime 0, no extra flags, OS unknown (as gzip.compress(..., mtime=0) writes)
    return b"".join((_GZIP_HEADER, stream[:n_stream].tobytes(), struct.pack("<II", zlib.crc32(text[:size]), size & 0xFFFFFFFF)))


def release_readme(sizes: dict, n_shards: int) -> str:
    return f"""# Screening library

{sizes['conformations']:,} molecular conformations, each a drug-like molecule in one 3D pose in a fixed
pocket frame (Å). Each has a hidden score; you may request the score of at most {sizes['budget']:,}
conformations (repeats are free), and submit up to {sizes['max_submissions']} sets of at most
{sizes['submission_size']:,} ids. A submission scores |submission ∩ true top-{sizes['top_k']:,}| / {sizes['top_k']:,} × 100 %;
the best submission counts. The score depends on the 3D pose: rotating or translating a conformation
changes it.

- `library.parquet`: `id`, `smiles`, `elements` (heavy atoms, in the order RDKit parses `smiles`),
  `coordinates` (one [x, y, z] per element, float32, Å).
- `sdf/library_0000.sdf.gz` … (`{n_shards}` shards of up to 5,000): the same conformations as V2000 molfiles
  (heavy atoms; the molfile's title line is the id).
- `MANIFEST.json`: every file with size and SHA-256.
"""
