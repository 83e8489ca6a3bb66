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


def reciprocal_rank_at(ranks: FloatArray, k: int) -> FloatArray:
    """1 / best rank when it is within k, else 0; its mean is MRR@k."""
    best = best_rank(ranks)
    return np.where(best <= k, 1.0 / best, 0.0)


def recall_at(ranks: FloatArray, k: int) -> FloatArray:
    """Fraction of each probe's references ranked within k."""
    present = ~np.isnan(ranks)
    within = np.where(present, ranks <= k, False).sum(axis=1)
    return np.asarray(within / present.sum(axis=1), dtype=np.float64)


def metric_table(ranks: FloatArray, ks: tuple[int, ...]) -> dict[str, FloatArray]:
    """Per-probe values of every headline metric, keyed by metric name.

    `mrr` uses the full ranking a retriever gave; `mrr@K` (K the largest cut-off) counts
    only the first K places, so it compares plug-ins that return K ids with built-ins.
    """
    table = {f"hit@{k}": hit_at(ranks, k) for k in ks}
    table["mrr"] = reciprocal_rank(ranks)
    table[f"mrr@{max(ks)}"] = reciprocal_rank_at(ranks, max(ks))
    table.update({f"recall@{k}": recall_at(ranks, k) for k in ks})
    return table


def random_hit_expectation(n_candidates: FloatArray, n_refs: FloatArray, k: int) -> FloatArray:
    """Chance that k messages drawn at random include a reference: 1 - C(N-m, k) / C(N, k)."""
    n = np.asarray(n_candidates, dtype=np.float64)
    m = np.asarray(n_refs, dtype=np.float64)
    miss = np.ones_like(n)
    for j in range(k):
        # past the N-th draw every candidate is taken: nothing further changes the miss chance
        left = n - j
        miss *= np.where(left > 0, np.clip((left - m) / np.maximum(left, 1.0), 0.0, 1.0), 1.0)
    return 1.0 - miss
