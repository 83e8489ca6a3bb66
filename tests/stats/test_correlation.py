"""Pearson and Spearman: hand-computed cases, scipy's pearsonr / spearmanr (r and p), and
the bootstrap weights against recomputing on the resampled pairs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from dialogbench.stats.bootstrap import resample_counts
from dialogbench.stats.correlation import p_value, pearson, spearman


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
    assert math.isnan(p_value(float("nan"), 10)) and math.isnan(p_value(0.5, 2))


@settings(max_examples=80, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=3, max_size=40))
def test_matches_scipy(pairs: list[tuple[int, int]]) -> None:
    x, y = np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float)
    assume(x.std() > 0 and y.std() > 0)
    r, rho = pearson(x, y)[0], spearman(x, y)[0]
    want_r, want_rho = stats.pearsonr(x, y), stats.spearmanr(x, y)
    assert r == pytest.approx(want_r.statistic, abs=1e-9)
    assert rho == pytest.approx(want_rho.statistic, abs=1e-9)
    assert p_value(r, len(x)) == pytest.approx(want_r.pvalue, abs=1e-6)
    assert p_value(rho, len(x)) == pytest.approx(want_rho.pvalue, abs=1e-6)


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
