"""Statistical validation report of a built world.

    python -m pipeline.validate <world_dir> [--out <dir>] [--only calibration,mechanisms,imaging]

Prints every figure beside its target and tolerance, writes ``validation.json``
and a self-contained ``validation.html`` (plots embedded) into ``--out``
(default: ``<world_dir>/sealed/validation``), and exits 1 when any figure is off
its tolerance.  The report names the drivers and quotes hidden parameters, so it
is sealed-grade: by default it stays inside ``sealed/``, in the one folder the
sealed manifest leaves out (``pipeline.bundle.SEALED_REPORTS``), and anywhere
else ``--out`` puts it a warning on stderr says what it holds.
"""
from __future__ import annotations

import json
import os
import sys

from .commandline import Command, Option
from .validation.core import WorldDir, format_console

SECTIONS = ("calibration", "mechanisms", "imaging")


def run(world_dir: str, sections=SECTIONS) -> dict:
    world = WorldDir(world_dir)
    checks, plots = [], {}
    import importlib

    for section in sections:
        if section == "imaging" and not os.path.isdir(os.path.join(world.release, "imaging")):
            continue  # release.imaging=none: no pixels to check
        module = importlib.import_module(f".validation.{section}", __package__)
        c, p = module.checks(world)
        checks += c
        plots.update(p)
    failed = [c for c in checks if not c.passed and not c.skipped]
    return {
        "world_id": world.truth.get("world_id"),
        "world_dir": world.dir,
        "passed": not failed,
        "n_checks": len(checks),
        "n_failed": len(failed),
        "checks": [c.as_dict() for c in checks],
        "_plots": plots,
        "_world": world,
    }


def print_table(report: dict, stream=None) -> None:
    print(format_console(report), file=stream or sys.stdout)  # sys.stdout of the call, not of the import


COMMAND = Command("pipeline.validate", "Statistical validation report of a built world (any kind).", [
    Option("world_dir", "a built world: <out>/<id> holding release/ and sealed/", required=True, positional=True),
    Option("out", "folder for the report (default: <world_dir>/sealed/validation; the report is sealed-grade)"),
    Option("only", f"comma-separated sections of a biobank world: {', '.join(SECTIONS)}"),
])


def main(argv: list | None = None) -> int:
    from . import kinds

    def run(args: dict) -> int:
        kind = kinds.for_world(args["world_dir"])
        if kind is not kinds.BIOBANK:  # another kind of world validates itself
            extra = [k for k in ("out", "only") if args[k] is not None]
            if extra:
                print(f"pipeline.validate: error: {extra[0]}: not an option for a {kind.name} world", file=sys.stderr)
                return 2
            return kind.validate_main([args["world_dir"]])
        return biobank(args)

    return COMMAND.main(argv, run)


def biobank_main(argv: list) -> int:
    """Validation of a biobank world (its own command line, kept for callers of earlier versions)."""
    return COMMAND.main(argv, biobank)


def biobank(args: dict) -> int:
    """Validation of a biobank world."""
    sections = [s.strip() for s in (args["only"] or ",".join(SECTIONS)).split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        print(f"error: only: unknown section {unknown[0]!r}; valid: {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    try:
        report = run(args["world_dir"], sections)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_table(report)
    from .bundle import reports_dir, sealed_grade_warning

    out = args["out"] or reports_dir(report["world_dir"])
    os.makedirs(out, exist_ok=True)
    from .validation.report import write_html

    doc = {k: v for k, v in report.items() if not k.startswith("_")}
    with open(os.path.join(out, "validation.json"), "w") as fh:
        json.dump(doc, fh, indent=2)
    write_html(report, os.path.join(out, "validation.html"))
    print(f"report: {os.path.join(out, 'validation.html')} (and validation.json; sealed-grade: they name the drivers)")
    warning = sealed_grade_warning(out, report["world_dir"])
    if warning:
        print(warning, file=sys.stderr)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
