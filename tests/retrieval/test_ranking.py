"""Ranking from scores, future masking, the score baselines and the per-probe adapter."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dialogbench.data.model import Message, Subject
from dialogbench.retrieval import baselines
from dialogbench.retrieval.base import (
    BatchRetriever,
    Probe,
    Rankings,
    _PerProbe,
    as_batch,
    reference_matrix,
)
from dialogbench.retrieval.baselines import (
    BrokenOracle,
    OffsetOracle,
    OracleRetriever,
    RandomPositionOracle,
    RandomRetriever,
    RecencyRetriever,
    RecencyUserRetriever,
    ScoreRetriever,
    donor_for,
    rank_scores,
)
from dialogbench.retrieval.bm25 import rank_sparse
from dialogbench.stats.metrics import hit_at

INF = math.inf
SCORE_VALUES = [-INF, 0.0, 0.5, 1.0, 2.0, 3.0, -1.0]  # few values: many ties


def make_subject(n: int, sid: str = "s1") -> Subject:
    """n messages alternating between 'ann' (user) and 'bot' (assistant)."""
    return Subject(
        id=sid,
        messages=[
            Message(
                id=f"m{i}",
                position=i,
                speaker="ann" if i % 2 == 0 else "bot",
                role="user" if i % 2 == 0 else "assistant",
                text=f"message number {i}",
            )
            for i in range(n)
        ],
        speakers=["ann"],
    )


def make_probe(
    pid: str,
    cutoff: int,
    refs: Sequence[int] = (),
    speakers: Sequence[str] = ("ann",),
    sid: str = "s1",
) -> Probe:
    return Probe(
        id=pid,
        subject_id=sid,
        kind="question",
        text="what",
        cutoff=cutoff,
        reference_positions=tuple(sorted(refs)),
        speakers=tuple(speakers),
    )


def brute_order(row: Sequence[float], cutoff: int) -> list[int]:
    """Candidates before the cutoff with a finite score, best first, ties to the later one."""
    cands = [c for c in range(len(row)) if c < cutoff and row[c] != -INF]
    return sorted(cands, key=lambda c: (-row[c], -c))


def check_against_brute(
    got: Rankings, scores: np.ndarray, probes: Sequence[Probe], depth: int
) -> None:
    refs = reference_matrix(probes)
    assert got.top.shape == (len(probes), depth)
    assert got.ref_ranks.shape == refs.shape
    for i, p in enumerate(probes):
        order = brute_order(list(scores[i]), p.cutoff)
        want_top = (order + [-1] * depth)[:depth]
        assert got.top[i].tolist() == want_top
        for j in range(refs.shape[1]):
            r = int(refs[i, j])
            if r < 0:
                assert math.isnan(got.ref_ranks[i, j])
            elif r in order:
                assert got.ref_ranks[i, j] == order.index(r) + 1
            else:
                assert got.ref_ranks[i, j] == INF


@st.composite
def scored_probes(draw: st.DrawFn) -> tuple[np.ndarray, list[Probe], int]:
    n = draw(st.integers(1, 12))
    n_probes = draw(st.integers(1, 5))
    scores = np.array(
        [[draw(st.sampled_from(SCORE_VALUES)) for _ in range(n)] for _ in range(n_probes)]
    )
    probes = []
    for i in range(n_probes):
        cutoff = draw(st.integers(0, n))
        # references may lie anywhere, even after the cutoff (then they cannot be retrieved)
        refs = draw(st.lists(st.integers(0, n - 1), max_size=4, unique=True))
        probes.append(make_probe(f"p{i}", cutoff, refs))
    depth = draw(st.integers(1, n + 3))
    return scores, probes, depth


@settings(max_examples=100, deadline=None)
@given(case=scored_probes())
def test_rank_scores_matches_brute_force(case: tuple[np.ndarray, list[Probe], int]) -> None:
    scores, probes, depth = case
    check_against_brute(rank_scores(scores, probes, depth), scores, probes, depth)


@settings(max_examples=50, deadline=None)
@given(case=scored_probes())
def test_rank_scores_in_small_blocks_is_the_same(
    case: tuple[np.ndarray, list[Probe], int],
) -> None:
    scores, probes, depth = case
    whole = rank_scores(scores, probes, depth)
    old = baselines._MAX_CELLS
    baselines._MAX_CELLS = 1  # one probe per block
    try:
        blocked = rank_scores(scores, probes, depth)
    finally:
        baselines._MAX_CELLS = old
    np.testing.assert_array_equal(blocked.top, whole.top)
    np.testing.assert_array_equal(blocked.ref_ranks, whole.ref_ranks)


def test_rank_scores_hand_case() -> None:
    scores = np.array([[1.0, 3.0, 3.0, -INF, 2.0, 9.0]])
    probe = make_probe("p", cutoff=5, refs=(0, 3, 5))
    got = rank_scores(scores, [probe], depth=6)
    # 5 is in the future, 3 is not retrieved; 2 beats 1 on the tie (more recent)
    assert got.top.tolist() == [[2, 1, 4, 0, -1, -1]]
    assert got.ref_ranks.tolist() == [[4.0, INF, INF]]


@settings(max_examples=100, deadline=None)
@given(case=scored_probes(), data=st.data())
def test_rank_sparse_agrees_with_rank_scores(
    case: tuple[np.ndarray, list[Probe], int], data: st.DataObject
) -> None:
    _, probes, depth = case
    n = case[0].shape[1]
    dense = np.array(
        [
            [
                data.draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.5])) if c < p.cutoff else 0.0
                for c in range(n)
            ]
            for p in probes
        ]
    )
    sparse = sp.csr_matrix(dense)  # zeros are absent, i.e. not retrieved
    got = rank_sparse(sparse, probes, depth)
    want = rank_scores(np.where(dense > 0, dense, -INF), probes, depth)
    np.testing.assert_array_equal(got.top, want.top)
    np.testing.assert_array_equal(got.ref_ranks, want.ref_ranks)


def test_empty_subject_ranks_nothing() -> None:
    subject = make_subject(0)
    probes = [make_probe("a", 0), make_probe("b", 0)]
    for retriever in (RecencyRetriever(), RandomRetriever(), OracleRetriever(), BrokenOracle()):
        got = retriever.rank(subject, probes, depth=3)
        assert got.top.tolist() == [[-1, -1, -1], [-1, -1, -1]]
        assert np.isnan(got.ref_ranks).all()


def test_rank_sparse_with_no_entries() -> None:
    probes = [make_probe("a", 3, (0, 2)), make_probe("b", 4, (1,))]
    got = rank_sparse(sp.csr_matrix((2, 5)), probes, 3)
    assert got.top.tolist() == [[-1, -1, -1], [-1, -1, -1]]
    np.testing.assert_array_equal(got.ref_ranks, [[INF, INF], [INF, np.nan]])


class FutureLover(ScoreRetriever):
    """Scores later messages higher, so the best ones are always in the future."""

    name = "future-lover"

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> np.ndarray:
        n = len(subject.messages)
        out = np.tile(np.arange(n, dtype=float), (len(probes), 1))
        out[:, -1] = 1e9
        return out


def test_future_messages_are_never_returned() -> None:
    subject = make_subject(20)
    probes = [make_probe(f"p{c}", c, (c - 1,) if c else ()) for c in range(0, 20, 3)]
    got = FutureLover().rank(subject, probes, depth=25)
    for i, p in enumerate(probes):
        row = got.top[i]
        assert set(row[row >= 0].tolist()) == set(range(p.cutoff))
        assert (row < p.cutoff).all()
    probe = make_probe("late", 10, (5, 12, 19))
    got = FutureLover().rank(subject, [probe], depth=5)
    assert got.top.tolist() == [[9, 8, 7, 6, 5]]
    assert got.ref_ranks.tolist() == [[5.0, INF, INF]]


def test_recency_returns_the_last_k_newest_first() -> None:
    subject = make_subject(12)
    probes = [make_probe("a", 10, (2, 9)), make_probe("b", 3, (0,)), make_probe("c", 0)]
    got = RecencyRetriever().rank(subject, probes, depth=4)
    assert got.top.tolist() == [[9, 8, 7, 6], [2, 1, 0, -1], [-1, -1, -1, -1]]
    np.testing.assert_array_equal(got.ref_ranks, [[8.0, 1.0], [3.0, np.nan], [np.nan, np.nan]])


def test_recency_user_puts_the_probe_speakers_first() -> None:
    subject = make_subject(10)  # ann at even positions, bot at odd ones
    probes = [
        make_probe("ann", 9, (1, 2), speakers=("ann",)),
        make_probe("bot", 9, (1, 2), speakers=("bot",)),
        make_probe("both", 9, (1, 2), speakers=("ann", "bot")),
        make_probe("nobody", 9, (1, 2), speakers=()),
    ]
    got = RecencyUserRetriever().rank(subject, probes, depth=9)
    assert got.top[0].tolist() == [8, 6, 4, 2, 0, 7, 5, 3, 1]
    assert got.top[1].tolist() == [7, 5, 3, 1, 8, 6, 4, 2, 0]
    assert got.top[2].tolist() == list(range(8, -1, -1))
    assert got.top[3].tolist() == list(range(8, -1, -1))
    assert got.ref_ranks[0].tolist() == [9.0, 4.0]
    assert got.ref_ranks[1].tolist() == [4.0, 8.0]


def test_oracle_ranks_the_references_first() -> None:
    subject = make_subject(30)
    probes = [
        make_probe("a", 20, (3, 7, 19)),
        make_probe("b", 5, (0,)),
        make_probe("c", 30, (12, 29)),
        make_probe("d", 10, (4, 15)),  # one reference in the future
    ]
    got = OracleRetriever().rank(subject, probes, depth=5)
    assert (hit_at(got.ref_ranks, 1) == 1.0).all()
    assert got.top[0].tolist() == [19, 7, 3, -1, -1]
    assert got.top[1].tolist() == [0, -1, -1, -1, -1]
    assert got.top[3].tolist() == [4, -1, -1, -1, -1]
    np.testing.assert_array_equal(got.ref_ranks[3], [1.0, INF, np.nan])


@settings(max_examples=100, deadline=None)
@given(
    sets=st.lists(st.sets(st.integers(0, 12), max_size=4), min_size=1, max_size=7),
    cutoff=st.integers(0, 13),
    data=st.data(),
)
def test_donor_for_picks_the_first_later_disjoint_set(
    sets: list[set[int]], cutoff: int, data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(sets) - 1))

    def ok(j: int) -> bool:
        return j != i and bool(sets[j]) and not (sets[j] & sets[i]) and min(sets[j]) < cutoff

    later = [(i + s) % len(sets) for s in range(1, len(sets))]
    want = next((j for j in later if ok(j)), None)
    assert donor_for(i, sets, cutoff) == want


def test_broken_oracle_never_hits() -> None:
    subject = make_subject(40)
    probes = [
        make_probe("a", 20, (3, 7)),
        make_probe("b", 25, (7, 10)),  # overlaps a
        make_probe("c", 30, (12, 29)),
        make_probe("d", 40, (3, 12)),  # overlaps a and c
        make_probe("e", 8, (1,)),
    ]
    broken = BrokenOracle()
    got = broken.rank(subject, probes, depth=10)
    assert (got.ref_ranks[~np.isnan(got.ref_ranks)] == INF).all()
    assert (hit_at(got.ref_ranks, 10) == 0.0).all()
    # donors: a -> c (b overlaps a), b -> c, c -> e (d overlaps c), d -> e, e -> a;
    # only the donor's references before the probe's cutoff are used
    assert got.top[0].tolist()[:2] == [12, -1]  # 29 is after a's cutoff
    assert got.top[1].tolist()[:2] == [12, -1]
    assert got.top[2].tolist()[:2] == [1, -1]
    assert got.top[3].tolist()[:2] == [1, -1]
    assert got.top[4].tolist()[:3] == [7, 3, -1]
    for i, p in enumerate(probes):
        assert not set(got.top[i].tolist()) & set(p.reference_positions)


def test_offset_oracle_shifts_references_cyclically() -> None:
    subject = make_subject(30)
    probes = [make_probe("a", 20, (3, 15)), make_probe("b", 0)]
    got = OffsetOracle(offset=5).rank(subject, probes, depth=3)
    assert got.top[0].tolist() == [18, 10, -1]  # (3 - 5) % 20 = 18, 15 - 5 = 10
    assert got.top[1].tolist() == [-1, -1, -1]


def test_random_position_oracle_only_returns_candidates() -> None:
    subject = make_subject(50)
    probes = [make_probe(f"p{c}", c, tuple(range(max(0, c - 4), c))) for c in range(0, 50, 5)] + [
        make_probe("future-refs", 3, (0, 1, 2, 10, 20))
    ]
    got = RandomPositionOracle(seed=1).rank(subject, probes, depth=8)
    for i, p in enumerate(probes):
        row = got.top[i][got.top[i] >= 0]
        assert len(row) == min(len(p.reference_positions), p.cutoff)
        assert len(set(row.tolist())) == len(row)
        assert (row < p.cutoff).all()
    again = RandomPositionOracle(seed=1).rank(subject, probes, depth=8)
    np.testing.assert_array_equal(again.top, got.top)


def test_random_is_a_deterministic_permutation_of_the_candidates() -> None:
    subject = make_subject(25)
    probes = [make_probe(f"p{c}", c, (c - 1,) if c else ()) for c in range(0, 25, 4)]
    got = RandomRetriever(seed=3).rank(subject, probes, depth=30)
    for i, p in enumerate(probes):
        row = got.top[i]
        assert sorted(row[row >= 0].tolist()) == list(range(p.cutoff))
    same = RandomRetriever(seed=3).rank(subject, probes, depth=30)
    np.testing.assert_array_equal(same.top, got.top)
    np.testing.assert_array_equal(same.ref_ranks, got.ref_ranks)
    other = RandomRetriever(seed=4).rank(subject, probes, depth=30)
    assert not np.array_equal(other.top, got.top)


def test_random_does_not_depend_on_probe_order_or_batching() -> None:
    subject = make_subject(40)
    probes = [make_probe(f"p{c}", c, (c // 2,)) for c in range(5, 40, 5)]
    whole = RandomRetriever(seed=0).rank(subject, probes, depth=10)
    rev = RandomRetriever(seed=0).rank(subject, probes[::-1], depth=10)
    np.testing.assert_array_equal(rev.top[::-1], whole.top)
    np.testing.assert_array_equal(rev.ref_ranks[::-1], whole.ref_ranks)
    for i, p in enumerate(probes):
        alone = RandomRetriever(seed=0).rank(subject, [p], depth=10)
        np.testing.assert_array_equal(alone.top[0], whole.top[i])
    old = baselines._MAX_CELLS
    baselines._MAX_CELLS = 1  # ScoreRetriever.rank: one probe per block
    try:
        blocked = RandomRetriever(seed=0).rank(subject, probes, depth=10)
    finally:
        baselines._MAX_CELLS = old
    np.testing.assert_array_equal(blocked.top, whole.top)
    np.testing.assert_array_equal(blocked.ref_ranks, whole.ref_ranks)
    # another subject (same messages, other id) gets other orders
    moved = RandomRetriever(seed=0).rank(make_subject(40, "s2"), probes, depth=10)
    assert not np.array_equal(moved.top, whole.top)


def test_random_hit_rate_is_near_its_expectation() -> None:
    subject = make_subject(20)
    probes = [make_probe(f"p{i}", 20, (0, 1)) for i in range(2000)]
    got = RandomRetriever(seed=0).rank(subject, probes, depth=5)
    expected = 1 - math.comb(18, 5) / math.comb(20, 5)  # 0.447
    assert abs(hit_at(got.ref_ranks, 5).mean() - expected) < 0.05


class ListRetriever:
    """A simple-protocol retriever returning a fixed list (or a function of the history)."""

    name = "listed"

    def __init__(self, answer: Sequence[str] | None = None) -> None:
        self.answer = answer
        self.seen: list[tuple[list[str], str, int]] = []

    def retrieve(self, history: Sequence[Message], probe: Probe, k: int) -> Sequence[str]:
        self.seen.append(([m.id for m in history], probe.id, k))
        if self.answer is not None:
            return self.answer
        return [m.id for m in reversed(history)]  # recency


def test_as_batch_adapts_the_simple_protocol() -> None:
    inner = ListRetriever()
    batch = as_batch(inner)
    assert isinstance(batch, _PerProbe)
    assert isinstance(batch, BatchRetriever)
    assert batch.name == "listed"
    subject = make_subject(10)
    probes = [make_probe("a", 6, (1, 5)), make_probe("b", 2, (0,)), make_probe("c", 0, (3,))]
    got = batch.rank(subject, probes, depth=3)
    assert inner.seen == [
        ([f"m{i}" for i in range(6)], "a", 3),
        (["m0", "m1"], "b", 3),
        ([], "c", 3),
    ]
    assert got.top.tolist() == [[5, 4, 3], [1, 0, -1], [-1, -1, -1]]
    # 1 is retrieved by recency, but past depth 3: not retrieved
    np.testing.assert_array_equal(got.ref_ranks, [[INF, 1.0], [2.0, np.nan], [INF, np.nan]])
    want = RecencyRetriever().rank(subject, probes[:2], depth=3)
    np.testing.assert_array_equal(got.top[:2], want.top)


def test_per_probe_drops_duplicates_and_truncates() -> None:
    subject = make_subject(10)
    batch = as_batch(ListRetriever(["m3", "m3", "m1", "m3", "m0", "m2"]))
    got = batch.rank(subject, [make_probe("a", 8, (0, 2))], depth=3)
    assert got.top.tolist() == [[3, 1, 0]]
    assert got.ref_ranks.tolist() == [[3.0, INF]]


@pytest.mark.parametrize("bad", ["m7", "m9", "nope"])
def test_per_probe_rejects_ids_outside_the_history(bad: str) -> None:
    subject = make_subject(10)
    batch = as_batch(ListRetriever(["m1", bad]))
    with pytest.raises(ValueError, match=rf"returned '{bad}' for probe 'a'.*before the probe"):
        batch.rank(subject, [make_probe("a", 7, (1,))], depth=5)


def test_as_batch_passes_batch_retrievers_through_and_rejects_others() -> None:
    oracle = OracleRetriever()
    assert as_batch(oracle) is oracle

    class Nameless:
        def retrieve(self, history: Sequence[Message], probe: Probe, k: int) -> list[str]:
            return []

    with pytest.raises(TypeError, match="neither"):
        as_batch(Nameless())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        as_batch(object())  # type: ignore[arg-type]


def test_reference_matrix_pads_with_minus_one() -> None:
    probes = [make_probe("a", 5, (3, 1)), make_probe("b", 5), make_probe("c", 5, (4,))]
    assert reference_matrix(probes).tolist() == [[1, 3], [-1, -1], [4, -1]]
    assert reference_matrix([make_probe("a", 5)]).shape == (1, 1)
