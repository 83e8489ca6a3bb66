"""Retrieval metrics from reference ranks.

`ranks` is a (probes x references) array of 1-based ranks: `inf` for a reference that
was not retrieved, `nan` for padding where a probe has fewer references. A probe is hit
at k when any of its references ranks within k.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def best_rank(ranks: FloatArray) -> FloatArray:
    """Rank of each probe's best-placed reference (`inf` if none was retrieved)."""
    return np.asarray(np.nanmin(ranks, axis=1), dtype=np.float64)


def hit_at(ranks: FloatArray, k: int) -> FloatArray:
    """1.0 where some reference ranks within k, else 0.0."""
    return (best_rank(ranks) <= k).astype(np.float64)


def reciprocal_rank(ranks: FloatArray) -> FloatArray:
    """1 / best rank (0 when no reference was retrieved); its mean is MRR."""
    return 1.0 / best_rank(ranks)


def recall_at(ranks: FloatArray, k: int) -> FloatArray:
    """Fraction of each probe's references ranked within k."""
    present = ~np.isnan(ranks)
    within = np.where(present, ranks <= k, False).sum(axis=1)
    return np.asarray(within / present.sum(axis=1), dtype=np.float64)


def metric_table(ranks: FloatArray, ks: tuple[int, ...]) -> dict[str, FloatArray]:
    """Per-probe values of every headline metric, keyed by metric name."""
    table = {f"hit@{k}": hit_at(ranks, k) for k in ks}
    table["mrr"] = reciprocal_rank(ranks)
    table.update({f"recall@{k}": recall_at(ranks, k) for k in ks})
    return table


def random_hit_expectation(n_candidates: FloatArray, n_refs: FloatArray, k: int) -> FloatArray:
    """Chance that k messages drawn at random include a reference: 1 - C(N-m, k) / C(N, k)."""
    n = np.asarray(n_candidates, dtype=np.float64)
    m = np.asarray(n_refs, dtype=np.float64)
    miss = np.ones_like(n)
    for j in range(k):
        miss *= np.clip((n - m - j) / np.maximum(n - j, 1.0), 0.0, 1.0)
    return 1.0 - miss
