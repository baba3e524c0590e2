"""The command line of the leak audit, and the hook to the cross-world tell scan.

    python -m pipeline.audit <world_dir> [--against <other_world_dir>] [--json]
    python -m pipeline.audit --tells <dir holding built worlds> [--json-out FILE]   (pipeline.tells.scan)
    python -m pipeline.audit --instruments <world_dir>... [--alpha 0.05] [--json-out FILE]   (pipeline.audit.instruments)
"""
from __future__ import annotations

import argparse
import json
import sys

from .. import kinds
from .run import audit, format_table

DESCRIPTION = ("Leak audit of a built world: nothing in ``<world>/release/`` may reveal a seed,\n"
               "a role, a latent value or a hidden parameter (SPEC sections 3, 5 and 6).")


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--tells" in argv:  # the cross-world tell scan (pipeline.tells) has its own options
        from ..tells.scan import main as tells_main

        return tells_main([a for a in argv if a != "--tells"])
    if "--instruments" in argv:  # lead instruments that move L outside the truth (pipeline.audit.instruments)
        from .instruments import main as instruments_main

        return instruments_main([a for a in argv if a != "--instruments"])
    world_dir = next((a for a in argv if not a.startswith("-")), None)
    kind = kinds.for_world(world_dir) if world_dir is not None else kinds.BIOBANK
    if kind is not kinds.BIOBANK:  # another kind of world audits its own release
        return kind.audit_main(argv)
    return biobank_main(argv)


def biobank_main(argv: list) -> int:
    """The biobank world's leak audit."""
    ap = argparse.ArgumentParser(prog="python -m pipeline.audit", description=DESCRIPTION)
    ap.add_argument("world_dir", help="a built world: <out>/<id> holding release/ and sealed/")
    ap.add_argument("--against", help="the same world built with another world.roles_salt (role-shuffle invariance)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    args = ap.parse_args(argv)
    report = audit(args.world_dir, args.against)
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0 if report["passed"] else 1
