"""The statistics of the evaluation tables (Supplementary Tables S4-S6 and S11), written out
with numpy and the t distribution of ``scipy.stats`` so that every number can be followed.

Every function takes plain sequences of floats and returns a dictionary of plain Python
floats and ints (``float("nan")`` where a statistic is undefined: too few values, zero
variance with zero mean); ``pipeline.evaluate.tables`` turns NaN into ``null`` in the
report.  Nothing here reads records: the tables decide what is paired with what.

# n = paired units (worlds), b = bootstrap resamples
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

#: Two-sided confidence level of every interval.
CI_LEVEL = 0.95
#: Resamples and seed of the paired bootstrap (S11 B: 20,000 resamples of worlds).
BOOTSTRAP_RESAMPLES = 20_000
BOOTSTRAP_SEED = 0
#: A paired difference with ``|d| <= TIE_TOLERANCE`` is a tie in the sign test (budget means of
#: equal scores can differ in the last bit).
TIE_TOLERANCE = 1e-9
#: The normal quantile of the noise floor's definition (issue 27: 1.96 x sqrt(2) x SD / sqrt(cells)).
NOISE_FLOOR_Z = 1.96

NAN = float("nan")


def _as_array(values: Iterable[float], name: str) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a flat sequence of numbers, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        bad = array[~np.isfinite(array)][0]
        raise ValueError(f"{name}: {bad!r} is not a finite number; every value must be finite")
    return array


def describe(values: Sequence[float]) -> dict:
    """Location and spread of a sample (Table S4 A).

    Parameters
    ----------
    values
        Finite numbers, e.g. the totals of one agent's episodes.

    Returns
    -------
    dict
        ``n``; ``mean``; ``sd`` (sample SD, ``ddof=1``; NaN for n < 2); ``median``; ``q1`` and
        ``q3`` (numpy's default linear-interpolation percentiles 25 and 75); ``iqr`` (q3 - q1);
        ``min``; ``max``.  With n = 0 every statistic is NaN.
    """
    array = _as_array(values, "values")
    n = int(array.size)
    if n == 0:
        return {"n": 0, "mean": NAN, "sd": NAN, "median": NAN, "q1": NAN, "q3": NAN, "iqr": NAN,
                "min": NAN, "max": NAN}
    q1, median, q3 = (float(v) for v in np.percentile(array, [25.0, 50.0, 75.0]))
    return {
        "n": n,
        "mean": float(array.mean()),
        "sd": float(array.std(ddof=1)) if n >= 2 else NAN,
        "median": median,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "min": float(array.min()),
        "max": float(array.max()),
    }


def paired_t(differences: Sequence[float], level: float = CI_LEVEL) -> dict:
    """The one-sample t analysis of paired differences (S5, S6): mean, t-based CI, paired-t P.

    With ``d`` the n differences, ``mean = sum(d) / n``, ``sd`` their sample SD (``ddof=1``),
    ``se = sd / sqrt(n)``, ``t = mean / se`` on ``df = n - 1`` degrees of freedom, the two-sided
    ``p = 2 * (1 - F_t(|t|; df))`` and the interval ``mean -/+ F_t^-1((1 + level) / 2; df) * se``.
    This equals ``scipy.stats.ttest_rel(a, b)`` on the paired samples ``a - b = d``.

    Parameters
    ----------
    differences
        Finite paired differences (one per world).
    level
        Two-sided confidence level of the interval, in (0, 1).

    Returns
    -------
    dict
        ``n``, ``mean_diff``, ``sd``, ``se``, ``t``, ``df``, ``p``, ``ci_low``, ``ci_high``.
        With n < 2 everything but ``n`` and ``mean_diff`` is NaN.  With zero spread the
        interval collapses to the mean and, as in scipy, ``t`` is +/-inf and ``p`` 0 for a
        nonzero mean, NaN for a zero mean.
    """
    from scipy.stats import t as t_dist

    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r}: invalid; valid: a confidence level strictly between 0 and 1")
    d = _as_array(differences, "differences")
    n = int(d.size)
    mean = float(d.mean()) if n else NAN
    out = {"n": n, "mean_diff": mean, "sd": NAN, "se": NAN, "t": NAN, "df": n - 1 if n >= 2 else NAN,
           "p": NAN, "ci_low": NAN, "ci_high": NAN}
    if n < 2:
        return out
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    df = n - 1
    half = float(t_dist.ppf(0.5 + level / 2.0, df)) * se
    out.update(sd=sd, se=se, ci_low=mean - half, ci_high=mean + half)
    if se > 0.0:
        t = mean / se
        out.update(t=t, p=float(min(1.0, 2.0 * t_dist.sf(abs(t), df))))
    elif mean != 0.0:
        out.update(t=math.copysign(math.inf, mean), p=0.0)
    return out


def binomial_two_sided_p(k: int, n: int) -> float:
    """Exact two-sided binomial P of ``k`` successes in ``n`` trials at probability 1/2.

    The P value sums the probabilities of every outcome no more likely than the observed one
    (the rule of ``scipy.stats.binomtest``); at probability 1/2 this is
    ``min(1, 2 * P(X <= min(k, n - k)))``.  Computed in exact integer arithmetic:
    ``sum(C(n, i) for i with C(n, i) <= C(n, k)) / 2**n``.

    Parameters
    ----------
    k, n
        Integers with ``0 <= k <= n`` and ``n >= 1``.
    """
    if isinstance(k, bool) or isinstance(n, bool) or not isinstance(k, (int, np.integer)) \
            or not isinstance(n, (int, np.integer)):
        raise ValueError(f"k={k!r}, n={n!r}: invalid; valid: integers")
    k, n = int(k), int(n)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"k={k}, n={n}: invalid; valid: n >= 1 and 0 <= k <= n")
    observed = math.comb(n, k)
    extreme = sum(math.comb(n, i) for i in range(n + 1) if math.comb(n, i) <= observed)
    return min(1.0, extreme / 2 ** n)


def sign_test(differences: Sequence[float], tie_tolerance: float = TIE_TOLERANCE) -> dict:
    """The exact two-sided sign test of paired differences, ties excluded (S5).

    Parameters
    ----------
    differences
        Finite paired differences.
    tie_tolerance
        ``|d| <= tie_tolerance`` counts as a tie.

    Returns
    -------
    dict
        ``n_positive``, ``n_negative``, ``n_ties``, ``n_untied`` and ``p`` (the exact binomial
        P of ``n_positive`` in ``n_untied`` at 1/2; NaN when every difference is a tie, since
        the test then has nothing to test).
    """
    d = _as_array(differences, "differences")
    positive = int(np.sum(d > tie_tolerance))
    negative = int(np.sum(d < -tie_tolerance))
    ties = int(d.size) - positive - negative
    untied = positive + negative
    return {"n_positive": positive, "n_negative": negative, "n_ties": ties, "n_untied": untied,
            "p": binomial_two_sided_p(positive, untied) if untied else NAN}


def bootstrap_mean_ci(differences: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED, level: float = CI_LEVEL) -> dict:
    """Percentile bootstrap interval of the mean paired difference, resampling the pairs (S11 B).

    ``rng = numpy.random.default_rng(seed)`` draws ``idx = rng.integers(0, n, size=(resamples, n))``
    (every resample picks n of the n pairs with replacement); the resampled means are
    ``d[idx].mean(axis=1)`` and the interval is their percentiles ``100 * (1 - level) / 2`` and
    ``100 * (1 + level) / 2`` (numpy's default linear interpolation).  A fresh generator per
    call: the interval of one comparison never depends on which others were computed, and
    the reversed comparison (``-d``) gets exactly the mirrored interval.

    Parameters
    ----------
    differences
        Finite paired differences, in a fixed order (the tables sort worlds by id).
    resamples
        Number of bootstrap resamples (>= 1).
    seed
        Seed of ``numpy.random.default_rng``.
    level
        Two-sided level of the percentile interval.

    Returns
    -------
    dict
        ``n``, ``resamples``, ``seed``, ``mean_diff``, ``ci_low``, ``ci_high`` (NaN when n = 0).
    """
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise ValueError(f"resamples={resamples!r}: invalid; valid: an integer >= 1")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r}: invalid; valid: a confidence level strictly between 0 and 1")
    d = _as_array(differences, "differences")
    n = int(d.size)
    out = {"n": n, "resamples": int(resamples), "seed": int(seed), "mean_diff": float(d.mean()) if n else NAN,
           "ci_low": NAN, "ci_high": NAN}
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(int(resamples), n))
    means = d[idx].mean(axis=1)
    low, high = np.percentile(means, [100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0])
    out.update(ci_low=float(low), ci_high=float(high))
    return out


def pooled_within_sd(groups: Iterable[Sequence[float]]) -> dict:
    """The within-cell SD pooled over cells: ``sqrt(sum_c (n_c - 1) s_c^2 / sum_c (n_c - 1))``.

    Cells with fewer than two values carry no within-cell information and are skipped.

    Parameters
    ----------
    groups
        One sequence of values per cell (e.g. the totals of one agent's trials in one world
        at one budget).

    Returns
    -------
    dict
        ``sd`` (NaN when no cell has two values), ``df`` (``sum_c (n_c - 1)``), ``cells_used``.
    """
    sum_squares, df, used = 0.0, 0, 0
    for i, group in enumerate(groups):
        values = _as_array(group, f"groups[{i}]")
        if values.size < 2:
            continue
        sum_squares += float(np.sum((values - values.mean()) ** 2))
        df += int(values.size) - 1
        used += 1
    return {"sd": math.sqrt(sum_squares / df) if df else NAN, "df": df, "cells_used": used}


def noise_floor(pooled_sd: float, cells: int, z: float = NOISE_FLOOR_Z) -> float:
    """The smallest difference between two single-trial runs of a whole grid that exceeds
    run-to-run noise at 95 %: ``z * sqrt(2) * pooled_sd / sqrt(cells)``.

    A single-trial grid mean over ``cells`` cells has run-to-run variance ``sd^2 / cells``;
    the difference of two independent runs has twice that.

    Parameters
    ----------
    pooled_sd
        Pooled within-cell SD (:func:`pooled_within_sd`).
    cells
        Number of cells (world x budget) in the grid, >= 1.
    """
    if isinstance(cells, bool) or not isinstance(cells, (int, np.integer)) or cells < 1:
        raise ValueError(f"cells={cells!r}: invalid; valid: an integer >= 1")
    if not math.isfinite(pooled_sd):
        return NAN
    return z * math.sqrt(2.0) * float(pooled_sd) / math.sqrt(int(cells))


def mean_sem_over_trials(trial_means: Sequence[float]) -> dict:
    """Mean +/- SEM over trials: the SD (``ddof=1``) of the per-trial means divided by sqrt(trials).

    Parameters
    ----------
    trial_means
        One mean per trial (each the mean of that trial's episodes over the grid).

    Returns
    -------
    dict
        ``trials``, ``mean``, ``sd_of_trial_means``, ``sem`` (NaN with fewer than two trials).
    """
    m = _as_array(trial_means, "trial_means")
    k = int(m.size)
    sd = float(m.std(ddof=1)) if k >= 2 else NAN
    return {"trials": k, "mean": float(m.mean()) if k else NAN, "sd_of_trial_means": sd,
            "sem": sd / math.sqrt(k) if k >= 2 else NAN}
