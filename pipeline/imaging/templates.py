"""Anatomical templates for the short-axis renderer.

A template is a small set of shape parameters (``CardiacTemplate``) that the
Numba kernel ``kernels.mri.render_batch`` deforms to each participant's
morphology and cardiac cycle.  The default is parametric and ships in this file;
``load_segmentation_template`` derives the shape parameters from a user-supplied
label map (ACDC-style NIfTI: 1 RV cavity, 2 LV myocardium, 3 LV cavity).

Calibration to the paper's pixel traces (Supplement Note S2), with this
module's conventions:

* Pixel spacing is nominally 1.0 mm, so ``lv_wall_mm`` renders as that many
  pixels of end-diastolic LV wall (times a per-slice factor).
* The mid-slice end-diastolic blood pool (LV cavity excluding the papillary
  muscles) is ``cavity_area_ref_px`` = 700 px^2 at ``edv_ref_ml`` = 126 mL and
  scales as EDV^(2/3) between participants (geometric similarity).  Absolute
  areas are thus calibrated to the traces, not to anatomy in mm^2: a 700 mm^2
  mid cavity is small for a 126 mL ventricle, and the template accepts that so
  that the cavity and the wall can both match the traces.
* Within the cycle, area = volume / long-axis length with the long axis
  shortening by ``long_axis_coupling`` x (1 - ESV/EDV).  The coupling is set so
  that the frozen baseline pipeline (``pipeline.imaging.measure``), measuring
  the rendered cine, finds the traces' "area emptying" (pilot mean 58.4 %,
  cohort median 59.0 %): in DCM worlds at tiny scale it measures a mean of
  0.57-0.59 and a median of ~0.60.  (With 0.18, the geometric value for a 58 %
  fall at EF 64 %, the pipeline measured 0.61-0.63: its end-systolic
  segmentation loses some cavity to the thickened wall.)
* Myocardium (the finite region of the released T1 map, which is how the
  paper's analyst measured "myocardial area") is the LV myocardium plus the RV
  free wall, papillary muscles excluded.  With a 9 mm wall, a 4.5 px RV free wall
  and the default RV crescent, the mid-slice myocardial area is ~1,600 px^2 at
  the reference cavity (wall/cavity area ratio ~2.3, as in the traces).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernels.mri import TEMPLATE_FIELDS


@dataclass(frozen=True)
class CardiacTemplate:
    """Shape, intensity and timing parameters of the rendered short-axis stack.

    Lengths are in pixels unless named ``_mm``; angles in radians, measured in
    image coordinates (x right, y down) and, except ``rv_angle_rad``, relative to
    the direction from the LV centre to the RV.  Intensities are noise-free
    SSFP levels on the uint8 scale before the site field.
    """

    centre_x_frac: float = 0.55          #: LV centre, fraction of the image width
    centre_y_frac: float = 0.52          #: LV centre, fraction of the image height
    centre_jitter_px: float = 3.0        #: per-subject positioning jitter, uniform +-
    slice_jitter_px: float = 1.0         #: per-slice breath-hold jitter, uniform +-
    rotation_jitter_rad: float = 0.2     #: per-subject rotation jitter, uniform +-
    rv_angle_rad: float = math.pi + 0.3  #: RV direction (left and anterior = up)
    slice_dx_base: float = -1.5          #: slice centre offsets (LV long axis not perpendicular)
    slice_dy_base: float = -1.0
    slice_dx_mid: float = 0.0
    slice_dy_mid: float = 0.0
    slice_dx_apex: float = 2.5
    slice_dy_apex: float = 2.0
    spacing_mm: float = 1.0              #: nominal pixel spacing used to render lv_wall_mm
    cavity_area_ref_px: float = 700.0    #: mid ED blood-pool area at edv_ref_ml
    edv_ref_ml: float = 126.0
    cavity_factor_base: float = 1.25     #: ED blood-pool area relative to the mid slice
    cavity_factor_mid: float = 1.0
    cavity_factor_apex: float = 0.42
    wall_factor_base: float = 0.95       #: ED wall thickness relative to lv_wall_mm
    wall_factor_mid: float = 1.0
    wall_factor_apex: float = 0.85
    long_axis_coupling: float = 0.33     #: long-axis shortening per unit of (1 - ESV/EDV)
    ellipticity: float = 0.04            #: relative radius modulation cos(2(angle - ellipse_angle))
    ellipse_angle_rad: float = math.pi / 2
    septal_wall_excess: float = 0.06     #: septum this much thicker than the mean, lateral wall thinner
    rv_area_ref_px: float = 520.0        #: mid ED RV cavity area at rv_edv_ref_ml
    rv_edv_ref_ml: float = 130.0
    rv_factor_base: float = 1.15
    rv_factor_mid: float = 1.0
    rv_factor_apex: float = 0.45
    rv_half_span_rad: float = 1.35       #: angular half-extent of the RV crescent
    rv_shape_power: float = 0.6          #: crescent width profile cos(...)^power (smaller = blunter)
    rv_wall_px: float = 4.5              #: RV free-wall thickness
    rv_wall_taper_rad: float = 0.3       #: free wall continues this far past the cavity tips (insertions)
    pap_radius_base: float = 0.0         #: papillary muscle radius (two muscles), none at the base
    pap_radius_mid: float = 3.0
    pap_radius_apex: float = 2.0
    pap_angle_1_rad: float = 2.3         #: anterolateral papillary muscle
    pap_angle_2_rad: float = -2.4        #: posteromedial papillary muscle
    pap_inset: float = 1.3               #: muscle centre sits this many radii inside the endocardium
    fat_px: float = 2.0                  #: pericardial fat thickness (thicker along the septal axis)
    i_blood: float = 200.0
    i_myocardium: float = 62.0
    i_papillary: float = 68.0
    i_fat: float = 175.0
    i_lung: float = 14.0
    i_mediastinum: float = 92.0
    i_liver: float = 105.0
    i_chest_muscle: float = 80.0
    i_chest_fat: float = 178.0
    i_aorta: float = 190.0
    noise_sigma: float = 6.0             #: SD of each quadrature channel (Rician magnitude noise)
    gain_sd: float = 0.03                #: per-subject receiver gain SD
    t1_noise_ms: float = 30.0            #: per-pixel T1 fit noise SD
    t1_floor_ms: float = 100.0           #: lowest reported T1 (fits never return <= 0)
    texture_spacing_px: float = 8.0      #: control-point spacing of the smooth T1 texture
    t_end_systole: float = 0.36          #: cycle fraction at end-systole
    tau_early: float = 0.18              #: duration of the early filling wave
    t_atrial: float = 0.80               #: onset of atrial filling
    tau_atrial: float = 0.12
    early_fraction: float = 0.75         #: share of filling in the early wave
    segment_half_width_rad: float = 0.9  #: half-width of a hypokinetic segment's window

    def as_vector(self) -> np.ndarray:
        """float64 [p] in ``kernels.mri.TEMPLATE_FIELDS`` order."""
        return np.array([float(getattr(self, name)) for name in TEMPLATE_FIELDS], dtype=np.float64)

    def replace(self, **changes) -> "CardiacTemplate":
        return dataclasses.replace(self, **changes)


if tuple(f.name for f in dataclasses.fields(CardiacTemplate)) != TEMPLATE_FIELDS:
    raise RuntimeError("CardiacTemplate fields and kernels.mri.TEMPLATE_FIELDS have drifted apart")

DEFAULT_TEMPLATE = CardiacTemplate()

ACDC_LABELS = {"rv_cavity": 1, "lv_myocardium": 2, "lv_cavity": 3}


def _slice_geometry(labels2d: np.ndarray, spacing: tuple[float, float], codes: dict) -> dict | None:
    """Areas (mm^2), LV centre, RV direction and spans of one label slice [x, y] (NIfTI i, j)."""
    lv_cav = labels2d == codes["lv_cavity"]
    lv_myo = labels2d == codes["lv_myocardium"]
    rv_cav = labels2d == codes["rv_cavity"]
    if lv_cav.sum() < 4 or lv_myo.sum() < 4:
        return None
    px_area = spacing[0] * spacing[1]
    ii, jj = np.nonzero(lv_cav)
    xs = ii * spacing[0]
    ys = jj * spacing[1]
    centre = np.array([xs.mean(), ys.mean()])
    cov = np.cov(np.vstack([xs - centre[0], ys - centre[1]])) if xs.size > 2 else np.eye(2)
    eigval, eigvec = np.linalg.eigh(cov)
    major = eigvec[:, 1]
    sd_minor, sd_major = np.sqrt(np.maximum(eigval, 1e-12))
    out = {
        "lv_cavity_mm2": lv_cav.sum() * px_area,
        "lv_myo_mm2": lv_myo.sum() * px_area,
        "rv_cavity_mm2": rv_cav.sum() * px_area,
        "centre_mm": centre,
        "ellipticity": float((sd_major - sd_minor) / (sd_major + sd_minor)),
        "major_angle": float(math.atan2(major[1], major[0])),
        "rv_angle": None,
        "rv_half_span": None,
    }
    if rv_cav.sum() >= 4:
        ri, rj = np.nonzero(rv_cav)
        vx = ri * spacing[0] - centre[0]
        vy = rj * spacing[1] - centre[1]
        rv_angle = math.atan2(vy.mean(), vx.mean())
        rel = np.angle(np.exp(1j * (np.arctan2(vy, vx) - rv_angle)))
        out["rv_angle"] = rv_angle
        out["rv_half_span"] = float(0.5 * (np.quantile(rel, 0.98) - np.quantile(rel, 0.02)))
    return out


def _equivalent_wall(cavity_mm2: float, myo_mm2: float) -> float:
    """Thickness of the annulus with this cavity and myocardial area."""
    inner = math.sqrt(cavity_mm2 / math.pi)
    return math.sqrt(inner * inner + myo_mm2 / math.pi) - inner


def template_from_label_volume(labels: np.ndarray, spacing=(1.0, 1.0), codes: dict | None = None,
                               base_first: bool = True, base: CardiacTemplate = DEFAULT_TEMPLATE
                               ) -> CardiacTemplate:
    """Derive a template from a short-axis label volume [x, y, z] (or one slice [x, y]).

    Taken from the label map: slice-to-slice ratios of LV cavity area, LV wall
    thickness (equivalent annulus) and RV cavity area; the RV/LV cavity ratio;
    the RV crescent's angular half-span; LV ellipticity and its orientation
    relative to the RV; slice centre offsets along the stack; and the RV
    direction in the image (label maps are in NIfTI (i, j) order, rendered with
    i as the image column).  Kept from ``base``: the absolute calibration to the
    paper's traces (``cavity_area_ref_px`` at ``edv_ref_ml``), the nominal
    spacing, intensities, noise and timing.  Base, mid and apex are the valid
    slices at 15 %, 50 % and 85 % of the stack (z = 0 is basal in ACDC; pass
    ``base_first=False`` otherwise).
    """
    codes = dict(ACDC_LABELS if codes is None else codes)
    labels = np.asarray(labels)
    if labels.ndim == 2:
        labels = labels[:, :, None]
    if labels.ndim != 3:
        raise ValueError(f"label map must be 2-D or 3-D, got shape {labels.shape}")
    labels = np.rint(labels).astype(np.int64)
    geoms = []
    for z in range(labels.shape[2]):
        g = _slice_geometry(labels[:, :, z], (float(spacing[0]), float(spacing[1])), codes)
        if g is not None:
            geoms.append(g)
    if not geoms:
        raise ValueError(f"label map has no slice with both LV cavity (label {codes['lv_cavity']}) and "
                         f"LV myocardium (label {codes['lv_myocardium']})")
    if not base_first:
        geoms = geoms[::-1]
    last = len(geoms) - 1
    picked = [geoms[int(round(q * last))] for q in (0.15, 0.5, 0.85)]
    mid = picked[1]
    with_rv = [g for g in picked if g["rv_angle"] is not None]
    if mid["rv_angle"] is None and not with_rv:
        raise ValueError(f"label map has no RV cavity (label {codes['rv_cavity']}) in the chosen slices")
    rv_ref = mid if mid["rv_angle"] is not None else with_rv[0]
    rv_angle = rv_ref["rv_angle"]

    walls = [_equivalent_wall(g["lv_cavity_mm2"], g["lv_myo_mm2"]) for g in picked]
    # The template is rescaled so that its mid cavity matches the trace calibration.
    scale_px_per_mm = math.sqrt(base.cavity_area_ref_px / mid["lv_cavity_mm2"])
    offsets = [(g["centre_mm"] - mid["centre_mm"]) * scale_px_per_mm for g in picked]
    rv_mid_mm2 = rv_ref["rv_cavity_mm2"] * (mid["lv_cavity_mm2"] / rv_ref["lv_cavity_mm2"])
    changes = dict(
        rv_angle_rad=float(rv_angle),
        cavity_factor_base=float(picked[0]["lv_cavity_mm2"] / mid["lv_cavity_mm2"]),
        cavity_factor_apex=float(picked[2]["lv_cavity_mm2"] / mid["lv_cavity_mm2"]),
        wall_factor_base=float(base.wall_factor_mid * walls[0] / walls[1]),
        wall_factor_apex=float(base.wall_factor_mid * walls[2] / walls[1]),
        rv_area_ref_px=float(base.cavity_area_ref_px * rv_mid_mm2 / mid["lv_cavity_mm2"]),
        rv_factor_base=float(picked[0]["rv_cavity_mm2"] / rv_mid_mm2),
        rv_factor_apex=float(picked[2]["rv_cavity_mm2"] / rv_mid_mm2),
        rv_half_span_rad=float(np.clip(rv_ref["rv_half_span"], 0.5, 2.0)),
        ellipticity=float(np.clip(mid["ellipticity"], 0.0, 0.3)),
        ellipse_angle_rad=float(mid["major_angle"] - rv_angle),
        slice_dx_base=float(offsets[0][0]), slice_dy_base=float(offsets[0][1]),
        slice_dx_apex=float(offsets[2][0]), slice_dy_apex=float(offsets[2][1]),
    )
    return base.replace(**changes)


def load_segmentation_template(path, codes: dict | None = None, base_first: bool = True,
                               base: CardiacTemplate = DEFAULT_TEMPLATE) -> CardiacTemplate:
    """Derive a ``CardiacTemplate`` from a segmentation label map file (NIfTI via nibabel).

    ``codes`` maps ``rv_cavity``, ``lv_myocardium`` and ``lv_cavity`` to label
    values (ACDC: 1, 2, 3).  A 4-D map uses its first frame (ACDC ``_gt`` files
    are 3-D, one per phase: pass the end-diastolic one).
    """
    import nibabel as nib

    image = nib.load(str(Path(path)))
    data = np.asanyarray(image.dataobj)
    if data.ndim == 4:
        data = data[..., 0]
    zooms = image.header.get_zooms()
    return template_from_label_volume(data, spacing=(float(zooms[0]), float(zooms[1])), codes=codes,
                                      base_first=base_first, base=base)
