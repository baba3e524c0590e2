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

import json
import math
import sys

from .commandline import Command, Option
from .oracle import KINDS, LedgerError, OracleError, Ledger, load_oracle, run_experiment


def _tristate(key: str, text: str):
    from .commandline import to_bool

    return None if str(text).lower() in ("none", "null", "default") else to_bool(key, text)


COMMAND = Command("pipeline.experiment", __doc__.split("\n\n")[0], [
    Option("sealed", "a world's sealed/ folder (holds oracle.json)", required=True),
    # Not choices: an unknown kind is answered with a refused payload, like the harness does.
    Option("kind", f"one of {', '.join(KINDS)}", required=True),
    Option("protein", "protein identifier, e.g. PROT_0123", required=True),
    Option("paper_compat", "cell perturbation returns surv5y as the paper did (default: oracle.json's setting)",
           kind=_tristate, flag=True),
    Option("realism", "off-target effects and knockdown assay noise (default: oracle.json's setting)", kind=_tristate,
           flag=True),
    Option("ledger", "JSON-Lines budget ledger to charge (created or resumed)"),
    Option("budget", "episode budget in dollars (required with ledger)", kind=float),
    Option("turn", "turn number recorded in the ledger row", kind=int, default=0),
])


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv, _run)


def _run(opts: dict) -> int:
    from types import SimpleNamespace

    args = SimpleNamespace(**opts)
    if (args.ledger is None) != (args.budget is None):
        print("pipeline.experiment: error: ledger and budget go together", file=sys.stderr)
        return 2
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget >= 0):
        print(f"pipeline.experiment: error: budget: {args.budget!r} is invalid; valid: dollars >= 0", file=sys.stderr)
        return 2
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
