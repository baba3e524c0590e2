"""Ask the sealed oracle for one experiment and print the payload JSON (Supplement S1.5).

    python -m pipeline.experiment --sealed <dir> --kind knockdown --protein PROT_0123
    python -m pipeline.experiment --sealed <dir> --kind knockdown --protein PROT_0123 \\
        --ledger episode/ledger.jsonl --budget 2000000 --turn 7

Without --ledger it is a one-off query with no budget.  With --ledger the request
goes through pipeline.oracle.Ledger (duplicates and over-budget requests refused,
every request recorded).  A refused request still prints a payload (status
"refused", with a reason) and exits 0: the payload, not the exit code, carries
the outcome.  Exit code 2 means the command itself could not run (bad arguments,
no usable oracle.json, a ledger that cannot be resumed).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from .oracle import KINDS, LedgerError, OracleError, Ledger, load_oracle, run_experiment


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline.experiment", description=__doc__.split("\n\n")[0])
    p.add_argument("--sealed", required=True, help="a world's sealed/ folder (holds oracle.json)")
    # Not argparse choices: an unknown kind is answered with a refused payload, like the harness does.
    p.add_argument("--kind", required=True, help=f"one of {', '.join(KINDS)}")
    p.add_argument("--protein", required=True, help="protein identifier, e.g. PROT_0123")
    p.add_argument("--paper-compat", action=argparse.BooleanOptionalAction, default=None,
                   help="cell perturbation returns surv5y as the paper did (default: oracle.json's setting)")
    p.add_argument("--realism", action=argparse.BooleanOptionalAction, default=None,
                   help="off-target effects and knockdown assay noise (default: oracle.json's setting)")
    p.add_argument("--ledger", help="JSON-Lines budget ledger to charge (created or resumed)")
    p.add_argument("--budget", type=float, help="episode budget in dollars (required with --ledger)")
    p.add_argument("--turn", type=int, default=0, help="turn number recorded in the ledger row (default 0)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.ledger is None) != (args.budget is None):
        parser.error("--ledger and --budget go together")
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget >= 0):
        parser.error(f"--budget: {args.budget!r} is invalid; valid: dollars >= 0")
    try:
        spec = load_oracle(args.sealed)
        if args.ledger is None:
            payload = run_experiment(spec, args.kind, args.protein, paper_compat=args.paper_compat, realism=args.realism)
        else:
            ledger = Ledger(args.budget, args.ledger, spec, paper_compat=args.paper_compat, realism=args.realism)
            payload = ledger.request(args.kind, args.protein, args.turn)
    except (OracleError, LedgerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(payload, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
