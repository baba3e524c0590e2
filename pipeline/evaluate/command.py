"""``python -m pipeline.evaluate`` (and ``dtw-evaluate``) as a Hydra app (``pipeline.cli``).

    python -m pipeline.evaluate panel=paper-v1 scale=small seeds=<file> \\
        agents=[null,truth,correlation,cis_mr,mr_knockdown,analyst,tells]

Everything is checked before any compute (``settings.prepare``; the machine checks of the
worlds still to build, ``pipeline.preflight``): a problem is one line on stderr and exit
status 2.  Then the worlds are verified or built and the episodes played on the cluster
(``runner.run``); progress and the run's summary go to stderr, the leaderboard (Markdown)
to stdout.  Exit status 0 when every episode of the grid has a record that did not fail,
1 when some failed (run again to replay them) or a world build failed, 2 for bad input or a
world whose build differs from the recorded one, 130 when interrupted (run again to resume).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from . import runner, settings

_PLANS: dict = {}


def prepare(overrides: list) -> settings.Plan:
    plan = settings.prepare(overrides)
    _PLANS[tuple(overrides)] = plan
    return plan


def check(plans: list, machine: bool = True) -> None:
    """The command's checks of every world (``pipeline.build``'s that need nothing of the
    machine), then (``machine``; not for ``--cfg``) memory and disk for the worlds to build
    (as ``pipeline.panel``), the scheduler of ``cluster=address``, writable output folders."""
    from .. import preflight
    from ..config import ConfigError

    for plan in plans:
        for world in plan.worlds:
            preflight.check_command(world.resolved)
    if not machine:
        return
    for plan in plans:
        absent = [w.resolved for w in plan.worlds if not w.present]
        if absent:
            preflight.check_all(absent, concurrent=min(plan.jobs, len(absent)))
        elif str(plan.cluster.kind) == "address":
            preflight.check_scheduler(str(plan.cluster.address))
        for name, folder in (("out", plan.out), ("worlds_out", plan.worlds_out)):
            parent = Path(folder)
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ConfigError(f"{name}: {folder} cannot be written ({parent} is not writable); valid: a folder "
                                  "this user can write")


def _task(cfg) -> int:
    from .. import cli
    from ..graph.executor import log

    overrides = cli.task_overrides()
    plan = _PLANS.get(tuple(overrides)) or settings.prepare(overrides)
    local = str(plan.cluster.kind) == "local"

    def start():
        made = cli.SESSION.executor_for(plan.cluster, processes=True, announce=plan.progress)
        if local:
            made.client.run(runner.ignore_interrupts)
        return made

    def fresh():
        # The episodes on a scheduler whose dashboard never showed the build's task names (world ids).
        cli.SESSION.close()
        return start()

    executor = start()

    try:
        summary = runner.run(plan, executor, started=runner._process_start(),
                             fresh_executor=fresh if local else None)
    except runner.EvaluationError as error:
        return cli.fail(str(error))
    except KeyboardInterrupt:
        log("evaluate: interrupted; every finished episode is in episodes.jsonl: run the same command to resume")
        return 130
    for line in runner.summary_lines(summary):
        log(line)
    report = summary.get("report")
    if report and (Path(report) / "leaderboard.md").is_file():
        sys.stdout.write((Path(report) / "leaderboard.md").read_text(encoding="utf-8"))
        sys.stdout.flush()
    return 1 if summary["episodes"]["failed_in_records"] else 0


def main(argv: list | None = None) -> int:
    """``python -m pipeline.evaluate`` as a Hydra app (see ``pipeline.cli``)."""
    from .. import cli

    settings.register()  # before Hydra composes anything (--cfg job included)
    return cli.run(cli.App("pipeline.evaluate", settings.CONFIG_NAME, prepare, check, _task), argv)


if __name__ == "__main__":
    sys.exit(main())
