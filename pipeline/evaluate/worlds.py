"""The worlds of an evaluation (``pipeline.evaluate.runner``): a world's manifest digests
(the SHA-256 of its release and sealed MANIFEST.json and one digest over both), its
bundles verified against them, the worlds absent or damaged built on the cluster, and
every world's build checked against the one evaluation.json recorded.

One job: that every episode is played on the world build the evaluation recorded.
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from .. import bundle
from .store import EVALUATION, EvaluationError


class WorldChanged(Exception):
    """Raised in a task: the world a worker sees is not the build the evaluation recorded."""

    def __init__(self, world: str, found: str, expected: str, where: str):
        super().__init__(world, found, expected, where)
        self.world, self.found, self.expected, self.where = world, found, expected, where

    def __str__(self) -> str:
        return (f"world {self.world}: the build {self.where} sees has manifest digest {self.found[:12]}..., not the "
                f"{self.expected[:12]}... this evaluation recorded")


def manifest_digests(world_dir: os.PathLike | str) -> dict:
    """SHA-256 of the world's release and sealed MANIFEST.json and the world's digest over both."""
    world = Path(world_dir)
    out = {}
    for name in (bundle.RELEASE, bundle.SEALED):
        path = world / name / bundle.MANIFEST
        out[f"{name}_manifest_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    both = f"{out['release_manifest_sha256']}\n{out['sealed_manifest_sha256']}"
    out["manifest_digest"] = hashlib.sha256(both.encode()).hexdigest()
    return out


def verify_world(world_dir: os.PathLike | str) -> list:
    """Problems of a world's release and sealed bundles against their manifests (empty: intact)."""
    world = Path(world_dir)
    return bundle.verify(world / bundle.RELEASE, bundle.RELEASE) + bundle.verify(world / bundle.SEALED, bundle.SEALED)


def prepare_worlds(plan, executor, recorded: dict, log) -> tuple[dict, dict]:
    """Verify the worlds present, build (on the cluster) those absent or damaged, and check every
    world's build against the one ``recorded`` (evaluation.json's worlds).  Returns
    (world id -> its entry for evaluation.json, timings)."""
    from concurrent.futures import ThreadPoolExecutor

    from .settings import read_build_record

    t0 = time.monotonic()
    present = [w for w in plan.worlds if w.present]
    with ThreadPoolExecutor(max_workers=4) as pool:
        problems = dict(zip([w.id for w in present], pool.map(lambda w: verify_world(w.dir), present)))
    verify_s = time.monotonic() - t0
    to_build = [w for w in plan.worlds if not w.present]
    for w in present:
        if problems[w.id]:
            log(f"world {w.id}: {problems[w.id][0]} ({len(problems[w.id])} problem(s)); rebuilding it")
            to_build.append(w)
    build_s = 0.0
    if to_build:
        from ..panel import Plan as BuildPlan
        from ..panel import execute

        t1 = time.monotonic()
        log(f"building {len(to_build)} world(s): {', '.join(w.id for w in to_build)}")
        rows = execute(BuildPlan("evaluation", [w.resolved for w in to_build], plan.jobs), executor)
        for row in rows:
            if not row["complete"]:
                raise EvaluationError(f"world {row['world']}: the build did not complete ({row['error']})")
        for w in to_build:
            bad = verify_world(w.dir)
            if bad:
                raise EvaluationError(f"world {w.id}: the build does not verify against its manifest ({bad[0]})")
        build_s = time.monotonic() - t1
    entries = {}
    for w in plan.worlds:
        record = read_build_record(Path(w.dir)) or {}
        if record.get("config_sha256") != w.config_digest:
            raise EvaluationError(f"world {w.id}: {w.dir} holds a build of another configuration than this "
                                  "evaluation's; valid: worlds_out=<another folder>")
        digests = manifest_digests(w.dir)
        old = (recorded.get(w.id) or {}).get("manifest_digest")
        if old is not None and old != digests["manifest_digest"]:
            raise EvaluationError(
                f"world {w.id}: its build (manifest digest {digests['manifest_digest'][:12]}...) differs from the one "
                f"this evaluation recorded ({old[:12]}...) in {Path(plan.out) / EVALUATION}; valid: restore that build "
                "(the same generator version, configuration and seed) or evaluate into another out=")
        entries[w.id] = {"kind": w.kind, "archetype": w.archetype, "dir": w.dir, "scale": record.get("scale"),
                         "config_sha256": w.config_digest, "generator_version": record.get("generator_version"),
                         **digests}
    return entries, {"verify_s": verify_s, "build_s": build_s, "worlds_built": [w.id for w in to_build]}
