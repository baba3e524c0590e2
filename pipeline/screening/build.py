"""Build one screening world: ``python -m pipeline.build world=screening-01 [scale=tiny|small|paper]``.

config (validated, frozen) -> plan (route and synthons per row) and pockets
-> shard tasks on the executor (poses, pocket scores, Parquet parts, SDF
shards) -> hidden score (library-wide) -> sealed bundle -> library.parquet
-> manifests (release last).  Byte-identical for any scheduler, worker count
or shard order; resumable (finished shards are reused when their hashes match).
"""
from __future__ import annotations

import posixpath
import time

import numpy as np

from .. import buildrecord
from ..bundle import MANIFEST, RELEASE, SEALED
from ..graph.executor import log, make_executor
from ..graph.progress import Progress, merge
from ..manifest import build_manifest
from ..outputs import Output, resume_or_reset
from .bundle import KIND, LIBRARY, README, RELEASE_FORMAT
from .config import BLOCK_SIZE, ScreeningResolved, world_determining
from .stages import shard_bounds, shard_task

def _prepare_work(output: Output, resolved: ScreeningResolved) -> bool:
    """Keep ``.build/`` only for the same world-determining config (then finished shards are reused)."""
    return resume_or_reset(output, world_determining(resolved), clear=(output.work, output.release, output.sealed))


def build(resolved: ScreeningResolved, executor=None, progress: bool = True) -> dict:
    """Build the world; returns the same summary keys as ``pipeline.build.build``."""
    from .fragments import load_table
    from .library import plan
    from .pocket import combine, hidden_noise, sample_pockets

    cfg = resolved.cfg
    world = cfg.world
    t_start, wall0, cpu0 = time.perf_counter(), time.time(), time.process_time()
    prog = Progress(world.id, progress)
    prog.start("plan")
    n = resolved.n
    table = load_table()
    lib = plan(resolved.seed, n, table)
    pockets = sample_pockets(resolved.seed, world)
    output = Output(cfg.out, world.id)
    own_executor = executor is None
    if own_executor:
        from ..config import ConfigError

        if cfg.cluster.kind == "address" and not output.shared_between_processes:
            raise ConfigError(f"out: {cfg.out!r} lives inside this process; valid with cluster=address: a shared filesystem URL")
        executor = make_executor(cfg.cluster, processes=output.shared_between_processes, announce=progress)
    timings: dict = {}
    try:
        output.rm(posixpath.join(output.release, MANIFEST))
        output.rm(posixpath.join(output.sealed, MANIFEST))
        resume = _prepare_work(output, resolved)
        if resume and progress:
            log(f"[{world.id}] resuming an interrupted build: finished shards are reused when their hashes match")
        d = world.docking
        ctx = {"seed": str(resolved.seed), "n": n, "out": cfg.out, "world_id": world.id, "pockets": pockets,
               "docking": {"starts": d.starts, "steps": d.steps, "spread": d.spread, "step_angle": d.step_angle,
                           "step_shift": d.step_shift}}
        ctx_f = executor.scatter(ctx)
        prog.start("shards")
        bounds = shard_bounds(n)
        futures = [executor.submit(shard_task, ctx_f, i, lo, lib.synthon[lo:hi], lib.route[lo:hi], key=f"shard-{world.id}")
                   for i, (lo, hi) in enumerate(bounds)]
        results = sorted(executor.gather(futures), key=lambda r: r["shard"])
        for r in results:
            merge(timings, r["timing"])
        components = {k: np.concatenate([r["components"][k] for r in results]) for k in results[0]["components"]}
        known = {r["sdf"][0]: (r["sdf"][1], r["sdf"][2]) for r in results}

        prog.start("score")
        noise = np.concatenate([hidden_noise(resolved.seed, min(BLOCK_SIZE, n - b * BLOCK_SIZE), b)
                                for b in range((n + BLOCK_SIZE - 1) // BLOCK_SIZE)])
        scored = combine(components, noise, world.score)

        prog.start("sealed")
        from .sealed import write_sealed

        write_sealed(output, resolved, components, scored, noise, pockets)

        prog.start("library")
        from .writers import release_readme

        known[LIBRARY] = _assemble_library(output, len(bounds))
        output.write_text(posixpath.join(output.release, README), release_readme(resolved.sizes, len(bounds)))
        output.write_json(posixpath.join(output.sealed, MANIFEST),
                          build_manifest(output, output.sealed, extra={"world_id": world.id, "bundle": SEALED, "kind": KIND}))
        prog.start("manifest")
        output.rm(output.work)
        manifest = build_manifest(output, output.release, known=known,
                                  extra={"bundle": RELEASE, "kind": KIND, "release_format": RELEASE_FORMAT,
                                         "scale": str(cfg.scale.name), "conformations": n})
        output.write_json(posixpath.join(output.release, MANIFEST), manifest)
        prog.stop()
        record = buildrecord.write(output, buildrecord.make(resolved, output, prog, timings, executor.n_workers, wall0,
                                                            cpu0, manifest))
    finally:
        prog.stop()
        if own_executor:
            executor.close()
    return {
        "world": world.id, "kind": KIND, "release": output.release, "sealed": output.sealed,
        "seconds": time.perf_counter() - t_start, "stages": prog.stages, "task_seconds": timings,
        "bytes": manifest["total_bytes"], "files": manifest["n_files"], "conformations": n, "record": record,
    }


def _assemble_library(output: Output, n_shards: int) -> tuple[int, str]:
    """``library.parquet`` from the shard parts, one row group each, in shard order, at the byte
    level (``writers.concat_parquet``: the parts' column chunks and a footer listing them; one part
    in memory at a time; written under .wip and renamed when complete).  Returns its (size, SHA-256)."""
    import hashlib

    from .writers import concat_parquet

    path = posixpath.join(output.release, LIBRARY)
    tmp = path + ".wip"
    digest, size = hashlib.sha256(), 0
    with output.fs.open(tmp, "wb") as handle:
        def write(data) -> None:
            nonlocal size
            handle.write(data)
            digest.update(data)
            size += len(data)

        concat_parquet((output.read_bytes(posixpath.join(output.work, f"part-{i:05d}.parquet")) for i in range(n_shards)),
                       write)
    output.fs.mv(tmp, path)
    return size, digest.hexdigest()
