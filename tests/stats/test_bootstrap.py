"""The vectorised percentile bootstrap: point, interval, clusters, NaN cells, coverage."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dialogbench.stats.bootstrap import bootstrap_means


@settings(max_examples=50, deadline=None)
@given(
    values=st.lists(
        st.lists(st.floats(-100, 100), min_size=3, max_size=3), min_size=1, max_size=40
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_point_is_the_mean_and_inside_the_interval(values: list[list[float]], seed: int) -> None:
    v = np.array(values)
    ests = bootstrap_means(v, n_boot=200, seed=seed)
    assert len(ests) == 3
    for j, e in enumerate(ests):
        mean = v[:, j].mean()
        assert e.value == pytest.approx(mean, abs=1e-9)
        assert e.n == len(values)
        assert e.ci_low - 1e-9 <= e.value <= e.ci_high + 1e-9
        assert v[:, j].min() - 1e-9 <= e.ci_low <= e.ci_high <= v[:, j].max() + 1e-9


def test_one_dimensional_input_is_one_column() -> None:
    (e,) = bootstrap_means([1.0, 2.0, 3.0, 6.0], n_boot=100)
    assert e.value == 3.0 and e.n == 4


def test_interval_narrows_with_n() -> None:
    rng = np.random.default_rng(0)
    widths = []
    for n in (50, 500, 5000):
        (e,) = bootstrap_means(rng.normal(size=n), n_boot=1000, seed=1)
        widths.append(e.ci_high - e.ci_low)
    # width ~ 2 * 1.96 / sqrt(n): 0.55, 0.18, 0.055
    assert widths[0] > 2 * widths[1] > 4 * widths[2]
    assert widths[0] == pytest.approx(2 * 1.96 / math.sqrt(50), rel=0.3)


def test_lower_level_gives_a_narrower_interval() -> None:
    v = np.random.default_rng(3).normal(size=300)
    (wide,) = bootstrap_means(v, level=0.95, seed=5)
    (narrow,) = bootstrap_means(v, level=0.5, seed=5)
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high


def test_constant_column_has_zero_width() -> None:
    v = np.column_stack([np.full(30, 0.25), np.random.default_rng(0).random(30)])
    const, varying = bootstrap_means(v, n_boot=300)
    assert const.value == const.ci_low == const.ci_high == 0.25
    assert varying.ci_high > varying.ci_low
    clustered, _ = bootstrap_means(v, [f"s{i % 4}" for i in range(30)], n_boot=300)
    assert clustered.value == clustered.ci_low == clustered.ci_high == 0.25


def test_cluster_interval_is_wider_when_clusters_repeat_one_value() -> None:
    rng = np.random.default_rng(7)
    per_cluster = rng.random(10)
    values = np.repeat(per_cluster, 20)  # 10 clusters of 20 identical items
    clusters = np.repeat([f"subject-{i}" for i in range(10)], 20)
    (items,) = bootstrap_means(values, n_boot=2000, seed=0)
    (clust,) = bootstrap_means(values, clusters, n_boot=2000, seed=0)
    assert items.value == pytest.approx(clust.value)
    # 200 items count as 10 independent observations: about sqrt(20) times wider
    assert clust.ci_high - clust.ci_low > 3 * (items.ci_high - items.ci_low)


def test_cluster_point_is_the_item_mean_not_the_mean_of_cluster_means() -> None:
    values = np.array([1.0, 1.0, 1.0, 0.0])
    (e,) = bootstrap_means(values, ["a", "a", "a", "b"], n_boot=200)
    assert e.value == 0.75  # cluster means 1 and 0 would give 0.5
    assert e.n == 4
    assert e.ci_low == 0.0 and e.ci_high == 1.0  # resamples: {a,a}, {a,b}, {b,b}


def test_cluster_labels_and_order_do_not_matter() -> None:
    rng = np.random.default_rng(11)
    values = rng.random(60)
    clusters = np.array([f"c{i % 6}" for i in range(60)])
    (a,) = bootstrap_means(values, clusters, n_boot=500, seed=2)
    renamed = np.array([f"zz-{c}" for c in clusters])
    (b,) = bootstrap_means(values, renamed, n_boot=500, seed=2)
    assert a == b
    perm = rng.permutation(60)  # items within clusters reordered: same sums per cluster
    (c,) = bootstrap_means(values[perm], clusters[perm], n_boot=500, seed=2)
    assert c.value == pytest.approx(a.value)
    assert c.ci_low == pytest.approx(a.ci_low) and c.ci_high == pytest.approx(a.ci_high)


def test_nan_cells_are_left_out_and_not_counted() -> None:
    v = np.array(
        [
            [1.0, np.nan],
            [2.0, 4.0],
            [np.nan, 6.0],
            [3.0, np.nan],
            [6.0, 8.0],
        ]
    )
    first, second = bootstrap_means(v, n_boot=500)
    assert first.n == 4 and second.n == 3
    assert first.value == pytest.approx(3.0) and second.value == pytest.approx(6.0)
    for e in (first, second):
        assert math.isfinite(e.ci_low) and math.isfinite(e.ci_high)
        assert e.ci_low <= e.value <= e.ci_high
    clustered = bootstrap_means(v, ["a", "a", "b", "b", "c"], n_boot=500)
    assert [e.n for e in clustered] == [4, 3]
    assert clustered[0].value == pytest.approx(3.0) and clustered[1].value == pytest.approx(6.0)


def test_all_nan_column_and_empty_input() -> None:
    v = np.column_stack([np.full(5, np.nan), np.arange(5.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy: all-NaN slice
        empty, full = bootstrap_means(v, n_boot=100)
    assert empty.n == 0 and math.isnan(empty.value)
    assert full.n == 5 and full.value == 2.0
    (none,) = bootstrap_means(np.zeros((0, 1)))
    assert none.n == 0 and math.isnan(none.value) and math.isnan(none.ci_low)


def test_deterministic_for_a_seed() -> None:
    v = np.random.default_rng(0).random((40, 2))
    assert bootstrap_means(v, seed=3) == bootstrap_means(v, seed=3)
    assert bootstrap_means(v, seed=3) != bootstrap_means(v, seed=4)


def test_columns_share_one_draw() -> None:
    """A column's interval does not depend on which other columns are estimated with it."""
    v = np.random.default_rng(1).random((40, 3))
    together = bootstrap_means(v, n_boot=300, seed=9)
    for j in range(3):
        (alone,) = bootstrap_means(v[:, j], n_boot=300, seed=9)
        assert alone.value == pytest.approx(together[j].value)
        assert alone.ci_low == pytest.approx(together[j].ci_low)
        assert alone.ci_high == pytest.approx(together[j].ci_high)


def test_coverage_of_bernoulli_mean() -> None:
    rng = np.random.default_rng(2024)
    reps, n, p = 200, 200, 0.3
    samples = (rng.random((reps, n)) < p).astype(float)
    covered = 0
    for r in range(reps):
        (e,) = bootstrap_means(samples[r], n_boot=1000, seed=r)
        covered += e.ci_low <= p <= e.ci_high
    assert 0.90 <= covered / reps <= 0.99
