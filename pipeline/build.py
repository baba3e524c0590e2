"""Build one world: ``python -m pipeline.build world=<id> [scale=...] [out=...] [cluster=...]``.

config (validated, frozen) -> world parameters (the hidden SCM, sampled once)
-> participant blocks (core: population, genotypes, molecule moments)
-> population stage (latent disease, selection, outcomes, clinical tables)
-> block outputs (omics partitions, VCF chunks, images) -> release and sealed
writers -> manifests (release last).
"""
from __future__ import annotations

import functools
import posixpath
import sys
import time
from collections import deque

import numpy as np
import pandas as pd

from . import blocks, config
from .executor import log, make_executor
from .timing import merge
from .manifest import MANIFEST, build_manifest
from .modalities import clinical, cohort as cohort_mod, measurement, phenotypes
from .outputs import Output
from .stages import OMICS_TABLES, assemble_parquet, block_groups, core_task, omics_task
from .world import CONTIGS, CHROM_LENGTHS, sample_world
from .writers.release.parquet import table_bytes

GENOTYPE_VARIANT_CHUNK = 256  # variants per genotype-store chunk (part of the format; = VCF_CHUNK so each VCF chunk decodes one store chunk)
VCF_CHUNK = 256  # records per independently compressed VCF chunk (part of the format)


class Progress:
    """Per-stage progress and wall time on stderr; the timings feed scripts/bench.py."""

    def __init__(self, world_id: str, enabled: bool = True):
        self.world_id = world_id
        self.enabled = enabled
        self.stages: dict = {}
        self._t = None
        self._name = None

    def start(self, name: str) -> None:
        self.stop()
        self._name, self._t = name, time.perf_counter()
        if self.enabled:
            log(f"[{self.world_id}] {name} ...")

    def stop(self) -> None:
        if self._name is not None:
            dt = time.perf_counter() - self._t
            self.stages[self._name] = self.stages.get(self._name, 0.0) + dt
            if self.enabled:
                log(f"[{self.world_id}] {self._name} done in {dt:.1f}s")
        self._name = None


def windowed_map(executor, fn, tasks, window: int = 8):
    """Yield ``fn(task)`` in task order with at most ``window`` tasks in flight, so
    results stream to the writer in bounded memory."""
    pending = deque()
    it = iter(tasks)
    for task in it:
        pending.append(executor.submit(fn, task))
        if len(pending) >= window:
            break
    for task in it:
        yield executor.gather([pending.popleft()])[0]
        pending.append(executor.submit(fn, task))
    while pending:
        yield executor.gather([pending.popleft()])[0]


def variant_table(world) -> pd.DataFrame:
    return pd.DataFrame({
        "contig": np.array(CONTIGS, dtype=object)[world.contig],
        "position": world.position,
        "id": world.variant_id,
        "ref": world.ref,
        "alt": world.alt,
    })


def contigs() -> list:
    return [(name, int(length)) for name, length in zip(CONTIGS, CHROM_LENGTHS)]


def _visit2_covariates(world, coh) -> dict:
    e = blocks.normal(world, "visit2_covariates", (3,))
    pop = coh.pop
    return {
        "bmi": np.clip(pop["bmi"] + 0.4 + 1.2 * e[:, 0], 15.0, 55.0),
        "smoking": (pop["smoking"] == 1) & (blocks.uniform(world, "visit2_quit") > 0.3),
        "exercise": np.clip(pop["exercise"] * np.exp(0.35 * e[:, 1]), 0.0, 20.0),
    }


def _per_block_context(world, coh, v2cov) -> dict:
    """Slices of population-stage results that each omics block needs."""
    ctx = {}
    v2_global = np.flatnonzero(coh.visit2)
    for b in range(world.n_blocks):
        lo, hi = world.block_range(b)
        rows = np.flatnonzero(coh.visit2[lo:hi])
        k0, k1 = np.searchsorted(v2_global, [lo, hi])
        ctx[b] = {
            "special": {p: v[lo:hi] for p, v in coh.special.items()},
            "special_v2": {p: v[k0:k1] for p, v in coh.special_v2.items()},
            "visit2_rows": rows,
            "visit2_years": coh.visit2_years[lo:hi][rows],
            "visit2_bmi": v2cov["bmi"][lo:hi][rows],
        }
    return ctx


def build(resolved: config.Resolved, executor=None, progress: bool = True) -> dict:
    if getattr(resolved, "kind", None) == "screening":  # [world-kind seam: screening]
        from .screening.build import build as build_screening

        return build_screening(resolved, executor=executor, progress=progress)
    cfg = resolved.cfg
    t_start = time.perf_counter()
    prog = Progress(cfg.world.id, progress)
    prog.start("sample")
    world = sample_world(resolved)
    output = Output(cfg.out, world.id)
    own_executor = executor is None
    if own_executor:
        if cfg.cluster.kind == "address" and not output.shared_between_processes:
            raise config.ConfigError(f"out: {cfg.out!r} lives inside this process; valid with cluster=address: a shared filesystem URL")
        executor = make_executor(cfg.cluster, processes=output.shared_between_processes)
    try:
        # A rebuild starts by withdrawing the manifests, so nothing half-built looks complete.
        output.rm(posixpath.join(output.release, MANIFEST))
        output.rm(posixpath.join(output.sealed, MANIFEST))
        resume = _prepare_work(output, resolved)
        if resume and progress:
            log(f"[{world.id}] resuming an interrupted build: finished partitions are reused when their hashes match")
        w = executor.scatter(world)
        groups = block_groups(world, int(cfg.cluster.chunk_blocks))
        rel = cfg.release
        known_hashes: dict = {}

        # ---- core: population, genotypes, molecule moments -----------------------
        prog.start("population+genotypes")
        geno_path = posixpath.join(output.release if rel.genotype_zarr else output.work, "genotypes.zarr")
        geno_url = None
        if rel.genotype_zarr or rel.vcf:
            from .writers.release import genozarr

            geno_url = output.url(geno_path)
            if not (resume and output.exists(posixpath.join(output.work, "genotype_store.ok"))):
                output.rm(geno_path)
                genozarr.init_store(geno_url, variant_table(world), world.subject_ids(), contigs(),
                                    variant_chunk=GENOTYPE_VARIANT_CHUNK, sample_chunk=config.BLOCK_SIZE)
                output.write_text(posixpath.join(output.work, "genotype_store.ok"), "initialised\n")
        futures = [executor.submit(core_task, w, grp, geno_url, cfg.out, key=f"core-{world.id}") for grp in groups]
        cores = [rec for recs in executor.gather(futures) for rec in recs]
        timings = _sum_timings(cores)

        # ---- population stage ------------------------------------------------------
        prog.start("disease")
        coh = cohort_mod.assemble(world, cores)
        del cores
        deaths = cohort_mod.simulate_deaths(world, coh)
        cohort_mod.choose_visit2(world, coh, deaths)
        v2cov = _visit2_covariates(world, coh)
        cohort_mod.visit2_specials(world, coh, v2cov["bmi"])

        # ---- omics partitions and Parquet assembly ---------------------------------
        prog.start("molecules")
        shared = {
            "protein_mean": coh.protein_mean, "protein_sd": coh.protein_sd,
            "transcript_mean": coh.transcript_mean, "transcript_sd": coh.transcript_sd,
            "metabolite_mean": coh.metabolite_mean, "metabolite_sd": coh.metabolite_sd,
            "measure": measurement.apply,
            "t9_moments": (measurement.t9_moments(world, coh.proteins[world.roles.decoys["T9"]], coh.pop["centre"])
                           if world.t9_centre is not None else None),
        }
        ctx = _per_block_context(world, coh, v2cov)
        shared_f = executor.scatter(shared)
        futures = [executor.submit(omics_task, w, grp, shared_f, {b: ctx[b] for b in grp}, cfg.out, geno_url,
                                   key=f"omics-{world.id}") for grp in groups]
        omics_results = executor.gather(futures)
        for res in omics_results:
            merge(timings, res["timing"])
        ids = world.subject_ids()
        column_sets = {
            "proteomics": world.protein_ids, "proteomics_visit2": world.protein_ids,
            "transcriptomics": world.transcript_ids, "metabolomics": world.metabolite_ids,
        }
        row_ids = {"proteomics": ids, "transcriptomics": ids, "metabolomics": ids,
                   "proteomics_visit2": ids[coh.visit2]}
        assemble_futures = [
            executor.submit(assemble_parquet, cfg.out, world.id, t, world.n_blocks, column_sets[t], list(row_ids[t]),
                            posixpath.join(output.release, f"{t}.parquet"), key=f"assemble-{world.id}-{t}")
            for t in OMICS_TABLES
        ]

        # ---- VCF from the genotype store ---------------------------------------------
        if rel.vcf:
            prog.start("vcf")
            from .genotypes_io import read_haplotype_blocks
            from .writers.release.vcf import write_vcf

            write_vcf(output.url(posixpath.join(output.release, "genotypes.vcf.gz")), variant_table(world),
                      list(ids), contigs(), functools.partial(read_haplotype_blocks, geno_url), chunk_size=VCF_CHUNK,
                      map_fn=functools.partial(windowed_map, executor))
        if geno_url is not None:
            from .writers.release import genozarr

            genozarr.finalise(geno_url)

        # ---- clinical tables ---------------------------------------------------------
        prog.start("clinical")
        visit_date = np.datetime64("2006-03-13") + coh.pop["assessment_day"].astype("timedelta64[D]")
        tables = _clinical_tables(world, coh, deaths, v2cov, visit_date)
        for name, df in tables.items():
            output.write_bytes(posixpath.join(output.release, f"{name}.parquet"), table_bytes(df))
        _write_dictionary(output, world)

        # ---- imaging -------------------------------------------------------------------
        baseline = None
        feature_tables = {}
        traits_z = phenotypes.trait_z(world, coh, coh.latent, 1)
        traits_v1 = phenotypes.traits_clinical(world, traits_z, "traits")
        if rel.imaging != "none":
            from .imaging_stage import run_imaging

            prog.start("imaging")
            baseline, img_hashes, img_timing, feature_tables = run_imaging(executor, w, world, coh, traits_v1, v2cov, output, cfg, resume)
            known_hashes.update(img_hashes)
            merge(timings, img_timing)

        prog.start("assemble")
        for res in executor.gather(assemble_futures):
            merge(timings, res["timing"])

        # ---- sealed, then manifests (release last) -----------------------------------
        prog.start("sealed")
        from .writers.sealed import write_sealed

        plain = config.to_plain(cfg)
        write_sealed(output, world, coh, plain, dict(plain.get("oracle", {})), baseline, traits_z, traits_v1)
        if 1 in feature_tables:
            # the environment's own measurement of the released baseline pixels (baseline pipeline)
            output.write_bytes(posixpath.join(output.sealed, "imaging_features.parquet"), table_bytes(feature_tables[1]))
        output.write_json(posixpath.join(output.sealed, MANIFEST),
                          build_manifest(output, output.sealed, extra={"world_id": world.id, "bundle": "sealed"}))
        prog.start("manifest")
        output.rm(output.work)
        manifest = build_manifest(output, output.release, known=known_hashes,
                                  extra={"bundle": "release", "scale": str(cfg.scale.name)})
        output.write_json(posixpath.join(output.release, MANIFEST), manifest)
        prog.stop()
    finally:
        if own_executor:
            executor.close()
    return {
        "world": world.id,
        "release": output.release,
        "sealed": output.sealed,
        "seconds": time.perf_counter() - t_start,
        "stages": prog.stages,
        "task_seconds": timings,
        "bytes": manifest["total_bytes"],
        "files": manifest["n_files"],
    }


def _prepare_work(output, resolved) -> bool:
    """Keep ``.build/`` only when it belongs to the same world-determining config
    (then finished partitions are reused); otherwise start from a clean slate."""
    import hashlib
    import json

    plain = config.to_plain(resolved.cfg)
    digest_doc = {k: v for k, v in plain.items() if k not in ("cluster", "out", "seeds")}
    digest_doc["seed"] = str(resolved.seed)
    digest = hashlib.sha256(json.dumps(digest_doc, sort_keys=True).encode()).hexdigest()
    state = posixpath.join(output.work, "state.json")
    if output.exists(state):
        try:
            if json.loads(output.read_bytes(state)).get("digest") == digest:
                return True
        except ValueError:
            pass
    output.rm(output.work)
    output.rm(output.release)
    output.makedirs(output.work)
    output.makedirs(output.release)
    output.write_json(state, {"digest": digest})
    return False


def _sum_timings(records) -> dict:
    out: dict = {}
    for r in records:
        merge(out, r.get("timing", {}))
    return out


def _clinical_tables(world, coh, deaths, v2cov, visit_date) -> dict:
    from . import tables

    surrogate = cohort_mod.surrogate_values(world, coh)
    mace = clinical.mace(world, coh, deaths, surrogate)
    dx = clinical.diagnoses(world, coh, deaths, mace, visit_date)
    meds = clinical.medications(world, coh, dx, visit_date)
    from .modalities import messy

    sentinels = messy.covariate_sentinels(world) if world.messy else None
    out = {
        "covariates": tables.covariates(world, coh, sentinels),
        "covariates_visit2": tables.covariates_visit2(world, coh, v2cov),
        "ecg_features": tables.wide(world, phenotypes.ecg(world, coh)),
        "coronary_ct": tables.wide(world, phenotypes.coronary_ct(world, coh)),
        "mortality": tables.mortality(world, coh, deaths, visit_date),
        "mace_events": tables.long_table(world, mace["row"], {"event": mace["event"], "years_from_baseline": mace["years"]}),
        "ehr_diagnoses": tables.long_table(world, dx["row"], {"icd10": dx["icd10"], "date": dx["date"].astype("datetime64[s]")}),
        "ehr_medications": tables.long_table(world, meds["row"], {"atc": meds["atc"], "description": meds["description"]}),
        "targetability": tables.targetability(world, blocks.seeds.stream(world.seed, "world/targetability")),
    }
    if world.messy:
        for name in ("ecg_features", "coronary_ct"):
            out[name] = messy.corrupt_table(world, name, out[name])
    return out


def _write_dictionary(output, world) -> None:
    from . import tables
    from .data_dictionary import render_markdown

    output.write_text(posixpath.join(output.release, "data_dictionary.tsv"), tables.data_dictionary_tsv())
    output.write_text(posixpath.join(output.release, "data_dictionary.md"), render_markdown(world))


def main(argv: list | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        print("overrides: world=<id> scale=tiny|small|paper|biobank out=<url> cluster=local|sync|address "
              f"release=<{'|'.join(config.group_options('release'))}>  worlds: {', '.join(config.group_options('world'))}")
        return 0
    try:
        resolved = config.load(argv)
    except config.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = build(resolved, progress=bool(resolved.cfg.cluster.progress))
    log(f"built {summary['world']}: {summary['files']} files, {summary['bytes'] / 1e6:.1f} MB in {summary['seconds']:.1f}s")
    log(f"  release: {summary['release']}")
    log(f"  sealed:  {summary['sealed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
