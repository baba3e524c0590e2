"""The command line of a build: ``python -m pipeline.build world=<id> [scale=...] [out=...] [cluster=...]``.

A Hydra app (``pipeline.cli``): the config is composed and validated, the machine
checked, and each world built by ``pipeline.graph`` (config -> world parameters ->
participant blocks -> population stage -> block outputs -> release and sealed
writers -> manifests, release last).

The generator (``pipeline.graph``: numpy, scipy, numba) is imported when a build
starts, not with this module: the command's checks come first, so that what would
break those imports (a malformed ``SOURCE_DATE_EPOCH``, which numpy's f2py parses
when scipy loads it) is a one-line error and not a traceback.
"""
from __future__ import annotations

import sys
from typing import Any

from . import config, kinds, preflight
from .outputs import Output


def build(resolved: Any, executor: Any = None, progress: bool = True, live: bool | None = None) -> dict:
    """Build one world of any kind (``pipeline.kinds``): a biobank world by
    ``pipeline.graph``, another kind by its own build."""
    kind = kinds.for_resolved(resolved)
    if kind is kinds.BIOBANK:
        from .graph import build_world

        return build_world(resolved, executor=executor, progress=progress, live=live)
    return kind.build(resolved, executor=executor, progress=progress)


def _prepare(overrides: list) -> config.Resolved:
    return config.load(overrides)


def _check(plans: list, machine: bool = True) -> None:
    """The command's checks of every job: those that need nothing of the machine, then
    (``machine``; not for ``--cfg``) memory, disk, the output location and the scheduler."""
    for resolved in plans:
        preflight.check_command(resolved)
    if machine:
        # a multirun's builds run one after another on one cluster: the scheduler is tried once
        preflight.check_all(plans)


def _task(cfg) -> int:
    """One build from Hydra's composed config (the task function of the app)."""
    from . import cli
    from .graph.executor import log

    resolved = kinds.for_config(cfg).validate(cfg, config.read_seed_file(cfg.seeds))
    progress = bool(resolved.cfg.cluster.progress)
    output = Output(resolved.cfg.out, resolved.cfg.world.id)
    executor = cli.SESSION.executor_for(resolved.cfg.cluster, processes=output.shared_between_processes, announce=progress)
    summary = build(resolved, executor=executor, progress=progress)
    log(f"built {summary['world']}: {summary['files']} files, {summary['bytes'] / 1e6:.1f} MB in {summary['seconds']:.1f}s")
    log(f"  release: {summary['release']}")
    log(f"  sealed:  {summary['sealed']}")
    log(f"  record:  {summary['record']}")
    return 0


def main(argv: list | None = None) -> int:
    """``python -m pipeline.build`` as a Hydra app (see ``pipeline.cli``)."""
    from . import cli

    return cli.run(cli.App("pipeline.build", "config", _prepare, _check, _task), argv)


if __name__ == "__main__":
    sys.exit(main())
