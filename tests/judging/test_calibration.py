"""Calibration probes: false-accept / false-reject rates of scripted judges on a loopback server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from dialogbench.judging import CalibrationProbe, CalibrationReport, PassRule, calibrate
from judging.judging_support import Body, Harness, shown_candidates

RULE = PassRule("accuracy", 6)


def probes(n_right: int = 4, n_wrong: int = 3) -> list[CalibrationProbe]:
    right = [
        CalibrationProbe(
            id=f"r{i}", candidate=f"right answer {i}", expected="right", reference="gold"
        )
        for i in range(n_right)
    ]
    wrong = [
        CalibrationProbe(
            id=f"w{i}", candidate=f"wrong answer {i}", expected="wrong", reference="gold"
        )
        for i in range(n_wrong)
    ]
    return right + wrong


def judging(accuracy: Callable[[str], int | None]) -> Callable[[Body], str]:
    """A judge giving `accuracy(candidate)`, or an unusable reply where that is None."""

    def reply(body: Body) -> str:
        score = accuracy(shown_candidates(body)[0][1])
        if score is None:
            return "cannot say"
        return json.dumps({"reason": "r", "accuracy": score, "clarity": 3, "uses_context": False})

    return reply


def run(
    harness: Harness, accuracy: Callable[[str], int | None], items: list[CalibrationProbe]
) -> CalibrationReport:
    judge = harness.judge(harness.server(reply=judging(accuracy)))
    return harness.run(calibrate(judge, items, RULE, n_boot=500))


def test_a_judge_that_accepts_everything(harness: Harness) -> None:
    report = run(harness, lambda text: 10, probes())
    assert report.false_accept is not None and report.false_reject is not None
    assert report.false_accept.value == 1.0 and report.false_accept.n == 3
    assert report.false_reject.value == 0.0 and report.false_reject.n == 4
    assert (report.n_right, report.n_wrong, report.unscored) == (4, 3, 0)
    assert all(o.accepted for o in report.outcomes)
    assert (report.dimension, report.threshold, report.rubric) == ("accuracy", 6, "qa")


def test_a_judge_that_rejects_everything(harness: Harness) -> None:
    report = run(harness, lambda text: 0, probes())
    assert report.false_accept is not None and report.false_reject is not None
    assert report.false_accept.value == 0.0
    assert report.false_reject.value == 1.0


def test_threshold_is_inclusive_and_rates_have_intervals(harness: Harness) -> None:
    # right answers get 6 (just accepted); wrong answers 0 and 1 are rejected, wrong 2 gets 6
    def accuracy(text: str) -> int:
        return 6 if text.startswith("right") or text.endswith("2") else 0

    report = run(harness, accuracy, probes(n_right=4, n_wrong=6))
    assert report.false_reject is not None and report.false_reject.value == 0.0
    fa = report.false_accept
    assert fa is not None and fa.value == pytest.approx(1 / 6) and fa.n == 6
    assert fa.ci_low <= fa.value <= fa.ci_high and fa.ci_high > fa.ci_low


def test_unscored_calibration_verdicts_are_shown_not_dropped(harness: Harness) -> None:
    def accuracy(text: str) -> int | None:
        return None if text in ("right answer 1", "wrong answer 0") else 10

    report = run(harness, accuracy, probes())
    assert report.unscored == 2 and report.unscored_ids == ["r1", "w0"]
    assert len(report.outcomes) == 7
    lost = {o.probe.id: o for o in report.outcomes if o.accepted is None}
    assert set(lost) == {"r1", "w0"}
    assert lost["r1"].verdict.raw == "cannot say" and lost["r1"].verdict.error
    assert report.false_accept is not None and report.false_accept.n == 2
    assert report.false_reject is not None and report.false_reject.n == 3


def test_a_group_with_nothing_scored_has_no_rate(harness: Harness) -> None:
    report = run(harness, lambda text: None if text.startswith("wrong") else 9, probes())
    assert report.false_accept is None
    assert report.false_reject is not None and report.false_reject.value == 0.0
    assert CalibrationReport.model_validate_json(report.model_dump_json()) == report


def test_the_question_is_shown_as_context(harness: Harness) -> None:
    srv = harness.server(reply=judging(lambda text: 7))
    probe = CalibrationProbe(
        id="q", candidate="Lyon", expected="wrong", question="Capital of France?", reference="Paris"
    )
    report = harness.run(calibrate(harness.judge(srv), [probe], RULE, n_boot=100))
    prompt = srv.requests[0]["messages"][1]["content"]
    assert "Capital of France?" in prompt and "Paris" in prompt
    assert report.false_accept is not None and report.false_accept.value == 1.0
    assert report.false_reject is None


def test_rules_and_probes_are_checked(harness: Harness) -> None:
    judge = harness.judge(harness.server())
    with pytest.raises(KeyError):
        harness.run(calibrate(judge, probes(), PassRule("fluency", 5)))
    for threshold in (0, 11):
        with pytest.raises(ValueError, match="threshold"):
            harness.run(calibrate(judge, probes(), PassRule("accuracy", threshold)))
    with pytest.raises(ValueError, match="distinct"):
        harness.run(calibrate(judge, probes() + probes(), RULE))
