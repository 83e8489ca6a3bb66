"""AUROC, its stratified bootstrap and operating points: hand cases, brute force, sklearn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dialogbench.stats.roc import auroc, bootstrap_auroc, operating_point


def brute_auroc(pos: list[float], neg: list[float]) -> float:
    """Every (positive, negative) pair: 1 if the positive is higher, 0.5 if tied."""
    pairs = [1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg]
    return sum(pairs) / len(pairs)


@pytest.mark.parametrize(
    ("pos", "neg", "expected"),
    [
        ([1.0, 2.0], [0.0], 1.0),
        ([0.0], [1.0, 2.0], 0.0),
        ([1.0], [1.0], 0.5),
        ([0.2, 0.8], [0.5, 0.8], 0.375),  # (0.2,0.5)=0 (0.2,0.8)=0 (0.8,0.5)=1 (0.8,0.8)=0.5
        ([3.0, 1.0, 2.0], [1.0, 1.0, 0.0], (3 + 2 + 3) / 9),  # 1 beats 0, ties twice
        ([0.0, 0.0, 0.0], [0.0, 0.0], 0.5),
    ],
)
def test_hand_computed(pos: list[float], neg: list[float], expected: float) -> None:
    assert auroc(pos, neg) == pytest.approx(expected)
    assert bootstrap_auroc(pos, neg, n_boot=50).value == pytest.approx(expected)


scores = st.lists(st.integers(0, 6).map(lambda k: k / 6), min_size=1, max_size=30)  # many ties


@settings(max_examples=100, deadline=None)
@given(pos=scores, neg=scores)
def test_matches_pairwise_brute_force(pos: list[float], neg: list[float]) -> None:
    assert auroc(pos, neg) == pytest.approx(brute_auroc(pos, neg), abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(pos=scores, neg=scores, seed=st.integers(0, 2**32 - 1))
def test_bootstrap_equals_a_loop_over_resamples(
    pos: list[float], neg: list[float], seed: int
) -> None:
    n_boot = 40
    e = bootstrap_auroc(pos, neg, n_boot=n_boot, seed=seed)
    # the same draws: one stream for the (sorted) negatives, one for the positives
    neg_rng, pos_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    neg_draws = neg_rng.integers(0, len(neg), size=(n_boot, len(neg)))
    pos_draws = pos_rng.integers(0, len(pos), size=(n_boot, len(pos)))
    ordered = np.sort(neg)
    loop = [
        brute_auroc(list(np.asarray(pos)[p]), list(ordered[n]))
        for p, n in zip(pos_draws, neg_draws, strict=True)
    ]
    lo, hi = np.percentile(loop, [2.5, 97.5])
    assert e.ci_low == pytest.approx(lo, abs=1e-12)
    assert e.ci_high == pytest.approx(hi, abs=1e-12)
    assert e.n == len(pos) + len(neg)
    assert 0.0 <= e.ci_low <= e.ci_high <= 1.0


def test_bootstrap_blocks_do_not_change_the_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    from dialogbench.stats import roc as module

    rng = np.random.default_rng(1)
    pos, neg = rng.normal(0.5, 1, 60), rng.normal(0, 1, 80)
    whole = bootstrap_auroc(pos, neg, n_boot=300, seed=3)
    monkeypatch.setattr(module, "_MAX_CELLS", 7 * 140)  # blocks of 7 resamples
    assert bootstrap_auroc(pos, neg, n_boot=300, seed=3) == whole


def test_interval_covers_a_known_separation() -> None:
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(1.0, 1.0, 400), rng.normal(0.0, 1.0, 400)
    e = bootstrap_auroc(pos, neg, n_boot=1000)
    true = 0.5 * math.erfc(-1.0 / 2.0)  # P(X - Y > 0), X - Y ~ N(1, 2)
    assert e.ci_low < true < e.ci_high
    assert e.ci_high - e.ci_low < 0.1


def test_empty_class_is_nan_not_a_crash() -> None:
    e = bootstrap_auroc([0.3, 0.4], [])
    assert math.isnan(e.value) and math.isnan(e.ci_low) and e.n == 2
    assert math.isnan(auroc([], [1.0]))


def test_nan_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="unscored"):
        auroc([0.1, float("nan")], [0.2])


def test_operating_point() -> None:
    op = operating_point([0.9, 0.5, 0.2, 0.7], [0.1, 0.6, 0.5, 0.0, 0.3], 0.5)
    assert (op.caught, op.missed, op.false_alarms, op.correct_rejections) == (3, 1, 2, 3)
    assert (op.n_pos, op.n_neg) == (4, 5)
    assert op.sensitivity == 0.75 and op.false_alarm_rate == 0.4
    assert op.describe() == "3 of 4 caught, 2 false alarms among 5"
    empty = operating_point([], [], 0.5)
    assert empty.caught == 0 and math.isnan(empty.sensitivity)


def test_agrees_with_sklearn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(5)
    pos, neg = rng.integers(0, 5, 50) / 4, rng.integers(0, 5, 70) / 4
    y = np.r_[np.ones(50), np.zeros(70)]
    assert auroc(pos, neg) == pytest.approx(metrics.roc_auc_score(y, np.r_[pos, neg]))


def test_replicates_are_the_bootstrap_draws() -> None:
    from dialogbench.stats.roc import auroc_replicates

    rng = np.random.default_rng(2)
    pos, neg = rng.normal(0.3, 1, 30), rng.normal(0, 1, 40)
    reps = auroc_replicates(pos, neg, n_boot=250, seed=9)
    e = bootstrap_auroc(pos, neg, n_boot=250, seed=9)
    assert (e.ci_low, e.ci_high) == pytest.approx(tuple(np.percentile(reps, [2.5, 97.5])))
    assert np.isnan(auroc_replicates([], neg, n_boot=5)).all()
