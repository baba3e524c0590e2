"""The build record: ``<out>/<id>/build-record.json``, beside the bundle.

Everything about a build that varies between runs of one config lives here and
never in ``release/`` or ``sealed/`` (which stay byte-identical): when and where
it ran, package versions, the cluster's worker count, and per-stage wall, CPU
and bytes written.  It identifies the config by a digest of the world-
determining config *without* the seed, and the outputs by their manifests'
SHA-256.  It never holds the seed.

What determines a world is defined once, :func:`world_determining` (declared on the
schema, ``pipeline.config_schema``): sealed/world.yaml records it, and the build record's
digest, the evaluation's world digest (``pipeline.evaluate.settings``), resumption
(``pipeline.graph.steps.prepare_work``) and the training worlds' cache key
(``pipeline.frameworks.worlds.world_key``) are all over it.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import posixpath
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from . import FORMAT_VERSION, __version__, config
from .config_schema import world_determining
from .formats import FormatError, check_format
from .outputs import Output

RECORD = "build-record.json"
COUNTERS = ("reused_partitions",)  #: task "stages" that count events rather than time them
PACKAGES = ("numpy", "numba", "dask", "distributed", "pyarrow", "pandas", "zarr", "numcodecs", "xarray", "fsspec",
            "hydra-core", "omegaconf", "scipy", "bokeh")


def config_digest(cfg: Any) -> str:
    """SHA-256 of the world-determining config (:func:`world_determining`) as sealed/world.yaml
    holds it, with the seed left out (a digest over a seed would be a way to test guesses)."""
    doc = world_determining(cfg)
    doc["world"] = {k: v for k, v in doc.get("world", {}).items() if k != "seed"}
    return hashlib.sha256(config.canonical_json(doc).encode()).hexdigest()


def resume_doc(resolved: Any) -> dict:
    """What a resumed build must match (``pipeline.outputs.resume_or_reset``): the
    world-determining config and the seed."""
    doc = world_determining(resolved.cfg)
    doc["seed"] = str(resolved.seed)
    return doc


def versions() -> dict:
    out = {"drugtargetworld": __version__, "python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _sha256(output, path: str) -> str | None:
    return hashlib.sha256(output.read_bytes(path)).hexdigest() if output.exists(path) else None


def make(resolved: config.Resolved, output: Output, progress: Any, task_timings: dict, n_workers: int, started: float, cpu0: float,
         manifest: dict) -> dict:
    cfg = resolved.cfg
    finished = time.time()
    return {
        "generator": "drugtargetworld",
        "generator_version": __version__,
        "format_version": FORMAT_VERSION,
        "world_id": str(cfg.world.id),
        "scale": str(cfg.scale.name),
        "config_sha256": config_digest(cfg),
        "release_manifest_sha256": _sha256(output, posixpath.join(output.release, "MANIFEST.json")),
        "sealed_manifest_sha256": _sha256(output, posixpath.join(output.sealed, "MANIFEST.json")),
        "started_utc": _dt.datetime.fromtimestamp(started, _dt.timezone.utc).isoformat(timespec="seconds"),
        "finished_utc": _dt.datetime.fromtimestamp(finished, _dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(finished - started, 3),
        "client_cpu_s": round(time.process_time() - cpu0, 3),
        "host": platform.node(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "versions": versions(),
        "cluster": {"kind": str(cfg.cluster.kind), "workers": int(n_workers),
                    "threads_per_worker": int(cfg.cluster.threads_per_worker), "chunk_blocks": int(cfg.cluster.chunk_blocks)},
        "files": int(manifest["n_files"]),
        "bytes": int(manifest["total_bytes"]),
        # client stages in order: wall and this process's CPU, bytes the world folder grew by, tasks submitted
        "stages": [{"name": name, **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in rec.items()}}
                   for name, rec in progress.records.items()],
        # task stages summed over every task on every worker (wall, CPU)
        "task_stages": {name: {"wall_s": round(float(v[0]), 3), "cpu_s": round(float(v[1]), 3)}
                        for name, v in sorted(task_timings.items()) if name not in COUNTERS},
        "reused_partitions": int(task_timings.get("reused_partitions", (0, 0))[0]),
    }


def write(output: Output, record: dict) -> str:
    path = posixpath.join(output.root, RECORD)
    output.write_json(path, record)
    return path


def read(world_dir, error: type = FormatError) -> dict | None:
    """``<world_dir>/build-record.json``, or None when it is absent or unreadable; a record of
    another ``format_version`` than this version writes raises ``error`` naming the file."""
    path = Path(world_dir) / RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    check_format(record.get("format_version"), FORMAT_VERSION, path, what="format_version", error=error)
    return record
