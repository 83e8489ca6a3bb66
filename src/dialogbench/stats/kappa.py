"""Cohen's kappa (two raters) and Fleiss' kappa (several), vectorised over bootstrap resamples.

Both treat scores as nominal categories (a 7 and an 8 disagree as much as a 0 and a 10),
as the paper's Table 2 does with its binary labels. For graded scores, read them beside
Krippendorff's alpha at the interval level and the correlations (`stats.correlation`).

Cohen:  kappa = (p_o - p_e) / (1 - p_e), p_o the share of items both raters put in the
        same category, p_e = sum_k p_a(k) p_b(k) from each rater's own marginals
        (scikit-learn's `cohen_kappa_score`).
Fleiss: items x categories counts n_ik, every item rated by the same number m of raters;
        P_i = (sum_k n_ik^2 - m) / (m (m - 1)), p_k = sum_i n_ik / (N m),
        kappa = (mean P_i - sum_k p_k^2) / (1 - sum_k p_k^2) (Fleiss, 1971).

When chance agreement is already complete (p_e = 1: every rating in one category) kappa
is 0 / 0 and NaN is returned, never 1, as for alpha.

`weights` (resamples x items, from `bootstrap.resample_counts`) counts how often each item
is drawn; None scores the sample once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def _categories(*columns: npt.ArrayLike) -> tuple[FloatArray, list[FloatArray]]:
    values = [np.asarray(c, dtype=np.float64) for c in columns]
    if any(np.isnan(v).any() for v in values):
        raise ValueError("kappa needs every item rated: drop the items with a missing rating")
    cats = np.unique(np.concatenate(values)) if values else np.array([])
    return cats, values


def cohen_kappa(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    weights: FloatArray | None = None,
) -> FloatArray:
    """Cohen's kappa of two raters' scores on the same items, one per row of `weights`."""
    cats, (x, y) = _categories(a, b)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"the raters scored {x.shape} and {y.shape} items; pair them first")
    k = len(cats)
    ia, ib = np.searchsorted(cats, x), np.searchsorted(cats, y)
    pair = np.zeros((len(x), k * k))
    pair[np.arange(len(x)), ia * k + ib] = 1.0
    w = np.ones((1, len(x))) if weights is None else np.asarray(weights, dtype=np.float64)
    confusion = (w @ pair).reshape(len(w), k, k)
    total = confusion.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(confusion, axis1=1, axis2=2) / total
        chance = (confusion.sum(axis=2) * confusion.sum(axis=1)).sum(axis=1) / total**2
        kappa = (observed - chance) / (1.0 - chance)
    return np.asarray(np.where(np.isclose(chance, 1.0), np.nan, kappa), dtype=np.float64)


def fleiss_kappa(ratings: npt.ArrayLike, weights: FloatArray | None = None) -> FloatArray:
    """Fleiss' kappa of `ratings` (raters x items, every item rated by every rater), one
    per row of `weights`."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.ndim != 2 or r.shape[0] < 2:
        raise ValueError("Fleiss' kappa needs a raters x items array with two raters or more")
    cats, _ = _categories(r.ravel())
    m, n_items = r.shape
    which = np.searchsorted(cats, r)
    counts = np.zeros((n_items, len(cats)))
    np.add.at(counts, (np.tile(np.arange(n_items), m), which.ravel()), 1.0)
    agree = ((counts**2).sum(axis=1) - m) / (m * (m - 1))
    w = np.ones((1, n_items)) if weights is None else np.asarray(weights, dtype=np.float64)
    drawn = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_bar = (w @ agree) / drawn
        share = (w @ counts) / (drawn[:, None] * m)
        chance = (share**2).sum(axis=1)
        kappa = (p_bar - chance) / (1.0 - chance)
    return np.asarray(np.where(np.isclose(chance, 1.0), np.nan, kappa), dtype=np.float64)
