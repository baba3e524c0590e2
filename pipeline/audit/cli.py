"""The command line of the leak audit, and the hook to the cross-world tell scan.

    python -m pipeline.audit <world_dir> [against=<other_world_dir>] [--json]
    python -m pipeline.audit --tells <dir holding built worlds> [json_out=FILE] [alpha=0.01] [jobs=1] [worlds=a,b] [cache=DIR]
    python -m pipeline.audit --instruments <world_dir>... [alpha=0.05] [json_out=FILE]   (pipeline.audit.instruments)

Every option also as ``key=value`` or ``--key value``.
"""
from __future__ import annotations

import json
import sys

from .. import kinds
from ..commandline import Command, Option
from .run import audit, format_table

DESCRIPTION = ("Leak audit of a built world: nothing in <world>/release/ may reveal a seed, a role, a latent value or a "
               "hidden parameter (SPEC sections 3, 5 and 6); with --tells, the tell scan over a folder of built worlds.")

COMMAND = Command("pipeline.audit", DESCRIPTION, [
    Option("world_dir", "a built world (<out>/<id> holding release/ and sealed/), or with --tells a folder of worlds",
           required=True, positional=True),
    Option("against", "the same world built with another world.roles_salt (role-shuffle invariance)"),
    Option("json", "print the report as JSON instead of a table", kind=bool, default=False),
    Option("tells", "the cross-world tell scan over the worlds in world_dir (pipeline.tells)", kind=bool, default=False),
    Option("instruments", "the instrument check of one or more worlds (or folders of them): each protein's lead "
           "instrument against the sealed L and L_late (pipeline.audit.instruments; options alpha=0.05, json_out=FILE)",
           kind=bool, default=False),
    Option("json_out", "--tells: write the full report as JSON here (default <dir>/tells.json)"),
    Option("alpha", "--tells: family-wise false-positive rate of the scan", kind=float, default=0.01),
    Option("jobs", "--tells: worlds analysed in parallel", kind=int, default=1),
    Option("worlds", "--tells: comma-separated world ids to include (default: all)"),
    Option("cache", "--tells: keep per-world analyses here and reuse them while worlds and code are unchanged"),
])
TELLS_ONLY = ("json_out", "worlds", "cache")
INSTRUMENTS_FLAGS = ("--instruments", "instruments=true", "instruments=1")


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in INSTRUMENTS_FLAGS for a in argv):  # several worlds: the instrument check parses its own options
        from .instruments import main as instruments_main

        return instruments_main([a for a in argv if a not in INSTRUMENTS_FLAGS])

    def run(args: dict) -> int:
        if args["tells"]:
            from ..tells.scan import scan_main

            return scan_main(args["world_dir"], json_out=args["json_out"], alpha=args["alpha"], jobs=args["jobs"],
                             worlds=args["worlds"], cache=args["cache"])
        extra = [k for k in TELLS_ONLY if args[k] is not None]
        if extra:
            print(f"pipeline.audit: error: {extra[0]}: an option of --tells only", file=sys.stderr)
            return 2
        kind = kinds.for_world(args["world_dir"])
        if kind is not kinds.BIOBANK:  # another kind of world audits its own release
            if args["against"]:
                print(f"pipeline.audit: error: against: not an option for a {kind.name} world", file=sys.stderr)
                return 2
            return kind.audit_main([args["world_dir"]])
        return biobank(args)

    return COMMAND.main(argv, run)


def biobank_main(argv: list) -> int:
    """The biobank world's leak audit (its own command line, kept for callers of earlier versions)."""
    return COMMAND.main(argv, biobank)


def biobank(args: dict) -> int:
    report = audit(args["world_dir"], args["against"])
    print(json.dumps(report, indent=2) if args["json"] else format_table(report))
    return 0 if report["passed"] else 1
