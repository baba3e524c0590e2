"""Findings on the release's shape: the manifest's contents and its agreement with the
files, which files exist (nothing per molecule or variant, per-participant files only
where the release's own flags say so, every Zarr chunk present), and no build residue
or copy of a sealed file."""
from __future__ import annotations

import json
import os
import re

import numpy as np

from .. import bundle
from .findings import Finding, limit
from .release_files import MANIFEST, PER_PARTICIPANT_DIRS, SUBJECT_ID, ZARR_META, Release, strings

_PER_ENTITY_NAME = re.compile(r"(PROT|TRANS|MET)_\d+|(?<![a-z])rs\d+")
_RESIDUE = re.compile(
    r"(^|/)(\.hydra|outputs|multirun|\.build|__pycache__|\.ipynb_checkpoints)(/|$)"
    r"|\.(log|wip|tmp|temp|lock|pyc|swp|bak|orig)$|\.partial|~$|(^|/)\.DS_Store$|(^|/)(nohup\.out|core)$"
)


def check_manifest_contents(rel: Release) -> Finding:
    path = rel.abs(MANIFEST)
    if not os.path.exists(path):
        return Finding("manifest_contents", False, f"no {MANIFEST}: the release is incomplete")
    doc = json.load(open(path))
    problems = [f"unexpected key {k!r}" for k in sorted(set(doc) - set(bundle.MANIFEST_KEYS[bundle.RELEASE]))]
    problems += [f"missing key {k!r}" for k in sorted({"files", "generator_version"} - set(doc))]
    for f in doc.get("files", []):
        extra = set(f) - set(bundle.MANIFEST_FILE_KEYS)
        if extra:
            problems.append(f"file entry {f.get('path')!r} carries {sorted(extra)}")
    if doc.get("bundle") not in (None, bundle.RELEASE):
        problems.append(f"bundle is {doc.get('bundle')!r}, not 'release'")
    if "scale" in doc and not re.fullmatch(r"[a-z0-9_-]{1,32}", str(doc["scale"])):
        problems.append(f"scale {doc['scale']!r} is not a scale name")
    # created is present only when the build ran with SOURCE_DATE_EPOCH (reproducible builds)
    if "created" in doc and not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d|Z)?", str(doc["created"])):
        problems.append(f"created {doc.get('created')!r} is not an ISO timestamp")
    for k in ("generator_version", "format_version"):
        if k in doc and not re.fullmatch(r"[0-9A-Za-z.+-]{1,32}", str(doc[k])):
            problems.append(f"{k} {doc[k]!r} is not a version")
    if "format_version" in doc:
        try:
            bundle.check_format_version(doc["format_version"], MANIFEST, generator=doc.get("generator_version", "unknown"))
        except bundle.UnknownFormat as exc:
            problems.append(str(exc))
    files = doc.get("files", [])
    if doc.get("n_files") != len(files):
        problems.append(f"n_files {doc.get('n_files')} != {len(files)} entries")
    if doc.get("total_bytes") != sum(int(f.get("size", 0)) for f in files):
        problems.append("total_bytes is not the sum of the file sizes")
    return Finding("manifest_contents", not problems, f"keys: {', '.join(sorted(doc))}", problems)


def check_file_layout(rel: Release) -> Finding:
    """No per-protein (or per-variant) files; per-participant files only where the
    release's own flags say so; every Zarr chunk file exists whatever its content."""
    problems = []
    for e in rel.entries:
        m = _PER_ENTITY_NAME.search(e.rel)
        if m:
            problems.append(f"{e.rel}: a file per molecule or variant ({m.group(0)})")
    flags = rel.covariate_flags()
    expected = {}
    if flags is not None:
        imaged = flags["imaged"].astype(bool) if "imaged" in flags else None
        visit2 = flags["visit2"].astype(bool) if "visit2" in flags else None
        if imaged is not None:
            expected[bundle.IMAGING[0]] = set(flags.index[imaged])
            if visit2 is not None:
                expected[bundle.IMAGING[2]] = set(flags.index[imaged & visit2])
    cohort = set(flags.index) if flags is not None else set()
    per_dir: dict = {}
    for e in rel.files:
        name = e.rel.rsplit("/", 1)[-1]
        stem = name.split(".", 1)[0]
        if SUBJECT_ID.match(stem):
            folder = e.rel.rsplit("/", 1)[0] if "/" in e.rel else ""
            if folder not in PER_PARTICIPANT_DIRS or not name.endswith(".npz"):
                problems.append(f"{e.rel}: a per-participant file outside {', '.join(PER_PARTICIPANT_DIRS)}")
            else:
                per_dir.setdefault(folder, set()).add(stem)
    for folder, names in sorted(per_dir.items()):
        if folder in expected and names != expected[folder]:
            problems.append(f"{folder}/: {len(names)} files, but covariates flag {len(expected[folder])} participants "
                            f"({len(names - expected[folder])} unexpected, {len(expected[folder] - names)} missing)")
        elif cohort and not names <= cohort:
            problems.append(f"{folder}/: files for participants not in the cohort")
    for root in sorted(rel.roots):
        problems += _zarr_grid_problems(rel, root)
        folder = root[: -len(".zarr")] if root.endswith(".zarr") else root
        if folder in expected and os.path.exists(rel.abs(f"{root}/subject_id/.zarray")):
            import zarr

            ids = strings(zarr.open_group(rel.abs(root), mode="r", zarr_format=2)["subject_id"])
            if set(ids) != expected[folder] or len(ids) != len(expected[folder]):
                problems.append(f"{root}/subject_id lists {len(ids)} participants, but covariates flag "
                                f"{len(expected[folder])}")
            per_dir[root] = set(ids)
    sizes = [e.size for e in rel.files]
    top = sorted(rel.files, key=lambda e: -e.size)[:3]
    detail = (f"{len(rel.files)} files, {sum(sizes) / 1e6:.1f} MB; largest: "
              + ", ".join(f"{e.rel} {e.size / 1e6:.2f} MB" for e in top)
              + "".join(f"; {f}/: {len(n)} {'subjects' if f.endswith('.zarr') else 'npz'}"
                        for f, n in sorted(per_dir.items())))
    return Finding("file_layout", not problems, detail, limit(problems))


def _zarr_grid_problems(rel: Release, root: str) -> list:
    present = {e.rel for e in rel.files}
    out = []
    for e in rel.files:
        if not (e.rel.startswith(root + "/") and e.rel.endswith("/.zarray")):
            continue
        meta = json.load(open(rel.abs(e.rel)))
        folder = e.rel[: -len("/.zarray")]
        sep = meta.get("dimension_separator", ".")
        grid = [-(-s // c) for s, c in zip(meta["shape"], meta["chunks"])]
        missing = 0
        for idx in np.ndindex(*grid) if grid else [()]:
            key = sep.join(map(str, idx)) if idx else "0"
            if f"{folder}/{key}" not in present:
                missing += 1
        if missing:
            out.append(f"{folder}: {missing} chunk file(s) absent, so which files exist depends on the data")
    return out


def check_build_residue(rel: Release, sealed: str) -> Finding:
    problems = []
    for e in rel.entries:
        base = e.rel.rsplit("/", 1)[-1]
        if e.kind == "symlink":
            problems.append(f"{e.rel}: a symbolic link (could reach outside the release)")
        if _RESIDUE.search(e.rel):
            problems.append(f"{e.rel}: build residue")
        elif base.startswith(".") and base not in ZARR_META:
            problems.append(f"{e.rel}: a hidden file or folder")
    sealed_names = set(os.listdir(sealed)) if os.path.isdir(sealed) else set()
    sealed_hashes = {}
    for name in sealed_names:
        p = os.path.join(sealed, name)
        if os.path.isfile(p) and name != MANIFEST:
            sealed_hashes[bundle.sha256(p)] = name
    for e in rel.files:
        base = e.rel.rsplit("/", 1)[-1]
        if base in sealed_names - {MANIFEST}:
            problems.append(f"{e.rel}: named like {bundle.SEALED}/{base}")
    by_size = {os.path.getsize(os.path.join(sealed, n)) for n in sealed_hashes.values()}
    for e in rel.files:
        if e.size in by_size:
            h = bundle.sha256(rel.abs(e.rel))
            if h in sealed_hashes:
                problems.append(f"{e.rel}: a byte copy of {bundle.SEALED}/{sealed_hashes[h]}")
    real = os.path.realpath(rel.path)
    if os.path.realpath(sealed).startswith(real + os.sep):
        problems.append("the sealed bundle lies inside the release")
    return Finding("build_residue", not problems, "no .hydra, logs, work-in-progress, hidden files, links or sealed copies"
                   if not problems else f"{len(problems)} problem(s)", limit(problems))


def check_manifest_verifies(world_dir: str) -> Finding:
    problems = bundle.verify(os.path.join(os.path.abspath(world_dir), bundle.RELEASE))
    return Finding("manifest_verifies", not problems, "every file listed with matching size and SHA-256"
                   if not problems else f"{len(problems)} problem(s)", limit(problems))
