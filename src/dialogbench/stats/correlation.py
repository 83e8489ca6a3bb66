"""Pearson's r and Spearman's rho with two-sided p-values, vectorised over bootstrap resamples.

Pearson:  r = cov(x, y) / (sd(x) sd(y)).
Spearman: Pearson's r of the ranks, ties given their average rank.
p-value:  t = r sqrt((n - 2) / (1 - r^2)) against Student's t with n - 2 degrees of freedom,
          two-sided (what scipy's `pearsonr` and `spearmanr` report; for Pearson the
          exact test under normality, for Spearman the usual large-sample one).

`weights` (resamples x items, from `bootstrap.resample_counts`) counts how often each item
is drawn: a resample's moments are weighted sums, and its ranks are recomputed within the
resample (an item drawn twice ties with itself), so the bootstrap matches resampling the
pairs and recomputing. A constant column has no correlation: NaN, never 0 or 1.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats

FloatArray = npt.NDArray[np.float64]


def _pair(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(
            f"correlation needs two equal-length 1-D samples, got {a.shape}, {b.shape}"
        )
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("correlation needs complete pairs: drop the items with a missing rating")
    return a, b


def _weighted_r(x: FloatArray, y: FloatArray, w: FloatArray) -> FloatArray:
    """Pearson's r per row; `x`, `y` are (items,) or (rows x items) like `w`."""
    total = w.sum(axis=1)
    mx = (w * x).sum(axis=1) / total
    my = (w * y).sum(axis=1) / total
    dx = x - mx[:, None]
    dy = y - my[:, None]
    sxy = (w * dx * dy).sum(axis=1)
    sxx = (w * dx * dx).sum(axis=1)
    syy = (w * dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.sqrt(sxx * syy)
        r = np.where(scale > 1e-12 * np.maximum(1.0, sxx + syy), sxy / scale, np.nan)
    return np.asarray(np.clip(r, -1.0, 1.0), dtype=np.float64)


def _ranks(x: FloatArray, w: FloatArray) -> FloatArray:
    """Average ranks (1-based) of each item within each weighted resample."""
    below = (x[None, :] < x[:, None]).astype(np.float64)  # below[i, j]: x_j < x_i
    equal = (x[None, :] == x[:, None]).astype(np.float64)
    return np.asarray(w @ below.T + (w @ equal.T + 1.0) / 2.0, dtype=np.float64)


def _correlation(
    x: npt.ArrayLike, y: npt.ArrayLike, weights: FloatArray | None, ranked: bool
) -> FloatArray:
    a, b = _pair(x, y)
    w = np.ones((1, len(a))) if weights is None else np.asarray(weights, dtype=np.float64)
    return _weighted_r(_ranks(a, w), _ranks(b, w), w) if ranked else _weighted_r(a, b, w)


def pearson(x: npt.ArrayLike, y: npt.ArrayLike, weights: FloatArray | None = None) -> FloatArray:
    """Pearson's r, one per row of `weights`."""
    return _correlation(x, y, weights, ranked=False)


def spearman(x: npt.ArrayLike, y: npt.ArrayLike, weights: FloatArray | None = None) -> FloatArray:
    """Spearman's rho (average ranks for ties), one per row of `weights`."""
    return _correlation(x, y, weights, ranked=True)


def p_value(r: float, n: int) -> float:
    """Two-sided p-value of a correlation `r` over `n` pairs (t-test, n - 2 df); NaN when
    n < 3 or r is NaN."""
    if n < 3 or np.isnan(r):
        return float("nan")
    if abs(r) >= 1.0:
        return 0.0
    t = r * np.sqrt((n - 2) / (1.0 - r * r))
    return float(2.0 * scipy_stats.t.sf(abs(t), n - 2))
