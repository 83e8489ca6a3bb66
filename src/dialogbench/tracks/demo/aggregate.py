"""DEMO's headline table (the paper's Table 3), one row per language, never pooled.

Element awareness: an item's score is the mean of its judge's `accuracy` and
`hallucination` (0-10); a task's score is the mean over its scored items; the awareness
average is the mean of the task scores present. Unscored items (a prediction that never
parsed, a verdict that never validated) are left out of the means and counted.

Interval of the awareness average: each task's items are resampled on their own (they are
separate samples), the task means recomputed and averaged, and the 2.5th and 97.5th
percentiles of those averages taken; the task intervals come from the same resamples.

Dialogue agent interaction: the interaction track reports one `Estimate` per dimension
(goal, believability, skillfulness, realism). `combine` takes plain dicts of name ->
`Estimate` for both halves, so it does not depend on any file layout, and gives the
interaction average, `overall` and `mean_of_averages`.

`overall` is DEMO's Overall as the paper's Table 3 computes it: (2 x the element-awareness
average + the interaction average) / 3. Every row of Table 3 satisfies this (GPT-4o:
(2 x 5.875 + 8.631) / 3 = 6.793), because DEMO's script pools the sub-scores rather than
averaging the two halves, although the caption calls it "the average score of two tasks".
`mean_of_averages` is that plain average, (awareness + interaction) / 2, kept under its
own name; it is not comparable with the paper.

An average handed over
ready-made (the awareness average above; an interaction average its track bootstrapped over
episodes) is used as it is; otherwise it is the mean of its parts, with a normal
approximation from their intervals that treats the parts as independent. That holds for
the two halves of `overall` (different data) but not for interaction dimensions scored on
the same episodes, whose interval it then understates; the row's `notes` say which.

DEMO's own script (step3_result.py) pools every result file it finds, English and Chinese
alike, and weights tasks by their item counts; here each language is its own row and each
task weighs the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

from dialogbench.data.demo.model import TASKS
from dialogbench.stats.bootstrap import (
    Estimate,
    nan_estimate,
    percentile_estimate,
    resample_counts,
)
from dialogbench.tracks.demo.interaction_prompts import DIMENSIONS as INTERACTION_DIMENSIONS

_Z = 1.959963984540054  # the standard normal's 97.5th percentile


def item_score(scores: Mapping[str, int] | None) -> float | None:
    """An item's score: the mean of `accuracy` and `hallucination`, None when unscored."""
    if scores is None:
        return None
    return (scores["accuracy"] + scores["hallucination"]) / 2.0


class AwarenessTable(BaseModel):
    """The element-awareness half of one language's row."""

    tasks: dict[str, Estimate]
    """Task -> mean item score over its scored items (NaN when none was scored)."""
    average: Estimate
    """Mean of the task means in `averaged`; n counts their scored items."""
    averaged: list[str]
    """Tasks with at least one scored item, which the average is taken over."""
    unscored: dict[str, int]
    """Task -> items left out because they went unscored."""
    missing: list[str]
    """DEMO's tasks with no scored item here: the average is not the paper's four-task one."""


def awareness_table(
    scores: Mapping[str, Sequence[float | None]], *, n_boot: int = 2000, seed: int = 0
) -> AwarenessTable:
    """Task means and their average from per-item scores (None: unscored, left out)."""
    rng = np.random.default_rng(seed)
    tasks: dict[str, Estimate] = {}
    unscored: dict[str, int] = {}
    replicates: list[npt.NDArray[np.float64]] = []
    points: list[float] = []
    ordered = [t for t in TASKS if t in scores] + sorted(set(scores) - set(TASKS))
    for task in ordered:
        values = np.array([v for v in scores[task] if v is not None], dtype=np.float64)
        unscored[task] = len(scores[task]) - len(values)
        if len(values) == 0:
            tasks[task] = nan_estimate()
            continue
        boot = resample_counts(len(values), n_boot, rng) @ values / len(values)
        tasks[task] = percentile_estimate(float(values.mean()), boot, len(values))
        replicates.append(boot)
        points.append(float(values.mean()))
    averaged = [t for t in ordered if tasks[t].n > 0]
    if averaged:
        n = sum(tasks[t].n for t in averaged)
        average = percentile_estimate(float(np.mean(points)), np.mean(replicates, axis=0), n)
    else:
        average = nan_estimate()
    return AwarenessTable(
        tasks=tasks,
        average=average,
        averaged=averaged,
        unscored=unscored,
        missing=[t for t in TASKS if t not in averaged],
    )


PAPER_OVERALL_WEIGHTS = {"awareness": 2.0, "interaction": 1.0}
"""DEMO's Overall: the element-awareness average counts twice (module docstring)."""


def mean_of(parts: Mapping[str, Estimate], weights: Mapping[str, float] | None = None) -> Estimate:
    """The (weighted) mean of estimates of independent quantities, with a
    normal-approximation interval: each part's standard error is read off its interval's
    width. Parts with nothing estimated (NaN) are left out; n adds up the parts' n.
    `weights` (name -> weight) defaults to equal weights."""
    present = {k: e for k, e in parts.items() if not math.isnan(e.value)}
    if not present:
        return nan_estimate()
    w = {k: 1.0 if weights is None else weights[k] for k in present}
    total = sum(w.values())
    value = sum(w[k] * e.value for k, e in present.items()) / total
    se = {k: (e.ci_high - e.ci_low) / (2 * _Z) for k, e in present.items()}
    half = _Z * math.sqrt(sum((w[k] * se[k]) ** 2 for k in present)) / total
    n = sum(e.n for e in present.values())
    return Estimate(value=value, ci_low=value - half, ci_high=value + half, n=n)


class TableRow(BaseModel):
    """One language's row of the paper's table."""

    awareness: dict[str, Estimate] = Field(default_factory=dict)
    awareness_average: Estimate = Field(default_factory=nan_estimate)
    interaction: dict[str, Estimate] = Field(default_factory=dict)
    interaction_average: Estimate = Field(default_factory=nan_estimate)
    overall: Estimate = Field(default_factory=nan_estimate)
    """DEMO's Overall, (2 x awareness average + interaction average) / 3; NaN unless both
    halves are there."""
    mean_of_averages: Estimate = Field(default_factory=nan_estimate)
    """(awareness average + interaction average) / 2: ours, not the paper's Overall."""
    notes: list[str] = Field(default_factory=list)


def combine(
    awareness: Mapping[str, Estimate],
    interaction: Mapping[str, Estimate],
    *,
    awareness_average: Estimate | None = None,
    interaction_average: Estimate | None = None,
) -> TableRow:
    """One language's row from the task and dimension estimates (see the module docstring).

    `awareness_average` is normally `AwarenessTable.average` (bootstrapped over items);
    `interaction_average`, when its track provides one bootstrapped over episodes.
    """
    notes: list[str] = []
    if awareness_average is None:
        awareness_average = mean_of(awareness)
        if awareness:
            notes.append(
                "awareness average: interval from the task intervals (normal approximation)"
            )
    if interaction_average is None:
        interaction_average = mean_of(interaction)
        if interaction:
            notes.append(
                "interaction average: interval from the dimension intervals as if independent "
                "(normal approximation); dimensions scored on the same episodes are not, so "
                "it is too narrow"
            )
    unknown = sorted(set(interaction) - set(INTERACTION_DIMENSIONS))
    if unknown:
        notes.append(f"interaction dimensions not among DEMO's four: {unknown}")
    missing = [d for d in INTERACTION_DIMENSIONS if d not in interaction]
    if interaction and missing:
        notes.append(f"interaction average without {missing}")
    halves = {"awareness": awareness_average, "interaction": interaction_average}
    absent = [name for name, e in halves.items() if math.isnan(e.value)]
    overall = mean_of_averages = nan_estimate()
    if absent:
        notes.append(f"no overall: no {' and no '.join(absent)} score")
    else:
        overall = mean_of(halves, PAPER_OVERALL_WEIGHTS)
        mean_of_averages = mean_of(halves)
    return TableRow(
        awareness=dict(awareness),
        awareness_average=awareness_average,
        interaction=dict(interaction),
        interaction_average=interaction_average,
        overall=overall,
        mean_of_averages=mean_of_averages,
        notes=notes,
    )


def paper_table(
    awareness: Mapping[str, AwarenessTable],
    interaction: Mapping[str, Mapping[str, Estimate]],
) -> dict[str, TableRow]:
    """Language -> row, for every language either half reports; languages never pooled."""
    rows: dict[str, TableRow] = {}
    for lang in sorted(set(awareness) | set(interaction)):
        table = awareness.get(lang)
        figures = dict(interaction.get(lang, {}))
        average = figures.pop("average", None)  # the track's own, bootstrapped over episodes
        rows[lang] = combine(
            table.tasks if table is not None else {},
            figures,
            awareness_average=table.average if table is not None else None,
            interaction_average=average,
        )
        if table is not None and table.missing:
            rows[lang].notes.append(f"awareness average without {table.missing}")
    return rows
