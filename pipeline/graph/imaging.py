"""The imaging stage of a build: render every imaged participant's cine and T1
map (baseline, and visit 2 from L_late with the world's own archetype), write
them in the release layout, and measure the environment's fixed baseline
phenotype on exactly the released pixels.

Work is cut into fixed groups of ``SUBJECTS_PER_TASK`` imaged participants (a
format constant, not a Dask chunking choice); every subject's noise key depends
only on (seed, visit, participant index).
"""
from __future__ import annotations

import hashlib
import posixpath
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import seeds, streams
from ..config import BLOCK_SIZE
from ..modalities import phenotypes
from ..outputs import SUBJECTS_PER_TASK, Output, pixel_sink
from .progress import StageTimer, merge

if TYPE_CHECKING:  # annotations only: no import at run time
    from ..model.world import World
    from ..modalities.cohort import Cohort

VISITS = {1: "imaging", 2: "imaging_visit2"}
#: Subjects a task renders, measures and writes at a time for each of its Numba threads (a
#: cache-sized piece of its group; the bytes do not depend on it: every pixel depends only on its
#: subject).
SUBJECTS_PER_PASS = 4


def noise_keys(world: World, rows: np.ndarray, visit: int) -> np.ndarray:
    """uint64 key per participant row, from a per-block stream (order-free)."""
    keys = np.empty(len(rows), dtype=np.uint64)
    by_block = rows // BLOCK_SIZE
    for b in np.unique(by_block):
        lo, hi = world.block_range(int(b))
        all_keys = seeds.seed_sequence(world.seed, streams.MRI.format(visit=visit), int(b)).generate_state(hi - lo, dtype=np.uint64)
        sel = by_block == b
        keys[sel] = all_keys[rows[sel] - lo]
    return keys


def render_task(out_url: str, world_id: str, layout: str, folder: str, start: int, subject_ids: list,
                traits: dict, site_fields: np.ndarray) -> dict:
    """Render, measure and write one group of subjects; returns features, hashes,
    timings.  A group finished by an interrupted build is reused when every file
    it wrote still has the SHA-256 it recorded."""
    import pickle

    from ..imaging.measure import measure_subjects
    from ..imaging.render import render_subjects
    from .partitions import Partitions

    output = Output(out_url, world_id)
    marker = Partitions(output, "mri")
    key = f"{folder}_{start:06d}"
    cached = marker.load(key)
    if cached is not None:
        res = pickle.loads(cached)
        if pixel_sink() or all(_file_matches(output, posixpath.join(output.release, rel), sha)
                               for rel, (_, sha) in res["hashes"].items()):
            res["timing"] = {"reused_partitions": (1.0, 0.0)}
            return res
    timer = StageTimer()
    measured = folder == VISITS[1]
    parts_of_features, hashes, nbytes, zarr_writer = [], {}, 0, None
    # A few subjects at a time: each one's pixels are rendered, measured, written and hashed while
    # they are still in the cache (and the task holds a few subjects' pixels, not the group's).
    import numba

    per_pass = SUBJECTS_PER_PASS * max(1, numba.get_num_threads())  # work for each of the task's Numba threads
    for lo in range(0, len(subject_ids), per_pass):
        ids = subject_ids[lo:lo + per_pass]
        cine, t1map = render_subjects({k: v[lo:lo + len(ids)] for k, v in traits.items()}, site_fields)
        timer.lap("mri_render")
        # The baseline phenotype is defined on the baseline scans; follow-up scans are
        # measured by the validation report from the release when it needs them.
        if measured:
            parts_of_features.append(measure_subjects(cine, t1map))
        timer.lap("baseline_phenotype")
        if layout == "npz":
            _write_npz_files(output, folder, ids, cine, t1map, hashes)
        elif layout == "zarr":
            if zarr_writer is None:
                from ..imaging.writer import ImagingZarrWriter

                zarr_writer = ImagingZarrWriter.open(output.url(posixpath.join(output.release, f"{folder}.zarr")))
            zarr_writer.write(start + lo, cine, t1map)
        nbytes += int(cine.nbytes + t1map.nbytes)
        timer.lap("mri_write")
    if layout == "npz" and pixel_sink():  # verify the group as written, then discard it
        for rel, (size, sha) in hashes.items():
            path = posixpath.join(output.release, rel)
            if not _file_matches(output, path, sha):
                raise RuntimeError(f"{rel}: read back with another SHA-256 than written (pixel sink)")
            output.rm(path)
        timer.lap("mri_write")
    feats = ({k: np.concatenate([f[k] for f in parts_of_features]) for k in parts_of_features[0]}
             if parts_of_features else {})
    res = {"start": start, "features": feats, "hashes": hashes, "timing": timer.stats, "bytes": nbytes}
    marker.save(key, pickle.dumps(res, protocol=5))
    return res


def _write_npz_files(output: Output, folder: str, subject_ids: list, cine: np.ndarray, t1map: np.ndarray,
                     hashes: dict) -> None:
    """Write each subject's .npz and record its (size, SHA-256) under its release path."""
    from ..imaging.writer import npz_parts

    for i, sid in enumerate(subject_ids):
        parts = npz_parts({"cine": cine[i], "t1map": t1map[i]})
        rel = f"{folder}/{sid}.npz"
        output.write_parts(posixpath.join(output.release, rel), parts)
        h = hashlib.sha256()
        for part in parts:
            h.update(part)
        hashes[rel] = (sum(memoryview(part).nbytes for part in parts), h.hexdigest())


def _file_matches(output, path: str, sha: str) -> bool:
    if not output.exists(path):
        return False
    h = hashlib.sha256()
    with output.fs.open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest() == sha


def _traits_for(world, traits: dict, rows: np.ndarray, centre: np.ndarray, keys: np.ndarray) -> dict:
    out = {k: np.asarray(v)[rows] for k, v in traits.items()}
    out["site"] = centre[rows].astype(np.int64)
    out["noise_key"] = keys
    return out


def visit2_traits(world: World, coh: Cohort, v2cov: dict, archetype: str | None = None) -> dict:
    """Visit-2 morphology from L_late, five years older, the world's own archetype
    (``archetype`` overrides it only to restore the paper's defect)."""
    years = np.nan_to_num(coh.visit2_years, nan=float(world.params["visit2_years"]))
    z_age2 = coh.z_age + years / coh.age_sd
    z_bmi2 = (v2cov["bmi"] - coh.pop["bmi"].mean()) / coh.pop["bmi"].std()
    z_ex2 = (v2cov["exercise"] - coh.pop["exercise"].mean()) / coh.pop["exercise"].std()
    z = phenotypes.trait_z(world, coh, coh.latent_late, 2, z_age=z_age2, z_bmi=z_bmi2, z_ex=z_ex2, archetype=archetype)
    return phenotypes.traits_clinical(world, z, "traits_visit2", archetype=archetype)


def run_imaging(executor: Any, w: Any, world: World, coh: Cohort, traits_v1: dict, v2cov: dict, output: Output, cfg: Any, resume: bool = False) -> tuple:
    layout = cfg.release.imaging
    site_fields = world.site_fields if world.site_fields is not None else np.zeros((len(world.centre_p), 1))
    ids = world.subject_ids()
    jobs = []
    plans = [(1, np.flatnonzero(coh.imaged), traits_v1)]
    if cfg.release.visit2_imaging:
        # SPEC section 9: follow-up MRI from L_late with the world's own archetype;
        # paper_compat restores the original's DCM rendering.
        arche = "dcm" if cfg.paper_compat else None
        plans.append((2, np.flatnonzero(coh.imaged & coh.visit2), visit2_traits(world, coh, v2cov, arche)))
    for visit, rows, traits in plans:
        folder = VISITS[visit]
        keys = noise_keys(world, rows, visit)
        tr = _traits_for(world, traits, rows, coh.pop["centre"], keys)
        zarr_path = posixpath.join(output.release, f"{folder}.zarr")
        if layout == "zarr" and not (resume and output.exists(zarr_path)):
            from ..imaging.writer import ImagingZarrWriter

            ImagingZarrWriter.create(output.url(zarr_path), ids[rows])
        elif layout == "npz":
            output.makedirs(posixpath.join(output.release, folder))
        for s in range(0, len(rows), SUBJECTS_PER_TASK):
            sl = slice(s, s + SUBJECTS_PER_TASK)
            jobs.append((visit, rows[sl], executor.submit(
                render_task, cfg.out, world.id, layout, folder, s, list(ids[rows[sl]]),
                {k: v[sl] for k, v in tr.items()}, site_fields, key=f"mri-{world.id}-v{visit}")))
    feats = {1: [], 2: []}
    hashes, timing, nbytes = {}, {}, 0
    for visit, rows, fut in jobs:
        res = executor.gather([fut])[0]
        feats[visit].append((rows, res["features"]))
        hashes.update(res["hashes"])
        nbytes += res["bytes"]
        merge(timing, res["timing"])
    timing["mri_raw_bytes"] = (float(nbytes), 0.0)
    tables = {v: _feature_table(world, parts) for v, parts in feats.items() if parts and parts[0][1]}
    baseline = baseline_record(world, coh, tables[1]) if 1 in tables else None
    return baseline, hashes, timing, tables


def _feature_table(world, parts) -> pd.DataFrame:
    rows = np.concatenate([r for r, _ in parts])
    cols = {k: np.concatenate([np.asarray(f[k]) for _, f in parts]) for k in parts[0][1]}
    df = pd.DataFrame(cols, index=pd.Index(world.subject_ids()[rows], name="subject_id", dtype=object))
    return df


def baseline_record(world: World, coh: Cohort, features: pd.DataFrame) -> dict:
    """sealed/phenotype_baseline.json: b = |corr(baseline, L)| over the imaged
    participants in the eval mask, plus the baseline's definition."""
    from ..imaging import measure

    score = measure.baseline_score({k: features[k].to_numpy() for k in features.columns})
    rows = pd.Index(world.subject_ids()).get_indexer(features.index)
    L = coh.latent[rows]
    in_mask = coh.eval_mask[rows]
    ok = np.isfinite(score)
    b = abs(float(np.corrcoef(score[ok & in_mask], L[ok & in_mask])[0, 1]))
    b_all = abs(float(np.corrcoef(score[ok], L[ok])[0, 1]))
    return {
        "built_in_correlation": b,
        "n_eval": int((ok & in_mask).sum()),
        "built_in_correlation_all_imaged": b_all,
        "n_imaged": int(ok.sum()),
        "definition": {
            "pipeline": "pipeline.imaging.measure (frozen; archetype-agnostic)",
            "features": list(measure.BASELINE_WEIGHTS),
            "weights": {k: float(v) for k, v in measure.BASELINE_WEIGHTS.items()},
            "combination": "sum of weight x within-cohort z-score of each pixel-measured feature",
        },
    }


def features_bytes(table: pd.DataFrame) -> bytes:
    from ..writers.parquet import table_bytes

    return table_bytes(table)

