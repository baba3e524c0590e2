"""The steps of a biobank build, in the manner of bio2zarr's init -> encode
partitions -> finalise, each a function of the build's state (:class:`Build`):

    init          withdraw the manifests, keep or clear the work folder, scatter the
                  world, create the genotype store
    encode_core   partitions of participant blocks: population, haplotypes (into the
                  genotype store), molecule moments
    population    latent disease, deaths, visit 2 (one process: population-wide sums)
    encode_omics  partitions of the molecular tables, then their Parquet row groups
    encode_vcf    the VCF, chunk by chunk, from the genotype store
    clinical      the clinical tables and the data dictionary
    imaging       the images and the baseline phenotype (``graph.imaging``)
    finalise      each molecular table's row groups stitched into its one Parquet file, the
                  sealed bundle, the release
                  manifest last (a release without it is incomplete)

Every value depends only on (seed, stream, block): the partitioning, the worker
count and the order of tasks change no byte.
"""
from __future__ import annotations

import dataclasses
import functools
import posixpath
from typing import Any

import numpy as np
import pandas as pd

from .. import buildrecord, config
from ..bundle import (DATA_DICTIONARY_MD, DATA_DICTIONARY_TSV, GENOTYPE_STORE, GENOTYPES_VCF, MANIFEST, SEALED_REPORTS,
                      TABLE_SUFFIX)
from ..manifest import build_manifest
from ..modalities import cohort as cohort_mod
from ..modalities import measurement, phenotypes
from ..modalities.population import visit2_covariates
from ..model.constants import CHROM_LENGTHS, CONTIGS
from ..model.world import World
from ..outputs import Output, resume_or_reset
from ..writers.parquet import table_bytes
from .executor import windowed_map
from .partitions import block_groups
from .progress import Progress, merge
from .tasks import OMICS_TABLES, ROW_GROUP_BLOCKS, core_task, encode_row_group, omics_task, stitch_parquet

GENOTYPE_STORE_READY = "genotype_store.ok"


@dataclasses.dataclass
class Build:
    """What the steps share: the inputs, then what each step adds."""

    resolved: config.Resolved
    output: Output
    world: World
    executor: Any  # tracked: every submitted task counts in the current stage's progress
    prog: Progress
    resume: bool = False
    world_f: Any = None  # the world as scattered to the workers
    groups: list = dataclasses.field(default_factory=list)
    geno_url: str | None = None
    known_hashes: dict = dataclasses.field(default_factory=dict)
    timings: dict = dataclasses.field(default_factory=dict)
    cohort: Any = None
    deaths: dict | None = None
    v2cov: dict | None = None
    assembled: list = dataclasses.field(default_factory=list)  # the row groups' results (encode_omics)
    traits_z: dict | None = None
    traits_v1: dict | None = None
    baseline: dict | None = None
    feature_tables: dict = dataclasses.field(default_factory=dict)

    @property
    def cfg(self) -> Any:
        return self.resolved.cfg


def variant_table(world: World) -> pd.DataFrame:
    return pd.DataFrame({
        "contig": np.array(CONTIGS, dtype=object)[world.contig],
        "position": world.position,
        "id": world.variant_id,
        "ref": world.ref,
        "alt": world.alt,
    })


def contigs() -> list:
    return [(name, int(length)) for name, length in zip(CONTIGS, CHROM_LENGTHS)]


def prepare_work(output: Output, resolved: config.Resolved) -> bool:
    """Keep ``.build/`` only when it belongs to the same world-determining config
    (then finished partitions are reused); otherwise start from a clean slate."""
    return resume_or_reset(output, buildrecord.resume_doc(resolved), clear=(output.work, output.release))


def init(b: Build) -> None:
    output, world, rel = b.output, b.world, b.cfg.release
    # A rebuild starts by withdrawing the manifests, so nothing half-built looks complete,
    # and the validation reports of the world it replaces (sealed/validation, outside the manifest).
    output.rm(posixpath.join(output.release, MANIFEST))
    output.rm(posixpath.join(output.sealed, MANIFEST))
    output.rm(posixpath.join(output.sealed, SEALED_REPORTS))
    b.resume = prepare_work(output, b.resolved)
    b.world_f = b.executor.scatter(world)
    b.groups = block_groups(world, int(b.cfg.cluster.chunk_blocks))
    if rel.genotype_zarr or rel.vcf:
        from ..writers.release import genozarr

        geno_path = posixpath.join(output.release if rel.genotype_zarr else output.work, GENOTYPE_STORE)
        b.geno_url = output.url(geno_path)
        if not (b.resume and output.exists(posixpath.join(output.work, GENOTYPE_STORE_READY))):
            output.rm(geno_path)
            genozarr.init_store(b.geno_url, variant_table(world), world.subject_ids(), contigs(),
                                variant_chunk=genozarr.VARIANT_CHUNK, sample_chunk=config.BLOCK_SIZE)
            output.write_text(posixpath.join(output.work, GENOTYPE_STORE_READY), "initialised\n")


def encode_core(b: Build) -> list:
    """Per-block records of the core partitions, in block order."""
    futures = [b.executor.submit(core_task, b.world_f, grp, b.geno_url, b.cfg.out, key=f"core-{b.world.id}")
               for grp in b.groups]
    cores = [rec for recs in b.executor.gather(futures) for rec in recs]
    for r in cores:
        merge(b.timings, r.get("timing", {}))
    return cores


def population(b: Build, cores: list) -> None:
    world = b.world
    coh = cohort_mod.assemble(world, cores)
    b.deaths = cohort_mod.simulate_deaths(world, coh)
    visit2, visit2_years = cohort_mod.choose_visit2(world, coh, b.deaths)
    coh = dataclasses.replace(coh, visit2=visit2, visit2_years=visit2_years)
    b.v2cov = visit2_covariates(world, coh.pop)
    v2_path, v2_eps = cohort_mod.visit2_specials(world, coh, b.v2cov["bmi"])
    b.cohort = dataclasses.replace(coh, special_v2_path=v2_path, special_v2_eps=v2_eps)


def _per_block_context(world: World, coh, v2cov: dict) -> dict:
    """Slices of population-stage results that each omics block needs."""
    ctx = {}
    v2_global = np.flatnonzero(coh.visit2)
    for b in range(world.n_blocks):
        lo, hi = world.block_range(b)
        rows = np.flatnonzero(coh.visit2[lo:hi])
        k0, k1 = np.searchsorted(v2_global, [lo, hi])
        ctx[b] = {
            "special": {p: v[lo:hi] for p, v in coh.special.items()},
            "special_tr": {p: v[lo:hi] for p, v in coh.special_tr.items()},
            "special_v2_path": {p: v[k0:k1] for p, v in coh.special_v2_path.items()},
            "special_v2_eps": {p: v[k0:k1] for p, v in coh.special_v2_eps.items()},
            "visit2_rows": rows,
            "visit2_years": coh.visit2_years[lo:hi][rows],
            "visit2_bmi": v2cov["bmi"][lo:hi][rows],
        }
    return ctx


def encode_omics(b: Build) -> None:
    """The molecular partitions, then their Parquet row groups (one task each, of fixed
    size), gathered here; :func:`finalise` stitches each table's file from them.  (Held as
    futures until finalise, a row group whose worker died in between came back cancelled,
    "already forgotten", instead of being recomputed: tests/biobank/test_panel.py.)"""
    world, coh, ex = b.world, b.cohort, b.executor
    shared = {
        "protein_mean": coh.protein_mean, "protein_sd": coh.protein_sd,
        "transcript_mean": coh.transcript_mean, "transcript_sd": coh.transcript_sd,
        "metabolite_mean": coh.metabolite_mean, "metabolite_sd": coh.metabolite_sd,
        "measure": measurement.released,
        "special_moments": coh.extras["special_moments"],
        "t9_moments": (measurement.t9_moments(world, coh.proteins[world.roles.decoys["T9"]], coh.pop["centre"])
                       if world.t9_centre is not None else None),
    }
    ctx = _per_block_context(world, coh, b.v2cov)
    shared_f = ex.scatter(shared)
    futures = [ex.submit(omics_task, b.world_f, grp, shared_f, {k: ctx[k] for k in grp}, b.cfg.out, b.geno_url,
                         key=f"omics-{world.id}") for grp in b.groups]
    for res in ex.gather(futures):
        merge(b.timings, res["timing"])
    # the participants of each block in each table: every one, or the visit-2 attendees
    v2_rows = np.flatnonzero(coh.visit2)
    futures = []
    for t in OMICS_TABLES:
        rows = v2_rows if t == "proteomics_visit2" else np.arange(world.n, dtype=np.int64)
        starts = range(0, world.n_blocks, ROW_GROUP_BLOCKS) if world.n_blocks else [0]
        for part, g in enumerate(starts):
            blocks = list(range(g, min(world.n_blocks, g + ROW_GROUP_BLOCKS)))
            lo, hi = (world.block_range(blocks[0])[0], world.block_range(blocks[-1])[1]) if blocks else (0, 0)
            group = rows[np.searchsorted(rows, lo):np.searchsorted(rows, hi)]
            futures.append(ex.submit(encode_row_group, b.world_f, b.cfg.out, t, part, blocks, group, not len(rows),
                                     key=f"encode-{world.id}-{t}-{part}"))
    b.assembled = ex.gather(futures)


def encode_vcf(b: Build) -> None:
    """The VCF from the genotype store (when the release has one), then the store finalised."""
    if b.cfg.release.vcf:
        from ..genotypes_io import read_haplotype_blocks
        from ..writers.release.vcf import DEFAULT_CHUNK_SIZE, write_vcf

        b.prog.start("vcf")
        write_vcf(b.output.url(posixpath.join(b.output.release, GENOTYPES_VCF)), variant_table(b.world),
                  list(b.world.subject_ids()), contigs(), functools.partial(read_haplotype_blocks, b.geno_url),
                  chunk_size=DEFAULT_CHUNK_SIZE,
                  # chunks in flight: enough for every worker (results wait on the workers, gathered in order)
                  map_fn=functools.partial(windowed_map, b.executor, window=max(8, 2 * int(b.executor.n_workers))))
    if b.geno_url is not None:
        from ..writers.release import genozarr

        genozarr.finalise(b.geno_url)


def clinical(b: Build) -> None:
    from .. import tables
    from ..data_dictionary import render_markdown

    world, output = b.world, b.output
    visit_date = np.datetime64("2006-03-13") + b.cohort.pop["assessment_day"].astype("timedelta64[D]")
    for name, df in tables.clinical_tables(world, b.cohort, b.deaths, b.v2cov, visit_date).items():
        output.write_bytes(posixpath.join(output.release, name + TABLE_SUFFIX), table_bytes(df))
    output.write_text(posixpath.join(output.release, DATA_DICTIONARY_TSV), tables.data_dictionary_tsv())
    output.write_text(posixpath.join(output.release, DATA_DICTIONARY_MD), render_markdown(world))


def imaging(b: Build) -> None:
    world, coh = b.world, b.cohort
    b.traits_z = phenotypes.trait_z(world, coh, coh.latent, 1)
    b.traits_v1 = phenotypes.traits_clinical(world, b.traits_z, "traits")
    if b.cfg.release.imaging == "none":
        return
    from .imaging import run_imaging

    b.prog.start("imaging")
    b.baseline, img_hashes, img_timing, b.feature_tables = run_imaging(
        b.executor, b.world_f, world, coh, b.traits_v1, b.v2cov, b.output, b.cfg, b.resume)
    b.known_hashes.update(img_hashes)
    merge(b.timings, img_timing)


def finalise(b: Build) -> dict:
    """The assembled tables gathered, the sealed bundle written, the work folder removed
    and the release manifest written last; returns the release manifest."""
    from ..writers.sealed import write_sealed

    b.prog.start("assemble")
    parts: dict = {}
    for res in b.assembled:  # the row groups (encode_omics)
        merge(b.timings, res["timing"])
        parts.setdefault(res["table"], []).append((res["part"], res["path"]))
    stitched = [b.executor.submit(stitch_parquet, b.cfg.out, b.world.id, t, [p for _, p in sorted(parts[t])],
                                  posixpath.join(b.output.release, t + TABLE_SUFFIX), key=f"stitch-{b.world.id}-{t}")
                for t in OMICS_TABLES if t in parts]
    for res in b.executor.gather(stitched):
        merge(b.timings, res["timing"])
        # hashed as written: the manifest need not read the table again
        b.known_hashes[posixpath.relpath(res["path"], b.output.release)] = (res["size"], res["sha256"])
    b.prog.start("sealed")
    plain = config.to_plain(b.cfg)
    write_sealed(b.output, b.world, b.cohort, plain, dict(plain.get("oracle", {})), b.baseline, b.traits_z,
                 b.traits_v1, imaging_features=b.feature_tables.get(1))
    b.prog.start("manifest")
    b.output.rm(b.output.work)
    from ..outputs import pixel_sink

    absent = [r for r in b.known_hashes if r.endswith(".npz")] if pixel_sink() else None
    manifest = build_manifest(b.output, b.output.release, known=b.known_hashes,
                              extra={"bundle": "release", "scale": str(b.cfg.scale.name)}, absent=absent)
    b.output.write_json(posixpath.join(b.output.release, MANIFEST), manifest)
    return manifest
