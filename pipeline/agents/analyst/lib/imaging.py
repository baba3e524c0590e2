"""Cardiac MRI measurements from the released pixels (the analyst's own segmentation).

Per participant and short-axis slice (base, mid, apex):

* The native T1 map is NaN outside the myocardium, so its finite region is a
  myocardial mask at end-diastole (frame 0 of the cine).  The enclosed holes of
  that mask are the LV and RV cavities; the LV cavity is the most circular hole.
* LV centre = centroid of the LV cavity.  Rays from the centre give the
  end-diastolic endocardial and epicardial radii per angle (the first run of
  mask pixels along the ray; the RV free wall is a later run and is ignored).
* Cine blood pool per frame: a partial-volume estimate, each pixel counting
  clip((I - I_myo) / (I_blood - I_myo), 0, 1), with the two levels read from
  the same slice at end-diastole (inside the cavity, inside the wall), inside a
  region bounded by the end-diastolic mid-wall.  Dark papillary muscles and the
  myocardium count zero; the region never reaches the bright epicardial fat or
  the RV.  Levels are per image, so a smooth multiplicative scanner field
  (which varies by acquisition site) cancels to first order.
* End-systole is the frame of the smallest cavity.  Regional function: the
  same estimate in 12 angular sectors gives each sector's fractional area
  change.  Wall thickness at end-systole: along each ray, the dark run that
  overlaps the end-diastolic wall.
* Filling: time after end-systole for the cavity to recover half of its
  stroke area (linear interpolation between frames), as a fraction of the cycle.
* T1: median and interquartile range of T1 in the LV wall, per slice.

``measure_subject`` returns a flat dict of numbers (NaN where a slice could
not be segmented); ``measure_files`` runs it over files.
"""
from __future__ import annotations

import math
import os

import numpy as np

N_RAYS = 48
N_SECTORS = 12
SLICES = ("base", "mid", "apex")


def _lv_cavity(mask: np.ndarray):
    """(LV cavity boolean image, RV cavity image or None) from the end-diastolic myocardial mask."""
    from scipy import ndimage

    filled = ndimage.binary_fill_holes(mask)
    holes = filled & ~mask
    labels, n = ndimage.label(holes)
    if n == 0:
        return None, None
    best, best_score, scores = None, -1.0, []
    for k in range(1, n + 1):
        ys, xs = np.nonzero(labels == k)
        area = len(ys)
        if area < 20:
            continue
        cy, cx = ys.mean(), xs.mean()
        rmax = np.sqrt(((ys - cy) ** 2 + (xs - cx) ** 2).max()) + 0.5
        # A disc fills the circle through its farthest pixel; a crescent does not.
        roundness = area / (math.pi * rmax * rmax)
        scores.append((roundness, area, k))
        if roundness > best_score:
            best, best_score = k, roundness
    if best is None:
        return None, None
    others = sorted((s for s in scores if s[2] != best), key=lambda s: -s[1])
    rv = labels == others[0][2] if others else None
    return labels == best, rv


def _ray_samples(centre, radii, angles):
    cy, cx = centre
    ys = cy + np.outer(np.sin(angles), radii)
    xs = cx + np.outer(np.cos(angles), radii)
    return ys, xs


def _first_run(flags: np.ndarray):
    """Start and end (exclusive) of the first True run along each row; -1 when none."""
    n = flags.shape[1]
    has = flags.any(axis=1)
    start = np.argmax(flags, axis=1)
    idx = np.arange(n)[None, :]
    after = flags | (idx < start[:, None])
    end = np.where((~after).any(axis=1), np.argmax(~after, axis=1), n)
    return np.where(has, start, -1), np.where(has, end, -1)


def _overlapping_run(flags: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Per row, the True run overlapping [lo, hi) most; (start, end) or -1."""
    n_rows, n = flags.shape
    f = flags.astype(np.int8)
    begins = np.diff(np.concatenate([np.zeros((n_rows, 1), np.int8), f], axis=1), axis=1) == 1
    run_id = np.cumsum(begins, axis=1) * f  # 0 outside runs, 1, 2, ... inside
    idx = np.arange(n)[None, :]
    window = (idx >= lo[:, None]) & (idx < hi[:, None]) & (lo[:, None] >= 0)
    n_runs = int(run_id.max()) + 1
    flat = (np.arange(n_rows)[:, None] * n_runs + run_id)[window & (run_id > 0)]
    overlap = np.bincount(flat, minlength=n_rows * n_runs).reshape(n_rows, n_runs)
    best = np.argmax(overlap, axis=1)
    found = overlap[np.arange(n_rows), best] > 0
    in_best = run_id == best[:, None]
    start = np.where(found, np.argmax(in_best, axis=1), -1)
    end = np.where(found, n - np.argmax(in_best[:, ::-1], axis=1), -1)
    return start, end


def measure_slice(cine: np.ndarray, t1: np.ndarray, step: float = 0.5) -> dict:
    """Measurements of one slice: cine uint8 [frames, H, W], t1 float [H, W]."""
    from scipy import ndimage

    out: dict = {}
    mask = np.isfinite(t1)
    if mask.sum() < 50:
        return out
    # Work on a crop around the myocardium: every measurement lies inside it.
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    y0, y1 = max(rows[0] - 4, 0), min(rows[-1] + 5, mask.shape[0])
    x0, x1 = max(cols[0] - 4, 0), min(cols[-1] + 5, mask.shape[1])
    mask, t1, cine = mask[y0:y1, x0:x1], t1[y0:y1, x0:x1], cine[:, y0:y1, x0:x1]
    lv, rv = _lv_cavity(mask)
    if lv is None or lv.sum() < 20:
        return out
    ys, xs = np.nonzero(lv)
    centre = (ys.mean(), xs.mean())
    angles = np.linspace(0, 2 * np.pi, N_RAYS, endpoint=False)
    radii = np.arange(0, 60, step)
    ry, rx = _ray_samples(centre, radii, angles)
    wall_on_ray = ndimage.map_coordinates(mask.astype(np.float32), [ry.ravel(), rx.ravel()], order=0,
                                          mode="constant", cval=0.0).reshape(ry.shape) > 0.5
    r0, r1 = _first_run(wall_on_ray)
    ok = (r0 >= 0) & (r1 > r0)
    if ok.sum() < N_RAYS * 3 // 4:  # too few rays cross a closed wall
        return out
    endo = np.where(ok, radii[np.clip(r0, 0, None)], np.nan)
    epi = np.where(ok, radii[np.clip(r1 - 1, 0, None)] + step, np.nan)
    thick_ed = epi - endo

    # Intensity levels of blood and myocardium at end-diastole, from this slice.
    ed = cine[0]
    core = ndimage.binary_erosion(lv, iterations=2)
    if core.sum() < 10:
        core = lv
    wall_core = ndimage.binary_erosion(mask, iterations=1)
    if wall_core.sum() < 10:
        wall_core = mask
    i_blood = float(np.percentile(ed[core], 75))  # papillary muscles sit low in the cavity's histogram
    i_myo = float(np.median(ed[wall_core]))
    if not i_blood > i_myo + 10:
        return out
    out["contrast"] = i_blood / max(i_myo, 1.0)
    scale = 1.0 / (i_blood - i_myo)

    # Region: inside the end-diastolic mid-wall, in polar terms around the centre.
    H, W = t1.shape
    gy, gx = np.mgrid[0:H, 0:W]
    dy, dx = gy - centre[0], gx - centre[1]
    rho = np.hypot(dy, dx)
    theta = np.mod(np.arctan2(dy, dx), 2 * np.pi)
    ray_index = np.round(theta / (2 * np.pi / N_RAYS)).astype(int) % N_RAYS
    mid_wall = endo + 0.5 * thick_ed
    limit = np.nan_to_num(mid_wall, nan=np.nanmedian(mid_wall))
    region = rho <= limit[ray_index]
    sector = (theta / (2 * np.pi / N_SECTORS)).astype(int) % N_SECTORS

    # Levels per angular sector: a smooth scanner field changes them across the heart.
    ring = mask & (rho <= np.nan_to_num(epi, nan=np.nanmedian(epi))[ray_index])
    ring_core = ndimage.binary_erosion(ring, iterations=1)
    if ring_core.sum() < 10:
        ring_core = ring
    lb = np.full(N_SECTORS, i_blood, dtype=np.float32)
    lm = np.full(N_SECTORS, i_myo, dtype=np.float32)
    for s in range(N_SECTORS):
        b = ed[core & (sector == s)]
        m = ed[ring_core & (sector == s)]
        if b.size >= 8 and m.size >= 8 and np.percentile(b, 75) > np.median(m) + 10:
            lb[s], lm[s] = np.percentile(b, 75), np.median(m)
    sec_r = sector[region]
    pix = cine[:, region].astype(np.float32)  # [frames, pixels in the region]
    frac = np.clip((pix - lm[sec_r]) / (lb[sec_r] - lm[sec_r]), 0.0, 1.0)
    onehot = np.zeros((pix.shape[1], N_SECTORS), dtype=np.float32)
    onehot[np.arange(pix.shape[1]), sector[region]] = 1.0
    sec_area = frac @ onehot
    area = sec_area.sum(axis=1)
    es = int(np.argmin(area))
    a_ed, a_es = float(area[0]), float(area[es])
    out.update(cav_ed=a_ed, cav_es=a_es, fac=1.0 - a_es / a_ed if a_ed > 0 else np.nan,
               es_frame=es / cine.shape[0])
    sec_fac = 1.0 - sec_area[es] / np.maximum(sec_area[0], 1e-6)
    out["fac_sd"] = float(np.std(sec_fac))
    out["fac_min_rel"] = float(np.min(sec_fac) - np.median(sec_fac))

    # Filling: fraction of the cycle after end-systole to regain half the stroke area.
    stroke = a_ed - a_es
    if stroke > 1 and es < len(area) - 1:
        rec = (area[es:] - a_es) / stroke
        above = np.flatnonzero(rec >= 0.5)
        if above.size:
            j = above[0]
            t = j - 1 + (0.5 - rec[j - 1]) / max(rec[j] - rec[j - 1], 1e-6) if j > 0 else 0.0
            out["fill_half"] = float(t) / cine.shape[0]
        # Early filling rate: area regained in the first fifth of the cycle after end-systole.
        k = min(len(rec) - 1, max(1, cine.shape[0] // 5))
        out["fill_early"] = float(rec[k])

    # Wall at end-systole: the dark run along each ray overlapping the end-diastolic wall.
    prof = ndimage.map_coordinates(cine[es].astype(np.float32), [ry.ravel(), rx.ravel()], order=1,
                                   mode="nearest").reshape(ry.shape)
    dark = prof < 0.5 * (i_blood + i_myo)
    lo = np.where(ok, r0, -1)
    hi = np.where(ok, r1, -1)
    s0, s1 = _overlapping_run(dark, lo, hi)
    good = (s0 >= 0) & ok
    if good.mean() > 0.5:
        # The epicardium moves inward in systole: a dark run past the end-diastolic
        # epicardium is lung or shadow beyond a thin fat line, not wall.
        s1 = np.minimum(s1, hi + int(round(1.0 / step)))
        thick_es = np.where(good & (s1 > s0), (s1 - s0) * step, np.nan)
        thick = thick_es / thick_ed
        out["thick_es"] = float(np.nanmean(thick_es))
        out["thickening"] = float(np.nanmedian(thick) - 1.0)
        by_sector = np.nanmean(thick.reshape(N_SECTORS, N_RAYS // N_SECTORS), axis=1)
        out["thickening_sd"] = float(np.nanstd(by_sector))

    out["wall_ed"] = float(np.nanmean(thick_ed))
    out["wall_ed_sd"] = float(np.nanstd(thick_ed))
    lv_wall = mask & (rho <= np.nan_to_num(epi, nan=np.nanmedian(epi))[ray_index])
    out["myo_area"] = float(lv_wall.sum())
    vals = t1[lv_wall]
    vals = vals[np.isfinite(vals)]
    if vals.size > 20:
        q25, q50, q75 = np.percentile(vals, [25, 50, 75])
        out["t1_median"], out["t1_iqr"] = float(q50), float(q75 - q25)
    rv_wall = mask & ~lv_wall
    rvv = t1[rv_wall]
    rvv = rvv[np.isfinite(rvv)]
    if rvv.size > 20:
        out["t1_rv_median"] = float(np.median(rvv))
    if rv is not None and rv.sum() > 20:
        rv_area = np.clip((cine[:, rv].astype(np.float32) - i_myo) * scale, 0.0, 1.0).sum(axis=1)
        out["rv_ed"] = float(rv_area[0])
        out["rv_fac"] = float(1.0 - rv_area.min() / max(rv_area[0], 1e-6))
    return out


def measure_subject(cine: np.ndarray, t1map: np.ndarray) -> dict:
    """Flat measurements of one participant: per-slice values and whole-stack summaries."""
    row: dict = {}
    per = []
    for s, name in enumerate(SLICES[: cine.shape[0]]):
        m = measure_slice(cine[s], t1map[s])
        per.append(m)
        for k, v in m.items():
            row[f"{name}_{k}"] = v
    ok = [m for m in per if "cav_ed" in m]
    if len(ok) == len(per):
        ed = sum(m["cav_ed"] for m in per)
        # End-systole of the stack: the slices' areas at their own smallest frame.
        es = sum(m["cav_es"] for m in per)
        row["stack_ed"] = ed
        row["stack_es"] = es
        row["stack_ef"] = 1.0 - es / ed if ed > 0 else np.nan
        row["stack_myo"] = sum(m.get("myo_area", np.nan) for m in per)
    return row


def measure_file(path: str) -> dict:
    with np.load(path) as data:
        cine = data["cine"]
        t1map = data["t1map"]
    return measure_subject(cine, t1map)


def measure_files(paths, deadline: float | None = None):
    """(subject ids, list of dicts) for the files measured before ``deadline`` (time.monotonic())."""
    import time

    ids, rows = [], []
    for path in paths:
        if deadline is not None and time.monotonic() > deadline:
            break
        sid = os.path.splitext(os.path.basename(path))[0]
        try:
            row = measure_file(path)
        except Exception as error:  # a corrupt file must not stop the cohort
            row = {"error": str(error)[:80]}
        ids.append(sid)
        rows.append(row)
    return ids, rows
