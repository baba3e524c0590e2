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
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from .numba_util import njit
from .rng import next_double, seed_state, splitmix64

# ----------------------------------------------------------------------------- layout

#: Columns of the float64 trait matrix [n, t] (clinical units; see pipeline.imaging.render).
TRAIT_COLUMNS = (
    "lv_edv_ml",
    "lv_esv_ml",
    "lv_wall_mm",
    "wall_thickening",
    "segment_motion",
    "motion_heterogeneity",
    "diastolic_lag",
    "t1_ms",
    "t1_heterogeneity_ms",
    "rv_edv_ml",
    "rv_esv_ml",
)
(T_EDV, T_ESV, T_WALL, T_THICKENING, T_SEG_MOTION, T_MOTION_HET, T_LAG, T_T1, T_T1_HET,
 T_RV_EDV, T_RV_ESV) = range(len(TRAIT_COLUMNS))

#: Fields of the float64 template vector [p]; pipeline.imaging.templates documents each.
TEMPLATE_FIELDS = (
    "centre_x_frac", "centre_y_frac", "centre_jitter_px", "slice_jitter_px", "rotation_jitter_rad",
    "rv_angle_rad",
    "slice_dx_base", "slice_dy_base", "slice_dx_mid", "slice_dy_mid", "slice_dx_apex", "slice_dy_apex",
    "spacing_mm", "cavity_area_ref_px", "edv_ref_ml",
    "cavity_factor_base", "cavity_factor_mid", "cavity_factor_apex",
    "wall_factor_base", "wall_factor_mid", "wall_factor_apex",
    "long_axis_coupling", "ellipticity", "ellipse_angle_rad", "septal_wall_excess",
    "rv_area_ref_px", "rv_edv_ref_ml", "rv_factor_base", "rv_factor_mid", "rv_factor_apex",
    "rv_half_span_rad", "rv_shape_power", "rv_wall_px", "rv_wall_taper_rad",
    "pap_radius_base", "pap_radius_mid", "pap_radius_apex", "pap_angle_1_rad", "pap_angle_2_rad",
    "pap_inset",
    "fat_px",
    "i_blood", "i_myocardium", "i_papillary", "i_fat", "i_lung", "i_mediastinum", "i_liver",
    "i_chest_muscle", "i_chest_fat", "i_aorta",
    "noise_sigma", "gain_sd",
    "t1_noise_ms", "t1_floor_ms", "texture_spacing_px",
    "t_end_systole", "tau_early", "t_atrial", "tau_atrial", "early_fraction",
    "segment_half_width_rad",
)
_P = {name: i for i, name in enumerate(TEMPLATE_FIELDS)}
P_CX, P_CY, P_CJIT, P_SJIT, P_RJIT, P_RV_ANGLE = (_P[k] for k in (
    "centre_x_frac", "centre_y_frac", "centre_jitter_px", "slice_jitter_px", "rotation_jitter_rad", "rv_angle_rad"))
P_SLICE_DX0 = _P["slice_dx_base"]
P_SPACING, P_CAV_REF, P_EDV_REF = _P["spacing_mm"], _P["cavity_area_ref_px"], _P["edv_ref_ml"]
P_CAV_F0, P_WALL_F0 = _P["cavity_factor_base"], _P["wall_factor_base"]
P_LONG, P_ELL, P_ELL_ANGLE, P_SEPTAL = (_P[k] for k in (
    "long_axis_coupling", "ellipticity", "ellipse_angle_rad", "septal_wall_excess"))
P_RV_REF, P_RV_EDV_REF, P_RV_F0 = _P["rv_area_ref_px"], _P["rv_edv_ref_ml"], _P["rv_factor_base"]
P_RV_HALF, P_RV_POW, P_RV_WALL, P_RV_TAPER = (_P[k] for k in (
    "rv_half_span_rad", "rv_shape_power", "rv_wall_px", "rv_wall_taper_rad"))
P_PAP_R0, P_PAP_A1, P_PAP_A2, P_PAP_INSET = (_P[k] for k in (
    "pap_radius_base", "pap_angle_1_rad", "pap_angle_2_rad", "pap_inset"))
P_FAT = _P["fat_px"]
(P_I_BLOOD, P_I_MYO, P_I_PAP, P_I_FAT, P_I_LUNG, P_I_MED, P_I_LIVER, P_I_CMUSCLE, P_I_CFAT,
 P_I_AORTA) = (_P[k] for k in ("i_blood", "i_myocardium", "i_papillary", "i_fat", "i_lung", "i_mediastinum",
                               "i_liver", "i_chest_muscle", "i_chest_fat", "i_aorta"))
P_SIGMA, P_GAIN_SD = _P["noise_sigma"], _P["gain_sd"]
P_T1_NOISE, P_T1_FLOOR, P_TEX_SPACING = _P["t1_noise_ms"], _P["t1_floor_ms"], _P["texture_spacing_px"]
P_TES, P_TAU_E, P_TA, P_TAU_A, P_EARLY = (_P[k] for k in (
    "t_end_systole", "tau_early", "t_atrial", "tau_atrial", "early_fraction"))
P_SEG_HW = _P["segment_half_width_rad"]

N_SLICES = 3
N_ANGLE_BINS = 256
N_HARMONICS = 3          # regional-motion harmonics of order 2, 3, 4
TEXTURE_NODES = 20       # texture control grid per axis, centred on the LV
MAX_FRAMES = 64
# Row numbers of the per-subject random streams.
ROW_SUBJECT = 0
ROW_CINE = 1             # + slice * MAX_FRAMES + frame
ROW_T1_NOISE = 1000      # + slice
ROW_TEXTURE = 2000       # + slice
# Number of subject-level uniform draws on ROW_SUBJECT, in this order:
# centre dx, centre dy, rotation, 3 x (slice dx, slice dy), 2 x N_HARMONICS harmonic
# coefficients (as normals), gain (as a normal).
N_SUBJECT_DRAWS = 3 + 2 * N_SLICES + 2 * N_HARMONICS + 1

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
TABLE_BITS = 16
_TABLE_SHIFT = np.uint64(64 - TABLE_BITS)
_BYTE_LANES = np.uint64(0x00FF00FF00FF00FF)
_BYTE_SUM_MEAN = 2.0 * 255.0
_BYTE_SUM_SCALE = 1.0 / math.sqrt(4.0 * (256.0 ** 2 - 1.0) / 12.0)
#: RMS of the regional wall-motion modulation per unit of motion_heterogeneity.
MOTION_HET_RMS_PER_UNIT = 0.5


def normal_quantile_table() -> np.ndarray:
    """float64 [65536]: the standard-normal quantiles at (j + 0.5) / 65536.

    Indexing it with 16 uniform random bits gives a standard normal deviate
    quantised to 65,536 equiprobable values.
    """
    from scipy.special import ndtri

    size = 1 << TABLE_BITS
    return ndtri((np.arange(size, dtype=np.float64) + 0.5) / size)


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
