"""Statistics: bootstrap intervals, metric definitions (retrieval, classification) and
inter-rater agreement."""

from dialogbench.stats.agreement import krippendorff_alpha
from dialogbench.stats.bootstrap import Estimate, bootstrap_means, resample_counts
from dialogbench.stats.classification import macro_f1
from dialogbench.stats.metrics import (
    best_rank,
    hit_at,
    metric_table,
    random_hit_expectation,
    recall_at,
    reciprocal_rank,
)
from dialogbench.stats.roc import OperatingPoint, auroc, bootstrap_auroc, operating_point

__all__ = [
    "Estimate",
    "OperatingPoint",
    "auroc",
    "best_rank",
    "bootstrap_auroc",
    "bootstrap_means",
    "hit_at",
    "krippendorff_alpha",
    "macro_f1",
    "metric_table",
    "operating_point",
    "random_hit_expectation",
    "recall_at",
    "reciprocal_rank",
    "resample_counts",
]
