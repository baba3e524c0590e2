"""Run a biobank build: the steps of :mod:`pipeline.graph.steps` in order, on an
executor, with per-stage progress and a build record beside the bundle."""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from .. import buildrecord, config, preflight
from ..outputs import Output
from ..world import sample_world
from . import steps
from .executor import Tracked, log, make_executor
from .progress import Progress


def folder_size(output: Output) -> Callable[[], int]:
    """A function returning the bytes under the world's folder (work files included)."""
    if output.protocol in ("file", "local"):
        root = output.root

        def local() -> int:
            total = 0
            stack = [root]
            while stack:
                try:
                    entries = list(os.scandir(stack.pop()))
                except FileNotFoundError:
                    continue
                for e in entries:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:  # renamed from .wip or removed meanwhile
                        pass
            return total

        return local
    return lambda: output.fs.du(output.root, total=True) if output.exists(output.root) else 0


def build_world(resolved: config.Resolved, executor: Any = None, progress: bool = True, live: bool | None = None) -> dict:
    """Build one biobank world.  Machine checks (``pipeline.preflight``) run first,
    before any compute; ``executor`` is shared when given (a panel, a multirun) and
    made from ``cluster`` otherwise.  ``progress`` prints per-stage progress on stderr
    (``live``: one rewritten line per stage; default: when stderr is a terminal).
    Writes ``<out>/<id>/build-record.json`` beside the bundle."""
    cfg = resolved.cfg
    own_executor = executor is None
    preflight.check(resolved, own_executor=own_executor)
    t_start, wall0, cpu0 = time.perf_counter(), time.time(), time.process_time()
    output = Output(cfg.out, cfg.world.id)
    prog = Progress(cfg.world.id, progress, size_fn=folder_size(output), live=live)
    prog.start("sample")
    world = sample_world(resolved)
    if own_executor:
        executor = make_executor(cfg.cluster, processes=output.shared_between_processes, announce=progress)
    n_workers = executor.n_workers
    b = steps.Build(resolved, output, world, Tracked(executor, prog), prog)
    try:
        steps.init(b)
        if b.resume and progress:
            log(f"[{world.id}] resuming an interrupted build: finished partitions are reused when their hashes match")
        prog.start("population+genotypes")
        cores = steps.encode_core(b)
        prog.start("disease")
        steps.population(b, cores)
        del cores
        prog.start("molecules")
        steps.encode_omics(b)
        steps.encode_vcf(b)
        prog.start("clinical")
        steps.clinical(b)
        steps.imaging(b)
        manifest = steps.finalise(b)
        prog.stop()
        record = buildrecord.write(output, buildrecord.make(resolved, output, prog, b.timings, n_workers, wall0, cpu0,
                                                            manifest))
    finally:
        prog.stop()
        if own_executor:
            executor.close()
    return {
        "world": world.id,
        "release": output.release,
        "sealed": output.sealed,
        "seconds": time.perf_counter() - t_start,
        "stages": prog.stages,
        "task_seconds": b.timings,
        "bytes": manifest["total_bytes"],
        "files": manifest["n_files"],
        "record": record,
    }
