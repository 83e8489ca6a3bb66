"""Pearson and Spearman: hand-computed cases, scipy's pearsonr / spearmanr (r and p), and
the bootstrap weights against recomputing on the resampled pairs."""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from dialogbench.stats.bootstrap import resample_counts
from dialogbench.stats.correlation import (
    FloatArray,
    pearson,
    pearson_p,
    spearman,
    spearman_p,
    undefined_correlation,
)


def test_by_hand() -> None:
    x, y = [1, 2, 3, 4], [2, 4, 5, 9]
    # mean 2.5 and 5; sxy = 1.5*3 + .5*1 + .5*0 + 1.5*4 = 11; sxx = 5; syy = 9+1+0+16 = 26
    assert pearson(x, y)[0] == pytest.approx(11 / math.sqrt(5 * 26))
    assert spearman(x, y)[0] == pytest.approx(1.0)
    # ties: ranks of [1, 1, 2] are 1.5, 1.5, 3
    assert spearman([1, 1, 2], [1, 2, 3])[0] == pytest.approx(pearson([1.5, 1.5, 3], [1, 2, 3])[0])


def test_constant_is_nan() -> None:
    assert math.isnan(pearson([3, 3, 3], [1, 2, 3])[0])
    assert math.isnan(spearman([1, 2, 3], [0, 0, 0])[0])
    for p in (pearson_p([3, 3, 3], [1, 2, 3]), spearman_p([1, 2, 3], [0, 0, 0])):
        assert math.isnan(p.value) and p.undefined is not None and "constant" in p.undefined


def test_undefined_figures_say_why() -> None:
    assert undefined_correlation([1, 2], [2, 1]) is None
    assert undefined_correlation([1], [2]) == "1 pair: a correlation needs two or more"
    assert undefined_correlation([], []) == "0 pairs: a correlation needs two or more"
    assert (
        undefined_correlation([2, 2], [1, 3])
        == "constant scores from the first rater: no correlation"
    )
    assert (
        undefined_correlation([1, 3], [4, 4])
        == "constant scores from the second rater: no correlation"
    )
    assert (
        undefined_correlation([4, 4], [4, 4]) == "constant scores from both raters: no correlation"
    )
    # 0.1 ten times: a mean that rounds, still constant
    assert undefined_correlation([0.1] * 10, range(10)) is not None


def test_n_2_is_what_scipy_gives() -> None:
    # any two points lie on a line: r = +-1, and Pearson's exact test gives p = 1
    assert pearson([1, 2], [5, 3])[0] == -1.0
    assert pearson_p([1, 2], [5, 3]) == (1.0, None)
    assert stats.pearsonr([1, 2], [5, 3]).pvalue == 1.0
    # Spearman's t-test has n - 2 = 0 degrees of freedom: NaN in scipy, named here
    p = spearman_p([1, 2], [5, 3])
    assert math.isnan(p.value) and math.isnan(stats.spearmanr([1, 2], [5, 3]).pvalue)
    assert p.undefined == "2 pairs: the t-test of rho has no degrees of freedom"


@settings(max_examples=80, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=3, max_size=40))
def test_matches_scipy(pairs: list[tuple[int, int]]) -> None:
    x, y = np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float)
    assume(x.std() > 0 and y.std() > 0)
    r, rho = pearson(x, y)[0], spearman(x, y)[0]
    want_r, want_rho = stats.pearsonr(x, y), stats.spearmanr(x, y)
    assert r == pytest.approx(want_r.statistic, abs=1e-9)
    assert rho == pytest.approx(want_rho.statistic, abs=1e-9)
    for (p, why), want in [(pearson_p(x, y), want_r), (spearman_p(x, y), want_rho)]:
        assert p == pytest.approx(want.pvalue, abs=1e-9) and why is None


def _scipy(test: Any, x: FloatArray, y: FloatArray) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input, n = 2
        result = test(x, y)
    return float(result.statistic), float(result.pvalue)


def _close(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or abs(got - want) <= 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_randomized_against_scipy_at_small_n_ties_and_constants(seed: int) -> None:
    """n = 2 and 3 weighted heavily, a narrow scale (ties), a constant column now and then:
    every r, rho and p is scipy's to 1e-9, and each NaN has its reason."""
    rng = np.random.default_rng(seed)
    seen = {"n2": 0, "n3": 0, "constant": 0, "ties": 0}
    for _ in range(500):
        n = int(rng.choice([2, 2, 3, 3, 4, 5, 8, 20]))
        x = rng.integers(0, int(rng.choice([2, 3, 5, 11])), n).astype(float)
        y = rng.integers(0, int(rng.choice([2, 3, 5, 11])), n).astype(float)
        if rng.random() < 0.1:
            y[:] = y[0]
        if rng.random() < 0.3:
            y = x * float(rng.choice([-1.0, 0.5, 2.0])) + float(rng.integers(-3, 3))
        constant = np.ptp(x) == 0 or np.ptp(y) == 0
        seen["n2"] += n == 2
        seen["n3"] += n == 3
        seen["constant"] += constant
        seen["ties"] += len(set(x)) < n
        for ours, p, test in (
            (pearson, pearson_p, stats.pearsonr),
            (spearman, spearman_p, stats.spearmanr),
        ):
            want_stat, want_p = _scipy(test, x, y)
            got = p(x, y)
            assert _close(float(ours(x, y)[0]), want_stat), (x, y, test)
            assert _close(got.value, want_p), (x, y, test, got, want_p)
            assert (got.undefined is None) == (not math.isnan(want_p)), (x, y, got)
            if constant:
                assert got.undefined is not None and "constant" in got.undefined
    assert min(seen.values()) > 20, seen


def test_weights_equal_recomputing_on_each_resample() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 6, 12).astype(float)
    y = x + rng.integers(-2, 3, 12)
    w = resample_counts(12, 30, np.random.default_rng(1))
    for row, r, rho in zip(w, pearson(x, y, w), spearman(x, y, w), strict=True):
        drawn = list(itertools.chain.from_iterable([i] * int(k) for i, k in enumerate(row)))
        sx, sy = x[drawn], y[drawn]
        if sx.std() == 0 or sy.std() == 0:
            assert math.isnan(r)
            continue
        assert r == pytest.approx(stats.pearsonr(sx, sy).statistic, abs=1e-9)
        assert rho == pytest.approx(stats.spearmanr(sx, sy).statistic, abs=1e-9)
