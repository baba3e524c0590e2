"""Benchmark validity (issue 12): role-blind statistics of proteins, the tell scan
over a set of worlds, and the sealed checks of instruments, surrogate and T4.

* ``features``: per-protein statistics from a release alone (shared with the
  ``tells`` exploit agent, which emits their source into the sandbox);
* ``sealed_checks``: checks that need the truth (unplanned instruments that
  move L, the surrogate's look on imaging and cardiac death, T4 separability);
* ``scan``: pools role ranks across worlds, tests them and reports
  (``python -m pipeline.audit --tells <dir>``).
"""
