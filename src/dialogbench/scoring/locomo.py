"""LoCoMo's official QA scorer (snap-research/LoCoMo, task_eval/evaluation.py), reimplemented.

The official pipeline, rule by rule (every rule here is replicated, quirks included):

* `normalize_answer`: delete commas, lowercase, delete ASCII punctuation (`string.punctuation`,
  deleted, not replaced by a space: "self-care" -> "selfcare", "3.5" -> "35"; curly quotes and
  dashes are not ASCII and stay), replace the whole words a/an/the/and with a space (word
  boundaries as the `regex` module defines them), then collapse whitespace.
* tokens are the normalised words, each Porter-stemmed with nltk's default `PorterStemmer`
  (NLTK_EXTENSIONS mode; identical from nltk 3.8.1, which the authors pinned, to 3.10).
* `f1_score`: token F1 over multisets (bag-of-tokens); 0.0 whenever nothing overlaps, so an
  empty or punctuation-only prediction scores 0.0 and so does an answer that normalises to
  nothing, even against itself.
* categories 2 (temporal) and 4 (single-hop): plain `f1_score`.
* category 3 (open-domain): the gold is cut at its first ';' (the rest is a rationale) and
  stripped; the prediction is not cut.
* category 1 (multi-hop): prediction and gold are split on ',' (raw text, before normalising);
  for every gold part take the best F1 over the prediction parts, then average over the gold
  parts (numpy mean). Extra prediction parts are never penalised.
* category 5 (adversarial): 1.0 when the lowercased raw prediction contains
  'no information available' or 'not mentioned' as a substring, else 0.0; the gold is ignored.
* numbers: the official code scores `str(answer)`, so integer golds are compared as their
  decimal strings; callers pass strings.

`evaluate_qa.py` stores each score rounded to 3 places (`official_round`). `set_f1` is NOT the
official metric: see its docstring.

Exact match (`exact_match`): the official `exact_match_score` of the same file: prediction and
gold normalised as above (no stemming) and compared as *sets* of words, so word order and
repeats do not count ("May 7 2023" matches "7 May, 2023"). `locomo_exact_match` applies it per
category as the QA evaluation prepares the gold (`str(answer)`, category 3 cut at its first
';'); an adversarial question has no gold to match (None).
"""

from __future__ import annotations

import functools
import string
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import regex  # type: ignore[import-untyped]

MULTI_HOP = "multi-hop"
TEMPORAL = "temporal"
OPEN_DOMAIN = "open-domain"
SINGLE_HOP = "single-hop"
ADVERSARIAL = "adversarial"
CATEGORY_NAMES: tuple[str, ...] = (MULTI_HOP, TEMPORAL, OPEN_DOMAIN, SINGLE_HOP, ADVERSARIAL)
"""The category names the scorer accepts (the values of `dialogbench.data.locomo.CATEGORIES`)."""

ABSTENTION_PHRASES: tuple[str, ...] = ("no information available", "not mentioned")
"""Substrings of the lowercased prediction that count as abstaining (category 5)."""

OFFICIAL_DECIMALS = 3
"""Places to which `evaluate_qa.py` rounds each stored per-question score."""

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = regex.compile(r"\b(a|an|the|and)\b", flags=regex.V0)


def normalize_answer(text: str) -> str:
    """Normalise an answer exactly as the official `normalize_answer` does."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = str(_ARTICLES.sub(" ", text))
    return " ".join(text.split())


@functools.cache
def _porter() -> Callable[[str], str]:
    """nltk's default Porter stemmer, imported on first use (importing nltk takes seconds)."""
    from nltk.stem.porter import PorterStemmer  # type: ignore[import-untyped]

    stem: Callable[[str], str] = PorterStemmer().stem
    return stem


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Porter stem of one word (nltk's default `PorterStemmer().stem`)."""
    return _porter()(word)


def answer_tokens(text: str) -> list[str]:
    """The stemmed tokens the official F1 compares: normalise, split on whitespace, stem."""
    return [stem(w) for w in normalize_answer(text).split()]


def f1_score(prediction: str, gold: str) -> float:
    """Official token F1: overlap of stemmed-token multisets (0.0 when none overlap)."""
    pred = answer_tokens(prediction)
    ref = answer_tokens(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision = 1.0 * same / len(pred)
    recall = 1.0 * same / len(ref)
    return (2 * precision * recall) / (precision + recall)


def multi_hop_f1(prediction: str, gold: str) -> float:
    """Category 1: mean over comma-separated gold parts of the best F1 over prediction parts."""
    preds = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    best = [max(f1_score(p, g) for p in preds) for g in golds]
    return float(np.mean(best))


def open_domain_gold(gold: str) -> str:
    """Category 3 gold: the text before the first ';', stripped."""
    return gold.split(";")[0].strip()


def is_abstention(prediction: str) -> bool:
    """Whether the prediction contains an official abstention phrase (case-insensitive)."""
    lowered = prediction.lower()
    return any(phrase in lowered for phrase in ABSTENTION_PHRASES)


def set_f1(prediction: str, gold: str) -> float:
    """Set-based token F1 (NOT the official metric), as some vendors report it.

    Same normalising and stemming as `f1_score`, but precision and recall count unique
    tokens: a token repeated in the prediction or gold counts once. So "dog dog" vs "dog"
    scores 1.0 here but 2/3 officially.
    """
    pred = set(answer_tokens(prediction))
    ref = set(answer_tokens(gold))
    same = len(pred & ref)
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(ref)
    return (2 * precision * recall) / (precision + recall)


def exact_match(prediction: str, gold: str) -> bool:
    """Official `exact_match_score`: the normalised words of both, compared as sets."""
    return set(normalize_answer(prediction).split()) == set(normalize_answer(gold).split())


def locomo_exact_match(prediction: str, gold: str | None, category: str) -> float | None:
    """`exact_match` (1.0 or 0.0) against the gold as the QA evaluation prepares it for a
    LoCoMo category name; None for an adversarial question (no gold to match)."""
    if category == ADVERSARIAL:
        return None
    known = _gold(gold, category)
    if category == OPEN_DOMAIN:
        known = open_domain_gold(known)
    return 1.0 if exact_match(prediction, known) else 0.0


def _gold(gold: str | None, category: str) -> str:
    """The gold of a known category other than adversarial; an error without one."""
    if category not in CATEGORY_NAMES:
        raise ValueError(f"unknown LoCoMo category {category!r}; expected one of {CATEGORY_NAMES}")
    if gold is None:
        raise ValueError(f"a {category} question needs a gold answer")
    return gold


def locomo_score(prediction: str, gold: str | None, category: str) -> float:
    """The official per-question score for a LoCoMo category name (see the module docstring)."""
    if category == ADVERSARIAL:
        return 1.0 if is_abstention(prediction) else 0.0
    known = _gold(gold, category)
    if category == MULTI_HOP:
        return multi_hop_f1(prediction, known)
    if category == OPEN_DOMAIN:
        known = open_domain_gold(known)
    return f1_score(prediction, known)


def score_many(
    predictions: Sequence[str],
    golds: Sequence[str | None],
    categories: Sequence[str],
) -> list[float]:
    """`locomo_score` over parallel sequences (stems are cached across calls)."""
    if not len(predictions) == len(golds) == len(categories):
        raise ValueError(
            f"lengths differ: {len(predictions)} predictions, {len(golds)} golds, "
            f"{len(categories)} categories"
        )
    return [locomo_score(p, g, c) for p, g, c in zip(predictions, golds, categories, strict=True)]


def official_round(score: float, category: str) -> float:
    """Round a score as `evaluate_qa.py` stores it: `round(score, 3)`.

    Multi-hop scores are numpy floats there, and numpy rounds by scaling (`round(2.675, 2)`
    gives 2.68 in numpy, 2.67 in Python), so they are rounded the numpy way.
    """
    if category == MULTI_HOP:
        return float(np.round(np.float64(score), OFFICIAL_DECIMALS))
    return round(float(score), OFFICIAL_DECIMALS)
