"""Small statistical helpers: correlations with standard errors, partial regressions,
an empirical null for proteome-wide screens, multiple-testing thresholds."""
from __future__ import annotations

import math

import numpy as np
from scipy import stats


def zcrit(alpha: float) -> float:
    """Two-sided normal critical value at level ``alpha``."""
    return float(stats.norm.isf(alpha / 2.0))


def pvalue(z) -> np.ndarray:
    return 2.0 * stats.norm.sf(np.abs(np.asarray(z, dtype=float)))


def zs(values: np.ndarray) -> np.ndarray:
    """Column z-scores, missing values at the mean; float32 input stays float32 (memory at scale)."""
    v = np.asarray(values)
    v = v.astype(np.float32 if v.dtype == np.float32 else np.float64, copy=True)
    m = np.nanmean(v, axis=0)
    if np.isnan(v).any():
        v = np.where(np.isnan(v), m, v)
    v -= m
    s = v.std(axis=0)
    v /= np.where(s > 0, s, 1.0).astype(v.dtype)
    return v


def corr_columns(X: np.ndarray, y: np.ndarray, mask: np.ndarray | None = None):
    """(r, z) of every column of X with y, over ``mask`` rows (Fisher z with n - 3)."""
    if mask is not None:
        X, y = X[mask], y[mask]
    n = len(y)
    Xz = zs(X)
    yz = zs(y).astype(Xz.dtype)
    r = (Xz.T @ yz).astype(float) / n
    z = np.arctanh(np.clip(r, -0.999999, 0.999999)) * math.sqrt(max(n - 3, 1))
    return r, z


def partial_columns(X: np.ndarray, y: np.ndarray, design: np.ndarray, mask: np.ndarray | None = None):
    """(beta, z) of y on each standardised column of X, each fitted with ``design`` (no other columns).

    Frisch-Waugh: residualise y and every column on the design once, then
    simple regressions of residuals; standard errors from the residual variance.
    """
    if mask is not None:
        X, y, design = X[mask], y[mask], design[mask]
    n, k = design.shape
    X = zs(X)
    Q, _ = np.linalg.qr(design)
    ry = y - Q @ (Q.T @ y)
    Qx = Q.astype(X.dtype)
    RX = X
    RX -= Qx @ (Qx.T @ X)  # in place: X is already a private copy
    ry = ry.astype(X.dtype)
    sxx = np.einsum("ij,ij->j", RX, RX).astype(float)
    sxx = np.where(sxx > 0, sxx, np.nan)
    beta = (RX.T @ ry).astype(float) / sxx
    resid_var = (float(ry @ ry) - beta ** 2 * sxx) / max(n - k - 1, 1)
    se = np.sqrt(np.clip(resid_var, 1e-300, None) / sxx)
    return beta, beta / se


def ols(y: np.ndarray, X: np.ndarray):
    """Coefficients and standard errors of y on X (X includes any intercept)."""
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    n, k = X.shape
    sigma2 = float(resid @ resid) / max(n - k, 1)
    cov = sigma2 * np.linalg.pinv(X.T @ X)
    return beta, np.sqrt(np.clip(np.diag(cov), 0, None))


def empirical_null(z: np.ndarray):
    """Centre and scale of the bulk of proteome-wide z-scores (median, 1.4826 MAD).

    Shared biology (common factors, covariate terms) spreads every protein's
    association a little; the empirical null measures that spread from the data
    so that an outlier means a protein that stands out from the proteome, not
    merely one that shares its factors (Efron's empirical-null argument).
    """
    z = np.asarray(z, dtype=float)
    z = z[np.isfinite(z)]
    centre = float(np.median(z))
    scale = float(1.4826 * np.median(np.abs(z - centre)))
    return centre, max(scale, 1.0)


def outliers(z: np.ndarray, alpha: float = 0.05):
    """Standardised z against the empirical null, and the Bonferroni flag over the proteome."""
    centre, scale = empirical_null(z)
    zz = (np.asarray(z, dtype=float) - centre) / scale
    return zz, np.abs(zz) > zcrit(alpha / max(np.isfinite(zz).sum(), 1))
