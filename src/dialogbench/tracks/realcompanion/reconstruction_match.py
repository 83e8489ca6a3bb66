"""Field-level matching of a written profile or persona against another one (gold or a run).

A record is a (field, statement) pair: a profile claim's `field`, or a persona entry's
`dimension`, with its statement. Predicted record p matches reference record g when

1. their fields are equal once normalised (`norm_field`: lower case, punctuation to spaces,
   plurals folded - "Hobbies" = "hobby" - and a few synonyms from `FIELD_ALIASES`
   mapped, e.g. "job" -> "occupation"), and
2. their statements agree: the F1 of their content-word sets (`content_words`: lower-case
   words of two letters or more, English stop words removed, plurals folded) is at least
   `threshold`. With threshold 0 any two statements agree, which is pure field matching.

Matching is one-to-one and greedy: of all agreeing pairs, the most similar is taken first
(ties: lower predicted index, then lower reference index), and both records leave the pool.
It is deterministic, so a rerun scores the same, and symmetric, so it also measures how
far two runs agree. From the matched count: precision = matched / predicted (NaN with no
prediction), recall = matched / reference (NaN with no reference), F1 = 2 matched /
(predicted + reference) (NaN when both are empty).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dialogbench.retrieval.bm25 import tokenize

Record = tuple[str, str]
"""(field or dimension, statement)."""

KINDS = ("profile", "persona")

FIELD_ALIASES: dict[str, str] = {
    "job": "occupation",
    "work": "occupation",
    "career": "occupation",
    "profession": "occupation",
    "employment": "occupation",
    "interest": "hobby",
    "pastime": "hobby",
    "hobby and interest": "hobby",
    "home": "living situation",
    "housing": "living situation",
    "residence": "living situation",
    "personality trait": "personality",
    "trait": "personality",
    "communication style": "speaking style",
    "style of speaking": "speaking style",
}
"""Normalised field -> the field it is read as (applied after plurals are folded)."""

MATCHER_SHA256 = hashlib.sha256(
    json.dumps({"aliases": FIELD_ALIASES, "rule": "content-word F1, greedy 1:1"}).encode()
).hexdigest()
"""Digest of the matching rule: recorded in the manifest."""

_NON_WORD = re.compile(r"[^a-z0-9]+")


def fold(word: str) -> str:
    """A crude plural fold: "hobbies" -> "hobby", "pets" -> "pet"; "ss" endings are kept."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def norm_field(text: str) -> str:
    """A field or dimension as compared: lower-case words, plurals folded, aliases mapped."""
    words = [fold(w) for w in _NON_WORD.sub(" ", text.lower()).split()]
    joined = " ".join(words)
    return FIELD_ALIASES.get(joined, joined)


def content_words(text: str) -> frozenset[str]:
    """The statement's content words (stop words removed, plurals folded)."""
    return frozenset(fold(w) for w in tokenize(text))


def similarity(a: str, b: str) -> float:
    """F1 of the two statements' content-word sets (0 when either has none)."""
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb:
        return 0.0
    return 2.0 * len(wa & wb) / (len(wa) + len(wb))


def match(
    pred: Sequence[Record], gold: Sequence[Record], threshold: float
) -> list[tuple[int, int, float]]:
    """One-to-one greedy matching: (pred index, gold index, similarity) per matched pair."""
    gold_fields = [norm_field(f) for f, _ in gold]
    candidates = []
    for i, (field, statement) in enumerate(pred):
        key = norm_field(field)
        for j, (_, g_statement) in enumerate(gold):
            if gold_fields[j] != key:
                continue
            sim = similarity(statement, g_statement)
            if sim >= threshold:
                candidates.append((-sim, i, j))
    candidates.sort()
    used_p: set[int] = set()
    used_g: set[int] = set()
    pairs = []
    for neg, i, j in candidates:
        if i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            pairs.append((i, j, -neg))
    return sorted(pairs)


@dataclass(frozen=True)
class Counts:
    """Matched, predicted and reference record counts, with the ratios they give."""

    matched: int
    predicted: int
    reference: int

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.matched + other.matched,
            self.predicted + other.predicted,
            self.reference + other.reference,
        )

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else math.nan

    @property
    def recall(self) -> float:
        return self.matched / self.reference if self.reference else math.nan

    @property
    def f1(self) -> float:
        total = self.predicted + self.reference
        return 2.0 * self.matched / total if total else math.nan


def count(pred: Sequence[Record], gold: Sequence[Record], threshold: float) -> Counts:
    """The counts of matching `pred` against `gold`."""
    return Counts(len(match(pred, gold, threshold)), len(pred), len(gold))


def count_all(
    pred: Mapping[str, Sequence[Record]], gold: Mapping[str, Sequence[Record]], threshold: float
) -> dict[str, Counts]:
    """Counts per kind (profile, persona) and pooled ("all")."""
    out = {k: count(pred.get(k, ()), gold.get(k, ()), threshold) for k in KINDS}
    out["all"] = out["profile"] + out["persona"]
    return out


def pairwise_f1(outputs: Sequence[Mapping[str, Sequence[Record]]], threshold: float) -> list[float]:
    """Pooled F1 of every pair of outputs (e.g. repeated runs on one subject), pair by pair:
    (0, 1), (0, 2), ..., (1, 2), ... The mean is the runs' agreement."""
    return [
        count_all(a, b, threshold)["all"].f1
        for i, a in enumerate(outputs)
        for b in outputs[i + 1 :]
    ]
