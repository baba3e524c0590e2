"""The analyst's analysis library, run inside the sandbox.

The harness-side policy (``pipeline.agents.analyst``) writes this package into
WORK/analyst_lib/ on the first turn; every turn then calls ``run_turn``, which
resumes the analysis from the state kept in WORK.  It needs numpy, pandas and
scipy only, and reads nothing but the release, the experiment results in WORK
and what the harness passes in.
"""
from .tasks import run_turn

__all__ = ["run_turn"]
