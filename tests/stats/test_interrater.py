"""Agreement reports from a ratings file: each figure against its library value."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score  # type: ignore[import-untyped]

from dialogbench.judging.ratings import read_ratings
from dialogbench.stats.interrater import (
    ALL,
    agreement_report,
    between,
    default_reference,
    group_agreement,
    pair_agreement,
    paper_tables,
)
from tests_support_ratings import SCORES, write_ratings_file


@pytest.fixture
def ratings_path(tmp_path: Path) -> Path:
    return write_ratings_file(tmp_path / "ratings.csv")


def test_pairs_match_scikit_learn_and_scipy(ratings_path: Path) -> None:
    report = agreement_report(read_ratings(ratings_path), n_boot=200)
    for p in report.pairs:
        if p.dimension == ALL:
            continue
        items = sorted(set(SCORES[p.dimension][p.a]) & set(SCORES[p.dimension][p.b]))
        x = [SCORES[p.dimension][p.a][i] for i in items]
        y = [SCORES[p.dimension][p.b][i] for i in items]
        assert p.n == len(items)
        assert p.cohen_kappa.value == pytest.approx(cohen_kappa_score(x, y))
        assert p.pearson.value == pytest.approx(stats.pearsonr(x, y).statistic)
        assert p.pearson_p == pytest.approx(stats.pearsonr(x, y).pvalue, abs=1e-9)
        assert p.spearman.value == pytest.approx(stats.spearmanr(x, y).statistic)
        assert p.spearman_p == pytest.approx(stats.spearmanr(x, y).pvalue, abs=1e-9)
        for e in (p.cohen_kappa, p.pearson, p.spearman):
            assert e.ci_low <= e.value <= e.ci_high


def test_groups_match_krippendorff_and_skip_missing(ratings_path: Path) -> None:
    report = agreement_report(read_ratings(ratings_path), n_boot=50)
    goal = next(g for g in report.groups if g.dimension == "goal")
    raters = goal.raters
    items = sorted({i for r in raters for i in SCORES["goal"][r]})
    matrix = np.array(
        [[SCORES["goal"][r].get(i, np.nan) for i in items] for r in raters], dtype=float
    )
    want = krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval")
    assert goal.alpha_interval.value == pytest.approx(want)
    complete = ~np.isnan(matrix).any(axis=0)
    assert goal.fleiss_kappa.n == int(complete.sum()) < len(items)  # bob skipped one item


def test_paper_tables_against_the_judge(ratings_path: Path) -> None:
    report = agreement_report(read_ratings(ratings_path), n_boot=50)
    assert default_reference(report.raters) == "judge"
    kappas, pearsons = paper_tables(report, "judge")
    assert set(kappas) == {"ann", "bob"}
    assert set(kappas["ann"]) == {"goal", "realism", ALL}
    assert set(pearsons["ann"]) == {"goal", "realism"}
    x = [SCORES["realism"]["judge"][i] for i in sorted(SCORES["realism"]["judge"])]
    y = [SCORES["realism"]["ann"][i] for i in sorted(SCORES["realism"]["judge"])]
    assert pearsons["ann"]["realism"][0].value == pytest.approx(stats.pearsonr(x, y).statistic)
    with pytest.raises(ValueError, match="no rater"):
        paper_tables(report, "nobody")


def test_between_names_the_comparison() -> None:
    assert between("human", "human") == "between humans"
    assert between("judge", "judge") == "between judges"
    assert between("human", "judge") == "judge and human"
    assert between("unknown", "judge") == "kinds not given"
    assert math.isnan(float("nan"))


def _library(test: Any, *args: Any, **kwargs: Any) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input, n = 2, complete chance agreement
        result = test(*args, **kwargs)
    return float(getattr(result, "pvalue", result))


def _same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or abs(got - want) <= 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_randomized_pairs_and_groups_match_the_libraries(seed: int) -> None:
    """Small n (2 and 3 most often), narrow scales (ties), constant raters: kappa is
    scikit-learn's, r, rho and their p-values scipy's, alpha krippendorff's, to 1e-9; every
    NaN pair figure is named in `undefined`, and only those."""
    rng = np.random.default_rng(seed)
    seen = {"n2": 0, "n3": 0, "constant": 0}
    for _ in range(150):
        n = int(rng.choice([2, 2, 3, 3, 4, 6]))
        x = rng.integers(0, int(rng.choice([2, 3, 5])), n).astype(float)
        y = rng.integers(0, int(rng.choice([2, 3, 5])), n).astype(float)
        if rng.random() < 0.15:
            y[:] = x[0] if rng.random() < 0.5 else y[0]
        seen["n2"] += n == 2
        seen["n3"] += n == 3
        seen["constant"] += np.ptp(x) == 0 or np.ptp(y) == 0
        _, kappa, r, r_p, rho, rho_p, undefined = pair_agreement(list(x), list(y), n_boot=20)
        want = {
            "cohen_kappa": (kappa.value, _library(cohen_kappa_score, x, y)),
            "pearson": (r.value, _library(lambda a, b: stats.pearsonr(a, b).statistic, x, y)),
            "pearson_p": (r_p, _library(stats.pearsonr, x, y)),
            "spearman": (rho.value, _library(lambda a, b: stats.spearmanr(a, b).statistic, x, y)),
            "spearman_p": (rho_p, _library(stats.spearmanr, x, y)),
        }
        for figure, (got, library) in want.items():
            assert _same(got, library), (figure, x, y, got, library)
            assert (figure in undefined) == math.isnan(got), (figure, x, y, undefined)
        matrix = np.vstack([x, y, rng.integers(0, 3, n).astype(float)])
        matrix[2, rng.random(n) < 0.3] = np.nan
        table = {
            rater: {f"i{i}": v for i, v in enumerate(row) if not math.isnan(v)}
            for rater, row in zip("abc", matrix, strict=True)
        }
        _, alpha_i, alpha_n = group_agreement(table, n_boot=10)
        for level, got_alpha in (("interval", alpha_i), ("nominal", alpha_n)):
            library = (
                _library(krippendorff.alpha, reliability_data=matrix, level_of_measurement=level)
                if np.unique(matrix[~np.isnan(matrix)]).size > 1
                else math.nan  # krippendorff raises on one value; alpha is undefined
            )
            assert _same(got_alpha.value, library), (level, matrix, got_alpha, library)
    assert min(seen.values()) > 10, seen


def test_undefined_figures_are_named_with_their_reason() -> None:
    _, _, r, r_p, _, rho_p, undefined = pair_agreement([1.0, 2.0], [3.0, 5.0], n_boot=20)
    assert (r.value, r_p) == (1.0, 1.0) and math.isnan(rho_p)
    assert undefined == {"spearman_p": "2 pairs: the t-test of rho has no degrees of freedom"}
    _, kappa, r, r_p, _, _, undefined = pair_agreement([4.0, 4.0, 4.0], [4.0, 4.0, 4.0])
    assert math.isnan(kappa.value) and math.isnan(r.value) and math.isnan(r_p)
    assert set(undefined) == {"cohen_kappa", "pearson", "pearson_p", "spearman", "spearman_p"}
    assert undefined["pearson_p"] == "constant scores from both raters: no correlation"
    _, _, _, _, _, _, undefined = pair_agreement([], [])
    assert set(undefined.values()) == {"no item scored by both raters"}


def test_figure3_differences_match_numpy(ratings_path: Path) -> None:
    """The paper's Figure 3 statistic: human - judge per item, its mean, sample SD, the
    share within 1.5 SD and the histogram, by plain numpy; only person-judge pairs."""
    report = agreement_report(read_ratings(ratings_path), n_boot=300)
    got = {(d.dimension, d.human, d.judge): d for d in report.differences}
    assert set(got) == {(dim, h, "judge") for dim in SCORES for h in ("ann", "bob")}
    for (dim, human, judge), d in got.items():
        items = sorted(set(SCORES[dim][human]) & set(SCORES[dim][judge]))
        diff = np.array([SCORES[dim][human][i] - SCORES[dim][judge][i] for i in items])
        sd = diff.std(ddof=1)
        assert d.n == len(items)
        assert d.mean.value == pytest.approx(diff.mean())
        assert d.sd.value == pytest.approx(sd)
        assert d.within_1_5_sd.value == pytest.approx(np.mean(np.abs(diff) <= 1.5 * sd))
        want: dict[str, int] = {}
        for v in sorted(round(float(x)) for x in diff):
            want[str(v)] = want.get(str(v), 0) + 1
        assert d.histogram == want
        for e in (d.mean, d.sd, d.within_1_5_sd):
            assert e.ci_low <= e.value <= e.ci_high


def test_figure3_resampled_sd_matches_a_loop() -> None:
    """The vectorised SD under resampling equals a loop over explicit resamples."""
    from dialogbench.stats.interrater import _sd

    rng = np.random.default_rng(3)
    d = rng.integers(-3, 4, size=12).astype(float)
    w = np.zeros((5, 12))
    for row in range(5):
        for i in rng.integers(0, 12, size=12):
            w[row, i] += 1
    for row in range(5):
        sample = np.repeat(d, w[row].astype(int))
        assert _sd(d, w)[row] == pytest.approx(sample.std(ddof=1))
