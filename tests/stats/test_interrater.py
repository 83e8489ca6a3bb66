"""Agreement reports from a ratings file: each figure against its library value."""

from __future__ import annotations

import math
from pathlib import Path

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
