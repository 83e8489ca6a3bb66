"""Extracting and validating JSON from model replies."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from dialogbench.models.structured import extract_json, parse_reply


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, le=130)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]  ", [1, 2]),
        ('Sure!\n```json\n{"a": 1}\n```\nDone.', {"a": 1}),
        ('```\n{"a": 0}\n```\nthen\n```json\n{"a": 2}\n```', {"a": 2}),
        ('Here: {"a": {"b": "}"}} and then {"c": 3}.', {"c": 3}),
        ('text {"a": "quote \\" and { brace"} tail', {"a": 'quote " and { brace'}),
        ('{"broken": } but later {"ok": true}', {"ok": True}),
    ],
)
def test_extract_json(text: str, expected: object) -> None:
    assert extract_json(text) == expected


def test_no_json_is_an_error() -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json("I think the answer is yes.")


def test_parse_reply_validates() -> None:
    assert parse_reply('The person: {"name": "Maya", "age": 31}', Person) == Person(
        name="Maya", age=31
    )
    with pytest.raises(ValueError, match=r"does not match the schema \(age: "):
        parse_reply('{"name": "Maya", "age": 400}', Person)
    with pytest.raises(ValueError, match="name: Field required"):
        parse_reply('{"age": 3}', Person)
