"""Answer scorers: LoCoMo's official QA scorer and its building blocks."""

from dialogbench.scoring.locomo import (
    ABSTENTION_PHRASES,
    CATEGORY_NAMES,
    OFFICIAL_DECIMALS,
    answer_tokens,
    exact_match,
    f1_score,
    is_abstention,
    locomo_exact_match,
    locomo_score,
    multi_hop_f1,
    normalize_answer,
    official_round,
    open_domain_gold,
    score_many,
    set_f1,
    stem,
)

__all__ = [
    "ABSTENTION_PHRASES",
    "CATEGORY_NAMES",
    "OFFICIAL_DECIMALS",
    "answer_tokens",
    "exact_match",
    "f1_score",
    "is_abstention",
    "locomo_exact_match",
    "locomo_score",
    "multi_hop_f1",
    "normalize_answer",
    "official_round",
    "open_domain_gold",
    "score_many",
    "set_f1",
    "stem",
]
