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
                           ellipse_coverage, bspline_weights, subject_draws, angular_profiles, frame_radii,
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


@njit
def render_subject_slice(i, s, traits, segments, site_index, keys, site_fields, tpl, table, canvas, cine_out,
                         t1_out):
    """Render slice ``s`` of subject ``i`` into cine_out[i, s] and t1_out[i, s]."""
    frames = cine_out.shape[2]
    size = cine_out.shape[3]
    npix = size * size
    n_bins = N_ANGLE_BINS
    key = keys[i]
    trait_row = traits[i]
    pad = canvas_pad(tpl)

    draws = np.empty(N_SUBJECT_DRAWS, dtype=np.float64)
    subject_draws(key, table, draws)
    offset_x = round_half_up(tpl[P_CJIT] * draws[0])
    offset_y = round_half_up(tpl[P_CJIT] * draws[1])
    rv_angle = tpl[P_RV_ANGLE] + tpl[P_RJIT] * draws[2]
    cx = tpl[P_CX] * size + offset_x + tpl[P_SLICE_DX0 + 2 * s] + tpl[P_SJIT] * draws[3 + 2 * s]
    cy = tpl[P_CY] * size + offset_y + tpl[P_SLICE_DX0 + 2 * s + 1] + tpl[P_SJIT] * draws[4 + 2 * s]
    gain = 1.0 + tpl[P_GAIN_SD] * draws[N_SUBJECT_DRAWS - 1]

    motion = np.empty(n_bins)
    wall_shape = np.empty(n_bins)
    ed_shape = np.empty(n_bins)
    rv_bump = np.empty(n_bins)
    rv_wall_bump = np.empty(n_bins)
    fat_shape = np.empty(n_bins)
    angular_profiles(trait_row, segments[i], draws, tpl, motion, wall_shape, ed_shape, rv_bump,
                     rv_wall_bump, fat_shape)

    edv = trait_row[T_EDV]
    area_ed = tpl[P_CAV_REF] * (edv / tpl[P_EDV_REF]) ** (2.0 / 3.0) * tpl[P_CAV_F0 + s]
    area_ratio = area_ratio_es_ed(trait_row[T_ESV], edv, tpl[P_LONG])
    pap_radius = tpl[P_PAP_R0 + s]
    pap_area = 2.0 * math.pi * pap_radius * pap_radius
    wall_ed_px = trait_row[T_WALL] / tpl[P_SPACING] * tpl[P_WALL_F0 + s]
    rv_edv = trait_row[T_RV_EDV]
    rv_area_ed = tpl[P_RV_REF] * (rv_edv / tpl[P_RV_EDV_REF]) ** (2.0 / 3.0) * tpl[P_RV_F0 + s]
    rv_area_ratio = area_ratio_es_ed(trait_row[T_RV_ESV], rv_edv, tpl[P_LONG])

    # Boundary radii [f, boundary, k] (endo, epi, RV endo, RV outer, fat) and papillary centres [f, muscle, xy].
    radii = np.empty((frames, 5, n_bins))
    pap_xy = np.empty((frames, 2, 2))
    # Per angle bin, the largest outer (fat) radius over the cycle: beyond it a pixel is background throughout.
    outer_by_bin = np.zeros(n_bins)
    for f in range(frames):
        c = contraction(f / frames, tpl[P_TES], trait_row[T_LAG], tpl[P_TAU_E], tpl[P_TA], tpl[P_TAU_A],
                        tpl[P_EARLY])
        frame_radii(c, area_ed, area_ratio, pap_area, wall_ed_px, trait_row[T_THICKENING], rv_area_ed,
                    rv_area_ratio, tpl[P_RV_WALL], motion, wall_shape, ed_shape, rv_bump, rv_wall_bump, fat_shape,
                    radii[f, 0], radii[f, 1], radii[f, 2], radii[f, 3], radii[f, 4])
        for k in range(n_bins):
            if radii[f, 4, k] > outer_by_bin[k]:
                outer_by_bin[k] = radii[f, 4, k]
        for j in range(2):
            pap_angle = tpl[P_PAP_A1 + j]
            pb = wrap_angle(pap_angle) / (2.0 * math.pi) * n_bins
            pb = pb - n_bins * math.floor(pb / n_bins)
            k0 = int(pb)
            endo_here = interp_bin(radii[f, 0], k0 % n_bins, (k0 + 1) % n_bins, pb - k0)
            pr = endo_here - tpl[P_PAP_INSET] * pap_radius
            if pr < 0.0:
                pr = 0.0
            pap_xy[f, j, 0] = cx + pr * math.cos(rv_angle + pap_angle)
            pap_xy[f, j, 1] = cy + pr * math.sin(rv_angle + pap_angle)
    r_outer = 0.0
    for k in range(n_bins):
        if outer_by_bin[k] > r_outer:
            r_outer = outer_by_bin[k]

    # Observed noise-free intensity per pixel; pixels within r_outer of the LV centre are redrawn per frame.
    truth = np.empty(npix)
    heart_pixel = np.empty(npix, dtype=np.int64)
    heart_radius = np.empty(npix)
    heart_bin = np.empty(npix)
    heart_background = np.empty(npix)
    heart_field = np.empty(npix)
    n_heart = 0
    site_field = site_fields[site_index[i]]
    canvas_s = canvas[s]
    for p in range(npix):
        y = p // size
        x = p - y * size
        field = site_field[y, x] * gain
        background = canvas_s[y - int(offset_y) + pad, x - int(offset_x) + pad]
        truth[p] = background * field
        dx = x - cx
        dy = y - cy
        r = math.sqrt(dx * dx + dy * dy)
        if r < r_outer + 0.5:
            rel = math.atan2(dy, dx) - rv_angle
            b = rel / (2.0 * math.pi) * n_bins
            b = b - n_bins * math.floor(b / n_bins)
            if b >= n_bins:
                b -= n_bins
            k0 = int(b)
            # Coverage of the outermost boundary is zero from 0.5 px beyond it (and the radius is interpolated
            # between two bins): such pixels keep their background.
            if r >= max(outer_by_bin[k0], outer_by_bin[(k0 + 1) % n_bins]) + 0.5:
                continue
            heart_pixel[n_heart] = p
            heart_radius[n_heart] = r
            heart_bin[n_heart] = b
            heart_background[n_heart] = background
            heart_field[n_heart] = field
            n_heart += 1

    i_blood = tpl[P_I_BLOOD]
    i_myo = tpl[P_I_MYO]
    i_pap = tpl[P_I_PAP]
    i_fat = tpl[P_I_FAT]
    sigma = tpl[P_SIGMA]
    pap_reach = pap_radius + 1.0
    myo_cover = np.zeros(n_heart)
    for f in range(frames):
        r_endo = radii[f, 0]
        r_epi = radii[f, 1]
        r_rv_in = radii[f, 2]
        r_rv_out = radii[f, 3]
        r_fat = radii[f, 4]
        for h in range(n_heart):
            p = heart_pixel[h]
            r = heart_radius[h]
            b = heart_bin[h]
            k0 = int(b)
            k1 = k0 + 1
            if k1 == n_bins:
                k1 = 0
            frac = b - k0
            c_endo = coverage(interp_bin(r_endo, k0, k1, frac), r)
            if c_endo == 1.0:
                # Inside the LV cavity all outer boundaries (radii >= endocardium) cover the pixel fully.
                c_epi = 1.0
                c_rv_in = 1.0
                c_rv_out = 1.0
                c_fat = 1.0
            else:
                c_fat = coverage(interp_bin(r_fat, k0, k1, frac), r)
                if c_fat == 0.0:
                    truth[p] = heart_background[h] * heart_field[h]
                    if f == 0:
                        myo_cover[h] = 0.0
                    continue
                c_epi = coverage(interp_bin(r_epi, k0, k1, frac), r)
                c_rv_in = coverage(interp_bin(r_rv_in, k0, k1, frac), r)
                c_rv_out = coverage(interp_bin(r_rv_out, k0, k1, frac), r)
            c_pap = 0.0
            if pap_radius > 0.0 and c_endo > 0.0:
                y = p // size
                x = p - y * size
                for j in range(2):
                    ddx = x - pap_xy[f, j, 0]
                    ddy = y - pap_xy[f, j, 1]
                    if abs(ddx) < pap_reach and abs(ddy) < pap_reach:
                        cj = coverage(pap_radius, math.sqrt(ddx * ddx + ddy * ddy))
                        if cj > c_pap:
                            c_pap = cj
            blood = c_endo * (1.0 - c_pap) + (c_rv_in - c_epi)
            papillary = c_endo * c_pap
            myocardium = (c_epi - c_endo) + (c_rv_out - c_rv_in)
            fat = c_fat - c_rv_out
            value = (i_blood * blood + i_pap * papillary + i_myo * myocardium + i_fat * fat
                     + heart_background[h] * (1.0 - c_fat))
            truth[p] = value * heart_field[h]
            if f == 0:
                myo_cover[h] = myocardium

        # Acquisition noise: complex Gaussian, magnitude image (Rician), rounded to uint8.
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
    wx = np.empty(4)
    wy = np.empty(4)
    for h in range(n_heart):
        if myo_cover[h] < 0.5:
            continue
        p = heart_pixel[h]
        y = p // size
        x = p - y * size
        gx = (x - cx) / spacing + half_nodes
        gy = (y - cy) / spacing + half_nodes
        ix = int(math.floor(gx))
        iy = int(math.floor(gy))
        norm_x = bspline_weights(gx - ix, wx)
        norm_y = bspline_weights(gy - iy, wy)
        texture = 0.0
        for a in range(4):
            row = min(max(iy - 1 + a, 0), TEXTURE_NODES - 1)
            for c_ in range(4):
                col = min(max(ix - 1 + c_, 0), TEXTURE_NODES - 1)
                texture += wy[a] * wx[c_] * nodes[row, col]
        texture /= norm_x * norm_y
        value = t1 + t1_het * texture + t1_sd * table[hashed_u64(noise_base, p) >> _TABLE_SHIFT]
        if value < t1_floor:
            value = t1_floor
        t1_plane[p] = np.float32(value)


@njit(parallel=True)
def render_batch(traits, segments, site_index, keys, site_fields, tpl, table, cine_out, t1_out):
    """Render a batch of subjects in parallel over (subject, slice).

    traits      float64 [n, t]   columns TRAIT_COLUMNS, already sanitised
    segments    int64   [n]      -1 none, 0..5 hypokinetic mid-ventricular segment
    site_index  int64   [n]      row of ``site_fields``
    keys        uint64  [n]      per-subject noise keys
    site_fields float64 [sites, y, x]  multiplicative field 1 + b_site(u)
    tpl         float64 [p]      template vector, TEMPLATE_FIELDS order
    table       float64 [65536]  normal_quantile_table()
    cine_out    uint8   [n, s, f, y, x]   filled
    t1_out      float32 [n, s, y, x]      filled (ms, NaN outside the myocardium)
    """
    n = traits.shape[0]
    canvas = background_canvas(tpl, cine_out.shape[3])
    for task in prange(n * N_SLICES):
        render_subject_slice(task // N_SLICES, task % N_SLICES, traits, segments, site_index, keys, site_fields,
                             tpl, table, canvas, cine_out, t1_out)


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
           'MOTION_HET_RMS_PER_UNIT', 'normal_quantile_table', 'render_subject_slice', 'render_batch']
