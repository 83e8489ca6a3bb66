"""Retrieval metrics against plain-Python definitions over full ranked lists."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dialogbench.stats.metrics import (
    best_rank,
    hit_at,
    metric_table,
    random_hit_expectation,
    recall_at,
    reciprocal_rank,
)

INF, NAN = math.inf, math.nan


@st.composite
def retrieved_probes(draw: st.DrawFn) -> list[tuple[list[int], list[int]]]:
    """Probes as (what the retriever returned best first, the reference set).

    The retriever ranks a random permutation of N candidates and returns its first L.
    """
    n_probes = draw(st.integers(1, 6))
    probes = []
    for _ in range(n_probes):
        n = draw(st.integers(1, 15))
        ranking = draw(st.permutations(list(range(n))))
        returned = ranking[: draw(st.integers(0, n))]
        refs = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
        probes.append((list(returned), refs))
    return probes


def ranks_of(probes: list[tuple[list[int], list[int]]]) -> np.ndarray:
    """The (probes x references) ranks array, built the way the library documents it."""
    width = max(len(refs) for _, refs in probes)
    out = np.full((len(probes), width), NAN)
    for i, (returned, refs) in enumerate(probes):
        for j, r in enumerate(refs):
            out[i, j] = returned.index(r) + 1 if r in returned else INF
    return out


def brute_hit(returned: list[int], refs: list[int], k: int) -> float:
    return float(any(d in refs for d in returned[:k]))


def brute_rr(returned: list[int], refs: list[int]) -> float:
    for i, d in enumerate(returned):
        if d in refs:
            return 1.0 / (i + 1)
    return 0.0


def brute_recall(returned: list[int], refs: list[int], k: int) -> float:
    return len(set(returned[:k]) & set(refs)) / len(refs)


@settings(max_examples=100, deadline=None)
@given(probes=retrieved_probes(), k=st.integers(1, 16))
def test_metrics_match_brute_force(probes: list[tuple[list[int], list[int]]], k: int) -> None:
    ranks = ranks_of(probes)
    np.testing.assert_array_equal(hit_at(ranks, k), [brute_hit(d, r, k) for d, r in probes])
    np.testing.assert_allclose(
        reciprocal_rank(ranks), [brute_rr(d, r) for d, r in probes], rtol=0, atol=1e-15
    )
    np.testing.assert_allclose(
        recall_at(ranks, k), [brute_recall(d, r, k) for d, r in probes], rtol=0, atol=1e-15
    )
    best = [min((d.index(x) + 1 for x in r if x in d), default=INF) for d, r in probes]
    np.testing.assert_array_equal(best_rank(ranks), best)
    table = metric_table(ranks, (1, k))
    assert set(table) == {f"hit@{k}", "hit@1", "mrr", f"mrr@{max(1, k)}", f"recall@{k}", "recall@1"}
    np.testing.assert_allclose(
        table[f"mrr@{max(1, k)}"],
        [brute_rr(d[: max(1, k)], r) for d, r in probes],
        rtol=0,
        atol=1e-15,
    )
    np.testing.assert_array_equal(table[f"hit@{k}"], hit_at(ranks, k))
    np.testing.assert_array_equal(table["mrr"], reciprocal_rank(ranks))
    np.testing.assert_array_equal(table["recall@1"], recall_at(ranks, 1))


@settings(max_examples=50, deadline=None)
@given(probes=retrieved_probes())
def test_metrics_are_monotone_in_k(probes: list[tuple[list[int], list[int]]]) -> None:
    ranks = ranks_of(probes)
    for k in range(1, 16):
        assert np.all(hit_at(ranks, k) <= hit_at(ranks, k + 1))
        assert np.all(recall_at(ranks, k) <= recall_at(ranks, k + 1))
        assert np.all(recall_at(ranks, k) <= hit_at(ranks, k))


def test_hand_computed_cases() -> None:
    ranks = np.array(
        [
            [3.0, 1.0, NAN],  # best rank 1
            [INF, 4.0, 2.0],  # best rank 2
            [INF, NAN, NAN],  # not retrieved
            [5.0, 7.0, 9.0],  # best rank 5
        ]
    )
    np.testing.assert_array_equal(best_rank(ranks), [1.0, 2.0, INF, 5.0])
    np.testing.assert_array_equal(hit_at(ranks, 1), [1, 0, 0, 0])
    np.testing.assert_array_equal(hit_at(ranks, 2), [1, 1, 0, 0])
    np.testing.assert_array_equal(hit_at(ranks, 5), [1, 1, 0, 1])
    np.testing.assert_allclose(reciprocal_rank(ranks), [1.0, 0.5, 0.0, 0.2])
    assert reciprocal_rank(ranks).mean() == pytest.approx((1 + 0.5 + 0 + 0.2) / 4)
    np.testing.assert_allclose(recall_at(ranks, 1), [1 / 2, 0, 0, 0])
    np.testing.assert_allclose(recall_at(ranks, 3), [1.0, 1 / 3, 0, 0])
    np.testing.assert_allclose(recall_at(ranks, 8), [1.0, 2 / 3, 0, 2 / 3])
    np.testing.assert_allclose(recall_at(ranks, 100), [1.0, 2 / 3, 0, 1.0])


def test_rank_exactly_k_counts_as_a_hit() -> None:
    ranks = np.array([[10.0], [11.0]])
    np.testing.assert_array_equal(hit_at(ranks, 10), [1, 0])
    np.testing.assert_array_equal(recall_at(ranks, 10), [1, 0])


def exact_random_hit(n: int, m: int, k: int) -> float:
    """1 - C(N-m, k') / C(N, k') with k' = min(k, N): k random picks take all N when k > N."""
    kk = min(k, n)
    return 1.0 - math.comb(n - m, kk) / math.comb(n, kk)


@settings(max_examples=100, deadline=None)
@given(
    cases=st.lists(
        st.integers(0, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
        min_size=1,
        max_size=8,
    ),
    k=st.integers(1, 45),
)
def test_random_hit_expectation_is_exact_combinatorics(
    cases: list[tuple[int, int]], k: int
) -> None:
    n = np.array([c[0] for c in cases], dtype=float)
    m = np.array([c[1] for c in cases], dtype=float)
    got = random_hit_expectation(n, m, k)
    want = [exact_random_hit(a, b, k) for a, b in cases]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_random_hit_expectation_edge_cases() -> None:
    # no references: never a hit, however many are drawn (also when k >= N)
    np.testing.assert_array_equal(
        random_hit_expectation(np.array([0.0, 3.0, 3.0, 10.0]), np.zeros(4), 5), 0.0
    )
    # every candidate is a reference, or k covers the whole history: always a hit
    np.testing.assert_array_equal(
        random_hit_expectation(np.array([4.0, 4.0, 6.0]), np.array([4.0, 1.0, 2.0]), 5), 1.0
    )
    # one reference among N, one draw: 1/N
    np.testing.assert_allclose(random_hit_expectation(np.array([8.0]), np.array([1.0]), 1), 1 / 8)


@pytest.mark.parametrize(("n", "m", "k"), [(20, 3, 5), (50, 1, 10), (7, 2, 3)])
def test_random_hit_expectation_matches_monte_carlo(n: int, m: int, k: int) -> None:
    rng = np.random.default_rng(12345)
    trials = 20000
    order = rng.random((trials, n)).argsort(axis=1)[:, :k]  # k distinct random candidates
    hits = (order < m).any(axis=1).mean()  # references are candidates 0..m-1
    expected = float(random_hit_expectation(np.array([float(n)]), np.array([float(m)]), k)[0])
    se = math.sqrt(expected * (1 - expected) / trials)
    assert abs(hits - expected) < 5 * se + 1e-9
