"""Krippendorff's alpha for (coders x units) ratings with missing values, via coincidences.

alpha = 1 - D_o / D_e, where D_o is the disagreement observed within units and D_e the
disagreement expected by chance from all pairable values. Only units with at least two
ratings are pairable; the others are ignored. When the pairable values do not vary at all,
D_e is 0 and alpha is undefined: the function returns NaN (not 1), so a panel that always
gives the same score is not reported as reliable.

Memory grows with the square of the number of distinct values, which suits rating scales.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[str, ...] = get_args(Level)

FloatArray = npt.NDArray[np.float64]


def krippendorff_alpha(ratings: npt.ArrayLike, level: Level = "interval") -> float:
    """Alpha of `ratings` (coders x units, NaN = missing) at the given level of measurement."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    r = np.asarray(ratings, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"ratings must be a 2-D (coders x units) array, got {r.ndim}-D")
    if np.isinf(r).any():
        raise ValueError("ratings must be finite or NaN (missing)")
    values, counts = _value_counts(r)
    if level == "ratio" and values.size and values[0] < 0:
        raise ValueError("ratio-level ratings must be non-negative")
    if counts.shape[0] == 0:
        return float("nan")
    o = _coincidences(counts)
    n_v = o.sum(axis=1)
    n = float(n_v.sum())
    d2 = _squared_distance(values, n_v, level)
    expected = float(n_v @ d2 @ n_v)
    if expected == 0.0:
        return float("nan")
    observed = float((o * d2).sum())
    return 1.0 - (n - 1.0) * observed / expected


def rating_matrix(ratings: Mapping[str, Mapping[str, float]]) -> FloatArray:
    """Rater x item ratings from rater -> {item: rating}: raters in their order, items
    sorted, NaN where a rater gave none (what `krippendorff_alpha` reads)."""
    items = sorted({i for by_item in ratings.values() for i in by_item})
    matrix = np.full((len(ratings), len(items)), np.nan)
    for c, by_item in enumerate(ratings.values()):
        for u, item in enumerate(items):
            if item in by_item:
                matrix[c, u] = by_item[item]
    return matrix


def _value_counts(r: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Distinct values and how often each unit got each one (pairable units only)."""
    present = ~np.isnan(r)
    pairable = present.sum(axis=0) >= 2
    r, present = r[:, pairable], present[:, pairable]
    values = np.unique(r[present])
    unit, coder = np.nonzero(present.T)
    which = np.searchsorted(values, r[coder, unit])
    counts = np.zeros((r.shape[1], values.size))
    np.add.at(counts, (unit, which), 1.0)
    return values, counts


def _coincidences(counts: FloatArray) -> FloatArray:
    """o[c, k] = sum over units of n_uc * (n_uk - [c == k]) / (m_u - 1)."""
    weights = 1.0 / (counts.sum(axis=1) - 1.0)
    weighted = counts * weights[:, None]
    o: FloatArray = weighted.T @ counts
    o -= np.diag(weighted.sum(axis=0))
    return o


def _squared_distance(values: FloatArray, n_v: FloatArray, level: Level) -> FloatArray:
    """delta^2 between every pair of distinct values at this level."""
    c, k = values[:, None], values[None, :]
    if level == "nominal":
        return np.asarray(c != k, dtype=np.float64)
    if level == "interval":
        return np.asarray((c - k) ** 2, dtype=np.float64)
    if level == "ratio":
        total = c + k
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(total == 0.0, 0.0, (c - k) / total)
        return np.asarray(ratio**2, dtype=np.float64)
    # ordinal: the mass of values from c through k, less half of each end
    i, j = np.indices((values.size, values.size))
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    cum = np.cumsum(n_v)
    between = cum[hi] - cum[lo] + n_v[lo]
    return np.asarray((between - (n_v[i] + n_v[j]) / 2.0) ** 2, dtype=np.float64)
