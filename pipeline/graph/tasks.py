"""Task functions of the build graph.  Each is a top-level (picklable) pure
function of the world, a list of fixed participant blocks and small context,
so it can run on any worker in any order and give the same bytes.

Tasks (in data-flow order):
  core      population + genotypes (written to the genotype store) + molecule moments
  omics     standardised proteomics / transcriptomics / metabolomics partitions
  assemble  partitions -> one Parquet file per table (one row group per 10 blocks)
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
        mol = molecules.BlockMolecules(world, b, pop, dosage)
        prot = mol.proteins_raw()
        tr = mol.transcripts_raw()
        poly = molecules.dot(molecules.standardised_genotypes(world, dosage, world.polygenic_variants), world.polygenic_effects[:, None])[:, 0]
        rec = dict(
            block=b, pop=pop,
            tracked_raw=prot[:, tracked],
            g_cis_tracked=mol.genotypes(world.protein_cis[tracked]),
            g_direct=molecules.standardised_genotypes(world, dosage, np.array([world.direct_variant]))[:, 0],
            g_poly=poly,
            m_prot=molecules.moments(prot),
            m_tr=molecules.moments(tr),
            m_met=molecules.moments(mol.metabolites_raw()),
            # what the bias equations replace the ordinary value with needs the
            # residual draws, and their transcripts the transcript's own part
            special_resid=mol.protein_resid[:, special],
            special_tr_own=tr[:, special] - world.transcript_concordance[special] * mol.protein_bio[:, special],
            t4_abundance=mol.t4_abundance_raw() if world.t4_coregulated else None,
        )
        timer.lap("molecules")
        parts.save(b, pickle.dumps(rec, protocol=5))
        timer.lap("work_partitions")
        rec["timing"] = timer.stats
        out.append(rec)
    return out


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def omics_task(world: World, block_ids: list, shared: dict, per_block: dict, out_url: str, geno_url: str | None = None) -> dict:
    """Standardised molecular tables for each block, saved as work partitions.

    ``shared`` holds the population moments; ``per_block[b]`` the block's special
    protein values, visit-2 rows and measurement-process details computed by the
    population stage.
    """
    output = Output(out_url, world.id)
    parts = {t: Partitions(output, t) for t in OMICS_TABLES}
    hashes = {}
    timer = StageTimer()
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
        mol = molecules.BlockMolecules(world, b, pop, dosage)
        prot = (mol.proteins_raw() - shared["protein_mean"]) / shared["protein_sd"]
        for p, vals in ctx["special"].items():
            prot[:, p] = vals
        tr = (mol.transcripts_raw() - shared["transcript_mean"]) / shared["transcript_sd"]
        for p, vals in ctx["special_tr"].items():
            tr[:, p] = vals
        met = (mol.metabolites_raw() - shared["metabolite_mean"]) / shared["metabolite_sd"]
        rows = ctx["visit2_rows"]
        prot2_raw, r2 = mol.proteins_visit2_raw(rows, ctx["visit2_years"], ctx["visit2_bmi"])
        prot2 = (prot2_raw - shared["protein_mean"]) / shared["protein_sd"]
        role_of = {p: role for role, p in world.special_proteins().items()}
        for p, path in ctx["special_v2_path"].items():
            g = mol.genotypes(world.protein_cis[[p]])[rows, 0]
            raw2 = special_raw(world, role_of[p], p, prot2_raw[:, p], r2[:, p], ctx["special_v2_eps"][p], g, path)[0]
            mean, sd = shared["special_moments"][p]
            prot2[:, p] = (raw2 - mean) / sd
        timer.lap("molecules")
        measure = shared["measure"]
        prot = measure(world, b, prot, pop, "proteomics", t9=shared.get("t9_moments"))
        prot2 = measure(world, b, prot2, {k: v[rows] for k, v in pop.items()}, "proteomics_visit2", rows=rows,
                        t9=shared.get("t9_moments"))
        tr = measure(world, b, tr, pop, "transcriptomics")
        met = measure(world, b, met, pop, "metabolomics")
        for name, arr in (("proteomics", prot), ("transcriptomics", tr), ("metabolomics", met), ("proteomics_visit2", prot2)):
            hashes[(name, b)] = parts[name].save(b, _npy_bytes(arr.astype(np.float32)))
        timer.lap("molecules_write")
    return {"hashes": hashes, "timing": timer.stats}


def assemble_parquet(out_url: str, world_id: str, table: str, n_blocks: int, columns: list,
                     row_ids: list, dest: str, row_group_blocks: int = 10) -> dict:
    """Concatenate a table's block partitions into one Parquet file, one row group
    per ``row_group_blocks`` blocks, and remove the partitions."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..writers.parquet import writer_options

    output = Output(out_url, world_id)
    timer = StageTimer()
    tmp = dest + ".wip"
    output.makedirs(posixpath.dirname(dest))
    writer = None
    offset = 0
    h = hashlib.sha256()
    with output.fs.open(tmp, "wb") as raw:
        fh = _HashingWriter(raw, h)  # the file's SHA-256 as it is written (the manifest's), not read back
        for g in range(0, n_blocks, row_group_blocks):
            arrays = []
            parts = Partitions(output, table)
            for b in range(g, min(n_blocks, g + row_group_blocks)):
                data = parts.load(b)
                if data is None:
                    raise RuntimeError(f"{table}: partition {b} is missing or corrupt; rerun the build to recompute it")
                arrays.append(np.load(io.BytesIO(data)))
            block = np.concatenate(arrays) if arrays else np.empty((0, len(columns)), np.float32)
            ids = row_ids[offset: offset + len(block)]
            offset += len(block)
            df = pd.DataFrame(block, columns=columns, index=pd.Index(ids, name="subject_id", dtype=object))
            tbl = pa.Table.from_pandas(df, preserve_index=True)
            if writer is None:
                writer = pq.ParquetWriter(fh, tbl.schema, **writer_options(tbl.schema))
            writer.write_table(tbl, row_group_size=len(tbl) or 1)
        if writer is None:
            df = pd.DataFrame(np.empty((0, len(columns)), np.float32), columns=columns,
                              index=pd.Index([], name="subject_id", dtype=object))
            tbl = pa.Table.from_pandas(df, preserve_index=True)
            writer = pq.ParquetWriter(fh, tbl.schema, **writer_options(tbl.schema))
            writer.write_table(tbl)
        writer.close()
    output.fs.mv(tmp, dest)
    timer.lap("parquet_assemble")
    return {"table": table, "sha256": h.hexdigest(), "size": fh.size, "path": dest, "timing": timer.stats}


class _HashingWriter:
    """A binary file for pyarrow's ParquetWriter that hashes what it writes (sequential writes only)."""

    def __init__(self, raw, h):
        self._raw, self._h, self.size = raw, h, 0
        self.closed = False

    def write(self, data) -> int:
        self._h.update(data)
        n = memoryview(data).nbytes
        self.size += n
        self._raw.write(data)
        return n

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        self.closed = True  # the raw file is closed by its own context

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False
