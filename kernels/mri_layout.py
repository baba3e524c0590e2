"""The layout of the cardiac MRI renderer (``kernels.mri``): the columns of the trait
matrix, the fields of the template vector and their indices, the slice, angle-bin,
harmonic and frame counts, the row numbers of each subject's random streams, and the
standard-normal quantile table the kernels draw normal deviates from.

One job: the numbers every part of the renderer agrees on (the Numba kernels read them
as compile-time constants; ``kernels.reference.mri`` and ``pipeline.imaging`` read them
through ``kernels.mri``, which re-exports every name here).
"""
from __future__ import annotations

import math

import numpy as np


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

