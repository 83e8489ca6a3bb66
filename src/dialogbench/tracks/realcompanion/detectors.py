"""Memory-need detectors: how likely a probe needs messages from before its recent thread.

Every detector scores a probe on [0, 1] (higher: more likely to need memory). It sees the
probe and, at most, the messages before it (positions < `cutoff`).

lexical          back-reference cues in the probe's own words (no model; see `CUES`)
bm25             how well the best earlier message matches the probe under BM25
model-context    a model reads the last `window` messages and the probe
model-retrieved  a model reads the probe and the `window` messages BM25 ranks highest
model-memory:NAME  (`--memory`) a model reads the probe and what a memory system recalled
                 for it (at most `window` memories, fed the conversation up to the probe)

A model detector's reply that cannot be used after corrections is *unscored* (score None,
raw text and error kept), never scored 0. model-retrieved makes no call, and scores 0, when
BM25 finds no earlier message sharing a word with the probe (nothing to show); so does
model-memory when the system recalls nothing. A probe whose subject the memory system failed
on is unscored, with the error (`memory_error`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from dialogbench.data.model import Subject
from dialogbench.models.structured import Structured
from dialogbench.models.types import ChatMessage
from dialogbench.retrieval.analyzers import WORDS, Analyzer
from dialogbench.retrieval.base import FloatArray, IntArray, Probe
from dialogbench.retrieval.bm25 import STOPWORDS, BM25Index, BM25Params, rank_sparse
from dialogbench.tracks.realcompanion.detection_prompts import (
    MemoryNeed,
    context_messages,
    memory_messages,
    retrieved_messages,
)
from dialogbench.tracks.realcompanion.recall import Shown

_MAX_POSTINGS = 1 << 22  # (probe, posting) pairs BM25 expands per block


@dataclass(frozen=True)
class Scored:
    """One detector's verdict on one probe; `score` None means unscored."""

    score: float | None
    decision: bool | None = None
    """The detector's own yes/no, where it gives one (the model detectors)."""
    detail: dict[str, Any] = field(default_factory=dict)


# -- lexical --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cue:
    """A family of back-reference wordings and how much one match counts."""

    name: str
    weight: float
    pattern: re.Pattern[str]


def _cue(name: str, weight: float, pattern: str) -> Cue:
    return Cue(name, weight, re.compile(pattern, re.IGNORECASE))


CUES: tuple[Cue, ...] = (
    _cue(
        "recall",
        0.6,
        r"\b(?:remember|recall|remind(?:ed)?|you (?:said|told me|asked|mentioned|suggested)"
        r"|i (?:told you|mentioned)|as i (?:said|mentioned)|like i said"
        r"|we (?:talked|spoke|chatted) about)\b",
    ),
    _cue(
        "outcome",
        0.4,
        r"\bhow (?:did|was|were)\b[^.?!]{0,40}?\b(?:go|turn out)\b"
        r"|\b(?:went|turned out|worked out) (?:well|badly|ok|okay|fine|great)\b",
    ),
    _cue(
        "continuation",
        0.3,
        r"\b(?:again|still|anymore|any more|finally|update|so far|turns out|in the end)\b",
    ),
    _cue(
        "temporal",
        0.3,
        r"\b(?:yesterday|last (?:night|week|weekend|month|year|time)|the other day|earlier"
        r"|a while (?:ago|back)|\w+ (?:days|weeks|months|years) ago|previously|recently)\b",
    ),
    _cue(
        "past question",
        0.2,
        r"^\s*(?:when|what|where|who|which|how|why)\b[^?]*\b(?:did|was|were|had)\b",
    ),
)
"""Matched families combine as a noisy-OR: score = 1 - prod(1 - weight), so one explicit
recall cue (0.6) or two weaker ones pass 0.5. A further family, `known name` (weight
`NAME_WEIGHT`), fires when the probe names something capitalised, not at a sentence start
and not a speaker, that occurs earlier in the conversation."""

NAME_WEIGHT = 0.3
CUES_SHA256 = hashlib.sha256(
    json.dumps([[c.name, c.weight, c.pattern.pattern] for c in CUES] + [NAME_WEIGHT]).encode()
).hexdigest()
"""Digest of the cue table: recorded in the manifest, so that new cues start a run afresh."""
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?:^|[.!?]\s+)(\w+)")
_CAPITALISED = re.compile(r"\b[A-Z][\w'-]*\w|\b[A-Z]\b")


def _first_seen(subject: Subject) -> dict[str, int]:
    """Lower-cased word -> position of the first message that uses it."""
    seen: dict[str, int] = {}
    for m in subject.messages:
        for w in _WORD.findall(m.text.lower()):
            seen.setdefault(w, m.position)
    return seen


def _known_names(text: str, cutoff: int, seen: dict[str, int], speakers: set[str]) -> list[str]:
    """Capitalised words, not at a sentence start, not stop words ("I", "The") and not a
    speaker's name or its short form ("Mel" for Melanie), that an earlier message used."""
    starts = {m.start(1) for m in _SENTENCE.finditer(text)}
    names = []
    for m in _CAPITALISED.finditer(text):
        word = m.group().lower()
        if m.start() in starts or word == "i" or word in STOPWORDS or _names(word, speakers):
            continue
        if seen.get(word, cutoff) < cutoff:
            names.append(m.group())
    return names


def _names(word: str, speakers: set[str]) -> bool:
    """Whether `word` is a speaker's name or the start of one (three letters or more)."""
    return word in speakers or (len(word) >= 3 and any(s.startswith(word) for s in speakers))


def lexical_scores(subject: Subject, probes: Sequence[Probe]) -> list[Scored]:
    """The cue scorer: noisy-OR of the cue families a probe's text matches."""
    seen = _first_seen(subject)
    speakers = {w for m in subject.messages for w in _WORD.findall(m.speaker.lower())}
    out = []
    for p in probes:
        hits = {c.name: c.weight for c in CUES if c.pattern.search(p.text)}
        names = _known_names(p.text, p.cutoff, seen, speakers)
        if names:
            hits["known name"] = NAME_WEIGHT
        score = 1.0 - float(np.prod([1.0 - w for w in hits.values()]))
        out.append(Scored(score, detail={"cues": sorted(hits), "names": names}))
    return out


# -- bm25 -----------------------------------------------------------------------------------


def bm25_evidence(
    subject: Subject,
    probes: Sequence[Probe],
    depth: int,
    params: BM25Params | None = None,
    analyzer: Analyzer = WORDS,
) -> tuple[FloatArray, IntArray]:
    """Each probe's BM25 confidence and the positions of its `depth` best earlier messages,
    the texts cut into terms by `analyzer` (`retrieval/analyzers.py`).

    confidence = min(1, best score / sum over the probe's words of idf), with idf from the
    history before the probe (a word absent from it gets the largest idf). A message of
    average length holding each of the probe's words once scores the idf of the words it
    shares, so the confidence is about the share of the probe's information that its best
    earlier message carries; short messages and repeated words can pass 1, which is capped.
    A probe with no history, or no word left after stop words, scores 0.
    """
    params = params or BM25Params()
    index = BM25Index.from_texts([m.text for m in subject.messages], params, analyzer=analyzer)
    cut = analyzer.terms([p.text for p in probes])
    words = [[t for t in ts if t not in STOPWORDS] for ts in cut]
    queries = index.query_matrix(words)
    cutoffs = np.array([p.cutoff for p in probes], dtype=np.int64)
    best = np.zeros(len(probes))
    top = np.full((len(probes), depth), -1, dtype=np.int64)
    work = np.cumsum(index.work(queries, cutoffs))
    lo = 0
    while lo < len(probes):
        base = work[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(work, base + _MAX_POSTINGS, side="right")))
        scores = index.score(queries[lo:hi], cutoffs[lo:hi])
        best[lo:hi] = scores.max(axis=1).toarray().ravel() if scores.nnz else 0.0
        top[lo:hi] = rank_sparse(scores, probes[lo:hi], depth).top
        lo = hi
    mass = _idf_mass(index, queries, cutoffs, np.array([len(w) for w in words]))
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = np.where(mass > 0, np.minimum(1.0, best / mass), 0.0)
    return confidence, top


def _idf(n: FloatArray, df: FloatArray, kind: str) -> FloatArray:
    ratio = (n - df + 0.5) / (df + 0.5)
    out: FloatArray = np.log1p(ratio) if kind == "lucene" else np.maximum(0.0, np.log(ratio))
    return out


def _idf_mass(
    index: BM25Index, queries: sp.csr_matrix, cutoffs: IntArray, n_words: IntArray
) -> FloatArray:
    """Sum of idf over each probe's words (with repeats), in the probe's own history."""
    coo = queries.tocoo()
    qi, qt, count = coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data
    n = cutoffs.astype(np.float64)
    df = np.searchsorted(index.post_key, qt * index.n_docs + cutoffs[qi]) - index.indptr[qt]
    known = np.bincount(qi, weights=count * _idf(n[qi], df.astype(float), index.params.idf))
    known = np.pad(known, (0, len(cutoffs) - len(known)))
    unknown = n_words - np.bincount(qi, weights=count, minlength=len(cutoffs))
    mass: FloatArray = known + unknown * _idf(n, np.zeros_like(n), index.params.idf)
    return np.where(cutoffs > 0, mass, 0.0)


def bm25_scores(
    subject: Subject, probes: Sequence[Probe], depth: int, analyzer: Analyzer = WORDS
) -> list[Scored]:
    """The bm25 detector: its confidence, with the best `depth` earlier messages it found."""
    confidence, top = bm25_evidence(subject, probes, depth, analyzer=analyzer)
    ids = [m.id for m in subject.messages]
    return [
        Scored(float(c), detail={"retrieved": [ids[t] for t in row if t >= 0]})
        for c, row in zip(confidence, top, strict=True)
    ]


# -- model detectors ------------------------------------------------------------------------


def context_prompts(
    subject: Subject, probes: Sequence[Probe], window: int
) -> list[list[ChatMessage]]:
    """Prompts showing each probe after the `window` messages before it."""
    return [
        context_messages(
            subject.messages[max(0, p.cutoff - window) : p.cutoff], p.text, _speaker(p)
        )
        for p in probes
    ]


def retrieved_prompts(
    subject: Subject, probes: Sequence[Probe], window: int, analyzer: Analyzer = WORDS
) -> tuple[list[list[ChatMessage] | None], list[list[str]]]:
    """Prompts showing each probe with its best `window` BM25 matches (in conversation
    order), and those matches' ids. None where BM25 found nothing to show."""
    _, top = bm25_evidence(subject, probes, window, analyzer=analyzer)
    prompts: list[list[ChatMessage] | None] = []
    found_ids: list[list[str]] = []
    for p, row in zip(probes, top, strict=True):
        found = [subject.messages[t] for t in sorted(int(t) for t in row if t >= 0)]
        found_ids.append([m.id for m in found])
        prompts.append(retrieved_messages(found, p.text, _speaker(p)) if found else None)
    return prompts, found_ids


def memory_prompts(probes: Sequence[Probe], recalled: Sequence[Shown | str]) -> list[Scored]:
    """The model-memory detector's placeholders: the prompt to send with the row fields of
    the recall; a final 0 where nothing was recalled; unscored where the system failed."""
    out = []
    for p, got in zip(probes, recalled, strict=True):
        if isinstance(got, str):
            out.append(Scored(None, detail={"memory_error": got}))
        elif not got.messages and not got.notes:
            note = "the memory system recalled nothing"
            out.append(Scored(0.0, False, {**got.fields, "note": note}))
        else:
            prompt = memory_messages(got.messages, got.notes, p.text, _speaker(p))
            out.append(Scored(None, detail={"prompt": prompt, **got.fields}))
    return out


def _speaker(p: Probe) -> str | None:
    return p.speakers[0] if p.kind == "chat" and p.speakers else None


def from_reply(got: Structured[MemoryNeed]) -> Scored:
    """A model detector's `Scored`: likelihood / 10, or unscored with raw text and error."""
    if got.value is None:
        return Scored(None, detail={"raw": got.raw, "error": got.error, "attempts": got.attempts})
    v = got.value
    return Scored(
        v.likelihood / 10.0,
        decision=v.needs_memory,
        detail={"likelihood": v.likelihood, "attempts": got.attempts},
    )
