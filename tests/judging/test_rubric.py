"""Rubric specs and the reply schemas built from them: ranges, required fields, labels."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from dialogbench.judging import Dimension, Flag, Rubric, blind_labels, blind_schema, verdict_schema

GOOD: dict[str, Any] = {"reason": "fine", "accuracy": 7, "clarity": 3, "uses_context": True}


def test_single_schema_accepts_scores_in_range(rubric: Rubric) -> None:
    got = verdict_schema(rubric).model_validate(GOOD)
    assert got.model_dump() == GOOD
    for edge in ({"accuracy": 0, "clarity": 1}, {"accuracy": 10, "clarity": 5}):
        verdict_schema(rubric).model_validate({**GOOD, **edge})


@pytest.mark.parametrize(
    "change",
    [
        {"accuracy": 11},
        {"accuracy": -1},
        {"clarity": 0},
        {"clarity": 6},
        {"accuracy": 7.5},
        {"accuracy": "high"},
        {"uses_context": "sometimes"},
    ],
)
def test_single_schema_rejects_bad_scores(rubric: Rubric, change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        verdict_schema(rubric).model_validate({**GOOD, **change})


@pytest.mark.parametrize("missing", ["reason", "accuracy", "clarity", "uses_context"])
def test_single_schema_requires_every_field(rubric: Rubric, missing: str) -> None:
    data = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(ValidationError):
        verdict_schema(rubric).model_validate(data)


def test_json_schema_carries_ranges_and_puts_reason_first(rubric: Rubric) -> None:
    schema = verdict_schema(rubric).model_json_schema()
    props = schema["properties"]
    assert next(iter(props)) == "reason"
    assert (props["accuracy"]["minimum"], props["accuracy"]["maximum"]) == (0, 10)
    assert (props["clarity"]["minimum"], props["clarity"]["maximum"]) == (1, 5)
    assert props["uses_context"]["type"] == "boolean"
    assert set(schema["required"]) == set(GOOD)


def _entry(label: str, accuracy: int = 5) -> dict[str, Any]:
    return {**GOOD, "label": label, "accuracy": accuracy}


def test_blind_schema_wants_each_label_exactly_once(rubric: Rubric) -> None:
    schema = blind_schema(rubric, ("A", "B"))
    got = schema.model_validate({"candidates": [_entry("B", 2), _entry("A", 9)]})
    assert [c["label"] for c in got.model_dump()["candidates"]] == ["B", "A"]
    bad = [
        [_entry("A"), _entry("A")],  # repeated
        [_entry("A")],  # missing
        [_entry("A"), _entry("B"), _entry("B")],  # too many
        [_entry("A"), _entry("C")],  # unknown
        [_entry("A"), _entry("B", 11)],  # out of range
    ]
    for candidates in bad:
        with pytest.raises(ValidationError):
            schema.model_validate({"candidates": candidates})


def test_blind_json_schema_lists_the_labels(rubric: Rubric) -> None:
    schema = blind_schema(rubric, ("A", "B", "C")).model_json_schema()
    item = schema["$defs"]["CandidateVerdict"]
    assert item["properties"]["label"]["enum"] == ["A", "B", "C"]
    assert schema["properties"]["candidates"]["minItems"] == 3
    assert schema["properties"]["candidates"]["maxItems"] == 3


def test_blind_labels() -> None:
    assert blind_labels(3) == ("A", "B", "C")
    labels = blind_labels(30)
    assert labels[25:28] == ("Z", "AA", "AB")
    assert len(set(labels)) == 30
    assert blind_labels(0) == ()


def test_specs_are_validated() -> None:
    with pytest.raises(ValueError, match="low"):
        Dimension("accuracy", 5, 5, "x")
    for bad in ("Accuracy", "goal achievement", "reason", "label", "model_x", "1st"):
        with pytest.raises(ValueError, match="name"):
            Dimension(bad, 0, 10, "x")
    with pytest.raises(ValueError, match="criteria"):
        Dimension("accuracy", 0, 10, "  ")
    with pytest.raises(ValueError, match="no dimensions"):
        Rubric("r", "x", ())
    with pytest.raises(ValueError, match="repeated"):
        Rubric("r", "x", (Dimension("a", 0, 1, "x"),), flags=(Flag("a", "?"),))


def test_dimension_lookup(rubric: Rubric) -> None:
    assert rubric.dimension("clarity").high == 5
    with pytest.raises(KeyError, match="accuracy, clarity"):
        rubric.dimension("fluency")
