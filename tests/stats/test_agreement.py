"""Krippendorff's alpha: the published worked example, `krippendorff` as an oracle, edge cases."""

from __future__ import annotations

import math
from typing import get_args

import krippendorff
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dialogbench.stats.agreement import Level, krippendorff_alpha

N = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 coders x 12 units.
WORKED = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
        [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
    ]
)
PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
LEVELS: tuple[Level, ...] = get_args(Level)


@pytest.mark.parametrize("level", LEVELS)
def test_worked_example_matches_the_published_values(level: Level) -> None:
    got = krippendorff_alpha(WORKED, level)
    assert round(got, 3) == PUBLISHED[level]
    oracle = krippendorff.alpha(reliability_data=WORKED, level_of_measurement=level)
    assert got == pytest.approx(oracle, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=8, max_size=8),
        min_size=2,
        max_size=5,
    ),
    level=st.sampled_from(LEVELS),
)
def test_agrees_with_the_krippendorff_package(data: list[list[int | None]], level: Level) -> None:
    r = np.array([[N if x is None else x for x in row] for row in data], dtype=float)
    pairable = (~np.isnan(r)).sum(axis=0) >= 2
    assume(pairable.any() and np.unique(r[:, pairable][~np.isnan(r[:, pairable])]).size > 1)
    oracle = krippendorff.alpha(reliability_data=r, level_of_measurement=level)
    assert krippendorff_alpha(r, level) == pytest.approx(oracle, abs=1e-9)


@pytest.mark.parametrize("level", LEVELS)
def test_perfect_agreement_is_one(level: Level) -> None:
    r = np.array([[1, 2, 3, 4, N], [1, 2, 3, 4, 5], [N, 2, 3, 4, 5]])
    assert krippendorff_alpha(r, level) == pytest.approx(1.0)


@pytest.mark.parametrize("level", LEVELS)
def test_units_with_fewer_than_two_ratings_are_ignored(level: Level) -> None:
    lonely = np.array([[9.0, N], [N, N], [N, N], [N, N]])
    padded = np.hstack([WORKED, lonely])
    assert krippendorff_alpha(padded, level) == pytest.approx(krippendorff_alpha(WORKED, level))


@pytest.mark.parametrize("level", LEVELS)
def test_order_of_coders_and_units_does_not_matter(level: Level) -> None:
    rng = np.random.default_rng(0)
    shuffled = WORKED[rng.permutation(4)][:, rng.permutation(12)]
    assert krippendorff_alpha(shuffled, level) == pytest.approx(krippendorff_alpha(WORKED, level))


def test_no_variation_is_nan() -> None:
    assert math.isnan(krippendorff_alpha(np.array([[3, 3, 3], [3, 3, N]])))


def test_no_pairable_unit_is_nan() -> None:
    assert math.isnan(krippendorff_alpha(np.array([[1, N, 3], [N, 2, N]])))
    assert math.isnan(krippendorff_alpha(np.empty((3, 0))))


def test_systematic_disagreement_is_negative() -> None:
    assert krippendorff_alpha([[1, 2, 1, 2], [2, 1, 2, 1]], "nominal") < 0


def test_ratio_allows_zero() -> None:
    r = [[0, 1, 2, 0], [0, 1, 3, 0]]
    oracle = krippendorff.alpha(reliability_data=r, level_of_measurement="ratio")
    assert krippendorff_alpha(r, "ratio") == pytest.approx(oracle)


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(WORKED, "cardinal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha([1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        krippendorff_alpha([[1.0, np.inf], [1.0, 2.0]])
    with pytest.raises(ValueError, match="non-negative"):
        krippendorff_alpha([[-1.0, 2.0], [1.0, 2.0]], "ratio")
