"""The sealed bundle of a screening world (scorer and oracle only; never mounted for an agent)."""
from __future__ import annotations

import json
import posixpath

import numpy as np
import pyarrow as pa
import yaml

from ..outputs import Output
from .bundle import ORACLE, POCKETS, SCORES, SEALED_FORMAT, TOPK, TRUTH, WORLD_CONFIG, top_k_order
from .config import KIND, ScreeningResolved, world_determining
from .writers import conformation_id_array, conformation_ids, parquet_bytes

SCORE_COLUMNS = ("id", "score", "structural", "target", "offtarget_penalty", "property_penalty", "hidden")


def write_sealed(output: Output, resolved: ScreeningResolved, components: dict, scored: dict, noise: np.ndarray,
                 pockets: dict) -> None:
    n = resolved.n
    sizes = resolved.sizes
    table = pa.table({
        "id": conformation_id_array(0, n, n),
        "score": scored["score"], "structural": scored["structural"], "target": components["target"],
        "offtarget_penalty": scored["offtarget_penalty"], "property_penalty": scored["property_penalty"],
        "hidden": noise,
        **{k: components[k] for k in sorted(components) if k.startswith("offtarget_")},
        "logp": components["logp"], "mw": components["mw"], "donors": components["donors"],
        "heavy_atoms": components["heavy_atoms"], "min_distance": components["min_distance"],
        "route": components["route"].astype(np.int8),
    })
    output.makedirs(output.sealed)
    output.write_bytes(posixpath.join(output.sealed, SCORES), parquet_bytes(table))
    top = top_k_order(scored["score"], sizes["top_k"])
    output.write_json(posixpath.join(output.sealed, TOPK), {
        "format": SEALED_FORMAT, "top_k": sizes["top_k"], "ids": [conformation_ids(int(i), int(i) + 1, n)[0] for i in top],
        "threshold": float(scored["score"][top[-1]]),
    })
    output.write_json(posixpath.join(output.sealed, POCKETS), {"format": SEALED_FORMAT, **pockets})
    output.write_json(posixpath.join(output.sealed, ORACLE), {
        "format": SEALED_FORMAT, "kind": KIND, "world_id": str(resolved.cfg.world.id), **sizes,
        "time_limit_hours": float(resolved.cfg.world.time_limit_hours),
    })
    doc = world_determining(resolved)
    doc["kind"] = KIND
    output.write_text(posixpath.join(output.sealed, WORLD_CONFIG), yaml.safe_dump(doc, sort_keys=True))
    output.write_json(posixpath.join(output.sealed, TRUTH), {
        "format": SEALED_FORMAT, "kind": KIND, "world_id": str(resolved.cfg.world.id),
        "hidden_share": float(resolved.cfg.world.score.hidden_share), "sizes": sizes,
    })
