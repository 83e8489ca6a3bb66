"""Cohen's and Fleiss' kappa: hand-computed cases, scikit-learn, a brute-force Fleiss, the
bootstrap weights against recomputing on the resampled items."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score  # type: ignore[import-untyped]

from dialogbench.stats.bootstrap import resample_counts
from dialogbench.stats.kappa import cohen_kappa, fleiss_kappa


def test_cohen_by_hand() -> None:
    # 10 items, yes/no: both yes 4, both no 3, a yes b no 2, a no b yes 1.
    a = [1, 1, 1, 1, 0, 0, 0, 1, 1, 0]
    b = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    # p_o = 0.7; a says yes 6/10, b 5/10: p_e = .6*.5 + .4*.5 = 0.5; kappa = 0.2/0.5
    assert cohen_kappa(a, b)[0] == pytest.approx(0.4)


def test_cohen_perfect_and_undefined() -> None:
    assert cohen_kappa([1, 2, 3], [1, 2, 3])[0] == pytest.approx(1.0)
    assert math.isnan(cohen_kappa([5, 5, 5], [5, 5, 5])[0])  # chance agreement is total


@settings(max_examples=80, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=30))
def test_cohen_matches_scikit_learn(pairs: list[tuple[int, int]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    assume(len(set(a) | set(b)) > 1)
    ours = cohen_kappa(a, b)[0]
    oracle = cohen_kappa_score(a, b)
    if math.isnan(oracle):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(oracle, abs=1e-12)


def fleiss_brute(ratings: list[list[int]]) -> float:
    """Fleiss (1971) written out loop by loop: ratings is raters x items."""
    m, n = len(ratings), len(ratings[0])
    cats = sorted({x for row in ratings for x in row})
    counts = [[sum(1 for r in range(m) if ratings[r][i] == c) for c in cats] for i in range(n)]
    p_i = [(sum(x * x for x in row) - m) / (m * (m - 1)) for row in counts]
    p_j = [sum(counts[i][j] for i in range(n)) / (n * m) for j in range(len(cats))]
    p_bar, p_e = sum(p_i) / n, sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e)


def test_fleiss_by_hand() -> None:
    # 3 raters, 4 items: unanimous, unanimous, 2-1, 2-1 over two categories.
    r = [[1, 0, 1, 0], [1, 0, 1, 1], [1, 0, 0, 1]]
    # P_i = 1, 1, 1/3, 1/3 -> 2/3; p(1) = 7/12, p(0) = 5/12 -> p_e = 74/144
    expected = (2 / 3 - 74 / 144) / (1 - 74 / 144)
    assert fleiss_kappa(r)[0] == pytest.approx(expected)
    assert fleiss_brute(r) == pytest.approx(expected)


def test_fleiss_published_example() -> None:
    # Fleiss (1971) / Wikipedia: 10 subjects, 14 raters, 5 categories -> 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    ratings = np.array([[c for c, n in enumerate(row) for _ in range(n)] for row in table]).T
    assert round(float(fleiss_kappa(ratings)[0]), 3) == 0.210


@settings(max_examples=60, deadline=None)
@given(data=st.data(), m=st.integers(2, 5), n=st.integers(2, 12))
def test_fleiss_matches_brute_force(data: st.DataObject, m: int, n: int) -> None:
    r = [data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)) for _ in range(m)]
    assume(len({x for row in r for x in row}) > 1)
    assert fleiss_kappa(r)[0] == pytest.approx(fleiss_brute(r), abs=1e-12)


def test_two_raters_fleiss_is_not_cohen_but_close() -> None:
    a, b = [1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 1, 1]
    # Fleiss pools the marginals (Scott's pi for two raters); equal marginals -> equal.
    assert fleiss_kappa([a, b])[0] == pytest.approx(cohen_kappa(a, b)[0])


def test_weights_equal_recomputing_on_each_resample() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 3, 15), rng.integers(0, 3, 15)
    c = rng.integers(0, 3, 15)
    w = resample_counts(15, 20, np.random.default_rng(0))
    cohen, fleiss = cohen_kappa(a, b, w), fleiss_kappa([a, b, c], w)
    for row, k_c, k_f in zip(w, cohen, fleiss, strict=True):
        drawn = list(itertools.chain.from_iterable([i] * int(k) for i, k in enumerate(row)))
        sa, sb, sc = a[drawn], b[drawn], c[drawn]
        if len(set(sa) | set(sb)) > 1:
            assert k_c == pytest.approx(cohen_kappa_score(sa, sb), abs=1e-12)
        assert k_f == pytest.approx(fleiss_brute([list(sa), list(sb), list(sc)]), abs=1e-12)


def test_missing_ratings_are_refused() -> None:
    with pytest.raises(ValueError, match="missing"):
        cohen_kappa([1, float("nan")], [1, 2])
    with pytest.raises(ValueError, match="two raters"):
        fleiss_kappa([[1, 2, 3]])
