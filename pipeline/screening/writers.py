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
# back to back, stitched at the byte level by pipeline.writers.parquet_stitch (the parts' column
# chunks unchanged, a footer listing every row group with its offsets moved): the file a
# pq.ParquetWriter writes when it is given each part's table in turn as one row group.


def concat_parquet(parts, write) -> None:
    """Write (through ``write(bytes)``) the Parquet file whose row groups are those of ``parts``
    (an iterable of whole files' bytes of one schema, in order), holding one part at a time
    (and every part's footer, to write the file's own at the end)."""
    from ..writers.parquet_stitch import MAGIC, StitchError, TRAILER_BYTES, footer_span, stitch_footer, trailer

    footers, bodies = [], []
    write(MAGIC)
    for data in parts:
        if bytes(data[:4]) != MAGIC:
            raise StitchError("not a Parquet file (no PAR1 at its start)")
        lo, hi = footer_span(bytes(data[-TRAILER_BYTES:]), len(data))
        footers.append(bytes(data[lo:hi]))
        bodies.append(lo - 4)
        write(memoryview(data)[4:lo])
    write(trailer(stitch_footer(footers, bodies)))


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
