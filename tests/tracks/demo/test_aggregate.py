"""DEMO's table: task means, the awareness average and its interval, and the combined row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dialogbench.stats.bootstrap import Estimate
from dialogbench.tracks.demo.aggregate import (
    awareness_table,
    combine,
    item_score,
    mean_of,
    paper_table,
)
from dialogbench.tracks.demo.interaction_prompts import DIMENSIONS as INTERACTION_DIMENSIONS


def est(value: float, half: float = 0.0, n: int = 10) -> Estimate:
    return Estimate(value=value, ci_low=value - half, ci_high=value + half, n=n)


def test_item_score_is_the_mean_of_the_two_dimensions() -> None:
    assert item_score({"accuracy": 6, "hallucination": 9}) == 7.5
    assert item_score(None) is None


def test_task_means_and_their_average_by_hand() -> None:
    table = awareness_table(
        {"goal": [10.0, 6.0, None], "persona": [4.0], "scene": [None, None]}, n_boot=200
    )
    assert table.tasks["goal"].value == 8.0 and table.tasks["goal"].n == 2
    assert table.tasks["persona"].value == 4.0
    assert table.tasks["persona"].ci_low == table.tasks["persona"].ci_high == 4.0
    assert 6.0 <= table.tasks["goal"].ci_low <= 8.0 <= table.tasks["goal"].ci_high <= 10.0
    assert math.isnan(table.tasks["scene"].value) and table.tasks["scene"].n == 0
    # the mean of the task means (8 and 4), not of the three items (20 / 3)
    assert table.average.value == 6.0 and table.average.n == 3
    assert table.averaged == ["goal", "persona"]
    assert table.unscored == {"goal": 1, "persona": 0, "scene": 2}
    assert table.missing == ["scene", "utterance"]
    assert 5.0 <= table.average.ci_low <= 6.0 <= table.average.ci_high <= 7.0


def test_nothing_scored_gives_nan_and_counts() -> None:
    table = awareness_table({"goal": [None]}, n_boot=50)
    assert math.isnan(table.average.value) and table.average.n == 0
    assert table.unscored == {"goal": 1} and table.averaged == []


def test_average_interval_resamples_tasks_independently() -> None:
    rng = np.random.default_rng(1)
    scores = {
        "goal": list(rng.integers(0, 11, 400).astype(float)),
        "persona": list(rng.integers(0, 11, 400).astype(float)),
    }
    table = awareness_table(scores, n_boot=4000, seed=3)
    widths = [table.tasks[t].ci_high - table.tasks[t].ci_low for t in ("goal", "persona")]
    width = table.average.ci_high - table.average.ci_low
    # independent halves: the width is about sqrt(w1^2 + w2^2) / 2, well under the mean width
    assert width < 0.8 * np.mean(widths)
    assert width == pytest.approx(math.hypot(*widths) / 2, rel=0.1)
    assert table == awareness_table(scores, n_boot=4000, seed=3)  # seeded


def test_mean_of_independent_estimates() -> None:
    z = 1.959963984540054
    got = mean_of({"a": est(4.0, z * 0.3, 5), "b": est(8.0, z * 0.4, 7)})
    assert got.value == 6.0 and got.n == 12
    assert got.ci_high - got.value == pytest.approx(z * 0.5 / 2)  # sqrt(0.3^2 + 0.4^2) / 2
    assert math.isnan(mean_of({}).value)
    assert mean_of({"a": est(4.0), "b": est(math.nan)}).value == 4.0  # NaN parts left out


# Table 3 of the DEMO paper: awareness tasks, awareness average, interaction dimensions,
# interaction average, Overall (each printed to three decimals).
TABLE_3 = {
    "GPT-4o": ((5.975, 4.051, 6.167, 7.308), 5.875, (8.190, 9.181, 8.614, 8.537), 8.631, 6.793),
    "Claude-3.5-Sonnet": (
        (5.979, 4.145, 6.221, 6.243),
        5.647,
        (7.571, 9.174, 8.432, 8.840),
        8.504,
        6.599,
    ),
    "Qwen2-72B-Instruct": (
        (5.357, 4.406, 5.702, 6.921),
        5.596,
        (8.447, 9.204, 8.699, 8.175),
        8.631,
        6.608,
    ),
}


@pytest.mark.parametrize("model", sorted(TABLE_3))
def test_overall_reproduces_the_papers_table_3(model: str) -> None:
    tasks, aw_avg, dims, int_avg, overall = TABLE_3[model]
    awareness = dict(zip(("goal", "persona", "scene", "utterance"), map(est, tasks), strict=True))
    interaction = dict(zip(INTERACTION_DIMENSIONS, map(est, dims), strict=True))
    row = combine(
        awareness, interaction, awareness_average=est(aw_avg), interaction_average=est(int_avg)
    )
    # the inputs are printed rounded to 0.001, so the result agrees to within that
    assert row.overall.value == pytest.approx(overall, abs=1e-3)
    assert abs(row.mean_of_averages.value - overall) > 0.2  # the plain mean is not the paper's
    # the halves themselves are the plain means of their parts, as printed
    assert round(sum(tasks) / 4, 3) == pytest.approx(aw_avg, abs=0.0015)
    assert round(sum(dims) / 4, 3) == pytest.approx(int_avg, abs=0.0015)


def test_combined_row_by_hand() -> None:
    awareness = {"goal": est(6.0, 1.0), "persona": est(4.0, 1.0)}
    interaction = {
        d: est(v, 0.5) for d, v in zip(INTERACTION_DIMENSIONS, (8, 9, 7, 8), strict=True)
    }
    row = combine(awareness, interaction, awareness_average=est(5.0, 0.7, 20))
    assert row.awareness_average == est(5.0, 0.7, 20)  # handed over, kept as it is
    assert row.interaction_average.value == 8.0
    assert row.overall.value == pytest.approx(6.0)  # DEMO's: (2 x 5 + 8) / 3
    assert row.overall.ci_low < 6.0 < row.overall.ci_high
    assert row.mean_of_averages.value == 6.5  # ours, under its own name: (5 + 8) / 2
    assert any("too narrow" in note for note in row.notes)  # the dimensions' approximation
    without = combine(awareness, {})
    assert without.awareness_average.value == 5.0
    assert math.isnan(without.interaction_average.value) and math.isnan(without.overall.value)
    assert any("no overall" in note for note in without.notes)
    partial = combine(awareness, {"goal": est(8.0), "realism": est(6.0)})
    assert partial.interaction_average.value == 7.0
    assert any("without ['believability', 'skillfulness']" in note for note in partial.notes)


def test_languages_stay_apart() -> None:
    tables = {
        "en": awareness_table({"goal": [8.0, 6.0], "utterance": [4.0]}, n_boot=100),
        "zh": awareness_table({"goal": [2.0]}, n_boot=100),
    }
    interaction = {"en": {d: est(9.0, 0.2) for d in INTERACTION_DIMENSIONS}}
    rows = paper_table(tables, interaction)
    assert set(rows) == {"en", "zh"}
    assert rows["en"].awareness_average.value == 5.5  # (7 + 4) / 2
    assert rows["en"].overall.value == pytest.approx((2 * 5.5 + 9.0) / 3)
    assert rows["en"].mean_of_averages.value == pytest.approx((5.5 + 9.0) / 2)
    assert rows["zh"].awareness_average.value == 2.0  # never pooled with English
    assert math.isnan(rows["zh"].overall.value)  # no Chinese interaction score
    assert any("without ['persona', 'scene', 'utterance']" in n for n in rows["zh"].notes)
    only_interaction = paper_table({}, {"zh": {"goal": est(7.0)}})
    assert math.isnan(only_interaction["zh"].awareness_average.value)
