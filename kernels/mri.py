"""Short-axis cardiac MRI rendering: SSFP cine and native T1 maps.

Dimension key used in shapes and comments:
    n  subject            s  slice (0 base, 1 mid, 2 apex)       f  cine frame
    y  image row          x  image column                       k  angle bin around the LV centre
    t  trait column (``TRAIT_COLUMNS``)                          p  template field (``TEMPLATE_FIELDS``)

Geometry is polar around each slice's LV centre.  Every boundary (LV endocardium,
LV epicardium, RV endocardium, RV free-wall epicardium, pericardial fat) is a
radius per angle bin, so a pixel's partial coverage of the region inside a
boundary is ``clamp(R(angle) - r + 0.5, 0, 1)``: a one-pixel linear ramp on the
signed radial distance, i.e. analytic anti-aliasing that keeps cavity areas
measurable to a fraction of a pixel.

The cycle: frame f shows cycle time f / frames, end-diastole at frame 0.  A
contraction curve c(t) (0 at ED, 1 at ES; half-cosine ejection, then early
filling delayed by ``diastolic_lag``, then atrial filling) scales every motion:
the blood-pool area is A_ED (1 - (1 - A_ES/A_ED) c), the wall thickens by
``wall_thickening`` x c x m(angle), where m is the regional motion multiplier.
The endocardial excursion along m is solved per frame so that the blood-pool
area is exact, so a hypokinetic segment is compensated by the rest of the ring.

Angles are measured from the direction of the RV (the septum's outward normal),
in image coordinates (x right, y down), so bin 0 always points at the septum
whatever the subject's rotation jitter.

Randomness comes only from ``kernels.rng``.  Per subject a ``noise_key`` seeds
named rows: row 0 for anatomical jitter and regional-motion harmonics, one row
per (slice, frame) plane for acquisition noise, one per slice for the T1 texture
and one per slice for T1 pixel noise.  Per-pixel draws are counter-based
(SplitMix64 of ``plane_base + pixel_index``), so any pixel's value depends only on
the key, its plane and its index, never on thread count or batch order.
Cine acquisition noise uses ``byte_sum_normals`` (two SD-matched Irwin-Hall
deviates per 64-bit word, cheap enough for 1.2 M pixels per subject); the few
other normal deviates (T1 texture and T1 noise, harmonic coefficients, gain)
come from a quantile table (``normal_quantile_table``): the upper 16 bits of a
random word pick one of 65,536 equiprobable standard-normal quantiles, exact up
to that quantisation and truncated at 4.3 SD.

This module is the kernel (``render_subject_slice``, ``render_batch``); its layout
(trait columns, template fields, stream rows, the quantile table) is
``kernels.mri_layout`` and its building blocks (hashing, contraction, coverage,
profiles, radii, background) ``kernels.mri_geometry``.  Every name of both is
importable from here, as before the split.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from .mri_geometry import (hashed_u64, plane_base, smoothstep, contraction, area_ratio_es_ed, wrap_angle, coverage,
                           ellipse_coverage, bspline_weights, subject_draws, angular_profiles, frame_radii, cycle_radii,
                           interp_bin, background_intensity, canvas_pad, background_canvas, round_half_up,
                           byte_sum_normals)
from .mri_layout import (TRAIT_COLUMNS, T_EDV, T_ESV, T_WALL, T_THICKENING, T_SEG_MOTION, T_MOTION_HET, T_LAG, T_T1,
                         T_T1_HET, T_RV_EDV, T_RV_ESV, TEMPLATE_FIELDS, P_CX, P_CY, P_CJIT, P_SJIT, P_RJIT,
                         P_RV_ANGLE, P_SLICE_DX0, P_SPACING, P_CAV_REF, P_EDV_REF, P_CAV_F0, P_WALL_F0, P_LONG, P_ELL,
                         P_ELL_ANGLE, P_SEPTAL, P_RV_REF, P_RV_EDV_REF, P_RV_F0, P_RV_HALF, P_RV_POW, P_RV_WALL,
                         P_RV_TAPER, P_PAP_R0, P_PAP_A1, P_PAP_A2, P_PAP_INSET, P_FAT, P_I_BLOOD, P_I_MYO, P_I_PAP,
                         P_I_FAT, P_I_LUNG, P_I_MED, P_I_LIVER, P_I_CMUSCLE, P_I_CFAT, P_I_AORTA, P_SIGMA, P_GAIN_SD,
                         P_T1_NOISE, P_T1_FLOOR, P_TEX_SPACING, P_TES, P_TAU_E, P_TA, P_TAU_A, P_EARLY, P_SEG_HW,
                         N_SLICES, N_ANGLE_BINS, N_HARMONICS, TEXTURE_NODES, MAX_FRAMES, ROW_SUBJECT, ROW_CINE,
                         ROW_T1_NOISE, ROW_TEXTURE, N_SUBJECT_DRAWS, TABLE_BITS, _TABLE_SHIFT,
                         MOTION_HET_RMS_PER_UNIT, normal_quantile_table)
from .numba_util import njit

# ----------------------------------------------------------------------------- the kernel

#: The cardiac cycle is composited in chunks of this many frames, one frame per SIMD lane
#: (a compile-time trip count, so LLVM vectorises each chunk without a scalar remainder).
LANES = 32


@njit(inline="always")
def _cover(boundary_radius, r):
    """``coverage`` as selects (the same value), so that a loop over frames vectorises."""
    v = boundary_radius - r + 0.5
    return 0.0 if v <= 0.0 else (1.0 if v >= 1.0 else v)


@njit(inline="always")
def _pap_lanes(pap_x, pap_y, f0, x, y, pap_radius, pap_reach, out):
    """Papillary coverage of pixel (x, y) in frames f0 .. f0 + LANES: the larger of the two
    muscles' coverages where the pixel is within reach of the muscle's centre, else 0."""
    start = np.uint64(f0)
    for f in range(np.uint64(LANES)):
        fi = start + f  # unsigned: no negative-index wraparound, so the loop vectorises without gathers
        c = 0.0
        for j in range(2):
            ddx = x - pap_x[j, fi]
            ddy = y - pap_y[j, fi]
            cj = _cover(pap_radius, math.sqrt(ddx * ddx + ddy * ddy))
            c = cj if ((abs(ddx) < pap_reach) & (abs(ddy) < pap_reach) & (cj > c)) else c
        out[fi] = c


@njit(inline="always")
def _heart_lanes(rk, f0, k0, k1, frac, r, background, field, pap, i_blood, i_pap, i_myo, i_fat, truth, myo):
    """Noise-free intensity (``truth``) and myocardial coverage (``myo``) of one heart pixel in
    frames f0 .. f0 + LANES: the compositing of the boundaries' coverages, branch-free.

    rk[k, boundary, frame] holds the boundary radii by angle bin (endo, epi, RV endo, RV
    outer, fat).  Inside the LV cavity every outer boundary covers the pixel fully; beyond
    the fat boundary the pixel keeps its background (and no myocardium)."""
    bg_field = background * field
    start = np.uint64(f0)
    for f in range(np.uint64(LANES)):
        fi = start + f  # unsigned: no negative-index wraparound, so the loop vectorises without gathers
        lo = rk[k0, 0, fi]
        c_endo = _cover(lo + (rk[k1, 0, fi] - lo) * frac, r)
        lo = rk[k0, 1, fi]
        c_epi = _cover(lo + (rk[k1, 1, fi] - lo) * frac, r)
        lo = rk[k0, 2, fi]
        c_rv_in = _cover(lo + (rk[k1, 2, fi] - lo) * frac, r)
        lo = rk[k0, 3, fi]
        c_rv_out = _cover(lo + (rk[k1, 3, fi] - lo) * frac, r)
        lo = rk[k0, 4, fi]
        c_fat_here = _cover(lo + (rk[k1, 4, fi] - lo) * frac, r)
        inside = c_endo == 1.0
        outside = (not inside) & (c_fat_here == 0.0)
        c_epi = 1.0 if inside else c_epi
        c_rv_in = 1.0 if inside else c_rv_in
        c_rv_out = 1.0 if inside else c_rv_out
        c_fat = 1.0 if inside else c_fat_here
        c_pap = pap[fi] if c_endo > 0.0 else 0.0
        blood = c_endo * (1.0 - c_pap) + (c_rv_in - c_epi)
        papillary = c_endo * c_pap
        myocardium = (c_epi - c_endo) + (c_rv_out - c_rv_in)
        fat = c_fat - c_rv_out
        value = (i_blood * blood + i_pap * papillary + i_myo * myocardium + i_fat * fat
                 + background * (1.0 - c_fat))
        truth[fi] = bg_field if outside else value * field
        myo[fi] = 0.0 if outside else myocardium


@njit
def render_subject_slice(i, s, traits, segments, site_index, keys, site_fields, tpl, table, canvas, draws, motion,
                         wall_shape, ed_shape, rv_bump, rv_wall_bump, fat_shape, cine_out, t1_out):
    """Render slice ``s`` of subject ``i`` into cine_out[i, s] and t1_out[i, s], given the
    subject's draws and angular profiles (``subject_draws``, ``angular_profiles``)."""
    frames = cine_out.shape[2]
    size = cine_out.shape[3]
    npix = size * size
    n_bins = N_ANGLE_BINS
    key = keys[i]
    trait_row = traits[i]
    pad = canvas_pad(tpl)

    offset_x = round_half_up(tpl[P_CJIT] * draws[0])
    offset_y = round_half_up(tpl[P_CJIT] * draws[1])
    rv_angle = tpl[P_RV_ANGLE] + tpl[P_RJIT] * draws[2]
    cx = tpl[P_CX] * size + offset_x + tpl[P_SLICE_DX0 + 2 * s] + tpl[P_SJIT] * draws[3 + 2 * s]
    cy = tpl[P_CY] * size + offset_y + tpl[P_SLICE_DX0 + 2 * s + 1] + tpl[P_SJIT] * draws[4 + 2 * s]
    gain = 1.0 + tpl[P_GAIN_SD] * draws[N_SUBJECT_DRAWS - 1]

    edv = trait_row[T_EDV]
    area_ed = tpl[P_CAV_REF] * (edv / tpl[P_EDV_REF]) ** (2.0 / 3.0) * tpl[P_CAV_F0 + s]
    area_ratio = area_ratio_es_ed(trait_row[T_ESV], edv, tpl[P_LONG])
    pap_radius = tpl[P_PAP_R0 + s]
    pap_area = 2.0 * math.pi * pap_radius * pap_radius
    wall_ed_px = trait_row[T_WALL] / tpl[P_SPACING] * tpl[P_WALL_F0 + s]
    rv_edv = trait_row[T_RV_EDV]
    rv_area_ed = tpl[P_RV_REF] * (rv_edv / tpl[P_RV_EDV_REF]) ** (2.0 / 3.0) * tpl[P_RV_F0 + s]
    rv_area_ratio = area_ratio_es_ed(trait_row[T_RV_ESV], rv_edv, tpl[P_LONG])

    # Boundary radii by angle bin [k, boundary, f] (endo, epi, RV endo, RV outer, fat) and the papillary
    # centres [muscle, f], over frames padded to whole chunks of LANES (a padding lane repeats frame 0).
    padded = (frames + LANES - 1) // LANES * LANES
    rk = np.empty((n_bins, 5, padded))
    pap_x = np.empty((2, padded))
    pap_y = np.empty((2, padded))
    cs = np.empty(frames)
    for f in range(frames):
        cs[f] = contraction(f / frames, tpl[P_TES], trait_row[T_LAG], tpl[P_TAU_E], tpl[P_TA], tpl[P_TAU_A],
                            tpl[P_EARLY])
    cycle_radii(cs, area_ed, area_ratio, pap_area, wall_ed_px, trait_row[T_THICKENING], rv_area_ed, rv_area_ratio,
                tpl[P_RV_WALL], motion, wall_shape, ed_shape, rv_bump, rv_wall_bump, fat_shape, rk)
    # Per angle bin, the largest outer (fat) radius over the cycle: beyond it a pixel is background throughout.
    outer_by_bin = np.zeros(n_bins)
    for k in range(n_bins):
        fat_k = rk[k, 4]
        outer = 0.0
        for f in range(frames):
            outer = fat_k[f] if fat_k[f] > outer else outer
        outer_by_bin[k] = outer
    for j in range(2):
        pap_angle = tpl[P_PAP_A1 + j]
        pb = wrap_angle(pap_angle) / (2.0 * math.pi) * n_bins
        pb = pb - n_bins * math.floor(pb / n_bins)
        k0 = int(pb)
        along_x = math.cos(rv_angle + pap_angle)
        along_y = math.sin(rv_angle + pap_angle)
        for f in range(frames):
            endo_here = interp_bin(rk[:, 0, f], k0 % n_bins, (k0 + 1) % n_bins, pb - k0)
            pr = endo_here - tpl[P_PAP_INSET] * pap_radius
            if pr < 0.0:
                pr = 0.0
            pap_x[j, f] = cx + pr * along_x
            pap_y[j, f] = cy + pr * along_y
    for f in range(frames, padded):
        rk[:, :, f] = rk[:, :, 0]
        pap_x[:, f] = pap_x[:, 0]
        pap_y[:, f] = pap_y[:, 0]
    r_outer = 0.0
    for k in range(n_bins):
        if outer_by_bin[k] > r_outer:
            r_outer = outer_by_bin[k]

    # Observed noise-free intensity of the static background; pixels within r_outer of the LV centre
    # (the heart pixels, found within a box around the centre, in raster order) are redrawn per frame.
    truth = np.empty(npix)
    site_field = site_fields[site_index[i]]
    canvas_s = canvas[s]
    oy = pad - int(offset_y)
    ox = pad - int(offset_x)
    for y in range(size):
        for x in range(size):
            truth[y * size + x] = canvas_s[y + oy, x + ox] * (site_field[y, x] * gain)
    reach = r_outer + 0.5
    y_lo = min(max(int(math.floor(cy - reach)) - 2, 0), size)
    y_hi = min(max(int(math.ceil(cy + reach)) + 2, y_lo), size)
    x_lo = min(max(int(math.floor(cx - reach)) - 2, 0), size)
    x_hi = min(max(int(math.ceil(cx + reach)) + 2, x_lo), size)
    n_box = (y_hi - y_lo) * (x_hi - x_lo)
    heart_pixel = np.empty(n_box, dtype=np.int64)
    heart_radius = np.empty(n_box)
    heart_bin = np.empty(n_box)
    n_heart = 0
    for y in range(y_lo, y_hi):
        dy = y - cy
        for x in range(x_lo, x_hi):
            dx = x - cx
            r = math.sqrt(dx * dx + dy * dy)
            if r < reach:
                rel = math.atan2(dy, dx) - rv_angle
                b = rel / (2.0 * math.pi) * n_bins
                b = b - n_bins * math.floor(b / n_bins)
                if b >= n_bins:
                    b -= n_bins
                k0 = int(b)
                # Coverage of the outermost boundary is zero from 0.5 px beyond it (and the radius is
                # interpolated between two bins): such pixels keep their background.
                if r >= max(outer_by_bin[k0], outer_by_bin[(k0 + 1) % n_bins]) + 0.5:
                    continue
                heart_pixel[n_heart] = y * size + x
                heart_radius[n_heart] = r
                heart_bin[n_heart] = b
                n_heart += 1

    # Every frame of each heart pixel (SIMD across frames); papillary coverage only near the muscles.
    i_blood = tpl[P_I_BLOOD]
    i_myo = tpl[P_I_MYO]
    i_pap = tpl[P_I_PAP]
    i_fat = tpl[P_I_FAT]
    pap_reach = pap_radius + 1.0
    pap_x0 = pap_x.min() - pap_reach
    pap_x1 = pap_x.max() + pap_reach
    pap_y0 = pap_y.min() - pap_reach
    pap_y1 = pap_y.max() + pap_reach
    no_pap = np.zeros(padded)
    pap_here = np.empty(padded)
    myo = np.empty(padded)
    heart_truth = np.empty((n_heart, padded))
    myo_cover = np.empty(n_heart)
    for h in range(n_heart):
        p = heart_pixel[h]
        y = p // size
        x = p - y * size
        b = heart_bin[h]
        k0 = int(b)
        k1 = k0 + 1
        if k1 == n_bins:
            k1 = 0
        pap = no_pap
        if pap_radius > 0.0 and pap_x0 < x < pap_x1 and pap_y0 < y < pap_y1:
            for f0 in range(0, padded, LANES):
                _pap_lanes(pap_x, pap_y, f0, float(x), float(y), pap_radius, pap_reach, pap_here)
            pap = pap_here
        background = canvas_s[y + oy, x + ox]
        field = site_field[y, x] * gain
        row = heart_truth[h]
        for f0 in range(0, padded, LANES):
            _heart_lanes(rk, f0, k0, k1, b - k0, heart_radius[h], background, field, pap, i_blood, i_pap, i_myo,
                         i_fat, row, myo)
        myo_cover[h] = myo[0]

    # Acquisition noise: complex Gaussian, magnitude image (Rician), rounded to uint8.
    sigma = tpl[P_SIGMA]
    for f in range(frames):
        for h in range(n_heart):
            truth[heart_pixel[h]] = heart_truth[h, f]
        base = plane_base(key, ROW_CINE + s * MAX_FRAMES + f)
        out = cine_out[i, s, f].reshape(npix)
        for p in range(npix):
            n1, n2 = byte_sum_normals(hashed_u64(base, p))
            real = truth[p] + sigma * n1
            imag = sigma * n2
            v = math.sqrt(real * real + imag * imag) + 0.5
            out[p] = np.uint8(min(v, 255.0))

    # Native T1 map at the end-diastolic geometry, NaN outside the myocardium.
    t1_plane = t1_out[i, s].reshape(npix)
    t1_plane[:] = np.nan
    t1 = trait_row[T_T1]
    t1_het = trait_row[T_T1_HET]
    t1_sd = tpl[P_T1_NOISE]
    t1_floor = tpl[P_T1_FLOOR]
    spacing = tpl[P_TEX_SPACING]
    half_nodes = 0.5 * (TEXTURE_NODES - 1)
    tex_base = plane_base(key, ROW_TEXTURE + s)
    nodes = np.empty((TEXTURE_NODES, TEXTURE_NODES))
    for a in range(TEXTURE_NODES):
        for c_ in range(TEXTURE_NODES):
            nodes[a, c_] = table[hashed_u64(tex_base, a * TEXTURE_NODES + c_) >> _TABLE_SHIFT]
    noise_base = plane_base(key, ROW_T1_NOISE + s)
    # The B-spline weights depend on the column (x) and the row (y) alone: made once per column and row.
    col_node = np.empty(size, dtype=np.int64)
    col_weight = np.empty((size, 4))
    col_norm = np.empty(size)
    row_node = np.empty(size, dtype=np.int64)
    row_weight = np.empty((size, 4))
    row_norm = np.empty(size)
    for x in range(size):
        gx = (x - cx) / spacing + half_nodes
        ix = int(math.floor(gx))
        col_norm[x] = bspline_weights(gx - ix, col_weight[x])
        col_node[x] = ix
    for y in range(size):
        gy = (y - cy) / spacing + half_nodes
        iy = int(math.floor(gy))
        row_norm[y] = bspline_weights(gy - iy, row_weight[y])
        row_node[y] = iy
    # The myocardium (coverage at least one half at end-diastole), listed without a branch per pixel.
    myo_pixel = np.empty(n_heart, dtype=np.int64)
    n_myo = 0
    for h in range(n_heart):
        myo_pixel[n_myo] = heart_pixel[h]
        n_myo += not (myo_cover[h] < 0.5)
    # The fit noise first, in a loop of independent look-ups (the table is large and cold here: many
    # misses in flight at once, not one per pixel behind the texture's chain of sums).
    fit_noise = np.empty(n_myo)
    for m in range(n_myo):
        fit_noise[m] = table[hashed_u64(noise_base, myo_pixel[m]) >> _TABLE_SHIFT]
    for m in range(n_myo):
        p = myo_pixel[m]
        y = p // size
        x = p - y * size
        ix = col_node[x]
        iy = row_node[y]
        texture = 0.0
        for a in range(4):
            row = min(max(iy - 1 + a, 0), TEXTURE_NODES - 1)
            wy = row_weight[y, a]
            for c_ in range(4):
                col = min(max(ix - 1 + c_, 0), TEXTURE_NODES - 1)
                texture += wy * col_weight[x, c_] * nodes[row, col]
        texture /= col_norm[x] * row_norm[y]
        value = t1 + t1_het * texture + t1_sd * fit_noise[m]
        if value < t1_floor:
            value = t1_floor
        t1_plane[p] = np.float32(value)


@njit
def render_subject(i, traits, segments, site_index, keys, site_fields, tpl, table, canvas, cine_out, t1_out):
    """Render every slice of subject ``i``: its draws and angular profiles once, then each slice."""
    n_bins = N_ANGLE_BINS
    draws = np.empty(N_SUBJECT_DRAWS, dtype=np.float64)
    subject_draws(keys[i], table, draws)
    motion = np.empty(n_bins)
    wall_shape = np.empty(n_bins)
    ed_shape = np.empty(n_bins)
    rv_bump = np.empty(n_bins)
    rv_wall_bump = np.empty(n_bins)
    fat_shape = np.empty(n_bins)
    angular_profiles(traits[i], segments[i], draws, tpl, motion, wall_shape, ed_shape, rv_bump, rv_wall_bump,
                     fat_shape)
    for s in range(N_SLICES):
        render_subject_slice(i, s, traits, segments, site_index, keys, site_fields, tpl, table, canvas, draws,
                             motion, wall_shape, ed_shape, rv_bump, rv_wall_bump, fat_shape, cine_out, t1_out)


@njit(parallel=True)
def render_batch(traits, segments, site_index, keys, site_fields, tpl, table, canvas, cine_out, t1_out):
    """Render a batch of subjects in parallel over subjects.

    traits      float64 [n, t]   columns TRAIT_COLUMNS, already sanitised
    segments    int64   [n]      -1 none, 0..5 hypokinetic mid-ventricular segment
    site_index  int64   [n]      row of ``site_fields``
    keys        uint64  [n]      per-subject noise keys
    site_fields float64 [sites, y, x]  multiplicative field 1 + b_site(u)
    tpl         float64 [p]      template vector, TEMPLATE_FIELDS order
    table       float64 [65536]  normal_quantile_table()
    canvas      float64 [s, y, x]  background_canvas(tpl, size)
    cine_out    uint8   [n, s, f, y, x]   filled
    t1_out      float32 [n, s, y, x]      filled (ms, NaN outside the myocardium)
    """
    for i in prange(traits.shape[0]):
        render_subject(i, traits, segments, site_index, keys, site_fields, tpl, table, canvas, cine_out, t1_out)


# kernels.mri is the renderer's one address: its layout and building blocks are importable from here too.
__all__ = ['hashed_u64', 'plane_base', 'smoothstep', 'contraction', 'area_ratio_es_ed', 'wrap_angle', 'coverage',
           'ellipse_coverage', 'bspline_weights', 'subject_draws', 'angular_profiles', 'frame_radii', 'interp_bin',
           'background_intensity', 'canvas_pad', 'background_canvas', 'round_half_up', 'byte_sum_normals',
           'TRAIT_COLUMNS', 'T_EDV', 'T_ESV', 'T_WALL', 'T_THICKENING', 'T_SEG_MOTION', 'T_MOTION_HET', 'T_LAG', 'T_T1',
           'T_T1_HET', 'T_RV_EDV', 'T_RV_ESV', 'TEMPLATE_FIELDS', 'P_CX', 'P_CY', 'P_CJIT', 'P_SJIT', 'P_RJIT',
           'P_RV_ANGLE', 'P_SLICE_DX0', 'P_SPACING', 'P_CAV_REF', 'P_EDV_REF', 'P_CAV_F0', 'P_WALL_F0', 'P_LONG',
           'P_ELL', 'P_ELL_ANGLE', 'P_SEPTAL', 'P_RV_REF', 'P_RV_EDV_REF', 'P_RV_F0', 'P_RV_HALF', 'P_RV_POW',
           'P_RV_WALL', 'P_RV_TAPER', 'P_PAP_R0', 'P_PAP_A1', 'P_PAP_A2', 'P_PAP_INSET', 'P_FAT', 'P_I_BLOOD',
           'P_I_MYO', 'P_I_PAP', 'P_I_FAT', 'P_I_LUNG', 'P_I_MED', 'P_I_LIVER', 'P_I_CMUSCLE', 'P_I_CFAT', 'P_I_AORTA',
           'P_SIGMA', 'P_GAIN_SD', 'P_T1_NOISE', 'P_T1_FLOOR', 'P_TEX_SPACING', 'P_TES', 'P_TAU_E', 'P_TA', 'P_TAU_A',
           'P_EARLY', 'P_SEG_HW', 'N_SLICES', 'N_ANGLE_BINS', 'N_HARMONICS', 'TEXTURE_NODES', 'MAX_FRAMES',
           'ROW_SUBJECT', 'ROW_CINE', 'ROW_T1_NOISE', 'ROW_TEXTURE', 'N_SUBJECT_DRAWS', 'TABLE_BITS',
           'MOTION_HET_RMS_PER_UNIT', 'normal_quantile_table', 'LANES', 'render_subject_slice', 'render_subject', 'render_batch']
