"""``audit``: one world's release checked against what its sealed bundle says to look for,
every check of ``CHECKS`` a finding; and the report as a table."""
from __future__ import annotations

import os
import time
from typing import Iterable, Optional

from .. import bundle
from .compare import against_findings
from .findings import Finding
from .layout_checks import check_build_residue, check_file_layout, check_manifest_contents, check_manifest_verifies
from .metadata_checks import check_identifier_order, check_role_identifiers, check_role_words, check_seed_material
from .needles import Needles
from .release_files import Release
from .secrets import Secrets
from .value_checks import (check_cis_locus_sharing, check_column_summaries, check_latent, check_missingness,
                           check_targetability)


class Context:
    """One world under audit: its release, what sealed/ says to look for."""

    def __init__(self, world_dir: str):
        self.world_dir = os.path.abspath(world_dir)
        self.release_dir = os.path.join(self.world_dir, bundle.RELEASE)
        self.sealed = os.path.join(self.world_dir, bundle.SEALED)
        self.secrets = Secrets.load(self.sealed)
        self.release = Release(self.release_dir)
        self.needles = Needles(self.secrets)


CHECKS = {
    "seed_material": lambda c: check_seed_material(c.release, c.needles),
    "role_words": lambda c: check_role_words(c.release, c.secrets),
    "role_identifiers": lambda c: check_role_identifiers(c.release, c.secrets),
    "identifier_order": lambda c: check_identifier_order(c.release),
    "latent_values": lambda c: check_latent(c.release, c.secrets),
    "missingness_by_role": lambda c: check_missingness(c.release, c.secrets),
    "column_summaries": lambda c: check_column_summaries(c.release, c.secrets),
    "targetability_rows": lambda c: check_targetability(c.release, c.secrets),
    "cis_locus_sharing": lambda c: check_cis_locus_sharing(c.release, c.secrets),
    "file_layout": lambda c: check_file_layout(c.release),
    "manifest_contents": lambda c: check_manifest_contents(c.release),
    "build_residue": lambda c: check_build_residue(c.release, c.sealed),
    "manifest_verifies": lambda c: check_manifest_verifies(c.world_dir),
}


def audit(world_dir: str, against: Optional[str] = None, only: Optional[Iterable[str]] = None) -> dict:
    """Audit ``<world_dir>/release`` against ``<world_dir>/sealed``; with
    ``against`` (the same world built with another ``world.roles_salt``) also
    check role-shuffle invariance.  ``only`` restricts the run to named checks of
    ``CHECKS``.  Returns the report dict."""
    t0 = time.perf_counter()
    world_dir = os.path.abspath(world_dir)
    if not os.path.isdir(os.path.join(world_dir, bundle.RELEASE)):
        missing = Finding("release_present", False, f"{world_dir}/{bundle.RELEASE} does not exist")
        return _report(world_dir, against, [missing], [], t0)
    ctx = Context(world_dir)
    findings = [Finding("sealed_inputs", not ctx.secrets.problems,
                        f"{len(ctx.secrets.roles)} role proteins, seed and oracle key known" if not ctx.secrets.problems
                        else "the audit cannot know what to look for", ctx.secrets.problems)]
    names = list(CHECKS) if only is None else list(only)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; valid: {', '.join(CHECKS)}")
    for name in names:
        try:
            findings.append(CHECKS[name](ctx))
        except Exception as exc:  # an unreadable release file is a failed finding, never a silent pass
            findings.append(Finding(name, False, f"check crashed: {type(exc).__name__}: {exc}"))
    if against is not None:
        findings += against_findings(world_dir, os.path.abspath(against), ctx.secrets)
    files = [{"path": e.rel, "size": e.size} for e in ctx.release.files]
    return _report(world_dir, against, findings, files, t0)


def _report(world_dir, against, findings, files, t0) -> dict:
    return {
        "world_dir": world_dir,
        "release": os.path.join(world_dir, bundle.RELEASE),
        "against": against,
        "passed": all(f.passed for f in findings),
        "findings": [f.as_dict() for f in findings],
        "files": files,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def format_table(report: dict) -> str:
    rows = [(f["name"], "pass" if f["passed"] else "FAIL", f["detail"]) for f in report["findings"]]
    w = max(len(r[0]) for r in rows) if rows else 10
    lines = [f"leak audit of {report['release']}" + (f" against {report['against']}" if report["against"] else ""),
             f"{'finding'.ljust(w)}  result  detail", f"{'-' * w}  ------  ------"]
    for name, result, detail in rows:
        lines.append(f"{name.ljust(w)}  {result.ljust(6)}  {detail}")
    for f in report["findings"]:
        if not f["passed"]:
            for p in f["problems"]:
                lines.append(f"  {f['name']}: {p}")
    lines.append(f"{'PASSED' if report['passed'] else 'FAILED'} in {report['seconds']:.1f}s")
    return "\n".join(lines)
