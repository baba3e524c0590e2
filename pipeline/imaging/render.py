"""Rendering of participants' short-axis cine and native T1 maps.

``render_subjects`` turns per-participant cardiac traits (clinical units, from
the world model) into the released pixel arrays:

* ``cine``  uint8  [n, 3, frames, size, size]: SSFP-like short-axis cine at base,
  mid and apex (bright blood, dark myocardium, bright pericardial fat, dark
  lungs, liver, chest wall, descending aorta), one cardiac cycle starting at
  end-diastole; ejection then filling, the early filling wave delayed by
  ``diastolic_lag``.  Observed intensity = |I_true(u) (1 + b_site(u)) gain + noise|
  with complex Gaussian noise (Rician magnitude), rounded and clipped to uint8.
* ``t1map`` float32 [n, 3, size, size]: native T1 in ms at the end-diastolic
  geometry; NaN outside the myocardium.  The myocardium of the T1 map is the LV
  myocardium plus the RV free wall (papillary muscles excluded), pixels whose
  myocardial coverage is at least one half.  T1 = t1_ms + smooth texture (SD
  t1_heterogeneity_ms, correlation length ~8 px) + per-pixel fit noise.  T1
  maps are quantitative reconstructions and carry no T5 site field.

How traits become pixels (template defaults in ``templates.CardiacTemplate``):

* ``lv_edv_ml``: mid-slice ED blood pool = 700 px^2 x (EDV / 126)^(2/3)
  (base x1.25, apex x0.42); ``lv_esv_ml``: ES/ED area ratio = r / (1 - c (1 - r))
  with r = ESV/EDV and c the template's long-axis coupling (0.33; long-axis
  shortening carries the rest of the ejection).
* ``lv_wall_mm``: mid-slice ED wall of that many pixels (1 mm/px; base x0.95,
  apex x0.85; septum 6 % thicker than the lateral wall); ``wall_thickening``:
  fractional systolic thickening, modulated regionally like the motion.
* ``motion_heterogeneity``: regional motion multiplier 1 + 0.5 h x h(angle) with
  h(angle) a unit-RMS random mix of angular harmonics 2-4 (drawn from the key);
  ``segment`` 0..5 (anterior, anteroseptal, inferoseptal, inferior, inferolateral,
  anterolateral, 60 degrees apart from the RV insertion) multiplies motion there
  by ``segment_motion`` inside a smooth window, in all three slices.
* ``diastolic_lag``: cycle fraction (0-0.3) between end-systole and the start
  of early filling.
* ``t1_ms``, ``t1_heterogeneity_ms``: T1 map level and texture SD (above).
* ``rv_edv_ml``, ``rv_esv_ml``: RV crescent area 520 px^2 x (RVEDV / 130)^(2/3)
  at mid, same ES rule as the LV.
* ``site``: row of the site parameters; ``noise_key``: every random draw
  (position and rotation jitter of a few pixels / ~10 degrees, receiver gain,
  motion harmonics, T1 texture, all noise).

Site field (bias T5): ``site_fields.sample_site_fields`` draws, per site (with
the world), coefficients of a low-order 2-D cosine basis; ``site_field`` evaluates
1 + b_site(u).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from kernels.mri import TRAIT_COLUMNS
from .site_fields import SITE_BASIS_ORDERS
from .templates import DEFAULT_TEMPLATE, CardiacTemplate

#: Trait ranges enforced before rendering (the world model should already respect them).
TRAIT_LIMITS = {
    "lv_edv_ml": (20.0, 600.0),
    "lv_wall_mm": (3.0, 35.0),
    "wall_thickening": (0.0, 1.5),
    "segment_motion": (0.0, 1.0),
    "motion_heterogeneity": (0.0, 1.0),
    "diastolic_lag": (0.0, 0.3),
    "t1_ms": (300.0, 3000.0),
    "t1_heterogeneity_ms": (0.0, 400.0),
    "rv_edv_ml": (20.0, 600.0),
}
#: ESV is kept within this fraction range of EDV (a heart cannot eject all or nothing).
ESV_FRACTION_LIMITS = (0.05, 0.98)

REQUIRED_FIELDS = TRAIT_COLUMNS + ("segment", "site", "noise_key")


def site_field(params: np.ndarray, site: int, shape=(128, 128)) -> np.ndarray:
    """float32 [H, W]: 1 + b_site(u) for row ``site`` of ``sample_site_fields`` output."""
    coef = np.asarray(params, dtype=np.float64)[int(site)]
    height, width = int(shape[0]), int(shape[1])
    ys = (np.arange(height) + 0.5) / height
    xs = (np.arange(width) + 0.5) / width
    field = np.ones((height, width), dtype=np.float64)
    for c, (p, q) in zip(coef, SITE_BASIS_ORDERS):
        field += c * np.outer(np.cos(math.pi * q * ys), np.cos(math.pi * p * xs))
    return field.astype(np.float32)


def all_site_fields(params: np.ndarray, size: int) -> np.ndarray:
    """float64 [n_sites, size, size] fields (the kernel's input)."""
    params = np.asarray(params, dtype=np.float64)
    if params.ndim != 2:
        raise ValueError(f"site parameters must be [n_sites, n_terms], got shape {params.shape}")
    return np.stack([site_field(params, s, (size, size)) for s in range(params.shape[0])]).astype(np.float64)


@lru_cache(maxsize=1)
def _table() -> np.ndarray:
    from kernels.mri import normal_quantile_table

    return normal_quantile_table()


@lru_cache(maxsize=4)
def _canvas(tpl_bytes: bytes, size: int) -> np.ndarray:
    """The noise-free thorax background of a template (``background_canvas``), made once per process."""
    from kernels.mri import background_canvas

    return background_canvas(np.frombuffer(tpl_bytes, dtype=np.float64).copy(), size)


@lru_cache(maxsize=4)
def _fields(params_bytes: bytes, shape: tuple, size: int) -> np.ndarray:
    return all_site_fields(np.frombuffer(params_bytes, dtype=np.float64).reshape(shape).copy(), size)


def _column(traits, name):
    if isinstance(traits, np.ndarray) and traits.dtype.names is not None:
        return traits[name]
    return traits[name]


def prepare_traits(traits) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate and pack traits: (float64 [n, t], int64 segment [n], int64 site [n], uint64 key [n]).

    Accepts a dict of equal-length 1-D arrays, a numpy structured array or a
    pandas DataFrame.  Values outside ``TRAIT_LIMITS`` are clipped (ESV to
    ``ESV_FRACTION_LIMITS`` of EDV); missing columns or NaN are errors.
    """
    names = traits.dtype.names if isinstance(traits, np.ndarray) else list(traits.keys())
    missing = [k for k in REQUIRED_FIELDS if k not in names]
    if missing:
        raise KeyError(f"render_subjects: traits lack {', '.join(missing)}")
    n = len(np.asarray(_column(traits, "lv_edv_ml")))
    matrix = np.empty((n, len(TRAIT_COLUMNS)), dtype=np.float64)
    for j, name in enumerate(TRAIT_COLUMNS):
        col = np.asarray(_column(traits, name), dtype=np.float64)
        if col.shape != (n,):
            raise ValueError(f"render_subjects: trait {name} has shape {col.shape}, expected ({n},)")
        if not np.all(np.isfinite(col)):
            raise ValueError(f"render_subjects: trait {name} has non-finite values")
        matrix[:, j] = col
    for name, (lo, hi) in TRAIT_LIMITS.items():
        j = TRAIT_COLUMNS.index(name)
        np.clip(matrix[:, j], lo, hi, out=matrix[:, j])
    lo, hi = ESV_FRACTION_LIMITS
    for edv_name, esv_name in (("lv_edv_ml", "lv_esv_ml"), ("rv_edv_ml", "rv_esv_ml")):
        e, s = TRAIT_COLUMNS.index(edv_name), TRAIT_COLUMNS.index(esv_name)
        matrix[:, s] = np.clip(matrix[:, s], lo * matrix[:, e], hi * matrix[:, e])
    segment = np.asarray(_column(traits, "segment")).astype(np.int64)
    segment = np.where((segment >= 0) & (segment <= 5), segment, -1)
    site = np.asarray(_column(traits, "site")).astype(np.int64)
    key = np.asarray(_column(traits, "noise_key")).astype(np.uint64)
    return matrix, segment, site, key


def render_subjects(traits, site_params, frames: int = 25, size: int = 128,
                    template: CardiacTemplate | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Render a batch: (cine uint8 [n, 3, frames, size, size], t1map float32 [n, 3, size, size]).

    ``site_params`` is the ``sample_site_fields`` output (rows indexed by each
    subject's ``site``).  Parallel over subjects with Numba's thread
    pool (``numba.set_num_threads`` sets the width); every pixel depends only on
    the subject's traits, its ``noise_key``, its site's field and the template.
    """
    from kernels.mri import MAX_FRAMES, render_batch

    if not 1 <= frames <= MAX_FRAMES:
        raise ValueError(f"frames must be in 1..{MAX_FRAMES}, got {frames}")
    if size < 96:
        raise ValueError(f"size must be >= 96 pixels for the template to fit, got {size}")
    matrix, segment, site, key = prepare_traits(traits)
    params = np.ascontiguousarray(site_params, dtype=np.float64)
    if params.ndim != 2:
        raise ValueError(f"site parameters must be [n_sites, n_terms], got shape {params.shape}")
    fields = _fields(params.tobytes(), params.shape, int(size))
    if site.size and (site.min() < 0 or site.max() >= fields.shape[0]):
        raise ValueError(f"site index out of range 0..{fields.shape[0] - 1}")
    tpl = (template or DEFAULT_TEMPLATE).as_vector()
    n = matrix.shape[0]
    cine = np.empty((n, 3, frames, size, size), dtype=np.uint8)
    t1map = np.empty((n, 3, size, size), dtype=np.float32)
    if n:
        render_batch(matrix, segment, site, key, fields, tpl, _table(), _canvas(tpl.tobytes(), int(size)), cine, t1map)
    return cine, t1map


def example_traits(rng: np.random.Generator, n: int, n_sites: int = 1) -> dict:
    """A typical adult cohort's traits for tests, calibration and previews (not the world model).

    EDV ~ N(126, 25^2) mL, ESV ~ N(41, 13^2) mL (kept below 0.85 EDV; mean EF
    ~0.67, as in the worlds' imaged cohorts, whose EF the template's long-axis
    coupling is calibrated against), wall ~
    N(9, 1.5^2) mm, thickening ~ N(0.42, 0.07^2), T1 ~ N(1000, 104^2) ms, T1
    texture SD U(20, 80) ms, lag U(0, 0.3), motion heterogeneity U(0, 0.6), one in
    six with a hypokinetic segment, RV volumes ~ N(130, 25^2) / N(55, 14^2) mL.
    """
    edv = rng.normal(126.0, 25.0, n).clip(60.0, 260.0)
    esv = np.minimum(rng.normal(41.0, 13.0, n).clip(12.0, None), 0.85 * edv)
    rv_edv = rng.normal(130.0, 25.0, n).clip(60.0, 260.0)
    rv_esv = np.minimum(rng.normal(55.0, 14.0, n).clip(15.0, None), 0.85 * rv_edv)
    hypokinetic = rng.random(n) < 1.0 / 6.0
    return {
        "lv_edv_ml": edv,
        "lv_esv_ml": esv,
        "lv_wall_mm": rng.normal(9.0, 1.5, n).clip(5.0, 20.0),
        "wall_thickening": rng.normal(0.42, 0.07, n).clip(0.1, 0.8),
        "segment": np.where(hypokinetic, rng.integers(0, 6, n), -1).astype(np.int8),
        "segment_motion": np.where(hypokinetic, rng.uniform(0.0, 0.6, n), 1.0),
        "motion_heterogeneity": rng.uniform(0.0, 0.6, n),
        "diastolic_lag": rng.uniform(0.0, 0.3, n),
        "t1_ms": rng.normal(1000.0, 104.0, n),
        "t1_heterogeneity_ms": rng.uniform(20.0, 80.0, n),
        "rv_edv_ml": rv_edv,
        "rv_esv_ml": rv_esv,
        "site": rng.integers(0, n_sites, n),
        "noise_key": rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64),
    }
