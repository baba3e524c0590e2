"""The environment's baseline image analysis: one fixed, archetype-agnostic
definition applied to the released pixels (it never reads traits).

Per participant, from ``cine`` uint8 [3, frames, H, W] and ``t1map`` float32
[3, H, W] (slices base, mid, apex):

1. Myocardium = the finite pixels of the T1 map (LV myocardium and RV free wall).
2. LV cavity region (per slice) = the hole of the myocardial mask (filled mask
   minus mask) with the largest inscribed circle (the RV cavity, the other
   hole, is a crescent); dilated by one pixel so that partial-volume pixels on
   the endocardial border count.
3. Intensity levels from the mid-slice end-diastolic frame: blood = median over
   the eroded cavity, myocardium = median over the eroded myocardial mask.
   Each cavity-region pixel counts as a blood fraction (I - myo) / (blood - myo),
   clipped to [-0.5, 1.5] (unbiased under noise, robust to stray structures); a
   frame's cavity area is the sum.
4. Features:
   ``ed_cavity_area_px``  mid-slice area at frame 0 (end-diastole), px^2;
   ``es_cavity_area_px``  mid-slice minimum over frames, px^2;
   ``area_emptying``      1 - ES/ED (an EF proxy);
   ``wall_thickness_px``  mean over 72 rays from the cavity centroid of the first
                          run of myocardial pixels on the mid slice (ED geometry);
   ``myocardial_area_px`` finite T1 pixels on the mid slice, px^2;
   ``t1_mean_ms``         mean of all finite T1 pixels (three slices);
   ``t1_heterogeneity_ms`` SD within the myocardium of the T1 map smoothed by a
                          mask-normalised Gaussian (sigma 2 px), pooled over slices;
   ``motion_heterogeneity`` SD over six 60-degree sectors (anchored on the RV
                          direction: from the cavity centroid towards the centroid
                          of the filled mask) of the mid-slice sector fractional
                          area change between ED and ES;
   ``filling_lag``        from the summed cavity-area curve of all slices: time
                          from end-systole (first within 5 % of the ED-to-minimum
                          span above the minimum) to 50 % refill after the
                          minimum, as a fraction of the cycle.
   A feature that cannot be measured is NaN; ``qc_ok`` flags participants with
   every feature finite.

``baseline_score`` combines within-cohort standardised features with the frozen
``BASELINE_WEIGHTS``.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import ndimage

FEATURES = (
    "ed_cavity_area_px",
    "es_cavity_area_px",
    "area_emptying",
    "wall_thickness_px",
    "myocardial_area_px",
    "t1_mean_ms",
    "t1_heterogeneity_ms",
    "motion_heterogeneity",
    "filling_lag",
)

# The baseline phenotype.  FROZEN: this definition is the environment's reference
# imaging phenotype; the generator (trait loadings, noise levels, template) is
# calibrated so that this fixed score reaches the paper's built-in correlations,
# never the other way round.  Changing a weight changes every world's b.
WEIGHT_T1_MEAN = 1.0
WEIGHT_T1_HETEROGENEITY = 1.0
WEIGHT_AREA_EMPTYING = -1.0
WEIGHT_WALL_THICKNESS = 0.5
WEIGHT_FILLING_LAG = 0.5
WEIGHT_MOTION_HETEROGENEITY = 1.0
BASELINE_WEIGHTS = {
    "t1_mean_ms": WEIGHT_T1_MEAN,
    "t1_heterogeneity_ms": WEIGHT_T1_HETEROGENEITY,
    "area_emptying": WEIGHT_AREA_EMPTYING,
    "wall_thickness_px": WEIGHT_WALL_THICKNESS,
    "filling_lag": WEIGHT_FILLING_LAG,
    "motion_heterogeneity": WEIGHT_MOTION_HETEROGENEITY,
}

N_RAYS = 72
RAY_STEP_PX = 0.25
RAY_LENGTH_PX = 64.0
T1_SMOOTH_SIGMA_PX = 2.0
N_SECTORS = 6
MIN_CAVITY_PX = 8
END_SYSTOLE_LEVEL = 0.05
BLOOD_FRACTION_CLIP = (-0.5, 1.5)
MID = 1

_CROSS = ndimage.generate_binary_structure(2, 1)


def _lv_cavity(mask: np.ndarray):
    """(LV cavity hole, filled mask) of one slice's myocardial mask; the hole is None if there is none.

    The LV cavity is the hole with the largest inscribed circle: the RV cavity is
    a crescent, narrow however large its area.
    """
    filled = ndimage.binary_fill_holes(mask)
    holes = filled & ~mask
    labels, n = ndimage.label(holes, structure=_CROSS)
    if n == 0:
        return None, filled
    index = np.arange(1, n + 1)
    inscribed = ndimage.maximum(ndimage.distance_transform_edt(holes), labels, index)
    sizes = ndimage.sum_labels(holes, labels, index)
    best = int(index[np.lexsort((sizes, inscribed))[-1]])
    if sizes[best - 1] < MIN_CAVITY_PX:
        return None, filled
    return labels == best, filled


def _crop_box(mask: np.ndarray, margin: int = 3):
    ys, xs = np.nonzero(mask)
    if ys.size == 0:
        return None
    h, w = mask.shape
    return (slice(max(ys.min() - margin, 0), min(ys.max() + margin + 1, h)),
            slice(max(xs.min() - margin, 0), min(xs.max() + margin + 1, w)))


@lru_cache(maxsize=1)
def _smoothing_weights() -> np.ndarray:
    """The 1-D weights ndimage.gaussian_filter uses for T1_SMOOTH_SIGMA_PX (truncate 4.0), computed
    as scipy computes them (``_gaussian_kernel1d``; symmetric, so its reversal changes nothing)."""
    radius = int(4.0 * T1_SMOOTH_SIGMA_PX + 0.5)
    x = np.arange(-radius, radius + 1)
    phi = np.exp(-0.5 / (T1_SMOOTH_SIGMA_PX * T1_SMOOTH_SIGMA_PX) * x ** 2)
    return np.ascontiguousarray((phi / phi.sum())[::-1])


def _crossing(curve: np.ndarray, level: float, start: int, rising: bool) -> float:
    """First fractional frame after ``start`` where ``curve`` crosses ``level`` (linear interpolation)."""
    for j in range(start + 1, curve.size):
        if (curve[j] >= level) if rising else (curve[j] <= level):
            step = curve[j] - curve[j - 1]
            return j - 1 + ((level - curve[j - 1]) / step if step != 0 else 1.0)
    return math.nan


def _filling_lag(curve: np.ndarray) -> float:
    """Cycle fraction from end-systole to 50 % refill of a cavity-area curve starting at end-diastole.

    End-systole is when the curve first comes within END_SYSTOLE_LEVEL of its
    minimum (of the ED-to-minimum span): a crossing, not the arg-minimum, so a
    flat isovolumic plateau cannot move it.
    """
    frames = curve.size
    low_frame = int(np.argmin(curve))
    low = float(curve[low_frame])
    span = float(curve[0]) - low
    if span <= 0 or low_frame == 0:
        return math.nan
    t_es = _crossing(curve, low + END_SYSTOLE_LEVEL * span, 0, rising=False)
    t_half = _crossing(curve, low + 0.5 * span, low_frame, rising=True)
    if not (math.isfinite(t_es) and math.isfinite(t_half)):
        return math.nan
    return (t_half - t_es) / frames


def _rays():
    """(sin, cos) of the N_RAYS ray directions (numpy's, as the definition computes them) and the
    sample steps along a ray."""
    angles = np.arange(N_RAYS) * (2.0 * math.pi / N_RAYS)
    return np.sin(angles), np.cos(angles), np.arange(0.0, RAY_LENGTH_PX, RAY_STEP_PX)


_RAY_SIN, _RAY_COS, _RAY_STEPS = _rays()
#: Margin of the T1 smoothing's crop: the Gaussian's reach beyond the myocardium.
T1_CROP_MARGIN = int(3 * T1_SMOOTH_SIGMA_PX) + 1
_STAGE_MEASURED = 3


def measure_subject(cine: np.ndarray, t1map: np.ndarray) -> dict:
    """Baseline features of one participant (cine uint8 [3, f, H, W], t1map float32 [3, H, W]).

    Steps 1-4 run in one Numba pass (``kernels.measure.measure_core``: the masks, the T1
    texture, the levels, the area curves, the centroids and the wall thickness, every sum in
    numpy's order); the T1 mean, the sectors and the filling lag are numpy and Python, as
    defined (``measure_subject_reference`` is the definition, bit for bit)."""
    from kernels.measure_features import measure_core

    cine = np.ascontiguousarray(cine, dtype=np.uint8)
    t1map = np.ascontiguousarray(t1map, dtype=np.float32)
    out = dict.fromkeys(FEATURES, math.nan)
    finite = t1map[np.isfinite(t1map)]
    if finite.size:
        out["t1_mean_ms"] = float(finite.mean())
    n_slices, frames = cine.shape[:2]
    scalars = np.empty(10)
    curves = np.zeros((n_slices, frames))
    slice_ok = np.zeros(n_slices, dtype=np.bool_)
    lo, hi = BLOOD_FRACTION_CLIP
    ys, xs, ed_fraction, es_fraction = measure_core(
        cine, t1map, _smoothing_weights(), T1_CROP_MARGIN, MIN_CAVITY_PX, MID, lo, hi, _RAY_SIN, _RAY_COS,
        _RAY_STEPS, RAY_STEP_PX, scalars, curves, slice_ok)
    out["t1_heterogeneity_ms"] = float(scalars[0])
    out["myocardial_area_px"] = float(scalars[1])
    if scalars[2] != _STAGE_MEASURED:
        out["qc_ok"] = False
        return out

    mid_curve = curves[MID]
    es = int(np.argmin(mid_curve))
    out["ed_cavity_area_px"] = float(mid_curve[0])
    out["es_cavity_area_px"] = float(mid_curve[es])
    if mid_curve[0] > 0:
        out["area_emptying"] = float(1.0 - mid_curve[es] / mid_curve[0])
    cy, cx, fy, fx, wall = scalars[5:10]
    out["wall_thickness_px"] = float(wall)

    # Sectors anchored on the RV: the filled mask (LV disc plus RV crescent) has its centroid on the RV side.
    rv_angle = math.atan2(fy - cy, fx - cx)
    rel = np.angle(np.exp(1j * (np.arctan2(ys - cy, xs - cx) - rv_angle)))
    sector = np.floor((rel + 2.0 * math.pi / 3.0) / (math.pi / 3.0)).astype(np.int64) % N_SECTORS
    ed_sector = np.bincount(sector, weights=ed_fraction, minlength=N_SECTORS)
    es_sector = np.bincount(sector, weights=es_fraction, minlength=N_SECTORS)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = 1.0 - es_sector / ed_sector
    if np.all(ed_sector > 1.0):
        out["motion_heterogeneity"] = float(np.std(change))

    total = mid_curve.copy()
    for s in range(n_slices):
        if s != MID and slice_ok[s]:
            total += curves[s]
    out["filling_lag"] = _filling_lag(total)
    out["qc_ok"] = bool(all(np.isfinite(out[k]) for k in FEATURES))
    return out


def measure_subjects(cine: np.ndarray, t1map: np.ndarray) -> dict:
    """Baseline features of a batch: {feature: float64 [n]} plus ``qc_ok`` bool [n].

    cine uint8 [n, 3, frames, H, W]; t1map float32 [n, 3, H, W].
    """
    cine = np.asarray(cine)
    t1map = np.asarray(t1map)
    if cine.ndim != 5 or t1map.ndim != 4 or cine.shape[0] != t1map.shape[0]:
        raise ValueError(f"expected cine [n, 3, f, H, W] and t1map [n, 3, H, W], got {cine.shape} and {t1map.shape}")
    rows = [measure_subject(cine[i], t1map[i]) for i in range(cine.shape[0])]
    result = {k: np.array([r[k] for r in rows], dtype=np.float64) for k in FEATURES}
    result["qc_ok"] = np.array([r["qc_ok"] for r in rows], dtype=bool)
    return result


# ----------------------------------------------------------------------------- the definition, in numpy
# The baseline analysis as it was defined, with numpy and scipy: the reference twin of
# ``measure_subject`` (tests require the two to agree bit for bit on every feature).


def _wall_thickness(mask: np.ndarray, cy: float, cx: float) -> float:
    angles = np.arange(N_RAYS) * (2.0 * math.pi / N_RAYS)
    steps = np.arange(0.0, RAY_LENGTH_PX, RAY_STEP_PX)
    ys = np.rint(cy + np.sin(angles)[:, None] * steps[None, :]).astype(np.int64)
    xs = np.rint(cx + np.cos(angles)[:, None] * steps[None, :]).astype(np.int64)
    valid = (ys >= 0) & (ys < mask.shape[0]) & (xs >= 0) & (xs < mask.shape[1])
    on = np.zeros(ys.shape, dtype=bool)
    on[valid] = mask[ys[valid], xs[valid]]
    has = on.any(axis=1)
    start = np.argmax(on, axis=1)
    after = np.where(np.arange(steps.size)[None, :] >= start[:, None], ~on, False)
    has_end = after.any(axis=1)
    end = np.argmax(after, axis=1)
    ok = has & has_end
    if not ok.any():
        return math.nan
    return float(np.mean((end[ok] - start[ok]) * RAY_STEP_PX))



def _t1_heterogeneity(t1: np.ndarray) -> float:
    from kernels.measure import gaussian_constant

    weights = _smoothing_weights()
    values = []
    for s in range(t1.shape[0]):
        mask = np.isfinite(t1[s])
        box = _crop_box(mask, margin=int(3 * T1_SMOOTH_SIGMA_PX) + 1)
        if box is None:
            continue
        m = mask[box].astype(np.float64)
        v = np.where(mask[box], t1[s][box], 0.0).astype(np.float64)
        # ndimage.gaussian_filter(., T1_SMOOTH_SIGMA_PX, mode="constant"), bit for bit (kernels.measure)
        num = np.empty_like(v)
        den = np.empty_like(m)
        gaussian_constant(v, weights, num)
        gaussian_constant(m, weights, den)
        smoothed = num[mask[box]] / den[mask[box]]
        values.append(smoothed - smoothed.mean())
    if not values:
        return math.nan
    return float(np.concatenate(values).std())


def _slice_regions(mask_full: np.ndarray):
    """(box, mask, cavity, filled, region) of one slice (step 2), or None: the crop and the
    binary morphology in one Numba pass (``kernels.measure``; the same masks as scipy's)."""
    from kernels.measure import crop_box, lv_cavity

    y0, y1, x0, x1 = crop_box(mask_full, 3)
    if y0 < 0:
        return None
    box = (slice(y0, y1), slice(x0, x1))
    mask = np.ascontiguousarray(mask_full[box])
    cavity = np.empty(mask.shape, dtype=bool)
    filled = np.empty(mask.shape, dtype=bool)
    region = np.empty(mask.shape, dtype=bool)
    if not lv_cavity(mask, MIN_CAVITY_PX, cavity, filled, region):
        return None
    return box, mask, cavity, filled, region


def _deep(image: np.ndarray, iterations: int) -> np.ndarray:
    """``ndimage.binary_erosion(image, structure=_CROSS, iterations=iterations)``."""
    from kernels.measure import erode_cross

    out = image
    for _ in range(iterations):
        nxt = np.empty_like(image)
        erode_cross(out, nxt)
        out = nxt
    return out


def measure_subject_reference(cine: np.ndarray, t1map: np.ndarray) -> dict:
    """Baseline features of one participant (cine uint8 [3, f, H, W], t1map float32 [3, H, W])."""
    out = dict.fromkeys(FEATURES, math.nan)
    masks = np.isfinite(t1map)
    finite = t1map[masks]
    if finite.size:
        out["t1_mean_ms"] = float(finite.mean())
    out["t1_heterogeneity_ms"] = _t1_heterogeneity(t1map)
    out["myocardial_area_px"] = float(masks[MID].sum())

    regions = []
    mid_info = None
    for s in range(cine.shape[0]):
        info = _slice_regions(masks[s])
        if info is None:
            regions.append(None)
            continue
        box, mask, cavity, filled, region = info
        regions.append((box, cavity, region))
        if s == MID:
            mid_info = info
    if mid_info is None:
        out["qc_ok"] = False
        return out

    box, mask, cavity, filled, region = mid_info
    ed = cine[MID, 0][box].astype(np.float64)
    deep_cavity = _deep(cavity, 2)
    deep_myo = _deep(mask, 1)
    if deep_cavity.sum() < 5 or deep_myo.sum() < 5:
        out["qc_ok"] = False
        return out
    blood_level = float(np.median(ed[deep_cavity]))
    myo_level = float(np.median(ed[deep_myo]))
    contrast = blood_level - myo_level
    if contrast <= 5.0:
        out["qc_ok"] = False
        return out
    lo, hi = BLOOD_FRACTION_CLIP

    def area_curve(s):
        box_s, _, region_s = regions[s]
        pixels = cine[s][(slice(None),) + box_s][:, region_s].astype(np.float64)
        fraction = np.clip((pixels - myo_level) / contrast, lo, hi)
        return fraction.sum(axis=1), fraction

    mid_curve, mid_fraction = area_curve(MID)
    es = int(np.argmin(mid_curve))
    out["ed_cavity_area_px"] = float(mid_curve[0])
    out["es_cavity_area_px"] = float(mid_curve[es])
    if mid_curve[0] > 0:
        out["area_emptying"] = float(1.0 - mid_curve[es] / mid_curve[0])

    cy, cx = ndimage.center_of_mass(cavity)
    out["wall_thickness_px"] = _wall_thickness(mask, cy, cx)

    # Sectors anchored on the RV: the filled mask (LV disc plus RV crescent) has its centroid on the RV side.
    fy, fx = ndimage.center_of_mass(filled)
    rv_angle = math.atan2(fy - cy, fx - cx)
    ys, xs = np.nonzero(region)
    rel = np.angle(np.exp(1j * (np.arctan2(ys - cy, xs - cx) - rv_angle)))
    sector = np.floor((rel + 2.0 * math.pi / 3.0) / (math.pi / 3.0)).astype(np.int64) % N_SECTORS
    ed_sector = np.bincount(sector, weights=mid_fraction[0], minlength=N_SECTORS)
    es_sector = np.bincount(sector, weights=mid_fraction[es], minlength=N_SECTORS)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = 1.0 - es_sector / ed_sector
    if np.all(ed_sector > 1.0):
        out["motion_heterogeneity"] = float(np.std(change))

    total = mid_curve.copy()
    for s in range(cine.shape[0]):
        if s != MID and regions[s] is not None:
            total += area_curve(s)[0]
    out["filling_lag"] = _filling_lag(total)
    out["qc_ok"] = bool(all(np.isfinite(out[k]) for k in FEATURES))
    return out


def standardise(values: np.ndarray) -> np.ndarray:
    """Within-cohort z-scores; NaN (unmeasurable) becomes 0, the cohort mean."""
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    if finite.sum() < 2:
        return np.zeros_like(values)
    mean = values[finite].mean()
    sd = values[finite].std()
    z = (values - mean) / sd if sd > 0 else np.zeros_like(values)
    return np.where(finite, z, 0.0)


def baseline_score(features: dict) -> np.ndarray:
    """The frozen baseline phenotype: sum of BASELINE_WEIGHTS x within-cohort z-scores."""
    missing = [k for k in BASELINE_WEIGHTS if k not in features]
    if missing:
        raise KeyError(f"baseline_score: features lack {', '.join(missing)}")
    score = None
    for name, weight in BASELINE_WEIGHTS.items():
        term = weight * standardise(features[name])
        score = term if score is None else score + term
    return score


def montage_png(cine: np.ndarray, t1map: np.ndarray, path, max_subjects: int = 4, title: str | None = None):
    """Save a PNG: per participant (row) the mid-slice ED and ES cine frames and the mid T1 map.

    Accepts one participant (cine [3, f, H, W], t1map [3, H, W]) or a batch
    (the first ``max_subjects``).  End-systole is the baseline pipeline's
    minimum-cavity frame (frame 0 and the middle frame if it cannot be measured).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cine = np.asarray(cine)
    t1map = np.asarray(t1map)
    if cine.ndim == 4:
        cine, t1map = cine[None], t1map[None]
    n = min(cine.shape[0], max_subjects)
    fig, axes = plt.subplots(n, 3, figsize=(9, 3 * n), squeeze=False)
    for i in range(n):
        es = _es_frame(cine[i], t1map[i])
        panels = ((cine[i, MID, 0], "mid ED (frame 0)", "gray", (0, 255)),
                  (cine[i, MID, es], f"mid ES (frame {es})", "gray", (0, 255)),
                  (t1map[i, MID], "mid native T1 (ms)", "viridis", (700, 1400)))
        for ax, (img, label, cmap, (vmin, vmax)) in zip(axes[i], panels):
            shown = ax.imshow(img, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
            ax.set_title(label, fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            if cmap == "viridis":
                fig.colorbar(shown, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)


def _es_frame(cine: np.ndarray, t1map: np.ndarray) -> int:
    masks = np.isfinite(t1map[MID])
    box = _crop_box(masks)
    if box is not None:
        cavity, _ = _lv_cavity(masks[box])
        if cavity is not None:
            curve = cine[MID][(slice(None),) + box][:, cavity].astype(np.float64).sum(axis=1)
            return int(np.argmin(curve))
    return cine.shape[1] // 2
