"""Leak audit of a built world: nothing in ``<world>/release/`` may reveal a seed,
a role, a latent value or a hidden parameter (SPEC sections 3, 5 and 6).

    python -m pipeline.audit <world_dir> [--against <other_world_dir>] [--json]
    python -m pipeline.audit --tells <dir holding built worlds> [--json-out FILE]   (pipeline.tells.scan)

``audit(world_dir, against=None) -> dict`` returns the report; the CLI prints a
table of findings and exits 1 when any fails.  ``sealed/`` is read only to know
what to look for (seed, oracle key, roles, latent values, eval mask, weights).

One job per module:

    findings         a finding (name, passed, detail, problems)
    secrets          what to look for, read from sealed/ through pipeline.bundle
    needles          seed material as byte patterns, and the scans for it
    release_files    the release's entries and the non-data parts of its files
    metadata_checks  seed material, role words, role identifiers, identifier order
    value_checks     latent copies, missingness, column summaries, cis loci, targetability
    layout_checks    the manifest, the file layout, build residue
    compare          role-shuffle invariance between two builds (``--against``)
    run              ``audit``: every check a finding; the report as a table
    cli              the command line, and the hook to the tell scan (``--tells``)
"""
from __future__ import annotations

from .cli import main
from .compare import against_findings, compare_missingness, compare_nondata
from .findings import ALPHA, Finding
from .layout_checks import check_build_residue, check_file_layout, check_manifest_contents, check_manifest_verifies
from .metadata_checks import (check_identifier_order, check_role_identifiers, check_role_words, check_seed_material,
                              role_word_problems)
from .needles import BIN_WINDOW, DEC_WINDOW, HEX_WINDOW, Needles
from .release_files import (MANIFEST, OUTCOME_STORES, PER_PARTICIPANT_DIRS, TEXT_SUFFIXES, ZARR_META, Entry,
                            ParquetInfo, Release, classify, inventory, npz_structure, tabix_header, vcf_header,
                            zarr_roots)
from .run import CHECKS, Context, audit, format_table
from .secrets import Secrets
from .value_checks import (LATENT_R_MAX, LOCUS_WINDOW_BP, SUMMARY_Z_MAX, check_cis_locus_sharing,
                           check_column_summaries, check_latent, check_missingness, check_targetability)

__all__ = [
    "audit", "main", "format_table", "CHECKS", "Context", "Finding", "Secrets", "Needles", "Release", "ParquetInfo",
    "Entry", "compare_nondata", "compare_missingness", "against_findings", "role_word_problems", "inventory",
    "zarr_roots", "classify", "vcf_header", "tabix_header", "npz_structure", "check_seed_material",
    "check_role_words", "check_role_identifiers", "check_identifier_order", "check_latent", "check_missingness",
    "check_column_summaries", "check_cis_locus_sharing", "check_targetability", "check_file_layout",
    "check_manifest_contents", "check_build_residue", "check_manifest_verifies", "ALPHA", "LATENT_R_MAX",
    "SUMMARY_Z_MAX", "LOCUS_WINDOW_BP", "HEX_WINDOW", "DEC_WINDOW", "BIN_WINDOW", "ZARR_META", "TEXT_SUFFIXES",
    "PER_PARTICIPANT_DIRS", "OUTCOME_STORES", "MANIFEST",
]
