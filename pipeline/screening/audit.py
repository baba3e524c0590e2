"""Leak audit of a screening world's release: nothing outside the molecules themselves
carries information about the hidden score.

    python -m pipeline.audit <screening world dir>     (dispatches here)

Checks (thresholds from standard errors; the tests use a family-wise level):

* ids and row order: Spearman(row index, score) within 4 SE (SE = 1/sqrt(n-1));
* shard boundaries: one-way ANOVA of the score over the SDF shards / row groups, and a
  chi-square test of the top-K's counts per shard, both p > 1e-4;
* position inside a shard: Spearman(row mod shard size, score) within 4 SE;
* SDF files: each shard's molecules are exactly its rows, in row order, titled by id;
* metadata: the release verifies against its manifest (no file added, changed or
  missing); the manifest's keys are the allowed ones; no release file holds the seed (hex
  or decimal), the world id, a sealed file name, a score, or a Parquet key-value entry
  other than pyarrow's schema; the README states only the rules of the game.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml

from .. import bundle
from .bundle import LIBRARY, ORACLE, README, RELEASE_MANIFEST_KEYS, SCORES, SDF_DIR, SDF_GLOB, SEALED_FILES, WORLD_CONFIG
from .config import SHARD_ROWS
P_MIN = 1e-4
Z_MAX = 4.0


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def audit(world_dir) -> dict:
    from scipy.stats import chisquare, f_oneway

    world = Path(world_dir)
    release, sealed = world / bundle.RELEASE, world / bundle.SEALED
    scores = pq.read_table(sealed / SCORES, columns=["id", "score"]).to_pandas()
    oracle = json.loads((sealed / ORACLE).read_text())
    seed = int(yaml.safe_load((sealed / WORLD_CONFIG).read_text())["world"]["seed"], 16)
    n = len(scores)
    s = scores["score"].to_numpy()
    rows = np.arange(n)
    se = 1.0 / np.sqrt(n - 1)
    checks = []

    def check(name, ok, value):
        checks.append({"check": name, "ok": bool(ok), "value": value})

    lib = pq.ParquetFile(release / LIBRARY)
    ids = lib.read(columns=["id"]).column("id").to_pylist()
    check("library ids are the sealed ids in the same order", ids == scores["id"].tolist(), len(ids))
    rho = _spearman(rows, s)
    check(f"Spearman(row, score) within {Z_MAX} SE", abs(rho) / se < Z_MAX, rho)
    rho_pos = _spearman(rows % SHARD_ROWS, s)
    check(f"Spearman(row within shard, score) within {Z_MAX} SE", abs(rho_pos) / se < Z_MAX, rho_pos)
    shard = rows // SHARD_ROWS
    n_shards = int(shard.max()) + 1
    if n_shards > 1:
        p_anova = float(f_oneway(*[s[shard == k] for k in range(n_shards)]).pvalue)
        check(f"score means equal across shards (ANOVA p > {P_MIN})", p_anova > P_MIN, p_anova)
        top = np.zeros(n, dtype=bool)
        top[np.argsort(-s, kind="stable")[:int(oracle["top_k"])]] = True
        counts = np.bincount(shard[top], minlength=n_shards)
        expected = np.bincount(shard, minlength=n_shards) * top.mean()
        p_chi = float(chisquare(counts, expected).pvalue)
        check(f"top-K spread evenly over shards (chi-square p > {P_MIN})", p_chi > P_MIN, p_chi)
    groups = [lib.metadata.row_group(i).num_rows for i in range(lib.metadata.num_row_groups)]
    check("row groups are the fixed shards", groups == [min(SHARD_ROWS, n - k * SHARD_ROWS) for k in range(len(groups))], groups[:3])
    kv = {k.decode() for k in (lib.metadata.metadata or {})}
    check("Parquet key-value metadata is pyarrow's schema only", kv <= {"ARROW:schema"}, sorted(kv))
    # SDF shards hold their rows in order
    sdf_ok = True
    for k, path in enumerate(sorted((release / SDF_DIR).glob(SDF_GLOB))):
        with gzip.open(path, "rt") as handle:
            titles = [line.rstrip("\n") for i, line in enumerate(_records_first_lines(handle))]
        if titles != ids[k * SHARD_ROWS:(k + 1) * SHARD_ROWS]:
            sdf_ok = False
    check("each SDF shard holds its rows in row order, titled by id", sdf_ok, n_shards)
    manifest = json.loads((release / bundle.MANIFEST).read_text())
    check("release manifest has only the allowed keys", set(manifest) <= RELEASE_MANIFEST_KEYS, sorted(set(manifest) - RELEASE_MANIFEST_KEYS))
    stray = bundle.verify(release)
    check("every release file is the manifest's, with its size and SHA-256", not stray, stray[:5])
    # The world's id is the sealed manifest's only (an agent is never told which world it plays).
    needles = [hex(seed)[2:].encode(), str(seed).encode(), oracle["world_id"].encode(),
               *[name.encode() for name in SEALED_FILES]]
    found = []
    for path in sorted(p for p in release.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        for needle in needles:
            if needle in data:
                found.append(f"{path.name}: {needle[:12].decode()}")
    check("no release file holds the seed, the world id or a sealed file name", not found, found[:5])
    readme = (release / README).read_text()
    numbers = re.findall(r"-?\d+\.\d{3,}", readme)
    check("the README holds no score-like number", not numbers, numbers[:5])
    return {"world_id": oracle["world_id"], "kind": "screening", "checks": checks, "ok": all(c["ok"] for c in checks)}


def _records_first_lines(handle):
    """The title line of every molfile record of an SD file."""
    first = True
    for line in handle:
        if first:
            yield line
            first = False
        elif line.startswith("$$$$"):
            first = True


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m pipeline.audit <screening world dir>")
        return 2
    report = audit(argv[0])
    for c in report["checks"]:
        print(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['value']}")
    return 0 if report["ok"] else 1
