"""Pearson's r and Spearman's rho with two-sided p-values, vectorised over bootstrap resamples.

Pearson:  r = cov(x, y) / (sd(x) sd(y)).
Spearman: Pearson's r of the ranks, ties given their average rank.
p-value:  two-sided, from scipy's `pearsonr` (the exact test under normality, 1.0 at n = 2,
          where any two points lie on a line) and `spearmanr` (t = rho sqrt((n - 2) /
          (1 - rho^2)) against Student's t with n - 2 df), called on the sample itself so
          that the figure is scipy's to the last bit, rounding of r near +-1 included (at
          n = 3 a rounding of r by 1e-16 moves p by 1e-8).

A p-value that cannot be computed comes as NaN with its reason (`PValue.undefined`),
never a silent NaN: fewer than two pairs, a constant sample (no correlation; scipy
also gives NaN), or Spearman at n = 2 (the t-test has no degrees of freedom; scipy gives
NaN there too while Pearson's exact test gives 1.0).

`weights` (resamples x items, from `bootstrap.resample_counts`) counts how often each item
is drawn: a resample's moments are weighted sums, and its ranks are recomputed within the
resample (an item drawn twice ties with itself), so the bootstrap matches resampling the
pairs and recomputing. A constant column has no correlation: NaN, never 0 or 1.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

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


class PValue(NamedTuple):
    """A two-sided p-value, or NaN and why it is undefined."""

    value: float
    undefined: str | None = None


def undefined_correlation(x: npt.ArrayLike, y: npt.ArrayLike) -> str | None:
    """Why Pearson's r and Spearman's rho of this sample are undefined (NaN), or None."""
    a, b = _pair(x, y)
    if len(a) < 2:
        return f"{len(a)} pair{'' if len(a) == 1 else 's'}: a correlation needs two or more"
    if np.isnan(pearson(a, b)[0]):
        which = [name for name, v in (("first", a), ("second", b)) if np.ptp(v) == 0.0]
        if not which:
            return "nearly constant scores: no correlation"
        who = "both raters" if len(which) == 2 else f"the {which[0]} rater"
        return f"constant scores from {who}: no correlation"
    return None


def _p(x: npt.ArrayLike, y: npt.ArrayLike, ranked: bool) -> PValue:
    a, b = _pair(x, y)
    why = undefined_correlation(a, b)
    if why is not None:
        return PValue(float("nan"), why)
    if ranked and len(a) == 2:
        return PValue(float("nan"), "2 pairs: the t-test of rho has no degrees of freedom")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's "nearly constant input" warning
        result = scipy_stats.spearmanr(a, b) if ranked else scipy_stats.pearsonr(a, b)
    p = float(result.pvalue)
    return PValue(p) if not np.isnan(p) else PValue(p, "scipy gave no p-value")


def pearson_p(x: npt.ArrayLike, y: npt.ArrayLike) -> PValue:
    """Two-sided p-value of Pearson's r of this sample (scipy's `pearsonr`)."""
    return _p(x, y, ranked=False)


def spearman_p(x: npt.ArrayLike, y: npt.ArrayLike) -> PValue:
    """Two-sided p-value of Spearman's rho of this sample (scipy's `spearmanr`)."""
    return _p(x, y, ranked=True)
