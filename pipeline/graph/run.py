"""Run a biobank build: the steps of :mod:`pipeline.graph.steps` in order, on an
executor, with per-stage progress and a build record beside the bundle."""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from .. import buildrecord, config, preflight
from ..outputs import Output
from ..model.sampler import sample_world
from . import steps
from .executor import Tracked, make_executor
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


#: Said once per process: a panel's worlds start together and would each say it.
_COMPILE_NOTED: list = []


def compile_note(executor: Any, release: Any) -> str | None:
    """What to say before the first stage when the build will compile the Numba kernels: on
    a machine's first build nothing else would explain a stage sitting at ``0/N tasks`` for
    a minute or more.  Asked of every worker (an address cluster's may be other machines);
    None when every one has them cached.  When the cache cannot be read (another numba's
    internals), the note is said, hedged."""
    if _COMPILE_NOTED:
        return None
    from . import warmup

    names = warmup.build_kernels(release)
    run_there = getattr(executor, "on_workers", None)
    try:
        states = run_there(warmup.kernels_cached, names) if run_there else [warmup.kernels_cached(names)]
    except Exception:  # noqa: BLE001 - a worker that cannot answer: cannot tell
        states = [None]
    if states and all(state is True for state in states):
        return None
    _COMPILE_NOTED.append(True)
    if any(state is False for state in states):
        return warmup.compile_note(release)
    return "the numba kernels compile on a machine's first build, which takes about 90 s more on two cores (cached afterwards)"


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
        if b.resume:
            prog.note("resuming an interrupted build: finished partitions are reused when their hashes match")
        prog.start("population+genotypes")
        if progress:
            note = compile_note(executor, cfg.release)
            if note:
                prog.note(note)
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
