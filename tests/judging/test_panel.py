"""A panel of judges on real loopback servers, and Krippendorff's alpha across them."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable

import numpy as np
import pytest

from dialogbench.judging import Panel, Verdict, panel_agreement
from dialogbench.stats.agreement import krippendorff_alpha
from judging.judging_support import Body, Harness, shown_candidates

WORTHS = [1, 3, 4, 6, 9]


def worth(body: Body) -> int:
    found = re.search(r"worth (\d+)", shown_candidates(body)[0][1])
    assert found is not None
    return int(found.group(1))


def scorer(shift: Callable[[int], int], garbled: int | None = None) -> Callable[[Body], str]:
    """A judge scoring accuracy = shift(worth); unusable replies for the item worth `garbled`."""

    def reply(body: Body) -> str:
        w = worth(body)
        if w == garbled:
            return "no idea"
        return json.dumps(
            {"reason": "r", "accuracy": shift(w), "clarity": 3, "uses_context": False}
        )

    return reply


def run_panel(harness: Harness, panel: Panel) -> list[dict[str, Verdict]]:
    async def all_items() -> list[dict[str, Verdict]]:
        return list(
            await asyncio.gather(
                *(panel.score(f"the answer worth {w}", reference="gold") for w in WORTHS)
            )
        )

    return harness.run(all_items())


def test_panel_scores_with_every_judge_and_measures_agreement(harness: Harness) -> None:
    same = harness.server(reply=scorer(lambda w: w))
    also = harness.server(reply=scorer(lambda w: w))
    off = harness.server(reply=scorer(lambda w: min(10, w + w % 2), garbled=4))
    panel = Panel(
        [
            harness.judge(same, name="first"),
            harness.judge(also, name="second"),
            harness.judge(off, name="third"),
        ]
    )
    items = run_panel(harness, panel)
    names = ["openai-compatible/first", "openai-compatible/second", "openai-compatible/third"]
    assert panel.names == names
    assert all(list(item) == names for item in items)
    assert [item[names[0]].scores for item in items] == [
        {"accuracy": w, "clarity": 3} for w in WORTHS
    ]
    garbled = items[WORTHS.index(4)][names[2]]
    assert garbled.scores is None and garbled.raw == "no idea"

    expected = np.array(
        [WORTHS, WORTHS, [min(10, w + w % 2) if w != 4 else np.nan for w in WORTHS]], dtype=float
    )
    alpha = panel_agreement(items, "accuracy")
    assert alpha == pytest.approx(krippendorff_alpha(expected, "interval"))
    assert 0.0 < alpha < 1.0
    by_id = {f"item{i}": item for i, item in enumerate(items)}
    assert panel_agreement(by_id, "accuracy", "ordinal") == pytest.approx(
        krippendorff_alpha(expected, "ordinal")
    )
    two = [{n: item[n] for n in names[:2]} for item in items]
    assert panel_agreement(two, "accuracy") == pytest.approx(1.0)
    assert math.isnan(panel_agreement(two, "clarity"))  # always 3: no variation


def _v(judge: str, score: int | None) -> Verdict:
    scores = None if score is None else {"accuracy": score}
    return Verdict(judge=judge, rubric="qa", scores=scores)


def test_missing_judges_and_unscored_verdicts_count_as_missing() -> None:
    items = [
        {"a": _v("a", 1), "b": _v("b", 1)},
        {"a": _v("a", 5), "b": _v("b", None)},
        {"a": _v("a", 3), "b": _v("b", 4), "c": _v("c", 3)},
        {"c": _v("c", 9)},
    ]
    n = np.nan
    expected = np.array([[1, 5, 3, n], [1, n, 4, n], [n, n, 3, 9]])
    assert panel_agreement(items, "accuracy") == pytest.approx(krippendorff_alpha(expected))


def test_agreement_edges() -> None:
    with pytest.raises(KeyError, match="fluency"):
        panel_agreement([{"a": _v("a", 1), "b": _v("b", 2)}], "fluency")
    assert math.isnan(panel_agreement([{"a": _v("a", None), "b": _v("b", None)}], "accuracy"))
    assert math.isnan(panel_agreement([], "accuracy"))


def test_panel_needs_distinct_judges(harness: Harness) -> None:
    srv = harness.server()
    with pytest.raises(ValueError, match="distinct"):
        Panel([harness.judge(srv), harness.judge(srv)])
    with pytest.raises(ValueError, match="at least one"):
        Panel([])
