"""AUROC (the Mann-Whitney statistic) with a stratified bootstrap interval, and operating points.

    AUROC = P(score of a positive > score of a negative) + 0.5 * P(equal)

computed from ranks: sort the negatives once; for each positive, `searchsorted` gives how
many negatives lie below it and how many tie with it. The bootstrap resamples positives
and negatives separately (the class sizes stay fixed) and is one count matrix per class,
so every resample is scored by gathers and a matrix product, with no loop over resamples.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from dialogbench.stats.bootstrap import Estimate, percentile_estimate, resample_counts

FloatArray = npt.NDArray[np.float64]
_MAX_CELLS = 1 << 23  # resample x item cells drawn per block


def _clean(scores: npt.ArrayLike, what: str) -> FloatArray:
    arr = np.asarray(scores, dtype=np.float64).ravel()
    if np.isnan(arr).any():
        raise ValueError(f"{what} scores hold NaN: leave unscored items out before calling")
    return arr


def _below_and_tied(pos: FloatArray, neg: FloatArray) -> tuple[npt.NDArray[np.int64], ...]:
    """For each positive: where its value starts and ends among the sorted negatives."""
    ordered = np.sort(neg)
    lo = np.searchsorted(ordered, pos, side="left").astype(np.int64)
    hi = np.searchsorted(ordered, pos, side="right").astype(np.int64)
    return lo, hi


def auroc(pos_scores: npt.ArrayLike, neg_scores: npt.ArrayLike) -> float:
    """The probability that a positive outscores a negative, ties counting one half.

    NaN when either class is empty. Higher scores are meant to signal positives.
    """
    pos, neg = _clean(pos_scores, "positive"), _clean(neg_scores, "negative")
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    lo, hi = _below_and_tied(pos, neg)
    return float((lo + hi).sum() / (2.0 * len(pos) * len(neg)))


def bootstrap_auroc(
    pos_scores: npt.ArrayLike,
    neg_scores: npt.ArrayLike,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Estimate:
    """AUROC with a percentile interval from resampling positives and negatives separately
    (`auroc_replicates`). `n` of the estimate counts positives plus negatives; the value is
    NaN if a class is empty."""
    pos, neg = _clean(pos_scores, "positive"), _clean(neg_scores, "negative")
    point = auroc(pos, neg)
    if len(pos) == 0 or len(neg) == 0:
        return Estimate(
            value=point, ci_low=float("nan"), ci_high=float("nan"), n=len(pos) + len(neg)
        )
    return percentile_estimate(
        point, auroc_replicates(pos, neg, n_boot=n_boot, seed=seed), len(pos) + len(neg), level
    )


def auroc_replicates(
    pos_scores: npt.ArrayLike, neg_scores: npt.ArrayLike, *, n_boot: int = 2000, seed: int = 0
) -> FloatArray:
    """The AUROC of each of `n_boot` resamples, positives and negatives drawn separately (the
    class sizes stay fixed); NaN everywhere if a class is empty. Two contrasts' replicates
    subtract into the interval of their difference.

    In one resample with negative counts c (over the sorted negatives) and positive counts
    w, the statistic is  sum_j w_j * (C[lo_j] + C[hi_j]) / (2 m n),  where C is the
    cumulative sum of c and lo_j, hi_j bound positive j's value among the sorted negatives.
    """
    pos, neg = _clean(pos_scores, "positive"), _clean(neg_scores, "negative")
    m, n = len(pos), len(neg)
    if m == 0 or n == 0:
        return np.full(n_boot, np.nan)
    lo, hi = _below_and_tied(pos, neg)
    # one stream per class, so the draws do not depend on how resamples are blocked
    neg_rng, pos_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    stats = np.empty(n_boot)
    block = max(1, _MAX_CELLS // (m + n))
    for start in range(0, n_boot, block):  # blocks of resamples bound the memory only
        b = min(block, n_boot - start)
        neg_counts = resample_counts(n, b, neg_rng)  # columns follow the sorted negatives
        cum = np.zeros((b, n + 1))
        np.cumsum(neg_counts, axis=1, out=cum[:, 1:])
        pos_counts = resample_counts(m, b, pos_rng)
        per_pos = cum[:, lo] + cum[:, hi]  # (b, m): twice the negatives each positive beats
        stats[start : start + b] = np.einsum("bm,bm->b", pos_counts, per_pos) / (2.0 * m * n)
    return stats


class OperatingPoint(BaseModel):
    """What a threshold does: positives caught and missed, negatives falsely flagged.

    A score at or above `threshold` counts as flagged.
    """

    model_config = ConfigDict(frozen=True)

    threshold: float
    caught: int
    missed: int
    false_alarms: int
    correct_rejections: int
    n_pos: int
    n_neg: int

    @property
    def sensitivity(self) -> float:
        return self.caught / self.n_pos if self.n_pos else float("nan")

    @property
    def false_alarm_rate(self) -> float:
        return self.false_alarms / self.n_neg if self.n_neg else float("nan")

    def describe(self) -> str:
        """E.g. '6 of 40 caught, 40 false alarms among 394'."""
        return (
            f"{self.caught} of {self.n_pos} caught, "
            f"{self.false_alarms} false alarms among {self.n_neg}"
        )


def operating_point(
    pos_scores: npt.ArrayLike, neg_scores: npt.ArrayLike, threshold: float
) -> OperatingPoint:
    """Counts at `threshold` (flagged = score >= threshold)."""
    pos, neg = _clean(pos_scores, "positive"), _clean(neg_scores, "negative")
    caught = int((pos >= threshold).sum())
    alarms = int((neg >= threshold).sum())
    return OperatingPoint(
        threshold=float(threshold),
        caught=caught,
        missed=len(pos) - caught,
        false_alarms=alarms,
        correct_rejections=len(neg) - alarms,
        n_pos=len(pos),
        n_neg=len(neg),
    )
