"""The T5 site fields: per assessment centre, the coefficients of a low-order 2-D
cosine basis that shade every image taken there (bias T5).

They are hidden world parameters, drawn once with the world (``pipeline.model.sampler``),
and evaluated by the renderer (``render.site_field``); this module holds only the
draw, so the world model needs nothing of the renderer.
"""
from __future__ import annotations

import math

import numpy as np

#: Cosine orders (p, q) of the site-field basis cos(pi p (x+.5)/W) cos(pi q (y+.5)/H), in order.
#: (0, 0) is a per-site receiver gain; the rest are smooth spatial shading.
SITE_BASIS_ORDERS = ((0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (0, 2), (2, 1), (1, 2), (2, 2), (3, 0), (0, 3))


def _basis_mean_square(p: int, q: int) -> float:
    return (1.0 if p == 0 else 0.5) * (1.0 if q == 0 else 0.5)


def sample_site_fields(rng: np.random.Generator, n_sites: int, amplitude: float = 0.12,
                       n_terms: int = 6) -> np.ndarray:
    """T5 parameters: float64 [n_sites, n_terms] coefficients of ``SITE_BASIS_ORDERS[:n_terms]``.

    Coefficient k ~ N(0, amplitude^2 / (n_terms * ms_k)) with ms_k the mean square
    of basis term k over the image, so the root-mean-square of b_site(u) over the
    image and over sites is ``amplitude``.
    """
    if not 1 <= n_terms <= len(SITE_BASIS_ORDERS):
        raise ValueError(f"n_terms must be in 1..{len(SITE_BASIS_ORDERS)}, got {n_terms}")
    if n_sites < 1:
        raise ValueError(f"n_sites must be >= 1, got {n_sites}")
    sd = np.array([amplitude / math.sqrt(n_terms * _basis_mean_square(p, q))
                   for p, q in SITE_BASIS_ORDERS[:n_terms]])
    return rng.standard_normal((n_sites, n_terms)) * sd
