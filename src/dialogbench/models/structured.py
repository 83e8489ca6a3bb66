"""Getting a validated object out of a model's reply.

Extraction tries, in order: the whole reply as JSON, the last fenced ```json block, the last
balanced `{...}` object. A reply that fails to parse or validate is sent back with a
corrective message, up to a limit; what still fails is returned unscored with its raw text,
never scored 0 and never dropped, and is a failed call of kind `unparseable`, `schema` or
`range` (`Unusable.kind`; see `Model.generate_parsed`).
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

CALL_FAILED = "call failed"
"""How a `Structured` error starts when the model call itself failed (no reply to fix)."""

ReplyKind = Literal["unparseable", "schema", "range"]
"""Why a reply that arrived could not be used:

- `unparseable`: no JSON (or nothing the caller's parser could read) in it;
- `schema`: JSON of the wrong shape (a field missing, of the wrong type, an unknown label);
- `range`: the right shape, with a value out of its allowed range (a score of 11 on 0-10).
"""
REPLY_KINDS: tuple[ReplyKind, ...] = ("unparseable", "schema", "range")

_RANGE_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of"}
)
"""pydantic error types that say a value is out of range (`Field(ge=..., le=...)`)."""


class Unusable(ValueError):
    """A reply that cannot be used, and why (`kind`): what a parser raises. A plain
    `ValueError` from a parser counts as `unparseable`."""

    def __init__(self, message: str, kind: ReplyKind = "unparseable") -> None:
        super().__init__(message)
        self.kind: ReplyKind = kind


def unusable_kind(error: ValueError) -> ReplyKind:
    """The kind of an unusable reply: the `Unusable.kind` a parser raised, else
    `unparseable`."""
    return error.kind if isinstance(error, Unusable) else "unparseable"


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The JSON value a reply carries; `ValueError` when there is none."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for block in reversed(_FENCE.findall(text)):
        try:
            return json.loads(block.strip())
        except json.JSONDecodeError:
            continue
    obj = _last_balanced_object(text)
    if obj is not None:
        return obj
    raise Unusable("no JSON object found in the reply", "unparseable")


def _last_balanced_object(text: str) -> Any:
    """Scan for balanced braces outside strings; return the last span that parses."""
    found: Any = None
    depth = 0
    start = -1
    in_string = False
    escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"' and depth > 0:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                with contextlib.suppress(json.JSONDecodeError):
                    found = json.loads(text[start : i + 1])
    return found


class Structured(BaseModel, Generic[V]):
    """A validated value, or the raw text and the reason it could not be used."""

    value: V | None = None
    raw: str = ""
    error: str | None = None
    attempts: int = 0
    kind: str | None = None
    """Why there is no value: a `ReplyKind` (the reply was unusable) or the failed call's
    `ModelError.kind`; None with a value."""
    retry: int = 0
    """How many earlier askings of this call gave nothing usable (0: the first asking;
    `Model.generate_parsed`): the cache key and the request's seed carry it."""

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def call_failed(self) -> bool:
        """No value because the call failed, not because a reply was unusable."""
        return self.error is not None and self.error.startswith(CALL_FAILED)


def parse_reply(text: str, schema: type[T]) -> T:
    """Extract and validate; raise `Unusable` with a short reason on failure (`range` when
    every problem is a value out of its range, else `schema`; no JSON: `unparseable`)."""
    data = extract_json(text)
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in errors[:5]
        )
        kind: ReplyKind = "range" if all(x["type"] in _RANGE_ERRORS for x in errors) else "schema"
        raise Unusable(f"the JSON does not match the schema ({problems})", kind) from None


CORRECTION = (
    "Your reply could not be used: {error}. Reply again with only one JSON object that "
    "follows this JSON schema, and nothing else:\n{schema}"
)
