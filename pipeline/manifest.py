"""MANIFEST.json: written last; every file with its size and SHA-256.

A release (or sealed bundle) without its manifest is incomplete.  The release
manifest carries the generator version, the format version and the scale name,
and nothing that reveals the truth or the seed.  It carries no wall-clock time,
so two builds of one config are byte-identical manifests included; the
reproducible-builds convention ``SOURCE_DATE_EPOCH`` adds a ``created`` time on
request.  What varies between runs (timings, host, workers) goes in the build
record beside the bundle (``pipeline.buildrecord``).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import os
import posixpath
from concurrent.futures import ThreadPoolExecutor

from . import FORMAT_VERSION, __version__

MANIFEST = "MANIFEST.json"


def source_date(environ=None) -> str | None:
    """``SOURCE_DATE_EPOCH`` (https://reproducible-builds.org/specs/source-date-epoch/)
    as an ISO 8601 UTC time, or None when it is unset.  A malformed value is an
    error, as the specification asks, rather than silently ignored."""
    value = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH")
    if value is None:
        return None
    if not value.isdigit():
        raise ValueError(f"SOURCE_DATE_EPOCH: {value!r} is not a time; valid: a non-negative integer of seconds since 1970-01-01 UTC")
    try:
        when = _dt.datetime.fromtimestamp(int(value), _dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"SOURCE_DATE_EPOCH: {value} is out of range; valid: seconds since 1970-01-01 UTC up to year 9999") from None
    return when.isoformat()


def _hash_file(fs, path: str) -> tuple:
    h = hashlib.sha256()
    size = 0
    with fs.open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def list_files(fs, root: str) -> list:
    out = []
    for path in sorted(fs.find(root)):
        rel = posixpath.relpath(path, root)
        if rel == MANIFEST or rel.endswith(".wip"):
            continue
        out.append(rel)
    return sorted(out)


def build_manifest(output, root: str, known: dict | None = None, extra: dict | None = None, threads: int = 4) -> dict:
    """Manifest of ``root``; ``known`` maps relative paths to (size, sha256)
    computed when the file was written, so large outputs are not read twice."""
    known = dict(known or {})
    rels = list_files(output.fs, root)
    todo = [r for r in rels if r not in known]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for rel, res in zip(todo, pool.map(lambda r: _hash_file(output.fs, posixpath.join(root, r)), todo)):
            known[rel] = res
    files = [{"path": r, "size": int(known[r][0]), "sha256": known[r][1]} for r in rels]
    doc = {
        "generator": "drugtargetworld",
        "generator_version": __version__,
        "format_version": FORMAT_VERSION,
        "n_files": len(files),
        "total_bytes": sum(f["size"] for f in files),
        "files": files,
    }
    created = source_date()
    if created is not None:
        doc["created"] = created
    doc.update(extra or {})
    return doc


def is_complete(output, root: str) -> bool:
    return output.exists(posixpath.join(root, MANIFEST))


def verify(output, root: str) -> list:
    """Problems with ``root`` against its manifest (empty list when intact)."""
    import json

    path = posixpath.join(root, MANIFEST)
    if not output.exists(path):
        return [f"{root}: no {MANIFEST}: the bundle is incomplete"]
    doc = json.loads(output.read_bytes(path))
    problems = []
    listed = {f["path"]: f for f in doc["files"]}
    present = set(list_files(output.fs, root))
    for rel in sorted(present - set(listed)):
        problems.append(f"{rel}: present but not in the manifest")
    for rel, f in listed.items():
        if rel not in present:
            problems.append(f"{rel}: listed in the manifest but missing")
            continue
        size, sha = _hash_file(output.fs, posixpath.join(root, rel))
        if size != f["size"] or sha != f["sha256"]:
            problems.append(f"{rel}: size or SHA-256 differs from the manifest")
    return problems
