"""Classification metrics over label indices, vectorised over bootstrap resamples."""

from __future__ import annotations

import warnings as warnings_module

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def macro_f1(gold: IntArray, pred: IntArray, weights: FloatArray | None = None) -> FloatArray:
    """Macro-F1 over every label seen in the gold or the predictions, for each row of
    `weights` (scikit-learn's `f1_score(average="macro")`).

    `gold` and `pred` hold label indices 0..K-1. `weights` (resamples x predictions) counts
    how often each prediction is drawn; None scores the sample once. A label's F1 is
    2 tp / (gold count + predicted count); a label neither in the drawn gold nor in the
    drawn predictions is left out of the mean; NaN when nothing is drawn.
    """
    g = np.asarray(gold, dtype=np.int64)
    p = np.asarray(pred, dtype=np.int64)
    labels = np.arange(int(max(g.max(), p.max())) + 1 if len(g) else 0)
    is_gold = (g[:, None] == labels).astype(np.float64)
    is_pred = (p[:, None] == labels).astype(np.float64)
    w = np.ones((1, len(g))) if weights is None else np.asarray(weights, dtype=np.float64)
    tp, seen = w @ (is_gold * is_pred), w @ is_gold + w @ is_pred
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(seen > 0, 2.0 * tp / seen, np.nan)
    with warnings_module.catch_warnings():
        warnings_module.simplefilter("ignore", RuntimeWarning)
        return np.asarray(np.nanmean(f1, axis=1) if labels.size else np.full(len(w), np.nan))
