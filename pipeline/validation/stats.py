"""Small, dependency-free estimators used by the checks (OLS with standard
errors, Poisson regression with an exposure offset, correlation z-tests)."""
from __future__ import annotations

import numpy as np


def ols(y, X, names=None):
    """OLS with an intercept; returns dict name -> (beta, se) and the residual SD."""
    y = np.asarray(y, float)
    X = np.column_stack([np.ones(len(y))] + [np.asarray(c, float) for c in (X if isinstance(X, list) else [X])])
    ok = np.isfinite(y) & np.isfinite(X).all(axis=1)
    y, X = y[ok], X[ok]
    xtx_inv = np.linalg.pinv(X.T @ X)
    beta = xtx_inv @ X.T @ y
    resid = y - X @ beta
    dof = max(1, len(y) - X.shape[1])
    s2 = resid @ resid / dof
    se = np.sqrt(np.diag(xtx_inv) * s2)
    names = ["intercept"] + list(names or [f"x{i}" for i in range(X.shape[1] - 1)])
    return {nm: (float(b), float(e)) for nm, b, e in zip(names, beta, se)}, float(np.sqrt(s2)), int(len(y))


def poisson(events, exposure, X, names, iters=50):
    """Poisson GLM log E[events] = log(exposure) + X beta (with intercept), IRLS."""
    events = np.asarray(events, float)
    exposure = np.asarray(exposure, float)
    X = np.column_stack([np.ones(len(events))] + [np.asarray(c, float) for c in X])
    offset = np.log(np.maximum(exposure, 1e-12))
    beta = np.zeros(X.shape[1])
    beta[0] = np.log(max(events.sum(), 1) / exposure.sum())
    for _ in range(iters):
        eta = np.clip(X @ beta + offset, -30, 30)
        mu = np.exp(eta)
        grad = X.T @ (events - mu)
        info = X.T @ (X * mu[:, None])
        step = np.linalg.solve(info, grad)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-9:
            break
    se = np.sqrt(np.diag(np.linalg.inv(info)))
    return {nm: (float(b), float(e)) for nm, b, e in zip(["intercept"] + list(names), beta, se)}


def corr_z(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    r = float(np.corrcoef(x[ok], y[ok])[0, 1])
    n = int(ok.sum())
    return r, r * np.sqrt(max(n - 2, 1) / max(1e-12, 1 - r * r)), n


def standardise(x):
    x = np.asarray(x, float)
    m, s = np.nanmean(x), np.nanstd(x)
    return (x - m) / (s if s > 0 else 1.0)


def ridge_cv(X, y, folds, alpha=1.0):
    """Out-of-fold ridge predictions (columns standardised within each training fold)."""
    X = np.asarray(X, float)
    y = np.asarray(y, float)
    pred = np.full(len(y), np.nan)
    for k in np.unique(folds):
        tr, te = folds != k, folds == k
        mu, sd = np.nanmean(X[tr], axis=0), np.nanstd(X[tr], axis=0)
        sd[sd == 0] = 1.0
        Xtr = np.nan_to_num((X[tr] - mu) / sd)
        Xte = np.nan_to_num((X[te] - mu) / sd)
        ym = y[tr].mean()
        beta = np.linalg.solve(Xtr.T @ Xtr + alpha * np.eye(X.shape[1]), Xtr.T @ (y[tr] - ym))
        pred[te] = Xte @ beta + ym
    return pred
