"""verdict_fields: one layout of a row's judge fields for every track."""

from __future__ import annotations

import pytest

from dialogbench.judging import BlindVerdict, Verdict, is_unscored, verdict_fields

BASE = (
    "judged",
    "judge_model",
    "judge_rubric",
    "judge_scores",
    "judge_flags",
    "judge_reason",
    "judge_attempts",
)


def test_a_scored_verdict() -> None:
    v = Verdict(judge="j", rubric="qa", scores={"a": 2}, flags={"f": True}, reason="ok", attempts=1)
    row = verdict_fields(v)
    assert tuple(row) == BASE
    assert row == {
        "judged": True,
        "judge_model": "j",
        "judge_rubric": "qa",
        "judge_scores": {"a": 2},
        "judge_flags": {"f": True},
        "judge_reason": "ok",
        "judge_attempts": 1,
    }
    assert not is_unscored(row)


def test_an_unscored_verdict_keeps_raw_and_error() -> None:
    v = Verdict(judge="j", rubric="qa", raw="nope", error="no JSON", attempts=3)
    row = verdict_fields(v)
    assert tuple(row) == (*BASE, "judge_raw", "judge_error")
    assert row["judged"] is False and row["judge_scores"] is None and row["judge_flags"] is None
    assert (row["judge_raw"], row["judge_error"], row["judge_attempts"]) == ("nope", "no JSON", 3)
    assert is_unscored(row)


def test_nothing_judged_says_why() -> None:
    row = verdict_fields(None, skipped="episode failed")
    assert tuple(row) == (*BASE, "judge_skipped")
    assert row["judged"] is False and row["judge_model"] is None and row["judge_attempts"] == 0
    assert row["judge_skipped"] == "episode failed"
    assert not is_unscored(row)  # not a failed verdict: there was none
    with pytest.raises(ValueError, match="skipped"):
        verdict_fields(None)
    with pytest.raises(ValueError, match="skipped"):
        verdict_fields(Verdict(judge="j", rubric="qa"), skipped="why")


def test_one_candidate_of_a_blinded_verdict() -> None:
    b = BlindVerdict(
        judge="j",
        rubric="chat",
        labels={"A": "y", "B": "x"},
        seed=7,
        scores={"x": {"m": 1}, "y": {"m": 3}},
        flags={"x": {"f": False}, "y": {"f": True}},
        reasons={"x": "rx", "y": "ry"},
        attempts=1,
    )
    row = verdict_fields(b, "x")
    assert tuple(row) == (*BASE, "judge_label", "judge_labels", "judge_seed")
    assert row["judge_scores"] == {"m": 1} and row["judge_flags"] == {"f": False}
    assert (row["judge_reason"], row["judge_label"], row["judge_seed"]) == ("rx", "B", 7)
    assert row["judge_labels"] == {"A": "y", "B": "x"}
    with pytest.raises(ValueError, match="candidate"):
        verdict_fields(b)
    with pytest.raises(KeyError):
        verdict_fields(b, "z")
    with pytest.raises(ValueError, match="blinded"):
        verdict_fields(Verdict(judge="j", rubric="qa"), "x")


def test_an_unscored_blinded_verdict() -> None:
    b = BlindVerdict(judge="j", rubric="chat", labels={"A": "x"}, raw="?", error="bad", attempts=3)
    row = verdict_fields(b, "x")
    assert row["judged"] is False and row["judge_scores"] is None and row["judge_reason"] == ""
    assert (row["judge_raw"], row["judge_error"], row["judge_label"]) == ("?", "bad", "A")
    assert is_unscored(row)
