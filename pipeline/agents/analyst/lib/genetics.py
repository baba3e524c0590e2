"""Genome-wide scans: every protein against every variant (pQTL lead variants),
and outcomes against every variant (GWAS), in variant blocks that can be spread
over several turns.

Conventions: genotypes and proteins are standardised (mean 0, SD 1; a missing
call or value at the mean), so a regression slope is a correlation r with
standard error sqrt((1 - r^2) / (n - 2)).  Instrument strength is the
first-stage F = r^2 (n - 2) / (1 - r^2).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

TOP_K = 6


def z_threshold(alpha: float) -> float:
    """Two-sided normal critical value."""
    return float(stats.norm.isf(alpha / 2))


def standardise_genotypes(block: np.ndarray) -> np.ndarray:
    g = np.asarray(block, dtype=np.float32)
    g[g < 0] = np.nan
    mean = np.nanmean(g, axis=0)
    g = np.where(np.isnan(g), mean, g)
    g -= mean
    sd = g.std(axis=0)
    sd[sd == 0] = 1.0
    g /= sd
    return g


def standardise(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    mean = np.nanmean(v, axis=0)
    v = np.where(np.isnan(v), mean, v) - mean
    sd = v.std(axis=0)
    sd[sd == 0] = 1.0
    return v / sd


def scan_block(G: np.ndarray, P: np.ndarray, start: int, state: dict, z_hit: float) -> None:
    """Update running top-K variants per protein and per-variant hit counts with one block.

    ``G`` standardised [n, b] (variants start .. start+b), ``P`` standardised [n, p].
    """
    n = G.shape[0]
    R = (G.T @ P) / n  # [b, p]
    r_hit = z_hit / math.sqrt(n - 2 + z_hit * z_hit)
    state["hits"][start:start + G.shape[1]] = (np.abs(R) > r_hit).sum(axis=1)
    k = min(TOP_K, R.shape[0])
    idx = np.argpartition(-np.abs(R), k - 1, axis=0)[:k]  # [k, p]
    vals = np.take_along_axis(R, idx, axis=0)
    all_idx = np.concatenate([state["top_idx"], idx + start], axis=0)
    all_val = np.concatenate([state["top_r"], vals], axis=0)
    order = np.argsort(-np.abs(all_val), axis=0)[:TOP_K]
    state["top_idx"] = np.take_along_axis(all_idx, order, axis=0)
    state["top_r"] = np.take_along_axis(all_val, order, axis=0)


def new_scan_state(n_variants: int, n_proteins: int) -> dict:
    return {"hits": np.zeros(n_variants, dtype=np.int64),
            "top_idx": np.zeros((0, n_proteins), dtype=np.int64),
            "top_r": np.zeros((0, n_proteins), dtype=np.float32),
            "next": 0}


def hub_threshold(hits: np.ndarray, alpha: float = 0.05) -> int:
    """Count of significant proteins above which a variant is a trans-acting hub.

    By chance, the number of proteins a variant is significantly associated with
    is Poisson (cis loci are scattered; a few proteins share one).  A hub is a
    count beyond the Poisson tail at a Bonferroni level over variants.
    """
    lam = max(float(np.mean(hits)), 1e-6)
    alpha_v = alpha / max(len(hits), 1)
    k = int(stats.poisson.isf(alpha_v, lam)) + 1
    return max(k, 2)


def gwas(G: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Correlations of standardised genotypes [n, v] with standardised outcomes [n, k] -> [v, k]."""
    return (G.T @ Y) / G.shape[0]


def r_se(r, n):
    r = np.asarray(r, dtype=float)
    return np.sqrt(np.clip(1 - r * r, 1e-12, None) / max(n - 2, 1))


def ld_neighbours(G_full, lead: int, width: int = 40, r2_min: float = 0.1):
    """Columns near ``lead`` (in file order, which is genomic) in LD with it, with their r."""
    lo, hi = max(0, lead - width), min(G_full.shape[1], lead + width + 1)
    block = standardise_genotypes(G_full[:, lo:hi])
    g = block[:, lead - lo]
    r = block.T @ g / len(g)
    keep = np.flatnonzero(r * r >= r2_min)
    return lo + keep, r[keep]
