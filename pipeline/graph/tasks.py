"""Task functions of the build graph.  Each is a top-level (picklable) pure
function of the world, a list of fixed participant blocks and small context,
so it can run on any worker in any order and give the same bytes.

Tasks (in data-flow order):
  core      population + genotypes (written to the genotype store) + molecule moments
  omics     standardised proteomics / transcriptomics / metabolomics partitions
  encode    a molecular table's row group (10 blocks) -> a Parquet part
  stitch    a table's parts -> its one Parquet file (pipeline.writers.parquet_stitch)
"""
from __future__ import annotations

import hashlib
import io
import posixpath
from typing import TYPE_CHECKING

import numpy as np

from ..modalities import molecules
from ..modalities.cohort import special_raw
from ..modalities.population import population_block
from ..outputs import Output
from .partitions import Partitions
from .progress import StageTimer

if TYPE_CHECKING:  # annotations only: no import at run time
    from ..model.world import World

OMICS_TABLES = ("proteomics", "transcriptomics", "metabolomics", "proteomics_visit2")
#: Participant blocks per row group of a molecular table (the file layout; never the chunking).
ROW_GROUP_BLOCKS = 10
COPY_CHUNK = 8 << 20


def core_task(world: World, block_ids: list, geno_url: str | None, out_url: str) -> list:
    """Population, haplotypes (written to the genotype store) and the per-block
    records the population stage needs; finished blocks of an interrupted build
    are reused from their work partitions."""
    import pickle

    out = []
    parts = Partitions(Output(out_url, world.id), "core")
    tracked = world.tracked_proteins()
    special = np.array(sorted(world.special_proteins().values()), dtype=np.int64)
    for b in block_ids:
        cached = parts.load(b)
        if cached is not None:
            rec = pickle.loads(cached)
            rec["timing"] = {"reused_partitions": (1.0, 0.0)}
            out.append(rec)
            continue
        timer = StageTimer()
        pop = population_block(world, b)
        timer.lap("population")
        hap = molecules.haplotypes(world, b)  # [n, 2, v]
        timer.lap("genotypes")
        if geno_url is not None:
            from kernels.genotypes import to_variant_major

            from ..writers.release import genozarr

            lo, _ = world.block_range(b)
            genozarr.write_sample_block(geno_url, lo, to_variant_major(hap))
            timer.lap("genotype_zarr")
        dosage = hap[:, 0, :] + hap[:, 1, :]
        del hap
        mol = molecules.BlockMolecules(world, b, pop, dosage)
        prot = mol.proteins_raw()
        poly = molecules.dot(molecules.standardised_genotypes(world, dosage, world.polygenic_variants), world.polygenic_effects[:, None])[:, 0]
        rec = dict(
            block=b, pop=pop,
            tracked_raw=prot[:, tracked],
            g_cis_tracked=mol.genotypes(world.protein_cis[tracked]),
            g_direct=molecules.standardised_genotypes(world, dosage, np.array([world.direct_variant]))[:, 0],
            g_poly=poly,
            m_prot=molecules.moments(prot),
        )
        del prot
        tr = mol.transcripts_raw()  # one table's values at a time
        rec.update(
            m_tr=molecules.moments(tr),
            # what the bias equations replace the ordinary value with needs the
            # residual draws, and their transcripts the transcript's own part
            special_resid=mol.protein_resid[:, special],
            special_tr_own=tr[:, special] - world.transcript_concordance[special] * mol.protein_bio[:, special],
            t4_abundance=mol.t4_abundance_raw() if world.t4_coregulated else None,
        )
        del tr
        rec["m_met"] = molecules.moments(mol.metabolites_raw())
        del mol, dosage
        timer.lap("molecules")
        parts.save(b, pickle.dumps(rec, protocol=5))
        timer.lap("work_partitions")
        rec["timing"] = timer.stats
        out.append(rec)
    return out


def _npy_bytes(arr: np.ndarray) -> bytes:
    """``np.save``'s bytes of a C-contiguous array (its header, then its memory: one copy)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, np.lib.format.header_data_from_array_1_0(arr))
    if not arr.flags.c_contiguous or buf.tell() % 64:  # what np.save would write otherwise
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        return buf.getvalue()
    return b"".join((buf.getvalue(), arr.data))


def _standardised(raw: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """(raw - mean) / sd, written over ``raw`` (the block's raw values are not needed after)."""
    from kernels.omics import standardise

    standardise(raw, molecules.kernel_array(mean), molecules.kernel_array(sd), raw)
    return raw


def omics_task(world: World, block_ids: list, shared: dict, per_block: dict, out_url: str, geno_url: str | None = None) -> dict:
    """Standardised molecular tables for each block, saved as work partitions (float32
    [columns, rows]: ``shared["measure"]``, ``modalities.measurement.released``).

    ``shared`` holds the population moments; ``per_block[b]`` the block's special
    protein values, visit-2 rows and measurement-process details computed by the
    population stage.  One table's values at a time: each is released and saved
    before the next is made.
    """
    output = Output(out_url, world.id)
    parts = {t: Partitions(output, column_stage(t)) for t in OMICS_TABLES}
    hashes = {}
    timer = StageTimer()
    measure = shared["measure"]
    role_of = {p: role for role, p in world.special_proteins().items()}

    def save(name, b, columns):
        hashes[(name, b)] = parts[name].save(b, _npy_bytes(columns))

    for b in block_ids:
        if all(parts[t].load(b) is not None for t in OMICS_TABLES):
            timer.count("reused_partitions")
            continue
        ctx = per_block[b]
        pop = population_block(world, b)
        if geno_url is not None:
            # the core stage wrote these calls already: reading them back is ~10x
            # cheaper than simulating the chains again
            from ..genotypes_io import read_sample_dosage

            lo, hi = world.block_range(b)
            dosage = read_sample_dosage(geno_url, lo, hi)
        else:
            hap = molecules.haplotypes(world, b)
            dosage = hap[:, 0, :] + hap[:, 1, :]
            del hap
        mol = molecules.BlockMolecules(world, b, pop, dosage)
        del dosage  # held by the block's molecules from here
        rows = ctx["visit2_rows"]
        prot2_raw, r2 = mol.proteins_visit2_raw(rows, ctx["visit2_years"], ctx["visit2_bmi"])
        prot2 = (prot2_raw - shared["protein_mean"]) / shared["protein_sd"]
        for p, path in ctx["special_v2_path"].items():
            g = mol.genotypes(world.protein_cis[[p]])[rows, 0]
            raw2 = special_raw(world, role_of[p], p, prot2_raw[:, p], r2[:, p], ctx["special_v2_eps"][p], g, path)[0]
            mean, sd = shared["special_moments"][p]
            prot2[:, p] = (raw2 - mean) / sd
        del prot2_raw, r2
        prot = _standardised(mol.proteins_raw(), shared["protein_mean"], shared["protein_sd"])
        for p, vals in ctx["special"].items():
            prot[:, p] = vals
        timer.lap("molecules")
        save("proteomics", b, measure(world, b, prot, pop, "proteomics", t9=shared.get("t9_moments")))
        save("proteomics_visit2", b, measure(world, b, prot2, {k: v[rows] for k, v in pop.items()}, "proteomics_visit2",
                                             rows=rows, t9=shared.get("t9_moments")))
        del prot, prot2
        timer.lap("molecules_write")
        tr = _standardised(mol.transcripts_raw(), shared["transcript_mean"], shared["transcript_sd"])
        for p, vals in ctx["special_tr"].items():
            tr[:, p] = vals
        met = _standardised(mol.metabolites_raw(), shared["metabolite_mean"], shared["metabolite_sd"])
        del mol
        timer.lap("molecules")
        save("transcriptomics", b, measure(world, b, tr, pop, "transcriptomics"))
        save("metabolomics", b, measure(world, b, met, pop, "metabolomics"))
        del tr, met
        timer.lap("molecules_write")
    return {"hashes": hashes, "timing": timer.stats}


def column_stage(table: str) -> str:
    """Work stage of a molecular table's block partitions: float32 [columns, rows] (column-major)."""
    return f"columns/{table}"


def parquet_part_path(output: Output, table: str, part: int) -> str:
    return posixpath.join(output.work, "parquet", table, f"g{part:05d}.parquet")


def table_columns(world: World, table: str) -> list:
    """A molecular table's column names."""
    return world.metabolite_ids if table == "metabolomics" else (
        world.transcript_ids if table == "transcriptomics" else world.protein_ids)


def encode_row_group(world: World, out_url: str, table: str, part: int, blocks: list, rows: np.ndarray,
                     empty_table: bool = False) -> dict:
    """Row group ``part`` of a molecular table (its ``blocks``' partitions, ``rows`` the
    participants they hold, in order) encoded as a Parquet file of its own in the work
    folder, with the layout of its footer beside it (``writers.parquet_stitch``);
    ``stitch_parquet`` makes the table's file.  Holds one row group's float32 values (their
    Arrow columns are views of them)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..writers.parquet import wide_table, writer_options
    from ..writers.parquet_stitch import footer_span, part_layout

    output = Output(out_url, world.id)
    timer = StageTimer()
    parts = Partitions(output, column_stage(table))
    columns = table_columns(world, table)
    width = world.subject_width
    row_ids = [f"SUBJ_{int(i):0{width}d}" for i in rows]  # world.subject_ids()[rows]
    values = np.empty((len(columns), len(row_ids)), np.float32)
    col = 0
    for b in blocks:
        data = parts.load(b)
        if data is None:
            raise RuntimeError(f"{table}: partition {b} is missing or corrupt; rerun the build to recompute it")
        block = np.load(io.BytesIO(data))
        values[:, col:col + block.shape[1]] = block
        col += block.shape[1]
        del data, block
    if col != len(row_ids):
        raise RuntimeError(f"{table}: row group {part} has {col} rows in its partitions, {len(row_ids)} expected")
    tbl = wide_table(values, columns, row_ids, empty_table=empty_table)
    path = parquet_part_path(output, table, part)
    output.makedirs(posixpath.dirname(path))
    # a local file through Arrow's own file (a Python file object costs ~20 % more CPU)
    sink = pa.OSFile(path + ".wip", "wb") if output.protocol in ("file", "local") else output.fs.open(path + ".wip", "wb")
    with sink as fh:
        writer = pq.ParquetWriter(fh, tbl.schema, **writer_options(tbl.schema))
        if blocks:
            writer.write_table(tbl, row_group_size=len(tbl) or 1)
        else:  # a table of no block at all: what the single writer wrote for it
            writer.write_table(tbl)
        writer.close()
    del tbl, values
    output.fs.mv(path + ".wip", path)
    size = output.fs.size(path)
    with output.fs.open(path, "rb") as fh:
        fh.seek(size - 8)
        lo, hi = footer_span(fh.read(8), size)
        fh.seek(lo)
        footer = fh.read(hi - lo)
    output.write_text(path + ".layout.json", json.dumps(part_layout(footer)))
    timer.lap("parquet_assemble")
    return {"table": table, "part": part, "path": path, "timing": timer.stats}


def stitch_parquet(out_url: str, world_id: str, table: str, part_paths: list, dest: str) -> dict:
    """The table's Parquet file from its encoded row groups (``encode_row_group``), in order:
    their bytes copied and the footer stitched, hashed as written (the manifest's SHA-256,
    not read back); the parts are removed."""
    import json

    from ..writers.parquet_stitch import MAGIC, footer_span, stitch_footer, trailer

    output = Output(out_url, world_id)
    fs = output.fs
    timer = StageTimer()
    footers, layouts, bodies = [], [], []
    for path in part_paths:
        size = fs.size(path)
        with fs.open(path, "rb") as fh:
            fh.seek(size - 8)
            lo, hi = footer_span(fh.read(8), size)
            fh.seek(lo)
            footers.append(fh.read(hi - lo))
        layouts.append(json.loads(output.read_bytes(path + ".layout.json")))
        bodies.append((len(MAGIC), lo))
    tail = trailer(stitch_footer(footers, [hi - lo for lo, hi in bodies], layouts))
    h = hashlib.sha256(MAGIC)
    total = len(MAGIC)
    output.makedirs(posixpath.dirname(dest))
    with fs.open(dest + ".wip", "wb") as out:
        out.write(MAGIC)
        for path, (lo, hi) in zip(part_paths, bodies):
            with fs.open(path, "rb") as fh:
                fh.seek(lo)
                left = hi - lo
                while left:
                    chunk = fh.read(min(left, COPY_CHUNK))
                    if not chunk:
                        raise RuntimeError(f"{path}: shorter than its footer says")
                    h.update(chunk)
                    out.write(chunk)
                    left -= len(chunk)
                    total += len(chunk)
        h.update(tail)
        out.write(tail)
        total += len(tail)
    fs.mv(dest + ".wip", dest)
    for path in part_paths:
        output.rm(path)
        output.rm(path + ".layout.json")
    timer.lap("parquet_assemble")
    return {"table": table, "sha256": h.hexdigest(), "size": total, "path": dest, "timing": timer.stats}
