"""Getting a validated object out of a model's reply.

Extraction tries, in order: the whole reply as JSON, the last fenced ```json block, the last
balanced `{...}` object. A reply that fails to parse or validate is sent back with a
corrective message, up to a limit; what still fails is returned unscored with its raw text,
never scored 0 and never dropped.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

CALL_FAILED = "call failed"
"""How a `Structured` error starts when the model call itself failed (no reply to fix)."""

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
    raise ValueError("no JSON object found in the reply")


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

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def call_failed(self) -> bool:
        """No value because the call failed, not because a reply was unusable."""
        return self.error is not None and self.error.startswith(CALL_FAILED)


def parse_reply(text: str, schema: type[T]) -> T:
    """Extract and validate; raise `ValueError` with a short reason on failure."""
    data = extract_json(text)
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"
            for err in e.errors()[:5]
        )
        raise ValueError(f"the JSON does not match the schema ({problems})") from None


CORRECTION = (
    "Your reply could not be used: {error}. Reply again with only one JSON object that "
    "follows this JSON schema, and nothing else:\n{schema}"
)
