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

import hashlib
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import __version__
from .bundle import FORMAT_VERSION, MANIFEST, RELEASE, SEALED, manifest_problems, outside_manifest, source_date
from .outputs import Output


def _hash_file(fs, path: str) -> tuple:
    h = hashlib.sha256()
    size = 0
    with fs.open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def bundle_kind(root: str) -> str:
    """``sealed`` for a world's sealed folder (``<out>/<id>/sealed``), else ``release``."""
    return SEALED if posixpath.basename(root.rstrip("/")) == SEALED else RELEASE


def list_files(fs: Any, root: str) -> list:
    kind = bundle_kind(root)
    out = []
    for path in sorted(fs.find(root)):
        rel = posixpath.relpath(path, root)
        if outside_manifest(rel, kind) or rel.endswith(".wip"):
            continue
        out.append(rel)
    return sorted(out)


def build_manifest(output: Output, root: str, known: dict | None = None, extra: dict | None = None, threads: int = 4,
                   absent: Any = None) -> dict:
    """Manifest of ``root``; ``known`` maps relative paths to (size, sha256)
    computed when the file was written, so large outputs are not read twice.
    ``absent``: paths of ``known`` to list although they are no longer on disk."""
    known = dict(known or {})
    rels = list_files(output.fs, root)
    if absent:  # written, verified and removed (a pixel sink): listed as built
        rels = sorted(set(rels) | {r for r in absent if r in known})
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


def is_complete(output: Output, root: str) -> bool:
    return output.exists(posixpath.join(root, MANIFEST))


def verify(output: Output, root: str) -> list:
    """Problems with ``root`` against its manifest (empty list when intact), in the words
    of the bundle contract's check (the release loader and the audit say the same)."""
    import json

    path = posixpath.join(root, MANIFEST)
    if not output.exists(path):
        return [f"{root}: no {MANIFEST}: the bundle is incomplete"]
    doc = json.loads(output.read_bytes(path))
    return manifest_problems(output.fs, root, {f["path"]: f for f in doc["files"]}, kind=bundle_kind(root))
