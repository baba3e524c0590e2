"""Release and sealed file formats of a screening world.

Release (what an agent reads)::

    library.parquet     id, smiles, elements (list<string>), coordinates (list<[x, y, z] float32>, Å, pocket frame)
                        one row per conformation; the atoms of ``elements``/``coordinates`` are in the order
                        RDKit parses ``smiles`` (heavy atoms only); one row group per 5,000-row shard
    sdf/library_NNNN.sdf.gz   the same conformations as V2000 molfiles (heavy atoms, Kekulé bonds,
                        M  CHG lines), 5,000 per shard, gzip with a zero timestamp
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

import gzip
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ELEMENTS = ("", "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S", "Cl", "Ar",
            "K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br")
RELEASE_COLUMNS = ("id", "smiles", "elements", "coordinates")
COORD_DECIMALS = 4  # Å; the SDF's precision, applied to every released and scored coordinate
SDF_PROGRAM_LINE = "  DTWSCRN 01012600003D"  # fixed: the molfile header carries no build time


def conformation_ids(lo: int, hi: int, n: int) -> list[str]:
    width = max(6, len(str(n - 1)))
    return [f"C{i:0{width}d}" for i in range(lo, hi)]


def release_table(ids: list, smiles: list, z: np.ndarray, atom_offset: np.ndarray, xyz: np.ndarray) -> pa.Table:
    symbols = pa.array(ELEMENTS, type=pa.string())
    elements = pa.DictionaryArray.from_arrays(pa.array(z.astype(np.int32)), symbols)
    offsets = pa.array(atom_offset.astype(np.int32))
    coords = pa.FixedSizeListArray.from_arrays(pa.array(xyz.astype(np.float32).reshape(-1)), 3)
    return pa.table({
        "id": pa.array(ids, type=pa.string()),
        "smiles": pa.array(smiles, type=pa.string()),
        "elements": pa.ListArray.from_arrays(offsets, elements.cast(pa.string())),
        "coordinates": pa.ListArray.from_arrays(offsets, coords),
    })


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", compression_level=3, row_group_size=max(1, table.num_rows))
    return buf.getvalue()


def sdf_bytes(ids: list, z: np.ndarray, charge: np.ndarray, atom_offset: np.ndarray, xyz: np.ndarray,
              bond_offset: np.ndarray, bonds: np.ndarray, level: int = 4) -> bytes:
    """Gzip-compressed V2000 SD file of the molecules (heavy atoms; RDKit and Open Babel add implicit H)."""
    from kernels.sdf import format_sdf

    titles = "".join(ids).encode("ascii")
    title_offset = np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64)
    header = (SDF_PROGRAM_LINE + "\n\n").encode("ascii")
    symbols = np.frombuffer("".join(f"{e:<3}" for e in ELEMENTS).encode("ascii"), dtype=np.uint8).reshape(-1, 3)
    n_atoms, n_bonds = int(atom_offset[-1]), int(bond_offset[-1])
    bound = len(titles) + len(ids) * (len(header) + 60) + n_atoms * 80 + n_bonds * 13 + int((charge != 0).sum()) * 20
    out = np.empty(bound, dtype=np.uint8)
    size = format_sdf(np.frombuffer(titles, dtype=np.uint8), title_offset, np.frombuffer(header, dtype=np.uint8),
                      z, charge, atom_offset, np.ascontiguousarray(xyz, dtype=np.float64), bond_offset,
                      np.ascontiguousarray(bonds, dtype=np.int64), symbols, out)
    return gzip.compress(out[:size].tobytes(), compresslevel=level, mtime=0)


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
