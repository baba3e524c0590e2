"""``python -m pipeline.score --sealed DIR --work DIR [--ledger FILE]``: the score of one
episode as JSON on stdout; exit status 2 when the sealed bundle cannot be scored against."""
from __future__ import annotations

import argparse
import json
import sys

from .. import kinds
from .episode import score_episode
from .sealed import SealedBundleError

DESCRIPTION = "The scorer: Supplementary Methods S2, applied to one episode."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.score", description=DESCRIPTION)
    parser.add_argument("--sealed", required=True, help="the world's sealed/ directory")
    parser.add_argument("--work", required=True, help="the episode's work folder")
    parser.add_argument("--ledger", default=None,
                        help="the harness's experiment ledger (JSON Lines); without it no experiment earns credit")
    parser.add_argument("--paper-compat", action="store_true",
                        help="score the phenotype by S2.5's own rule (the participants given a value) instead of "
                             "on the imaged participants of the eval mask")
    args = parser.parse_args(argv)
    kind = kinds.for_sealed(args.sealed)
    if kind is not kinds.BIOBANK:  # another kind of world scores its own episodes
        print(json.dumps(kind.score_episode(args.sealed, args.work, args.ledger), indent=2, allow_nan=False))
        return 0
    try:
        result = score_episode(args.sealed, args.work, args.ledger, paper_compat=args.paper_compat)
    except SealedBundleError as error:
        print(f"pipeline.score: cannot score: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, allow_nan=False))
    return 0
