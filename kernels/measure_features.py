"""The baseline image analysis of one participant in one Numba pass (``measure_core``), for
``pipeline.imaging.measure.measure_subject``: the T1 texture, the masks (``kernels.measure``),
the blood and myocardium levels, the cavity-area curves, the centroids and the wall thickness.

Every number is the one the numpy/scipy definition (``measure_subject_reference``) gives, bit
for bit: its sums are made in numpy's order (pairwise for a contiguous run, one by one where
numpy adds across a pixel-major array), its medians are the sorted middle values, its
smoothing is scipy's Gaussian sums (tests compare them).
"""
from __future__ import annotations

import math

import numpy as np

from .measure import crop_box, erode_cross, lv_cavity
from .numba_util import njit


@njit
def _block_sum(a, lo, n):
    """numpy's float64 pairwise sum of a run of at most 128: eight interleaved partial sums."""
    if n < 8:
        s = 0.0
        for i in range(n):
            s += a[lo + i]
        return s
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    s = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        s += a[lo + i]
        i += 1
    return s


@njit
def pairwise_sum(a, lo, n):
    """numpy's float64 ``add.reduce`` of a[lo:lo + n] (contiguous), bit for bit: runs of up to
    128 by ``_block_sum``, longer ones split in two at a multiple of 8 and the halves' sums
    added (numpy recurses; here an explicit stack, since a recursive kernel breaks Numba's
    on-disk cache)."""
    if n <= 128:
        return _block_sum(a, lo, n)
    stack_lo = np.empty(192, dtype=np.int64)
    stack_n = np.empty(192, dtype=np.int64)
    stack_join = np.empty(192, dtype=np.bool_)
    sums = np.empty(96)
    top = 1
    stack_lo[0], stack_n[0], stack_join[0] = lo, n, False
    n_sums = 0
    while top > 0:
        top -= 1
        start, length, join = stack_lo[top], stack_n[top], stack_join[top]
        if join:  # both halves summed: left + right
            n_sums -= 1
            sums[n_sums - 1] = sums[n_sums - 1] + sums[n_sums]
        elif length <= 128:
            sums[n_sums] = _block_sum(a, start, length)
            n_sums += 1
        else:
            half = length // 2
            half -= half % 8
            stack_lo[top], stack_n[top], stack_join[top] = start, length, True
            stack_lo[top + 1], stack_n[top + 1], stack_join[top + 1] = start + half, length - half, False
            stack_lo[top + 2], stack_n[top + 2], stack_join[top + 2] = start, half, False
            top += 3
    return sums[0]


@njit
def _ranked(counts, rank):
    """The grey level at ``rank`` (0-based) in sorted order, from a histogram of levels."""
    seen = 0
    for v in range(counts.shape[0]):
        seen += counts[v]
        if seen > rank:
            return v
    return counts.shape[0] - 1


@njit
def median_of_counts(counts, n):
    """np.median of n grey levels (as float64) given their histogram: the middle value, or the
    mean of the middle two (the values sorting would give)."""
    if n % 2:
        return np.float64(_ranked(counts, n // 2))
    return (np.float64(_ranked(counts, n // 2 - 1)) + np.float64(_ranked(counts, n // 2))) / 2.0


@njit
def t1_heterogeneity(t1map, weights, margin):
    """SD over the three slices' myocardium of (T1 smoothed by the mask-normalised Gaussian minus
    its slice mean): ``pipeline.imaging.measure`` step 4, numpy's sums in numpy's order."""
    n_slices, h, w = t1map.shape
    finite = np.isfinite(t1map)
    values = np.empty(finite.sum())
    at = 0
    for s in range(n_slices):
        y0, y1, x0, x1 = crop_box(finite[s], margin)
        if y0 < 0:
            continue
        bh = y1 - y0
        bw = x1 - x0
        v = np.empty((bh, bw))
        m = np.empty((bh, bw))
        for y in range(bh):
            for x in range(bw):
                inside = finite[s, y0 + y, x0 + x]
                v[y, x] = np.float64(t1map[s, y0 + y, x0 + x]) if inside else 0.0
                m[y, x] = 1.0 if inside else 0.0
        num = np.empty((bh, bw))
        den = np.empty((bh, bw))
        smooth_at_mask(v, m, finite[s, y0:y1, x0:x1], weights, num, den)
        start = at
        for y in range(bh):
            for x in range(bw):
                if finite[s, y0 + y, x0 + x]:
                    values[at] = num[y, x] / den[y, x]
                    at += 1
        mean = pairwise_sum(values, start, at - start) / (at - start)
        for k in range(start, at):
            values[k] = values[k] - mean
    if at == 0:
        return np.nan
    mean = pairwise_sum(values, 0, at) / at
    squares = np.empty(at)
    for k in range(at):
        d = values[k] - mean
        squares[k] = d * d
    return math.sqrt(pairwise_sum(squares, 0, at) / at)


@njit
def smooth_at_mask(v, m, inside, weights, num, den):
    """``gaussian_constant`` of ``v`` and of ``m`` (into ``num``, ``den``), the same sums, made only
    where the mask-normalised smoothing reads them: at the ``inside`` pixels (the first pass on
    their rows, the second on each row's span of them; elsewhere num and den are left unset)."""
    h, w = v.shape
    r = weights.shape[0] // 2
    centre = weights[r]
    y_lo, y_hi = h, -1
    x_lo = np.full(h, w, dtype=np.int64)
    x_hi = np.full(h, -1, dtype=np.int64)
    for y in range(h):
        for x in range(w):
            if inside[y, x]:
                x_lo[y] = min(x_lo[y], x)
                x_hi[y] = max(x_hi[y], x)
                y_lo = min(y_lo, y)
                y_hi = max(y_hi, y)
    if y_hi < 0:
        return
    pv = np.zeros((h + 2 * r, w))
    pm = np.zeros((h + 2 * r, w))
    pv[r:r + h] = v
    pm[r:r + h] = m
    tv = np.zeros((h, w + 2 * r))
    tm = np.zeros((h, w + 2 * r))
    av = np.empty(w)
    am = np.empty(w)
    for y in range(y_lo, y_hi + 1):  # axis 0
        c = y + r
        _scaled(av, pv[c], 0, centre, 0, w)
        _scaled(am, pm[c], 0, centre, 0, w)
        for j in range(-r, 0):
            _add_pair(av, pv[c + j], pv[c - j], 0, weights[r + j], 0, w)
            _add_pair(am, pm[c + j], pm[c - j], 0, weights[r + j], 0, w)
        tv[y, r:r + w] = av
        tm[y, r:r + w] = am
    for y in range(y_lo, y_hi + 1):  # axis 1, on the row's span of mask pixels
        if x_hi[y] < 0:
            continue
        a, b = x_lo[y], x_hi[y] + 1
        _scaled(av, tv[y], r, centre, a, b)
        _scaled(am, tm[y], r, centre, a, b)
        for j in range(-r, 0):
            _add_pair(av, tv[y, r + j:], tv[y, r - j:], 0, weights[r + j], a, b)
            _add_pair(am, tm[y, r + j:], tm[y, r - j:], 0, weights[r + j], a, b)
        num[y, a:b] = av[a:b]
        den[y, a:b] = am[a:b]


@njit(inline="always")
def _scaled(acc, src, offset, weight, a, b):
    """acc[x] = src[offset + x] * weight for x in a..b-1 (unsigned indices: the loop vectorises)."""
    o = np.uint64(offset)
    for x in range(np.uint64(a), np.uint64(b)):
        acc[x] = src[o + x] * weight


@njit(inline="always")
def _add_pair(acc, left, right, offset, weight, a, b):
    """acc[x] += (left[offset + x] + right[offset + x]) * weight for x in a..b-1."""
    o = np.uint64(offset)
    for x in range(np.uint64(a), np.uint64(b)):
        acc[x] += (left[o + x] + right[o + x]) * weight


@njit
def centre_of_mass(mask):
    """scipy.ndimage.center_of_mass of a boolean image: (row, column), its sums in numpy's order."""
    h, w = mask.shape
    ys = np.empty(h * w)
    xs = np.empty(h * w)
    count = 0
    for y in range(h):
        for x in range(w):
            on = mask[y, x]
            ys[y * w + x] = float(y) if on else 0.0
            xs[y * w + x] = float(x) if on else 0.0
            count += on
    return pairwise_sum(ys, 0, h * w) / count, pairwise_sum(xs, 0, h * w) / count


@njit
def wall_thickness(mask, cy, cx, ray_sin, ray_cos, steps, step_px):
    """Mean over rays from (cy, cx) of the length of the first run of ``mask`` pixels (pixels
    sampled at rint(centre + direction x step)), over rays that enter and leave it; NaN if none."""
    h, w = mask.shape
    n_rays = ray_sin.shape[0]
    lengths = np.empty(n_rays)
    n_ok = 0
    for k in range(n_rays):
        start = -1
        for j in range(steps.shape[0]):
            yi = np.int64(np.rint(cy + ray_sin[k] * steps[j]))
            xi = np.int64(np.rint(cx + ray_cos[k] * steps[j]))
            on = 0 <= yi < h and 0 <= xi < w and mask[yi, xi]
            if start < 0:
                if on:
                    start = j
            elif not on:
                lengths[n_ok] = (j - start) * step_px
                n_ok += 1
                break
    if n_ok == 0:
        return np.nan
    return pairwise_sum(lengths, 0, n_ok) / n_ok


@njit
def blood_fraction_levels(myo_level, contrast, lo, hi):
    """The blood fraction clip((I - myo) / contrast, lo, hi) of each grey level I (0..255): the
    value numpy gives every pixel of that level."""
    level = np.empty(256)
    for v in range(256):
        level[v] = min(max((np.float64(v) - myo_level) / contrast, lo), hi)
    return level


@njit
def region_curve(frames_cine, y0, x0, region, level, curve):
    """Grey levels [f, n] of the ``region`` pixels (box at y0, x0 of each frame of ``frames_cine``
    [f, H, W], raster order) and ``curve`` [f]: each frame's sum of their blood fractions
    (``level``) in numpy's order.  numpy holds the fractions pixel-major
    (``cine[:, box][:, region]`` is F-ordered), so its sum over pixels adds them one by one in
    raster order, every frame at once (as here); a single frame is one contiguous row, summed
    pairwise."""
    bh, bw = region.shape
    n = region.sum()
    frames, h, w = frames_cine.shape
    offsets = np.empty(n, dtype=np.int64)
    k = 0
    for y in range(bh):
        for x in range(bw):
            if region[y, x]:
                offsets[k] = (y0 + y) * w + x0 + x
                k += 1
    grey = np.empty((frames, n), dtype=np.uint8)
    for f in range(frames):
        plane = frames_cine[f].reshape(h * w)
        row = grey[f]
        for k in range(n):
            row[k] = plane[offsets[k]]
    if frames == 1:
        curve[0] = pairwise_sum(fractions_of(grey[0], level), 0, n)
        return grey
    f = 0
    while f + 4 <= frames:  # four frames' sums at a time, each in pixel order
        g0, g1, g2, g3 = grey[f], grey[f + 1], grey[f + 2], grey[f + 3]
        t0 = t1 = t2 = t3 = 0.0
        for k in range(n):
            t0 += level[g0[k]]
            t1 += level[g1[k]]
            t2 += level[g2[k]]
            t3 += level[g3[k]]
        curve[f], curve[f + 1], curve[f + 2], curve[f + 3] = t0, t1, t2, t3
        f += 4
    while f < frames:
        g0 = grey[f]
        t0 = 0.0
        for k in range(n):
            t0 += level[g0[k]]
        curve[f] = t0
        f += 1
    return grey


@njit
def fractions_of(grey, level):
    out = np.empty(grey.shape[0])
    for k in range(grey.shape[0]):
        out[k] = level[grey[k]]
    return out


@njit
def measure_core(cine, t1map, weights, t1_margin, min_cavity, mid, lo, hi, ray_sin, ray_cos, steps, step_px,
                 scalars, curves, slice_ok):
    """Steps 1-4 of ``pipeline.imaging.measure`` for one participant (cine uint8 [s, f, H, W],
    t1map float32 [s, H, W]) but the T1 mean, the sectors and the filling lag.

    scalars float64 [10] out: t1 heterogeneity, myocardial area (mid), stage reached (0 no mid
    cavity, 1 too few deep pixels, 2 too little contrast, 3 measured), myo level, contrast,
    cavity centroid y, x, filled-mask centroid y, x, wall thickness (the last six when 3).
    curves float64 [s, f] out: each slice's cavity-area curve (slice_ok[s] when measured).
    Returns the mid slice's region pixels (rows, columns in its box) and their blood fractions
    at end-diastole and end-systole (the minimum of the mid curve), for the sector analysis."""
    n_slices, frames, h, w = cine.shape
    finite = np.isfinite(t1map)
    scalars[:] = np.nan
    scalars[0] = t1_heterogeneity(t1map, weights, t1_margin)
    scalars[1] = finite[mid].sum()
    slice_ok[:] = False
    boxes = np.zeros((n_slices, 4), dtype=np.int64)
    regions = np.zeros((n_slices, h, w), dtype=np.bool_)
    empty = np.zeros(0, dtype=np.int64)
    none = np.zeros(0)
    mid_mask = np.zeros((0, 0), dtype=np.bool_)
    mid_cavity = np.zeros((0, 0), dtype=np.bool_)
    mid_filled = np.zeros((0, 0), dtype=np.bool_)
    for s in range(n_slices):
        y0, y1, x0, x1 = crop_box(finite[s], 3)
        if y0 < 0:
            continue
        mask = np.ascontiguousarray(finite[s, y0:y1, x0:x1])
        cavity = np.empty(mask.shape, dtype=np.bool_)
        filled = np.empty(mask.shape, dtype=np.bool_)
        region = np.empty(mask.shape, dtype=np.bool_)
        if not lv_cavity(mask, min_cavity, cavity, filled, region):
            continue
        slice_ok[s] = True
        boxes[s, 0], boxes[s, 1], boxes[s, 2], boxes[s, 3] = y0, y1, x0, x1
        regions[s, :y1 - y0, :x1 - x0] = region
        if s == mid:
            mid_mask, mid_cavity, mid_filled = mask, cavity, filled
    scalars[2] = 0.0
    if not slice_ok[mid]:
        return empty, empty, none, none
    y0, y1, x0, x1 = boxes[mid, 0], boxes[mid, 1], boxes[mid, 2], boxes[mid, 3]
    bh, bw = y1 - y0, x1 - x0
    deep_cavity = np.empty((bh, bw), dtype=np.bool_)
    once = np.empty((bh, bw), dtype=np.bool_)
    erode_cross(mid_cavity, once)
    erode_cross(once, deep_cavity)
    deep_myo = np.empty((bh, bw), dtype=np.bool_)
    erode_cross(mid_mask, deep_myo)
    scalars[2] = 1.0
    n_blood = deep_cavity.sum()
    n_myo = deep_myo.sum()
    if n_blood < 5 or n_myo < 5:
        return empty, empty, none, none
    blood = np.zeros(256, dtype=np.int64)
    myo = np.zeros(256, dtype=np.int64)
    for y in range(bh):
        for x in range(bw):
            value = cine[mid, 0, y0 + y, x0 + x]
            blood[value] += deep_cavity[y, x]
            myo[value] += deep_myo[y, x]
    blood_level = median_of_counts(blood, n_blood)
    myo_level = median_of_counts(myo, n_myo)
    contrast = blood_level - myo_level
    scalars[3] = myo_level
    scalars[4] = contrast
    scalars[2] = 2.0
    if contrast <= 5.0:
        return empty, empty, none, none
    scalars[2] = 3.0
    mid_region = np.ascontiguousarray(regions[mid, :bh, :bw])
    level = blood_fraction_levels(myo_level, contrast, lo, hi)
    grey = region_curve(cine[mid], y0, x0, mid_region, level, curves[mid])
    for s in range(n_slices):
        if s != mid and slice_ok[s]:
            region = np.ascontiguousarray(regions[s, :boxes[s, 1] - boxes[s, 0], :boxes[s, 3] - boxes[s, 2]])
            region_curve(cine[s], boxes[s, 0], boxes[s, 2], region, level, curves[s])
    es = np.argmin(curves[mid])
    cy, cx = centre_of_mass(mid_cavity)
    fy, fx = centre_of_mass(mid_filled)
    scalars[5], scalars[6], scalars[7], scalars[8] = cy, cx, fy, fx
    scalars[9] = wall_thickness(mid_mask, cy, cx, ray_sin, ray_cos, steps, step_px)
    n = grey.shape[1]
    rows = np.empty(n, dtype=np.int64)
    cols = np.empty(n, dtype=np.int64)
    k = 0
    for y in range(bh):
        for x in range(bw):
            if mid_region[y, x]:
                rows[k] = y
                cols[k] = x
                k += 1
    return rows, cols, fractions_of(grey[0], level), fractions_of(grey[es], level)
