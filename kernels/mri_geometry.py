"""The cardiac MRI renderer's per-pixel and per-subject building blocks (``kernels.mri``
assembles them into the kernel): counter-based hashing of a pixel's random word, the
contraction curve, area ratios, partial coverage of a boundary, B-spline weights (the
small helpers); and per subject, its draws, the angular profiles of every boundary, the
radii at a frame, and the noise-free thorax background (the per-subject setup).

One job: the geometry and randomness primitives, each a Numba function compiled with
the kernel that calls it (``kernels.mri.render_batch``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from .mri_layout import (MOTION_HET_RMS_PER_UNIT, N_HARMONICS, N_SLICES, N_SUBJECT_DRAWS, P_CJIT, P_CX, P_CY,
                         P_ELL, P_ELL_ANGLE, P_FAT, P_I_AORTA, P_I_CFAT, P_I_CMUSCLE, P_I_LIVER, P_I_LUNG, P_I_MED,
                         P_RV_HALF, P_RV_POW, P_RV_TAPER, P_SEG_HW, P_SEPTAL, ROW_SUBJECT, T_MOTION_HET,
                         T_SEG_MOTION, _BYTE_LANES, _BYTE_SUM_MEAN, _BYTE_SUM_SCALE, _GOLDEN)
from .numba_util import njit
from .rng import next_double, seed_state, splitmix64

# ----------------------------------------------------------------------------- small helpers


@njit
def hashed_u64(base, counter):
    """The SplitMix64 output at position ``counter`` of the stream starting at ``base``."""
    _, z = splitmix64(base + np.uint64(counter) * _GOLDEN)
    return z


@njit
def plane_base(key, row):
    """The 64-bit base of a counter-hashed plane of draws on stream (key, row)."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(key, row, state)
    return state[0]


@njit
def smoothstep(x):
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    return x * x * (3.0 - 2.0 * x)


@njit
def contraction(t, t_es, lag, tau_early, t_atrial, tau_atrial, early_fraction):
    """Fraction of the end-systolic excursion reached at cycle time ``t`` in [0, 1).

    0 at end-diastole (t = 0), 1 at end-systole; ejection is a half cosine, the
    early-filling wave starts ``lag`` after end-systole (an isovolumic plateau
    meanwhile) and the atrial wave completes filling before the cycle closes.
    """
    if t <= t_es:
        return 0.5 * (1.0 - math.cos(math.pi * t / t_es))
    early = smoothstep((t - t_es - lag) / tau_early)
    atrial = smoothstep((t - t_atrial) / tau_atrial)
    return 1.0 - early_fraction * early - (1.0 - early_fraction) * atrial


@njit
def area_ratio_es_ed(esv, edv, long_axis_coupling):
    """End-systolic / end-diastolic short-axis cavity area for a volume ratio.

    Volume = area x long-axis length; the long axis shortens in systole by
    ``long_axis_coupling`` x (1 - ESV/EDV), so the short-axis area changes less
    than the volume does (fractional area change ~58 % at EF ~64 %).
    """
    r = esv / edv
    return r / (1.0 - long_axis_coupling * (1.0 - r))


@njit
def wrap_angle(a):
    """``a`` wrapped to [-pi, pi)."""
    return a - 2.0 * math.pi * math.floor((a + math.pi) / (2.0 * math.pi))


@njit
def coverage(boundary_radius, r):
    v = boundary_radius - r + 0.5
    if v <= 0.0:
        return 0.0
    if v >= 1.0:
        return 1.0
    return v


@njit
def ellipse_coverage(x, y, cx, cy, ax, ay):
    """Partial coverage of pixel (x, y) by an axis-aligned ellipse (first-order signed distance)."""
    dx = (x - cx) / ax
    dy = (y - cy) / ay
    f = math.sqrt(dx * dx + dy * dy)
    if f == 0.0:
        return 1.0
    grad = math.sqrt((dx / ax) ** 2 + (dy / ay) ** 2) / f
    sdf = (f - 1.0) / grad
    return coverage(0.0, sdf)


@njit
def bspline_weights(t, w):
    """Cubic B-spline weights at fractional offset t for nodes -1..2; returns sqrt(sum w^2)."""
    t2 = t * t
    t3 = t2 * t
    w[0] = (1.0 - t) ** 3 / 6.0
    w[1] = (3.0 * t3 - 6.0 * t2 + 4.0) / 6.0
    w[2] = (-3.0 * t3 + 3.0 * t2 + 3.0 * t + 1.0) / 6.0
    w[3] = t3 / 6.0
    return math.sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2] + w[3] * w[3])


# ----------------------------------------------------------------------------- per-subject setup


@njit
def subject_draws(key, table, out):
    """Fill ``out`` (float64 [N_SUBJECT_DRAWS]) with the subject-level draws of ROW_SUBJECT.

    Uniforms on [-1, 1) for jitter, standard normals (quantile table) for the
    harmonic coefficients and the gain.
    """
    state = np.empty(4, dtype=np.uint64)
    seed_state(key, ROW_SUBJECT, state)
    n_uniform = 3 + 2 * N_SLICES
    for j in range(N_SUBJECT_DRAWS):
        u = next_double(state)
        if j < n_uniform:
            out[j] = 2.0 * u - 1.0
        else:
            out[j] = table[int(u * 65536.0)]


@njit
def angular_profiles(trait_row, segment, draws, tpl, motion, wall_shape, ed_shape, rv_bump,
                     rv_wall_bump, fat_shape):
    """Per-angle-bin profiles [k] of one subject and slice that do not change over the cycle.

    motion: regional wall-motion multiplier m (smooth harmonics scaled by
    motion_heterogeneity, times the hypokinetic segment's factor); wall_shape:
    ED wall thickness relative to the mean (septum slightly thicker); ed_shape:
    relative ED endocardial radius (ellipticity); rv_bump: RV cavity width
    profile; rv_wall_bump: RV free-wall presence (tapers onto the LV at the
    insertion points); fat_shape: pericardial fat thickness.
    """
    n_bins = motion.shape[0]
    het = min(max(trait_row[T_MOTION_HET], 0.0), 1.0)
    seg_motion = min(max(trait_row[T_SEG_MOTION], 0.0), 1.0)
    coef_offset = 3 + 2 * N_SLICES
    norm = 0.0
    for j in range(2 * N_HARMONICS):
        norm += draws[coef_offset + j] ** 2
    norm = math.sqrt(norm / 2.0)
    if norm == 0.0:
        norm = 1.0
    half_span = tpl[P_RV_HALF]
    taper = tpl[P_RV_TAPER]
    seg_hw = tpl[P_SEG_HW]
    for k in range(n_bins):
        phi = 2.0 * math.pi * k / n_bins
        d = wrap_angle(phi)
        h = 0.0
        for j in range(N_HARMONICS):
            order = j + 2
            h += draws[coef_offset + 2 * j] * math.cos(order * phi) + draws[coef_offset + 2 * j + 1] * math.sin(order * phi)
        m = 1.0 + MOTION_HET_RMS_PER_UNIT * het * h / norm
        if m < 0.05:
            m = 0.05
        if segment >= 0:
            dd = abs(wrap_angle(phi - (segment - 1.5) * math.pi / 3.0))
            if dd < seg_hw:
                window = math.cos(0.5 * math.pi * dd / seg_hw) ** 2
                m *= 1.0 - (1.0 - seg_motion) * window
        motion[k] = m
        wall_shape[k] = 1.0 + tpl[P_SEPTAL] * math.cos(phi)
        ed_shape[k] = 1.0 + tpl[P_ELL] * math.cos(2.0 * (phi - tpl[P_ELL_ANGLE]))
        ad = abs(d)
        if ad < half_span:
            rv_bump[k] = math.cos(0.5 * math.pi * ad / half_span) ** tpl[P_RV_POW]
        else:
            rv_bump[k] = 0.0
        if ad <= half_span:
            rv_wall_bump[k] = 1.0
        elif ad < half_span + taper:
            rv_wall_bump[k] = math.cos(0.5 * math.pi * (ad - half_span) / taper) ** 2
        else:
            rv_wall_bump[k] = 0.0
        fat_shape[k] = tpl[P_FAT] * (0.3 + 0.35 * (1.0 + math.cos(d)))


@njit
def frame_radii(c, area_ed, area_ratio, pap_area, wall_ed_px, thickening, rv_area_ed, rv_area_ratio, rv_wall_px,
                motion, wall_shape, ed_shape, rv_bump, rv_wall_bump, fat_shape,
                r_endo, r_epi, r_rv_in, r_rv_out, r_fat):
    """Boundary radii [k] at contraction ``c``.

    The endocardium moves inward by D x m(angle) with D solved so that the
    blood-pool area (endocardial area minus papillary muscles) equals the
    target; walls thicken by ``thickening`` x c x m; the RV crescent width is
    solved for the RV target area on top of the LV epicardium.
    """
    n_bins = motion.shape[0]
    dphi = 2.0 * math.pi / n_bins
    endo_area_ed = area_ed + pap_area
    endo_area = area_ed * (1.0 - (1.0 - area_ratio) * c) + pap_area
    shape_sq = 0.0
    for k in range(n_bins):
        shape_sq += ed_shape[k] * ed_shape[k]
    r0 = math.sqrt(2.0 * endo_area_ed / (shape_sq * dphi))
    a2 = 0.0
    a1 = 0.0
    a0 = -endo_area
    for k in range(n_bins):
        rk = r0 * ed_shape[k]
        a2 += 0.5 * motion[k] * motion[k] * dphi
        a1 += rk * motion[k] * dphi
        a0 += 0.5 * rk * rk * dphi
    if a0 < 0.0:
        a0 = 0.0
    disc = a1 * a1 - 4.0 * a2 * a0
    if disc < 0.0:
        disc = 0.0
    # Stable root of a2 D^2 - a1 D + a0 = 0: zero excursion exactly when a0 = 0.
    excursion = 2.0 * a0 / (a1 + math.sqrt(disc)) if a1 > 0.0 else 0.0
    b2 = 0.0
    b1 = 0.0
    for k in range(n_bins):
        endo = r0 * ed_shape[k] - excursion * motion[k]
        if endo < 0.0:
            endo = 0.0
        r_endo[k] = endo
        r_epi[k] = endo + wall_ed_px * wall_shape[k] * (1.0 + thickening * c * motion[k])
        b2 += 0.5 * rv_bump[k] * rv_bump[k] * dphi
        b1 += r_epi[k] * rv_bump[k] * dphi
    rv_area = rv_area_ed * (1.0 - (1.0 - rv_area_ratio) * c)
    rv_width = 0.0
    if rv_area > 0.0 and b2 > 0.0:
        rv_width = 2.0 * rv_area / (b1 + math.sqrt(b1 * b1 + 4.0 * b2 * rv_area))
    for k in range(n_bins):
        r_rv_in[k] = r_epi[k] + rv_width * rv_bump[k]
        r_rv_out[k] = r_rv_in[k] + rv_wall_px * rv_wall_bump[k]
        r_fat[k] = r_rv_out[k] + fat_shape[k]


@njit
def cycle_radii(cs, area_ed, area_ratio, pap_area, wall_ed_px, thickening, rv_area_ed, rv_area_ratio, rv_wall_px,
                motion, wall_shape, ed_shape, rv_bump, rv_wall_bump, fat_shape, rk):
    """``frame_radii`` of every frame at once: rk[k, boundary, f] (endo, epi, RV endo, RV outer,
    fat) at contraction cs[f], f < len(cs).  The same arithmetic value by value; the sums over
    bins that do not depend on the frame are made once, those that do (the LV area's constant
    term, the RV crescent's linear term) run over the bins in the same order for every frame at
    once, and the per-bin work runs across frames (the loops vectorise)."""
    n_bins = motion.shape[0]
    frames = cs.shape[0]
    dphi = 2.0 * math.pi / n_bins
    endo_area_ed = area_ed + pap_area
    shape_sq = 0.0
    for k in range(n_bins):
        shape_sq += ed_shape[k] * ed_shape[k]
    r0 = math.sqrt(2.0 * endo_area_ed / (shape_sq * dphi))
    a2 = 0.0
    a1 = 0.0
    a0 = np.empty(frames)
    for f in range(frames):
        a0[f] = -(area_ed * (1.0 - (1.0 - area_ratio) * cs[f]) + pap_area)
    for k in range(n_bins):
        rk_ = r0 * ed_shape[k]
        a2 += 0.5 * motion[k] * motion[k] * dphi
        a1 += rk_ * motion[k] * dphi
        term = 0.5 * rk_ * rk_ * dphi
        for f in range(frames):
            a0[f] += term
    excursion = np.empty(frames)
    for f in range(frames):
        a0_f = a0[f] if a0[f] >= 0.0 else 0.0
        disc = a1 * a1 - 4.0 * a2 * a0_f
        if disc < 0.0:
            disc = 0.0
        excursion[f] = 2.0 * a0_f / (a1 + math.sqrt(disc)) if a1 > 0.0 else 0.0
    b2 = 0.0
    b1 = np.zeros(frames)
    uf = np.uint64(frames)
    for k in range(n_bins):
        base = r0 * ed_shape[k]
        m = motion[k]
        wall = wall_ed_px * wall_shape[k]
        bump = rv_bump[k]
        b2 += 0.5 * bump * bump * dphi
        endo_k = rk[k, 0]
        epi_k = rk[k, 1]
        for f in range(uf):  # unsigned: no negative-index wraparound, so the loop vectorises
            endo = base - excursion[f] * m
            endo = endo if endo >= 0.0 else 0.0
            endo_k[f] = endo
            epi = endo + wall * (1.0 + thickening * cs[f] * m)
            epi_k[f] = epi
            b1[f] += epi * bump * dphi
    rv_width = np.zeros(frames)
    for f in range(frames):
        rv_area = rv_area_ed * (1.0 - (1.0 - rv_area_ratio) * cs[f])
        if rv_area > 0.0 and b2 > 0.0:
            rv_width[f] = 2.0 * rv_area / (b1[f] + math.sqrt(b1[f] * b1[f] + 4.0 * b2 * rv_area))
    for k in range(n_bins):
        bump = rv_bump[k]
        wall = rv_wall_px * rv_wall_bump[k]
        fat = fat_shape[k]
        epi_k = rk[k, 1]
        rv_in_k = rk[k, 2]
        rv_out_k = rk[k, 3]
        fat_k = rk[k, 4]
        for f in range(uf):
            rv_in = epi_k[f] + rv_width[f] * bump
            rv_in_k[f] = rv_in
            rv_out = rv_in + wall
            rv_out_k[f] = rv_out
            fat_k[f] = rv_out + fat


@njit
def interp_bin(table, k0, k1, frac):
    return table[k0] + (table[k1] - table[k0]) * frac


@njit
def background_intensity(x, y, bx, by, slice_index, tpl):
    """True (noise-free) intensity of the static thoracic background at pixel (x, y).

    Mediastinal soft tissue, both lungs (dark), the liver under the diaphragm
    (larger towards the apex), the anterior chest wall (muscle under
    subcutaneous fat) and the descending aorta (bright, posterior).  (bx, by)
    is the body reference point (the LV centre before slice offsets).
    """
    value = tpl[P_I_MED]
    c = ellipse_coverage(x, y, bx - 47.0, by - 6.0, 25.0, 52.0)
    value += (tpl[P_I_LUNG] - value) * c
    c = ellipse_coverage(x, y, bx + 45.0, by - 14.0, 23.0, 46.0)
    value += (tpl[P_I_LUNG] - value) * c
    c = ellipse_coverage(x, y, bx - 30.0, by + 64.0 - 6.0 * slice_index, 58.0, 30.0)
    value += (tpl[P_I_LIVER] - value) * c
    chest_edge = by - 46.0 + 0.006 * (x - bx) * (x - bx)
    c = coverage(chest_edge, y)
    value += (tpl[P_I_CMUSCLE] - value) * c
    c = coverage(chest_edge - 9.0, y)
    value += (tpl[P_I_CFAT] - value) * c
    c = ellipse_coverage(x, y, bx + 22.0, by + 44.0, 7.0, 7.0)
    value += (tpl[P_I_AORTA] - value) * c
    return value


@njit
def canvas_pad(tpl):
    """Margin of the background canvas: covers the largest integer body offset."""
    return int(math.ceil(tpl[P_CJIT])) + 1


@njit(parallel=True)
def background_canvas(tpl, size):
    """float64 [s, size + 2 pad, size + 2 pad]: noise-free background per slice.

    The body reference point sits at the template centre shifted by (pad, pad);
    a subject whose body is offset by integer (ox, oy) reads its pixel (x, y) at
    canvas[s, y - oy + pad, x - ox + pad].  Computed once per batch because the
    thorax does not change with the cardiac traits.
    """
    pad = canvas_pad(tpl)
    n = size + 2 * pad
    canvas = np.empty((N_SLICES, n, n))
    bx = tpl[P_CX] * size + pad
    by = tpl[P_CY] * size + pad
    for task in prange(N_SLICES * n):
        s = task // n
        y = task - s * n
        for x in range(n):
            canvas[s, y, x] = background_intensity(x, y, bx, by, s, tpl)
    return canvas


@njit
def round_half_up(v):
    return math.floor(v + 0.5)


@njit
def byte_sum_normals(u):
    """Two approximately standard normal deviates from one 64-bit word.

    Each is the centred, scaled sum of four uniform bytes (Irwin-Hall of order
    4: SD-matched, kurtosis 2.7, support +-3.46 SD), which vectorises where a
    table look-up or a logarithm would not.
    """
    lanes = (u & _BYTE_LANES) + ((u >> np.uint64(8)) & _BYTE_LANES)
    s1 = float((lanes & np.uint64(0xFFFF)) + ((lanes >> np.uint64(16)) & np.uint64(0xFFFF)))
    s2 = float(((lanes >> np.uint64(32)) & np.uint64(0xFFFF)) + (lanes >> np.uint64(48)))
    return (s1 - _BYTE_SUM_MEAN) * _BYTE_SUM_SCALE, (s2 - _BYTE_SUM_MEAN) * _BYTE_SUM_SCALE

