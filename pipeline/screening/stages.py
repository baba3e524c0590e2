"""The build of a screening world as init -> one task per shard -> finalise.

init (client): plan the library (route and synthons of every row), sample the
pockets, withdraw the manifests.  Each shard task (5,000 rows, any worker):
splice SMILES/atoms/bonds, assemble the poses from synthon conformers, dock
them into the target pocket, score every pocket, and write its Parquet part
and SDF shard; a finished shard leaves a ``.done`` record with its files'
SHA-256, so a rerun reuses it.  finalise (client): combine the per-row parts
into the hidden score (library-wide standardisation in row order), write the
sealed bundle, assemble ``library.parquet`` from the parts in shard order,
and write the manifests (release last).
"""
from __future__ import annotations

import hashlib
import io
import json
import posixpath
import time

import numpy as np

from .. import seeds
from ..outputs import Output
from .config import SHARD_ROWS
from .streams import ASSEMBLE, DOCK

# What a finished shard's files are (in its .done record): a shard finished by code that wrote
# them differently (parts with other list-child names, zlib SDF shards) is rebuilt, not reused.
SHARD_FORMAT = "screening-shard/2"
COMPONENTS = ("target", "offtarget_1", "offtarget_2", "offtarget_3", "logp", "mw", "donors", "heavy_atoms",
              "min_distance", "route")


def shard_bounds(n: int) -> list[tuple[int, int]]:
    return [(lo, min(n, lo + SHARD_ROWS)) for lo in range(0, n, SHARD_ROWS)]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def poses(seed: int, lo: int, synthon: np.ndarray, route: np.ndarray, table, target: dict, docking: dict):
    """Spliced molecules and their docked poses (rounded to the released precision) for rows lo.."""
    from kernels.screening import assemble, dock

    from .library import conformer_choice, splice, torsion_table
    from .pocket import kernel_args
    from .writers import COORD_DECIMALS

    m = len(synthon)
    rows = np.arange(lo, lo + m, dtype=np.int64)
    sp = splice(table, synthon)
    conf = conformer_choice(seed, lo, lo + m, synthon, table)
    tors, n_tors = torsion_table(route)
    n_slots = (synthon >= 0).sum(axis=1).astype(np.int64)
    xyz_asm = np.empty((int(sp.atom_offset[-1]), 3))
    min_d = np.empty(m)
    assemble(seeds.block_key(seed, ASSEMBLE), rows, synthon.astype(np.int64), conf, n_slots, tors, n_tors,
             table.atom_offset, table.conf_offset, table.conf_atom_offset, table.coords, table.up_attach,
             table.up_neighbour, table.up_ref, table.down_attach, table.down_ref, sp.atom_offset, xyz_asm, min_d)
    xyz = np.ascontiguousarray(xyz_asm[sp.assembly_index])
    posed = np.empty_like(xyz)
    docked = np.empty(m)
    dock(seeds.block_key(seed, DOCK), rows, xyz, sp.atom_offset, sp.bits, int(docking["starts"]),
         int(docking["steps"]), float(docking["spread"]), float(docking["step_angle"]), float(docking["step_shift"]),
         *kernel_args(target), posed, docked)
    posed = np.round(posed, COORD_DECIMALS)
    return sp, posed, min_d


def shard_task(ctx: dict, shard: int, lo: int, synthon: np.ndarray, route: np.ndarray) -> dict:
    """Build one shard's release files and per-row score parts; reuse a finished shard."""
    from .fragments import load_table
    from .pocket import pocket_score
    from .writers import conformation_ids, parquet_bytes, release_table, sdf_bytes

    output = Output(ctx["out"], ctx["world_id"])
    done_path = posixpath.join(output.work, f"shard-{shard:05d}.done")
    part_path = posixpath.join(output.work, f"part-{shard:05d}.parquet")
    comp_path = posixpath.join(output.work, f"components-{shard:05d}.npz")
    sdf_rel = f"sdf/library_{shard:04d}.sdf.gz"
    sdf_path = posixpath.join(output.release, sdf_rel)
    if output.exists(done_path):
        record = json.loads(output.read_bytes(done_path))
        try:
            blobs = {p: output.read_bytes(p) for p in (part_path, comp_path)}
            sdf_ok = output.exists(sdf_path) and _sha(output.read_bytes(sdf_path)) == record["sdf"]
            if record.get("format") == SHARD_FORMAT and sdf_ok and all(_sha(blobs[p]) == record[k] for p, k in ((part_path, "part"), (comp_path, "components"))):
                with np.load(io.BytesIO(blobs[comp_path])) as data:
                    return {"shard": shard, "components": {k: data[k] for k in data.files}, "sdf": (sdf_rel, record["sdf_size"], record["sdf"]),
                            "timing": {}, "reused": True}
        except (OSError, KeyError, ValueError):
            pass
    t0, c0 = time.perf_counter(), time.thread_time()
    table = load_table()
    seed, n = int(ctx["seed"]), int(ctx["n"])
    sp, posed, min_d = poses(seed, lo, synthon, route, table, ctx["pockets"]["target"], ctx["docking"])
    t1, c1 = time.perf_counter(), time.thread_time()
    comps = {"target": pocket_score(ctx["pockets"]["target"], posed, sp.atom_offset, sp.bits)}
    for k, pocket in enumerate(ctx["pockets"]["offtargets"]):
        comps[f"offtarget_{k + 1}"] = pocket_score(pocket, posed, sp.atom_offset, sp.bits)
    starts = sp.atom_offset[:-1]
    comps["logp"] = np.add.reduceat(sp.logp, starts)
    comps["mw"] = np.add.reduceat(sp.weight, starts)
    comps["donors"] = np.add.reduceat(sp.donor.astype(np.int64), starts).astype(np.float64)
    comps["heavy_atoms"] = np.diff(sp.atom_offset).astype(np.float64)
    comps["min_distance"] = min_d
    comps["route"] = route.astype(np.float64)
    t2, c2 = time.perf_counter(), time.thread_time()
    ids = conformation_ids(lo, lo + len(synthon), n)
    part = parquet_bytes(release_table(ids, sp.smiles, sp.z, sp.atom_offset, posed))
    sdf = sdf_bytes(ids, sp.z, sp.charge, sp.atom_offset, posed, sp.bond_offset, sp.bonds)
    buf = io.BytesIO()
    np.savez(buf, **comps)
    comp_blob = buf.getvalue()
    output.write_bytes(part_path, part)
    output.write_bytes(comp_path, comp_blob)
    output.write_bytes(sdf_path, sdf)
    sdf_sha = _sha(sdf)
    output.write_json(done_path, {"format": SHARD_FORMAT, "part": _sha(part), "components": _sha(comp_blob), "sdf": sdf_sha,
                                  "sdf_size": len(sdf)})
    t3, c3 = time.perf_counter(), time.thread_time()
    # (wall, CPU) of each part; CPU is this thread's (the kernels run on it: one Numba thread a task)
    return {"shard": shard, "components": comps, "sdf": (sdf_rel, len(sdf), sdf_sha), "reused": False,
            "timing": {"assemble+dock": (t1 - t0, c1 - c0), "score": (t2 - t1, c2 - c1), "write": (t3 - t2, c3 - c2)}}


def warm_up() -> None:
    """Compile and load the screening kernels (on every worker before a timed build)."""
    from .fragments import load_table
    from .pocket import sample_pocket
    from .config import PocketConfig, DockingConfig

    table = load_table()
    from .library import plan

    p = plan(1 << 127, 1000, table)
    target = sample_pocket(1 << 127, "target", PocketConfig())
    d = DockingConfig()
    sp, posed, _ = poses(1 << 127, 0, p.synthon[:4], p.route[:4], table, target,
                         {"starts": d.starts, "steps": d.steps, "spread": d.spread, "step_angle": d.step_angle,
                          "step_shift": d.step_shift})
    # and the rest of a shard's kernels: pocket scores, the SDF formatter and its deflate
    from .pocket import pocket_score
    from .writers import conformation_ids, sdf_bytes

    pocket_score(target, posed, sp.atom_offset, sp.bits)
    sdf_bytes(conformation_ids(0, 4, 4), sp.z, sp.charge, sp.atom_offset, posed, sp.bond_offset, sp.bonds)
