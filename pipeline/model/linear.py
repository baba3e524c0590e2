"""The hidden model's linear structure (SPEC section 4): each protein's ordinary raw value is
cis + trans + lambda F + beta X + residual, with X = (age - 55, sex, BMI - 27, smoking), so
its variance and its content in the shared factors and covariates follow from the world's
parameters.  The linkage bound (``pipeline.linkage``) and the pathway builder
(``pipeline.pathways``) both compute with these helpers; the participant modalities use
``covariate_matrix``."""
from __future__ import annotations

import numpy as np

from .constants import PROTEIN_RESIDUAL

#: Ordinary covariate coefficients per protein (age per year, sex, BMI per kg/m2, smoking):
#: means are the supplement's fixed terms (smoking none), spreads about half of each.
COVARIATE_MEAN = np.array([0.01, 0.10, 0.02, 0.0])
COVARIATE_SD = np.array([0.005, 0.05, 0.01, 0.05])
COVARIATE_CENTRES = np.array([55.0, 0.0, 27.0, 0.0])


def covariate_matrix(pop: dict) -> np.ndarray:
    """X = (age - 55, sex, BMI - 27, smoking), float64 [n, 4]."""
    return np.column_stack([pop["age"] - COVARIATE_CENTRES[0], pop["sex"].astype(np.float64),
                            pop["bmi"] - COVARIATE_CENTRES[2], pop["smoking"].astype(np.float64)])


def mm(a, b) -> np.ndarray:
    """Matrix product with a fixed summation order (kernels.linalg): these values become
    world parameters, whose bits may not depend on BLAS paths or memory alignment."""
    from kernels.linalg import dot

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out = dot(a.reshape(1, -1) if a.ndim == 1 else a, b.reshape(-1, 1) if b.ndim == 1 else b)
    if a.ndim == 1 and b.ndim == 1:
        return out[0, 0]
    return out[0] if a.ndim == 1 else (out[:, 0] if b.ndim == 1 else out)



def gauss_hermite(fn, n: int = 64) -> float:
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return float(np.sum(w * fn(x)) / np.sqrt(2 * np.pi))


def sigma_matrix(F: int, cov_x: np.ndarray) -> np.ndarray:
    """Covariance of Z = (F shared factors, X covariates)."""
    sigma = np.zeros((F + 4, F + 4))
    sigma[:F, :F] = np.eye(F)
    sigma[F:, F:] = cov_x
    return sigma


def content(world, p) -> np.ndarray:
    """Z content (factor loadings, covariate coefficients) of protein p's ordinary raw value."""
    return np.concatenate([world.protein_loadings[p], world.protein_cov[p]])


def var_of(q, sigma) -> float:
    return float(mm(mm(q, sigma), q))


def raw_variance(world, p, sigma) -> float:
    """Variance of protein p's ordinary raw value (cis, trans, factors, covariates, residual 0.8)."""
    trans = 0.01 if world.protein_master[p] >= 0 else 0.0
    return float(world.protein_h2[p] + trans + var_of(content(world, p), sigma) + PROTEIN_RESIDUAL ** 2)
