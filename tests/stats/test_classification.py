"""Macro-F1 over label indices: by hand, against a brute-force count and scikit-learn's
`f1_score(average="macro")`, and with resampling weights as repeated rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import f1_score  # type: ignore[import-untyped]

from dialogbench.stats import macro_f1


def brute_macro_f1(gold: list[int], pred: list[int]) -> float:
    scores = []
    for label in sorted(set(gold) | set(pred)):
        tp = sum(1 for g, p in zip(gold, pred, strict=True) if g == p == label)
        fp = sum(1 for g, p in zip(gold, pred, strict=True) if p == label and g != label)
        fn = sum(1 for g, p in zip(gold, pred, strict=True) if g == label and p != label)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        scores.append(2 * precision * recall / (precision + recall) if tp else 0.0)
    return sum(scores) / len(scores)


def test_macro_f1_by_hand() -> None:
    one = np.array([0, 0, 1, 1])
    assert macro_f1(one, one)[0] == 1.0
    # label 0: tp 1, fp 1, fn 1 -> 0.5; label 1: tp 1, fp 1, fn 1 -> 0.5
    assert macro_f1(one, np.array([0, 1, 0, 1]))[0] == 0.5
    # label 2 is predicted but never gold: a label of its own with F1 0, so averaged in
    assert macro_f1(np.array([0, 1]), np.array([0, 2]))[0] == pytest.approx((1 + 0 + 0) / 3)
    assert math.isnan(macro_f1(np.array([], dtype=np.int64), np.array([], dtype=np.int64))[0])


def test_macro_f1_never_exceeds_accuracy_on_a_skewed_sample() -> None:
    # the old definition (gold labels only) gave 1.0 here against an accuracy of 0.75
    gold, pred = np.array([0, 0, 0, 0]), np.array([0, 0, 0, 1])
    assert macro_f1(gold, pred)[0] == pytest.approx((6 / 7 + 0) / 2)


def test_macro_f1_matches_brute_force_sklearn_and_weights_repeat_rows() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        raw_gold, raw_pred = rng.integers(0, 4, n), rng.integers(0, 6, n)
        _, both = np.unique(np.concatenate([raw_gold, raw_pred]), return_inverse=True)
        gold, pred = both[:n], both[n:]  # labels 0..K-1, each seen in gold or prediction
        got = macro_f1(gold, pred)[0]
        assert got == pytest.approx(brute_macro_f1(list(gold), list(pred)))
        assert got == pytest.approx(f1_score(gold, pred, average="macro"))
        counts = rng.integers(0, 3, (2, n)).astype(float)
        rows = macro_f1(gold, pred, counts)
        for row, weights in zip(rows, counts, strict=True):
            idx = np.repeat(np.arange(n), weights.astype(int))
            if len(idx) == 0:
                assert math.isnan(row)
                continue
            assert row == pytest.approx(brute_macro_f1(list(gold[idx]), list(pred[idx])))
            assert row == pytest.approx(
                f1_score(gold[idx], pred[idx], average="macro", zero_division=0)
            )
