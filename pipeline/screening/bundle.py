"""The bundle contract of a screening world: the names in its ``release/`` and
``sealed/`` folders and the readers the judging side uses (the scorer, the oracle,
the audit, the entry points' kind detection).  It imports nothing of the generator,
as ``pipeline.bundle`` does not; the folder and manifest names are that module's.

    release/  library.parquet (id, smiles, elements, coordinates; one row group per
              shard), sdf/library_<shard>.sdf.gz, README.md, MANIFEST.json
    sealed/   scores.parquet, topk.json, pockets.json, oracle.json, world.yaml,
              truth.json, MANIFEST.json
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import bundle

KIND = "screening"
SEALED_FORMAT = "screening-sealed/1"
RELEASE_FORMAT = "screening/1"

LIBRARY = "library.parquet"
SDF_DIR = "sdf"
SDF_GLOB = "library_*.sdf.gz"
README = "README.md"

SCORES = "scores.parquet"
TOPK = "topk.json"
POCKETS = "pockets.json"
ORACLE = bundle.ORACLE
WORLD_CONFIG = bundle.WORLD_CONFIG
TRUTH = bundle.TRUTH
#: Every sealed file but the manifest (the audit looks for their names in the release).
SEALED_FILES = (SCORES, TOPK, POCKETS, ORACLE, WORLD_CONFIG, TRUTH)
#: The keys a screening release manifest may carry: the bundle contract's and the library's size.
RELEASE_MANIFEST_KEYS = frozenset(bundle.MANIFEST_KEYS[bundle.RELEASE]) | {"kind", "release_format", "conformations"}


def top_k_order(score: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the k best scores, best first (ties broken by row, so the set is well defined)."""
    order = np.lexsort((np.arange(len(score)), -score))
    return order[:k]


def is_screening_sealed(sealed_dir) -> bool:
    """Whether ``sealed_dir`` is a screening world's sealed bundle (its oracle.json says so)."""
    try:
        return json.loads((Path(sealed_dir) / ORACLE).read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def is_screening_world(world_dir) -> bool:
    """Whether ``world_dir`` holds a screening world (its release manifest says so)."""
    path = Path(world_dir) / bundle.RELEASE / bundle.MANIFEST
    try:
        return json.loads(path.read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def read_sealed(sealed_dir) -> dict:
    """The scorer's and oracle's view of a sealed bundle: sizes, top-K ids, every score by id."""
    import pyarrow.parquet as pq

    sealed = Path(sealed_dir)
    bundle.check_sealed(sealed, require_manifest=False)  # a manifest that is there names a format we read
    oracle = json.loads((sealed / ORACLE).read_text())
    if oracle.get("kind") != KIND:
        raise ValueError(f"{sealed}: {ORACLE} is not a screening world's (kind={oracle.get('kind')!r})")
    topk = json.loads((sealed / TOPK).read_text())
    scores = pq.read_table(sealed / SCORES, columns=["id", "score"])
    return {"oracle": oracle, "topk": topk["ids"], "threshold": topk["threshold"],
            "ids": scores.column("id").to_pylist(), "score": scores.column("score").to_numpy()}
