"""Percentile bootstrap intervals for means, vectorised, optionally resampling clusters.

Resampling is expressed as a count matrix W (resamples x units) drawn once; every metric
column is then a matrix product, so many metrics cost one draw.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, field_validator


class Estimate(BaseModel):
    """A point estimate with its 95% (by default) bootstrap interval.

    An estimate over nothing is NaN; JSON has no NaN, so it is written as null and read back.
    """

    value: float
    ci_low: float
    ci_high: float
    n: int

    @field_validator("value", "ci_low", "ci_high", mode="before")
    @classmethod
    def _null_is_nan(cls, v: object) -> object:
        return float("nan") if v is None else v


def nan_estimate(n: int = 0) -> Estimate:
    """An estimate over nothing (or of nothing estimable): NaN with a NaN interval."""
    return Estimate(value=float("nan"), ci_low=float("nan"), ci_high=float("nan"), n=n)


def percentile_interval(
    replicates: npt.ArrayLike, level: float = 0.95, axis: int | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The (low, high) percentile interval of bootstrap `replicates` along `axis`, NaNs left
    out; all-NaN replicates give a NaN interval, without a warning."""
    tail = (1.0 - level) / 2.0 * 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(np.asarray(replicates, np.float64), [tail, 100 - tail], axis)
    return lo, hi


def percentile_estimate(
    value: float, replicates: npt.ArrayLike, n: int, level: float = 0.95
) -> Estimate:
    """`value` with the percentile interval of its bootstrap `replicates`."""
    lo, hi = percentile_interval(replicates, level)
    return Estimate(value=float(value), ci_low=float(lo), ci_high=float(hi), n=n)


def resample_counts(n_units: int, n_boot: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """How often each of `n_units` is drawn in each of `n_boot` resamples with replacement:
    the count matrix W (n_boot x n_units). Every bootstrap here draws through this."""
    draws = rng.integers(0, n_units, size=(n_boot, n_units))
    flat = (draws + n_units * np.arange(n_boot)[:, None]).ravel()
    counts = np.bincount(flat, minlength=n_boot * n_units).reshape(n_boot, n_units)
    return counts.astype(np.float64)


def bootstrap_means(
    values: npt.ArrayLike,
    clusters: Sequence[str] | npt.NDArray[np.str_] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> list[Estimate]:
    """Mean of each column of `values` (items x metrics) with a percentile interval.

    With `clusters`, whole clusters (e.g. subjects) are resampled and the mean is the
    ratio of resampled sums to resampled counts. NaN cells are left out of their column.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    n_items, n_metrics = v.shape
    if n_items == 0:
        return [nan_estimate() for _ in range(n_metrics)]
    present = ~np.isnan(v)
    filled = np.where(present, v, 0.0)
    if clusters is None:
        unit = np.arange(n_items)
    else:
        _, unit = np.unique(np.asarray(clusters), return_inverse=True)
    n_units = int(unit.max()) + 1
    sums = np.zeros((n_units, n_metrics))
    counts = np.zeros((n_units, n_metrics))
    np.add.at(sums, unit, filled)
    np.add.at(counts, unit, present.astype(np.float64))
    weights = resample_counts(n_units, n_boot, np.random.default_rng(seed))
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (weights @ sums) / (weights @ counts)
        point = sums.sum(0) / counts.sum(0)
    lo, hi = percentile_interval(boot, level, axis=0)  # an all-NaN column stays NaN
    n = counts.sum(0).astype(int)
    return [
        Estimate(value=float(point[j]), ci_low=float(lo[j]), ci_high=float(hi[j]), n=int(n[j]))
        for j in range(n_metrics)
    ]
