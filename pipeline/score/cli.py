"""``python -m pipeline.score``: the score of one episode as JSON on stdout.

    python -m pipeline.score --sealed <world>/sealed --work <episode>/work [--ledger <episode>/ledger.jsonl]
    python -m pipeline.score <world dir> <episode dir>          (the same: sealed/, work/ and ledger.jsonl found)

Every option also as ``key=value``.  Without a ledger no experiment (and, on a screening
world, no submission) earns credit, and ``details.warnings`` says so.  Exit status 2 when
the sealed bundle cannot be scored against or the arguments are wrong.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import kinds
from ..commandline import Command, Option
from .episode import score_episode
from .sealed import SealedBundleError

DESCRIPTION = "The scorer: Supplementary Methods S2 (biobank) or the screening rules, applied to one episode."

COMMAND = Command("pipeline.score", DESCRIPTION, [
    Option("world", "a built world (its sealed/ is used) or a sealed/ folder", positional=True),
    Option("episode", "an episode folder (its work/ and ledger.jsonl are used) or a work folder", positional=True),
    Option("sealed", "the world's sealed/ folder"),
    Option("work", "the episode's work folder"),
    Option("ledger", "the harness's ledger (JSON Lines); without it no experiment earns credit"),
    Option("paper_compat", "score the phenotype by S2.5's own rule (the participants given a value)", kind=bool,
           default=False),
])


def resolve(args: dict) -> tuple[Path, Path, "Path | None"]:
    """(sealed, work, ledger) from the options: positional folders or the explicit ones."""
    from ..commandline import UsageError

    sealed = args["sealed"] or args["world"]
    if sealed is None:
        raise UsageError("missing sealed= (or a world folder as the first argument)")
    sealed = Path(sealed)
    if (sealed / "sealed").is_dir():
        sealed = sealed / "sealed"
    work, ledger = args["work"], args["ledger"]
    if work is None:
        if args["episode"] is None:
            raise UsageError("missing work= (or an episode folder as the second argument)")
        episode = Path(args["episode"])
        if (episode / "work").is_dir():
            work = episode / "work"
            if ledger is None and (episode / "ledger.jsonl").is_file():
                ledger = episode / "ledger.jsonl"
        else:
            work = episode
    elif args["episode"] is not None:
        raise UsageError("an episode folder and work= both given; valid: one of them")
    return sealed, Path(work), Path(ledger) if ledger is not None else None


def main(argv: list[str] | None = None) -> int:
    def run(args: dict) -> int:
        from ..commandline import UsageError

        try:
            sealed, work, ledger = resolve(args)
        except UsageError as error:
            print(f"pipeline.score: error: {error}", file=sys.stderr)
            return 2
        kind = kinds.for_sealed(sealed)
        try:
            if kind is not kinds.BIOBANK:  # another kind of world scores its own episodes
                if args["paper_compat"]:
                    print("pipeline.score: error: paper_compat: not an option of a screening world", file=sys.stderr)
                    return 2
                result = kind.score_episode(str(sealed), str(work), str(ledger) if ledger else None)
            else:
                result = score_episode(sealed, work, ledger, paper_compat=args["paper_compat"])
        except (SealedBundleError, OSError, ValueError) as error:
            print(f"pipeline.score: cannot score: {error}", file=sys.stderr)
            return 2
        print(json.dumps(result, indent=2, allow_nan=False))
        return 0

    return COMMAND.main(argv, run)
