"""The sealed bundle of a screening world (scorer and oracle only; never mounted for an agent)."""
from __future__ import annotations

import json
import posixpath

import numpy as np
import pyarrow as pa
import yaml

from ..outputs import Output
from .config import KIND, ScreeningResolved, world_determining
from .writers import conformation_ids, parquet_bytes

SEALED_FORMAT = "screening-sealed/1"
SCORE_COLUMNS = ("id", "score", "structural", "target", "offtarget_penalty", "property_penalty", "hidden")


def top_k_order(score: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the k best scores, best first (ties broken by row, so the set is well defined)."""
    order = np.lexsort((np.arange(len(score)), -score))
    return order[:k]


def write_sealed(output: Output, resolved: ScreeningResolved, components: dict, scored: dict, noise: np.ndarray,
                 pockets: dict) -> None:
    n = resolved.n
    sizes = resolved.sizes
    ids = conformation_ids(0, n, n)
    table = pa.table({
        "id": pa.array(ids, type=pa.string()),
        "score": scored["score"], "structural": scored["structural"], "target": components["target"],
        "offtarget_penalty": scored["offtarget_penalty"], "property_penalty": scored["property_penalty"],
        "hidden": noise,
        **{k: components[k] for k in sorted(components) if k.startswith("offtarget_")},
        "logp": components["logp"], "mw": components["mw"], "donors": components["donors"],
        "heavy_atoms": components["heavy_atoms"], "min_distance": components["min_distance"],
        "route": components["route"].astype(np.int8),
    })
    output.makedirs(output.sealed)
    output.write_bytes(posixpath.join(output.sealed, "scores.parquet"), parquet_bytes(table))
    top = top_k_order(scored["score"], sizes["top_k"])
    output.write_json(posixpath.join(output.sealed, "topk.json"), {
        "format": SEALED_FORMAT, "top_k": sizes["top_k"], "ids": [ids[i] for i in top],
        "threshold": float(scored["score"][top[-1]]),
    })
    output.write_json(posixpath.join(output.sealed, "pockets.json"), {"format": SEALED_FORMAT, **pockets})
    output.write_json(posixpath.join(output.sealed, "oracle.json"), {
        "format": SEALED_FORMAT, "kind": KIND, "world_id": str(resolved.cfg.world.id), **sizes,
        "time_limit_hours": float(resolved.cfg.world.time_limit_hours),
    })
    doc = world_determining(resolved)
    doc["kind"] = KIND
    output.write_text(posixpath.join(output.sealed, "world.yaml"), yaml.safe_dump(doc, sort_keys=True))
    output.write_json(posixpath.join(output.sealed, "truth.json"), {
        "format": SEALED_FORMAT, "kind": KIND, "world_id": str(resolved.cfg.world.id),
        "hidden_share": float(resolved.cfg.world.score.hidden_share), "sizes": sizes,
    })


def is_screening_sealed(sealed_dir) -> bool:
    """Whether ``sealed_dir`` is a screening world's sealed bundle."""
    from pathlib import Path

    try:
        return json.loads((Path(sealed_dir) / "oracle.json").read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def read_sealed(sealed_dir) -> dict:
    """The scorer's and oracle's view of a sealed bundle: sizes, top-K ids, every score by id."""
    from pathlib import Path

    import pyarrow.parquet as pq

    sealed = Path(sealed_dir)
    oracle = json.loads((sealed / "oracle.json").read_text())
    if oracle.get("kind") != KIND:
        raise ValueError(f"{sealed}: oracle.json is not a screening world's (kind={oracle.get('kind')!r})")
    topk = json.loads((sealed / "topk.json").read_text())
    scores = pq.read_table(sealed / "scores.parquet", columns=["id", "score"])
    return {"oracle": oracle, "topk": topk["ids"], "threshold": topk["threshold"],
            "ids": scores.column("id").to_pylist(), "score": scores.column("score").to_numpy()}
