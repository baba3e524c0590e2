"""Role-shuffle invariance (``--against``): two builds of one world whose roles are
re-dealt over identifiers (``world.roles_salt``).  Everything that is not a data value
must be identical.  Some quantities look structural but are outcomes of the
simulation, which re-dealt roles legitimately change:

* the number of rows of event tables (diagnoses, medications, MACE) and of the
  visit-2 tables (attendees are drawn among those alive), and so their
  row-group sizes and ``subject_id`` dictionaries;
* which participants are imaged (T3 worlds select on L) and attend visit 2, and
  so the names of per-participant image files and the subject extent of a
  visit-2 imaging Zarr store;
* the order of a Parquet dictionary of a value column (first appearance in the
  rows); the set of its values is compared.

Tables with one row per participant (row count equal to the cohort) or per
protein are compared strictly: row counts, row groups, identifier dictionaries
in order, encodings.
"""
from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from .. import bundle
from .findings import Finding, limit
from .release_files import (MOLECULE_ID, OUTCOME_STORES, PER_PARTICIPANT_DIRS, SUBJECT_ID, TARGETABILITY, ZARR_META,
                            ParquetInfo,
                            Release, column_batches, npz_structure, numeric_float, read_text, strings, tabix_header,
                            vcf_header)
from .secrets import Secrets

BASELINE_IMAGING = bundle.IMAGING[0]


def _per_participant(rel_path: str) -> Optional[str]:
    """The folder or store of a file that exists per participant of a data-defined
    subset (an image file, or a chunk of an outcome-sized Zarr store), else None."""
    parts = rel_path.split("/")
    if len(parts) == 2 and parts[0] in PER_PARTICIPANT_DIRS and SUBJECT_ID.match(parts[1].split(".", 1)[0]):
        return parts[0]
    if len(parts) >= 2 and parts[0] in OUTCOME_STORES and parts[-1] not in ZARR_META:
        return parts[0]
    return None


def _structural_paths(rel: Release) -> list:
    return [e.rel + ("/" if e.kind == "dir" else "@" if e.kind == "symlink" else "")
            for e in rel.entries if _per_participant(e.rel) is None]


def _diff_lists(label: str, a: list, b: list, out: list) -> None:
    if a == b:
        return
    sa, sb = set(a), set(b)
    if sa != sb:
        out.append(f"{label}: only in A {limit(sorted(sa - sb), 5)}, only in B {limit(sorted(sb - sa), 5)}")
    else:
        k = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        out.append(f"{label}: same members, different order (first at position {k}: {a[k]!r} vs {b[k]!r})")


def _entity_table(info: ParquetInfo, n_cohort: Optional[int]) -> bool:
    """One row per participant (the whole cohort) or per protein: rows are structure."""
    if info.index_columns == ["protein"]:
        return True
    return "subject_id" in info.index_columns and (n_cohort is None or info.md.num_rows == n_cohort)


def _parquet_diffs(r: str, a: ParquetInfo, b: ParquetInfo, entity: bool, out: list) -> None:
    if a.kv != b.kv:
        for k in sorted(set(a.kv) | set(b.kv)):
            if a.kv.get(k) != b.kv.get(k):
                out.append(f"{r}: key-value metadata {k.decode('utf-8', 'replace')!r} differs")
    if not a.arrow_schema.equals(b.arrow_schema, check_metadata=True):
        out.append(f"{r}: Arrow schema differs")
    _diff_lists(f"{r}: column order", a.columns, b.columns, out)
    if a.parquet_schema != b.parquet_schema:
        out.append(f"{r}: Parquet schema differs")
    for attr in ("created_by", "format_version", "num_columns"):
        if getattr(a.md, attr) != getattr(b.md, attr):
            out.append(f"{r}: {attr} {getattr(a.md, attr)!r} vs {getattr(b.md, attr)!r}")
    if entity:
        if a.md.num_rows != b.md.num_rows:
            out.append(f"{r}: {a.md.num_rows} vs {b.md.num_rows} rows")
        rga = [a.md.row_group(i).num_rows for i in range(a.md.num_row_groups)]
        rgb = [b.md.row_group(i).num_rows for i in range(b.md.num_row_groups)]
        if rga != rgb:
            out.append(f"{r}: row groups {rga} vs {rgb}")
    ids = set(a.index_columns) | {"subject_id"}
    skip_encoding = set() if entity else {"subject_id"}

    def chunk_meta(md, g, i):
        c = md.row_group(g).column(i)
        return (c.path_in_schema, c.physical_type, c.compression, tuple(sorted(c.encodings)),
                c.has_dictionary_page, c.is_stats_set)

    # Event tables may split into a different number of row groups; their first is compared.
    groups = range(min(a.md.num_row_groups, b.md.num_row_groups) if entity else min(1, a.md.num_row_groups, b.md.num_row_groups))
    if a.md.num_columns == b.md.num_columns:
        for g in groups:
            for i in range(a.md.num_columns):
                ma, mb = chunk_meta(a.md, g, i), chunk_meta(b.md, g, i)
                if ma[0] in skip_encoding:
                    continue
                if ma != mb:
                    out.append(f"{r}: row group {g} column chunk layout of {ma[0]} differs: {ma} vs {mb}")
    strings = [c for c in a.string_columns if c in b.string_columns]
    da, db = a.dictionaries(strings), b.dictionaries(strings)
    for c in strings:
        if c in ids:
            if entity and da.get(c) != db.get(c):
                out.append(f"{r}: dictionary of identifier column {c} differs")
        else:
            va = {v for d in da.get(c) or [] if d for v in d}
            vb = {v for d in db.get(c) or [] if d for v in d}
            if va != vb:
                out.append(f"{r}: dictionary of {c} holds different values: only A {limit(sorted(map(str, va - vb)), 5)}, "
                           f"only B {limit(sorted(map(str, vb - va)), 5)}")


def _zarr_json(path: str, rel_path: str) -> object:
    """Zarr metadata JSON with the subject extent of visit-2 imaging stores (an
    outcome: who attended and was imaged) set aside."""
    doc = json.load(open(path))
    if rel_path.split("/", 1)[0] not in OUTCOME_STORES:
        return doc

    def norm(meta):
        if isinstance(meta, dict) and "shape" in meta and "chunks" in meta and meta.get("shape"):
            meta = dict(meta)
            meta["shape"] = ["<subjects>"] + list(meta["shape"][1:])
            if len(meta["chunks"]) == 1:
                meta["chunks"] = ["<subjects>"]
        return meta

    if isinstance(doc, dict) and "metadata" in doc:
        doc = dict(doc)
        doc["metadata"] = {k: norm(v) for k, v in doc["metadata"].items()}
        return doc
    return norm(doc)


def compare_nondata(release_a: str, release_b: str) -> list:
    """Every difference between two releases outside data values (see the module
    docstring for what counts as data).  Empty when the non-data bytes agree."""
    A, B = Release(release_a), Release(release_b)
    out: list = []
    _diff_lists("file list", _structural_paths(A), _structural_paths(B), out)
    for folder in PER_PARTICIPANT_DIRS:
        na = sum(1 for e in A.files if _per_participant(e.rel) == folder)
        nb = sum(1 for e in B.files if _per_participant(e.rel) == folder)
        if folder == BASELINE_IMAGING and na != nb:
            out.append(f"{BASELINE_IMAGING}/: {na} vs {nb} baseline image files (the imaged count is fixed by the scale)")
    common = [e.rel for e in A.files if e.rel in B.kinds and _per_participant(e.rel) is None]
    cohort = A.cohort()
    n_cohort = len(cohort) if cohort is not None else None
    for r in common:
        kind = A.kinds[r]
        pa_, pb_ = A.abs(r), B.abs(r)
        if kind != B.kinds[r]:
            out.append(f"{r}: {kind} vs {B.kinds[r]}")
        elif kind == "parquet":
            ia = A.parquet(r)
            _parquet_diffs(r, ia, B.parquet(r), _entity_table(ia, n_cohort), out)
        elif kind == "zarr-meta":
            if read_text(pa_) != read_text(pb_) and _zarr_json(pa_, r) != _zarr_json(pb_, r):
                out.append(f"{r}: Zarr metadata differs")
        elif kind == "zarr-chunk":
            continue
        elif kind == "vcf":
            if vcf_header(pa_) != vcf_header(pb_):
                out.append(f"{r}: VCF header differs")
        elif kind == "index":
            if tabix_header(pa_) != tabix_header(pb_):
                out.append(f"{r}: index header (sequence names, column layout) differs")
        elif kind == "manifest":
            out += _manifest_diffs(json.load(open(pa_)), json.load(open(pb_)))
        elif kind == "npz":
            if npz_structure(pa_) != npz_structure(pb_):
                out.append(f"{r}: npz members, headers or zip fields differ")
        elif read_text(pa_) != read_text(pb_):
            out.append(f"{r}: bytes differ")
    out += _zarr_identifier_diffs(A, B)
    for folder in PER_PARTICIPANT_DIRS:
        shapes: dict = {}
        for R, tag in ((A, "A"), (B, "B")):
            for e in R.files:
                if _per_participant(e.rel) == folder and e.rel.endswith(".npz"):
                    s = json.dumps(npz_structure(R.abs(e.rel)), sort_keys=True)
                    shapes.setdefault(s, f"{tag}:{e.rel}")
        if len(shapes) > 1:
            out.append(f"{folder}/: npz files differ in members, headers or zip fields ({', '.join(shapes.values())})")
    return out


def _manifest_diffs(a: dict, b: dict) -> list:
    out = []
    outcome = lambda doc: sum(1 for f in doc.get("files", []) if _per_participant(f["path"]) not in (None, BASELINE_IMAGING))
    for k in sorted(set(a) | set(b)):
        if k in ("created", "total_bytes", "files"):
            continue
        if k == "n_files" and a.get(k, 0) - outcome(a) == b.get(k, 0) - outcome(b):
            continue
        if a.get(k) != b.get(k):
            out.append(f"MANIFEST.json: {k} {a.get(k)!r} vs {b.get(k)!r}")
    if set(a) != set(b):
        out.append(f"MANIFEST.json: keys differ {sorted(set(a) ^ set(b))}")
    pa_ = [f["path"] for f in a.get("files", []) if _per_participant(f["path"]) is None]
    pb_ = [f["path"] for f in b.get("files", []) if _per_participant(f["path"]) is None]
    _diff_lists("MANIFEST.json file list", pa_, pb_, out)
    ka = {tuple(sorted(f)) for f in a.get("files", [])}
    kb = {tuple(sorted(f)) for f in b.get("files", [])}
    if ka != kb:
        out.append(f"MANIFEST.json: file entries carry different keys {ka} vs {kb}")
    return out


def _zarr_identifier_diffs(A: Release, B: Release) -> list:
    """String arrays (sample, variant, contig, filter identifiers) are identifiers,
    not data; imaging stores list who was imaged, which is an outcome."""
    import zarr

    out = []
    for root in sorted(A.roots & B.roots):
        if root.startswith(BASELINE_IMAGING):
            continue
        ga = zarr.open_group(A.abs(root), mode="r", zarr_format=2)
        gb = zarr.open_group(B.abs(root), mode="r", zarr_format=2)
        for name, arr in ga.members(max_depth=None):
            if not hasattr(arr, "dtype") or not str(arr.dtype).startswith(("StringDType", "<U", "|O", "object")):
                continue
            try:
                other = gb[name]
            except KeyError:
                continue
            if strings(arr) != strings(other):
                out.append(f"{root}/{name}: identifier values differ")
    return out


def compare_missingness(release_a: str, release_b: str) -> list:
    """Missing-value masks of the molecular tables, on the participants both hold:
    the missingness process must not depend on which protein carries which role."""
    A, B = Release(release_a), Release(release_b)
    out = []
    for r in A.of_kind("parquet"):
        if r not in B.kinds:
            continue
        ia, ib = A.parquet(r), B.parquet(r)
        mols = [c for c in ia.value_columns if MOLECULE_ID.match(c)]
        if not mols or ia.subject_key is None:
            continue
        if mols != [c for c in ib.value_columns if MOLECULE_ID.match(c)]:
            out.append(f"{r}: molecule columns differ")
            continue
        sa = pq.read_table(ia.path, columns=["subject_id"]).column("subject_id").to_pylist()
        sb = pq.read_table(ib.path, columns=["subject_id"]).column("subject_id").to_pylist()
        common = sorted(set(sa) & set(sb))
        ra, rb = pd.Index(sa).get_indexer(common), pd.Index(sb).get_indexer(common)
        differ = []
        for ta, tb in zip(column_batches(ia.path, mols), column_batches(ib.path, mols)):
            for name in ta.column_names:
                ma = ~np.isfinite(numeric_float(ta.column(name))[ra])
                mb = ~np.isfinite(numeric_float(tb.column(name))[rb])
                if not np.array_equal(ma, mb):
                    differ.append(name)
        if differ:
            out.append(f"{r}: missing-value pattern differs in {len(differ)} column(s), e.g. {differ[:5]}")
    return out


def _role_shuffle_pair(sa: Secrets, sb: Secrets) -> list:
    """Problems making the two worlds not a role-shuffled pair (same world, roles re-dealt)."""
    out = []
    ca, cb = json.loads(json.dumps(sa.config, default=str)), json.loads(json.dumps(sb.config, default=str))
    for c in (ca, cb):
        (c.get("world") or {}).pop("roles_salt", None)
    if ca != cb:
        keys = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
        out.append(f"the resolved configs differ beyond world.roles_salt (in {keys})")
    if sa.seed != sb.seed:
        out.append("the seeds differ")
    if sa.roles == sb.roles:
        out.append("the roles are dealt identically: the comparison would prove nothing")
    return out


def against_findings(world_dir: str, other: str, secrets: Secrets) -> list:
    """The findings of ``--against``: is ``other`` a role-shuffled twin, and do the two releases agree
    on every non-data byte, every missing-value mask and the targetability table?"""
    ra, rb = os.path.join(world_dir, bundle.RELEASE), os.path.join(other, bundle.RELEASE)
    out = []
    pair = _role_shuffle_pair(secrets, Secrets.load(os.path.join(other, bundle.SEALED)))
    out.append(Finding("role_shuffle_pair", not pair, f"{other}: same world and seed, roles re-dealt"
                       if not pair else f"{other} is not a role-shuffled twin", pair))
    for name, fn, ok_text in (
        ("role_shuffle_invariance", compare_nondata, "every non-data byte identical"),
        ("missingness_invariance", compare_missingness, "missing-value masks identical on shared participants"),
    ):
        try:
            diffs = fn(ra, rb)
            out.append(Finding(name, not diffs, ok_text if not diffs else f"{len(diffs)} difference(s)", limit(diffs, 40)))
        except Exception as exc:
            out.append(Finding(name, False, f"check crashed: {type(exc).__name__}: {exc}"))
    ta, tb = os.path.join(ra, TARGETABILITY), os.path.join(rb, TARGETABILITY)
    same = os.path.exists(ta) and os.path.exists(tb) and read_text(ta) == read_text(tb)
    out.append(Finding("targetability_invariance", same, f"{TARGETABILITY} byte-identical" if same
                       else f"{TARGETABILITY} differs between the role deals (or is missing)"))
    return out
