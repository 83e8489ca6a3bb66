"""Claim-level matching of a written profile or persona against another one (gold or a run).

A record is a (field, statement) pair: a profile claim's `field`, or a persona entry's
`dimension`, with its statement. Two matchers decide when predicted record p and reference
record g agree; both then pair records one-to-one.

`lexical` (strict; the original rule)
    1. the fields are equal once normalised (`norm_field`: lower case, punctuation to
       spaces, plurals folded - "Hobbies" = "hobby" - and the few aliases of
       `FIELD_ALIASES`, e.g. "job" -> "occupation"), and
    2. the statements' content-word F1 (`content_words`: lower-case words of two letters or
       more, English stop words removed, plurals folded) is at least `threshold` (default
       0.25; 0 = field matching only). A statement with no content word at all (`"F"`,
       `"42"`, `"no"`) is compared on all its words instead, so a one-letter value matches
       itself.

`meaning`
    1. the fields fall in the same group of `FIELD_GROUPS` (a table of synonyms, after the
       same normalisation: `relationships` = `family` = `partner`, `pets` = `animals`,
       `hobbies` = `interests` = `reading`; a field in no group is its own group), and
    2. the statements mean the same: the cosine similarity of their sentence embeddings
       (`similarity_model`, the packaged MiniLM embedder) is at least `threshold` (default
       `MEANING_THRESHOLD`), or they are equal once normalised. Short values (one or two
       words on both sides, e.g. `"F"` against `"female"`) are not embedded: they agree when
       equal after the abbreviations of `VALUE_SYNONYMS` are expanded, so `"F"` matches
       `"female"` and never `"M"`.

Pairing is one-to-one and optimal: among the agreeing pairs, the largest number of pairs,
and among those the largest total similarity (`assign`: scipy's `linear_sum_assignment` on
the similarity matrix, each agreeing pair worth one more than any total of similarities).
So two near-duplicate gold claims each keep their own match, and the gold replayed verbatim
scores precision 1 and recall 1. It is deterministic and symmetric, so it also measures how
far two runs agree. From the matched count: precision = matched / predicted (NaN with no
prediction), recall = matched / reference (NaN with no reference), F1 = 2 matched /
(predicted + reference) (NaN when both are empty).

Matched pairs are then compared on what else a claim carries (`agreement`): the absolute
difference of their confidences, the overlap of their validity windows and of their
evidence ids; for persona entries the overlap of their grounds and whether both call the
entry a working hypothesis.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from dialogbench.data.model import PersonaEntry, ProfileClaim
from dialogbench.retrieval.bm25 import tokenize

Record = tuple[str, str]
"""(field or dimension, statement)."""

FloatArray = npt.NDArray[np.float64]

KINDS = ("profile", "persona")
MATCHERS = ("lexical", "meaning")
LEXICAL_THRESHOLD = 0.25
MEANING_THRESHOLD = 0.6
"""Default statement similarity at which two records agree, per matcher."""

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
"""The lexical matcher's aliases: normalised field -> the field it is read as (applied after
plurals are folded)."""

FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "occupation": (
        "occupation", "job", "work", "career", "profession", "employment", "employer",
        "workplace", "business", "work life",
    ),
    "relationships": (
        "relationship", "family", "partner", "spouse", "marriage", "marital status",
        "child", "kid", "parent", "sibling", "dating", "romance", "friend", "friendship",
        "social life", "social circle", "relative",
    ),
    "pets": ("pet", "animal", "dog", "cat"),
    "hobby": (
        "hobby", "interest", "pastime", "leisure", "activity", "reading", "sport",
        "hobby and interest", "like", "entertainment", "music", "art",
    ),
    "living situation": (
        "living situation", "home", "housing", "residence", "location", "city", "address",
        "hometown", "where they live", "place", "country",
    ),
    "health": ("health", "medical", "wellbeing", "mental health", "fitness", "illness"),
    "education": ("education", "school", "study", "degree", "university", "college"),
    "name": ("name", "full name", "nickname"),
    "age": ("age", "birthday", "date of birth", "birth date"),
    "gender": ("gender", "sex"),
    "food": ("food", "diet", "cuisine", "favourite food", "favorite food", "eating"),
    "goals": ("goal", "plan", "aspiration", "ambition", "dream", "future plan"),
    "personality": ("personality", "trait", "personality trait", "character", "temperament"),
    "speaking style": (
        "speaking style", "communication style", "style of speaking", "tone", "communication",
    ),
    "values": ("value", "belief", "principle"),
    "coping style": ("coping style", "coping", "stress response", "stress"),
    "anxieties": ("anxiety", "fear", "worry", "concern", "insecurity"),
    "humour": ("humour", "humor", "sense of humour", "sense of humor"),
    "decision making": ("decision making", "decision", "decision style", "choice"),
    "emotions": ("emotion", "emotional style", "mood", "feeling"),
}  # fmt: skip
"""The meaning matcher's field synonyms: group -> the normalised fields it holds (plurals
folded first, so "pets" and "animals" are looked up as "pet" and "animal")."""

VALUE_SYNONYMS: dict[str, str] = {
    "f": "female",
    "woman": "female",
    "w": "female",
    "m": "male",
    "man": "male",
    "y": "yes",
    "true": "yes",
    "n": "no",
    "false": "no",
    "nb": "non binary",
    "nonbinary": "non binary",
}
"""Abbreviations of short values the meaning matcher expands before comparing them."""

SHORT_VALUE_WORDS = 2
"""Statements of at most this many words on both sides are compared as values."""

_NON_WORD = re.compile(r"[^a-z0-9]+")


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


MATCHER_SHA256 = _digest({"aliases": FIELD_ALIASES, "rule": "content-word F1, optimal 1:1"})
"""Digest of the lexical matching rule: recorded in the manifest."""

MEANING_SHA256 = _digest(
    {
        "groups": FIELD_GROUPS,
        "values": VALUE_SYNONYMS,
        "short": SHORT_VALUE_WORDS,
        "rule": "field group, embedding cosine or equal values, optimal 1:1",
    }
)
"""Digest of the meaning matching rule (its embedding model is recorded beside it)."""


def fold(word: str) -> str:
    """A crude plural fold: "hobbies" -> "hobby", "pets" -> "pet"; "ss" endings are kept."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _folded(text: str) -> str:
    return " ".join(fold(w) for w in _NON_WORD.sub(" ", text.lower()).split())


def norm_field(text: str) -> str:
    """A field or dimension as the lexical matcher compares it: lower-case words, plurals
    folded, aliases mapped."""
    joined = _folded(text)
    return FIELD_ALIASES.get(joined, joined)


_GROUP_OF = {_folded(name): group for group, names in FIELD_GROUPS.items() for name in names}


def field_group(text: str) -> str:
    """A field or dimension as the meaning matcher compares it: its group in
    `FIELD_GROUPS`, else the normalised field itself."""
    joined = _folded(text)
    return _GROUP_OF.get(joined, _GROUP_OF.get(norm_field(text), norm_field(text)))


def content_words(text: str) -> frozenset[str]:
    """The statement's content words (stop words removed, plurals folded)."""
    return frozenset(fold(w) for w in tokenize(text))


def all_words(text: str) -> frozenset[str]:
    """Every word of the statement (one-letter words and stop words too), plurals folded."""
    return frozenset(_folded(text).split())


def _f1(wa: frozenset[str], wb: frozenset[str]) -> float:
    if not wa or not wb:
        return 0.0
    return 2.0 * len(wa & wb) / (len(wa) + len(wb))


def similarity(a: str, b: str) -> float:
    """F1 of the two statements' content-word sets; when either has no content word, F1
    of all their words (so `"F"` against `"F"` is 1). 0 when either is empty."""
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb:
        return _f1(all_words(a), all_words(b))
    return _f1(wa, wb)


def short_value(text: str) -> str | None:
    """A statement of at most `SHORT_VALUE_WORDS` words as a value (abbreviations expanded),
    else None."""
    words = _folded(text).split()
    if not words or len(words) > SHORT_VALUE_WORDS:
        return None
    return " ".join(VALUE_SYNONYMS.get(w, w) for w in words)


def assign(weights: FloatArray, agree: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The optimal one-to-one pairing of rows and columns: as many agreeing pairs as
    possible, then the largest total weight (weights in [0, 1]). Pairs in row order."""
    if not agree.any():
        return []
    bonus = float(min(agree.shape)) + 1.0
    value = np.where(agree, bonus + np.clip(weights, 0.0, 1.0), 0.0)
    rows, cols = linear_sum_assignment(value, maximize=True)
    return [(int(i), int(j)) for i, j in zip(rows, cols, strict=True) if agree[i, j]]


StatementSimilarity = Callable[[Sequence[str], Sequence[str]], FloatArray]
"""Statements a (n) and b (m) -> their n x m similarity matrix (cosines, in [-1, 1])."""


@dataclass(frozen=True)
class Matcher:
    """A matching rule: when two records agree, and how similar they are."""

    name: str
    threshold: float
    embed_similarity: StatementSimilarity | None = None
    """The meaning matcher's statement similarity (None: the lexical matcher)."""

    def field_key(self, text: str) -> str:
        return norm_field(text) if self.embed_similarity is None else field_group(text)

    def scores(
        self, pred: Sequence[Record], gold: Sequence[Record]
    ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """The similarity of every (pred, gold) pair and whether the pair agrees."""
        sims = np.zeros((len(pred), len(gold)))
        fields = np.array(
            [[self.field_key(p[0]) == self.field_key(g[0]) for g in gold] for p in pred],
            dtype=bool,
        ).reshape(len(pred), len(gold))
        if self.embed_similarity is None:
            for i, j in zip(*np.nonzero(fields), strict=True):
                sims[i, j] = similarity(pred[i][1], gold[j][1])
            return sims, fields & (sims >= self.threshold)
        values_p = [short_value(s) for _, s in pred]
        values_g = [short_value(s) for _, s in gold]
        pairs = [
            (int(i), int(j))
            for i, j in zip(*np.nonzero(fields), strict=True)
            if values_p[i] is None or values_g[j] is None
        ]
        if pairs:
            rows = sorted({i for i, _ in pairs})
            cols = sorted({j for _, j in pairs})
            got = self.embed_similarity([pred[i][1] for i in rows], [gold[j][1] for j in cols])
            at_r, at_c = {i: k for k, i in enumerate(rows)}, {j: k for k, j in enumerate(cols)}
            for i, j in pairs:
                sims[i, j] = float(got[at_r[i], at_c[j]])
        for i, j in zip(*np.nonzero(fields), strict=True):
            if values_p[i] is not None and values_g[j] is not None:
                sims[i, j] = float(values_p[i] == values_g[j])
            elif _folded(pred[i][1]) == _folded(gold[j][1]):
                sims[i, j] = 1.0
        return sims, fields & (sims >= self.threshold) & (sims > 0)

    def match(self, pred: Sequence[Record], gold: Sequence[Record]) -> list[tuple[int, int, float]]:
        """One-to-one optimal matching: (pred index, gold index, similarity) per pair."""
        if not pred or not gold:
            return []
        sims, agree = self.scores(pred, gold)
        return [(i, j, float(sims[i, j])) for i, j in assign(sims, agree)]


def lexical(threshold: float = LEXICAL_THRESHOLD) -> Matcher:
    """The strict matcher: equal normalised fields, content-word F1 >= threshold."""
    return Matcher("lexical", threshold)


def meaning(similar: StatementSimilarity, threshold: float = MEANING_THRESHOLD) -> Matcher:
    """The meaning matcher: field groups, statement similarity `similar` >= threshold."""
    return Matcher("meaning", threshold, similar)


MatcherLike = Matcher | float
"""A matcher, or a threshold for the lexical one."""


def _matcher(m: MatcherLike) -> Matcher:
    return m if isinstance(m, Matcher) else lexical(m)


def match(
    pred: Sequence[Record], gold: Sequence[Record], matcher: MatcherLike
) -> list[tuple[int, int, float]]:
    """One-to-one optimal matching: (pred index, gold index, similarity) per matched pair."""
    return _matcher(matcher).match(pred, gold)


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


def count(pred: Sequence[Record], gold: Sequence[Record], matcher: MatcherLike) -> Counts:
    """The counts of matching `pred` against `gold`."""
    return Counts(len(match(pred, gold, matcher)), len(pred), len(gold))


def count_all(
    pred: Mapping[str, Sequence[Record]],
    gold: Mapping[str, Sequence[Record]],
    matcher: MatcherLike,
) -> dict[str, Counts]:
    """Counts per kind (profile, persona) and pooled ("all")."""
    out = {k: count(pred.get(k, ()), gold.get(k, ()), matcher) for k in KINDS}
    out["all"] = out["profile"] + out["persona"]
    return out


def pairwise_f1(
    outputs: Sequence[Mapping[str, Sequence[Record]]], matcher: MatcherLike
) -> list[float]:
    """Pooled F1 of every pair of outputs (e.g. repeated runs on one subject), pair by pair:
    (0, 1), (0, 2), ..., (1, 2), ... The mean is the runs' agreement."""
    return [
        count_all(a, b, matcher)["all"].f1 for i, a in enumerate(outputs) for b in outputs[i + 1 :]
    ]


# -- what matched claims carry besides their statement ----------------------------------------

CLAIM_METRICS = ("confidence error", "window agreement", "evidence agreement")
PERSONA_METRICS = ("evidence agreement", "hypothesis agreement")


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """|a & b| / |a | b| of two id lists; NaN when both are empty (nothing to compare)."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else math.nan


def window_agreement(
    a: tuple[datetime | None, datetime | None],
    b: tuple[datetime | None, datetime | None],
    span: tuple[datetime, datetime] | None,
) -> float:
    """Overlap of two validity windows (from, to): the length of their intersection over
    that of their union, an open end standing for the edge of `span` (the history's first
    and last timestamps). Two open windows agree (1); with no span, or windows of no
    length, the windows agree when their ends are equal."""
    if a == b:
        return 1.0
    if span is None:
        return 0.0
    lo, hi = span
    a0, a1 = a[0] or lo, a[1] or hi
    b0, b1 = b[0] or lo, b[1] or hi
    union = (max(a1, b1) - min(a0, b0)).total_seconds()
    if union <= 0:
        return float((a0, a1) == (b0, b1))
    inter = max(0.0, (min(a1, b1) - max(a0, b0)).total_seconds())
    return inter / union


def _naive(t: datetime | None) -> datetime | None:
    return None if t is None else t.replace(tzinfo=None)


def claim_agreement(
    pred: ProfileClaim, gold: ProfileClaim, span: tuple[datetime, datetime] | None
) -> dict[str, float]:
    """How far a matched pair of profile claims agree beyond their statements."""
    return {
        "confidence error": abs(pred.confidence - gold.confidence),
        "window agreement": window_agreement(
            (_naive(pred.valid_from), _naive(pred.valid_to)),
            (_naive(gold.valid_from), _naive(gold.valid_to)),
            span,
        ),
        "evidence agreement": jaccard(pred.evidence_ids, gold.evidence_ids),
    }


def persona_agreement(pred: PersonaEntry, gold: PersonaEntry) -> dict[str, float]:
    """How far a matched pair of persona entries agree beyond their statements."""
    return {
        "evidence agreement": jaccard(pred.grounds, gold.grounds),
        "hypothesis agreement": float(pred.hypothesis == gold.hypothesis),
    }
