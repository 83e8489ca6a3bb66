"""Probe sampling: the three strata are sized, seeded and disjoint, each draws from what it
should, and the surface signal equals the documented BM25 formula computed by hand."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from dialogbench.build.sampling import (
    CUE_WEIGHT,
    FAR_THRESHOLD,
    Sizes,
    person_positions,
    sample_strata,
    session_openers,
    surface,
)
from dialogbench.data.model import RECENT_WINDOW, Dataset, Message, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.retrieval.bm25 import tokenize


@pytest.fixture(scope="module")
def sample() -> Dataset:
    return load_dataset("sample")


def test_strata_are_sized_disjoint_and_drawn_from_their_pools(sample: Dataset) -> None:
    picks, warnings = sample_strata(sample, Sizes(30, 12, 8), seed=3)
    assert warnings == []
    counts = Counter(p.stratum for p in picks)
    assert counts == {"proportional": 30, "enriched": 12, "abstention": 8}
    keys = [(p.subject_id, p.position) for p in picks]
    assert len(set(keys)) == len(keys)
    subjects = {s.id: s for s in sample.subjects}
    for p in picks:
        s = subjects[p.subject_id]
        assert p.position in person_positions(s)
        assert p.opener == (p.position in session_openers(s))
        if p.stratum == "abstention":
            assert p.opener
        if p.stratum == "enriched":
            assert not p.opener and p.surface_tier in ("session", "distant")
    assert keys == sorted(keys)


def test_same_seed_same_picks_other_seed_other_picks(sample: Dataset) -> None:
    a, _ = sample_strata(sample, Sizes(), seed=7)
    b, _ = sample_strata(sample, Sizes(), seed=7)
    c, _ = sample_strata(sample, Sizes(), seed=8)
    assert a == b
    assert a != c


def test_a_stratum_short_of_messages_takes_all_and_warns(sample: Dataset) -> None:
    openers = sum(len(session_openers(s)) for s in sample.subjects)
    picks, warnings = sample_strata(sample, Sizes(0, 0, openers + 5), seed=0)
    assert len(picks) == openers
    assert any("abstention stratum asked for" in w for w in warnings)
    none, _ = sample_strata(sample, Sizes(0, 0, 0), seed=0)
    assert none == []


def test_subjects_filter_and_unknown_subject(sample: Dataset) -> None:
    picks, _ = sample_strata(sample, Sizes(10, 5, 3), seed=0, subjects=["tomas"])
    assert {p.subject_id for p in picks} == {"tomas"}
    with pytest.raises(ValueError, match="nobody not in sample"):
        sample_strata(sample, Sizes(), seed=0, subjects=["nobody"])


def test_proportional_is_uniform_over_pooled_messages(sample: Dataset) -> None:
    """Over many seeds each subject's share of the proportional stratum is its share of the
    person's messages (pooled, not per subject)."""
    n = {s.id: len(person_positions(s)) for s in sample.subjects}
    total = sum(n.values())
    got: Counter[str] = Counter()
    runs, size = 50, 80  # 4,000 picks; without replacement within a run, so the bound is loose
    for seed in range(runs):
        picks, _ = sample_strata(sample, Sizes(size, 0, 0), seed=seed)
        got.update(p.subject_id for p in picks)
    for sid, k in n.items():
        expected = runs * size * k / total
        assert abs(got[sid] - expected) < 4 * math.sqrt(expected)


def _brute_far(subject: Subject, p: int, k1: float = 1.5, b: float = 0.75) -> float:
    """The documented far score, with the lucene idf over the history before p, by loops."""
    docs = [tokenize(m.text) for m in subject.messages[:p]]
    query = Counter(tokenize(subject.messages[p].text))
    if not docs or not query:
        return 0.0
    avgdl = sum(map(len, docs)) / len(docs)
    best = 0.0
    for d, doc in enumerate(docs):
        if d >= p - RECENT_WINDOW:
            break
        tf = Counter(doc)
        score = 0.0
        for t, c in query.items():
            df = sum(t in x for x in docs)
            if df == 0 or tf[t] == 0:
                continue
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            norm = tf[t] + k1 * (1 - b + b * len(doc) / avgdl)
            score += c * idf * tf[t] * (k1 + 1) / norm
        best = max(best, score)
    return best / max(1, len(query))


def test_surface_signal_equals_the_formula_by_hand(sample: Dataset) -> None:
    s = sample.subjects[0]
    sig = surface(s)
    for p in list(range(0, 12)) + list(range(40, 246, 17)):
        assert sig.far[p] == pytest.approx(_brute_far(s, p), rel=1e-9, abs=1e-12)
    assert np.array_equal(sig.signal, sig.far + CUE_WEIGHT * sig.cue)
    for p, tier in enumerate(sig.tier):
        if sig.far[p] >= FAR_THRESHOLD:
            assert tier in ("session", "distant")
            b = int(sig.far_best[p])
            assert 0 <= b < p - RECENT_WINDOW
            same = s.messages[b].session == s.messages[p].session
            assert tier == ("session" if same else "distant")
        else:
            assert tier in ("recent", "none")


def test_surface_tier_reads_cues_and_sessions() -> None:
    texts = ["we adopted a greyhound called Biscuit from the shelter"] + [
        f"filler line number {i}" for i in range(12)
    ]
    texts += ["Biscuit the greyhound from the shelter", "do you remember what I said"]
    msgs = [
        Message(id=f"m{i}", position=i, speaker="Ana", text=t, session="a" if i < 6 else "b")
        for i, t in enumerate(texts)
    ]
    sig = surface(Subject(id="s", messages=msgs))
    assert sig.tier[13] == "distant" and sig.far_best[13] == 0
    assert sig.tier[14] == "recent" and sig.cue[14] == 1.0
    assert sig.tier[1] == "none"
