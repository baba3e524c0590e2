"""The entry points as Hydra apps (``python -m pipeline.build``, ``python -m
pipeline.panel``, and the ``dtw-build``/``dtw-panel`` commands).

Hydra parses the command line and runs the app, so its own flags work:
``--help``, ``--cfg job|hydra|all``, ``--info``, ``-m/--multirun``,
``--shell-completion``, ``--version``.  Around it:

* before Hydra runs anything that computes, every job is composed, validated
  and checked against the machine (``pipeline.preflight``); a problem is one
  line on stderr and exit status 2, with nothing written;
* a key given twice (``out=a out=b``, ``world=x world=y``) is such an error,
  where Hydra would silently take the last;
* ``--cfg job`` (and ``--cfg all``) runs the same checks as a build before
  printing, except those that ask the machine (memory, disk, the output
  folder's permissions, a remote ``out=`` answering, the scheduler):
  an invalid config fails exactly as its build would.  ``--cfg hydra`` and
  ``--info`` only compose (they show Hydra's own settings);
* the configs set Hydra to write nothing: no run folder, no ``.hydra/`` copy of
  the config (it holds the seed), no log file (``conf/config.yaml``).  Hydra's
  basic sweeper always saves the sweep's config as ``multirun.yaml`` in
  ``hydra.sweep.dir``; a multirun points that at a private temporary folder that
  is removed when the sweep ends, so nothing lands in the working folder;
* a multirun's jobs run in this process one after another on one cluster;
* flags that would load other configs (``--config-path``, ``--config-name``,
  ``--config-dir``, ``--experimental-rerun``) and ``hydra.*`` overrides are
  refused: the apps' Hydra settings are what keeps a release free of run files.
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import config
from .paths import CONF_DIR

REFUSED_FLAGS = {"config_path": "--config-path", "config_name": "--config-name", "config_dir": "--config-dir",
                 "experimental_rerun": "--experimental-rerun"}


@dataclass
class App:
    """One entry point.  ``prepare`` turns one job's overrides into a checked
    plan (raising ConfigError); ``check`` sees every job's plan together (machine
    checks across a multirun); ``task`` runs one job from Hydra's composed config
    and returns an exit status."""

    name: str
    config_name: str
    prepare: Callable[[list], Any]
    check: Callable[[list], None]
    task: Callable[[Any], int]


class _Session:
    """State shared by the jobs of one invocation: the cluster and the status."""

    def __init__(self):
        self.executor = None
        self.key = None
        self.status = 0

    def executor_for(self, cluster_cfg, processes: bool, announce: bool = True):
        """One cluster for every job of a multirun (a new one only if a job asks
        for a different cluster)."""
        from .graph.executor import make_executor

        key = (config.canonical_json(config.to_plain(cluster_cfg)), processes)
        if self.executor is None or self.key != key:
            self.close()
            self.executor = make_executor(cluster_cfg, processes=processes, announce=announce)
            self.key = key
        return self.executor

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()
        self.executor, self.key = None, None


SESSION = _Session()


class _ArgumentError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    from hydra._internal.utils import get_args_parser  # Hydra's own parser, as @hydra.main uses it

    parser = get_args_parser()

    def error(message: str):
        raise _ArgumentError(message)

    parser.error = error  # one line instead of argparse's usage block
    return parser


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


def job_overrides(overrides: list, multirun: bool) -> list:
    """The override list of every job: one job, or the sweep expanded as Hydra's
    basic sweeper expands it."""
    parsed = config.parse_overrides(overrides, multirun=multirun)
    config.check_unique_keys(parsed)
    if not multirun:
        return [list(overrides)]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    batches = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for batch in batches for job in batch]


def run(app: App, argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--version" in argv:  # the project's version, as every entry point answers it (and Hydra's beside it)
        from .commandline import version
        import hydra

        print(f"drugtargetworld {version()} (Hydra {hydra.__version__})")
        return 0
    try:
        args = _parser().parse_args(argv)
    except _ArgumentError as exc:
        return fail(f"arguments: {exc}; valid: {app.name} [--help] [--cfg job] [--info] [-m] [field=value ...] "
                    "(flags before or after all the overrides)")
    except SystemExit as exc:  # --version printed Hydra's version
        return exc.code if isinstance(exc.code, int) else 0
    for attr, flag in REFUSED_FLAGS.items():
        if getattr(args, attr, None) is not None:
            return fail(f"{flag}: {app.name} composes its own configs (conf/); valid: overrides such as world=<id> "
                        "scale=<size> out=<path>, or a world file added to conf/world/")
    computes = not (args.help or args.hydra_help or args.shell_completion or args.cfg or args.info)
    shows_job = args.cfg in ("job", "all")
    extra = []
    try:
        if computes or shows_job:
            plans = [app.prepare(job) for job in job_overrides(args.overrides, args.multirun)]
            app.check(plans, machine=computes)
        elif args.cfg or args.info:
            for job in job_overrides(args.overrides, args.multirun):  # syntax, sweeps and repeated keys
                config.compose(job, config_name=app.config_name)  # types, as one line
    except config.ConfigError as exc:
        return fail(str(exc))
    SESSION.status = 0
    with contextlib.ExitStack() as stack:
        stack.enter_context(_root_logging_kept())
        if args.multirun:
            sweep_dir = tempfile.mkdtemp(prefix="dtw-sweep-")
            stack.callback(shutil.rmtree, sweep_dir, True)
            extra = [f"hydra.sweep.dir={sweep_dir}"]
        stack.callback(SESSION.close)
        try:
            _hydra_main(app, [*argv, *extra])
        except SystemExit as exc:  # Hydra exits after --help, --version and its own errors
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return SESSION.status


@contextlib.contextmanager
def _root_logging_kept():
    """Hydra's ``--info`` puts a DEBUG handler on the root logger bound to the
    stdout of the moment; an app called in-process (``main(argv)``) must leave the
    caller's logging as it found it."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def _hydra_main(app: App, argv: list) -> None:
    import hydra

    config.register_configs()

    def task(cfg) -> None:
        try:
            status = app.task(cfg)
        except config.ConfigError as exc:
            # a check that needed the job running (e.g. the scheduler stopped answering)
            raise SystemExit(fail(str(exc))) from None
        SESSION.status = max(SESSION.status, int(status or 0))

    task.__module__ = app.name  # Hydra names the job after the task's module
    main = hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name=app.config_name)(task)
    saved = sys.argv
    sys.argv = [saved[0] if saved else app.name, *argv]
    try:
        main()
    finally:
        sys.argv = saved


def task_overrides() -> list:
    """The overrides of the job Hydra is running (a multirun's one job)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task)
