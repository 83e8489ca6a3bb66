"""Rubrics, and the pydantic schemas a judge's JSON reply must satisfy.

A rubric names integer-scored dimensions (each with its own inclusive range) and optional
yes/no flags (e.g. `uses_context`). Out-of-range or missing scores fail validation, so the
model is asked to correct itself, and what still fails is kept unscored.

Single candidate:  {"reason": str, <dim>: int, ..., <flag>: bool, ...}
Blinded candidates: {"candidates": [{"label": "A", "reason": str, <dim>: int, ...}, ...]}
with exactly one entry per label. `reason` comes first so that it is written before the scores.
The schemas' field descriptions are worded in the rubric's language (`dialogbench.lang`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model, field_validator

from dialogbench.lang import FRAMINGS, Lang

CompareTo = Literal["reference", "context", "none"]
"""What a rubric needs besides the candidate: a reference answer, the context, or nothing."""

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
RESERVED = frozenset({"reason", "label", "candidates"})


def _check_name(kind: str, name: str) -> None:
    if not _NAME.match(name) or name.startswith("model_") or name in RESERVED:
        raise ValueError(
            f"{kind} name {name!r} must be lower_snake_case (letters, digits, _), start with a "
            f"letter, not start with 'model_' and not be one of {sorted(RESERVED)}"
        )


@dataclass(frozen=True)
class Dimension:
    """One integer-scored criterion, scored from `low` to `high` inclusive."""

    name: str
    low: int
    high: int
    criteria: str

    def __post_init__(self) -> None:
        _check_name("dimension", self.name)
        if self.low >= self.high:
            raise ValueError(f"dimension {self.name!r}: low ({self.low}) must be below high")
        if not self.criteria.strip():
            raise ValueError(f"dimension {self.name!r}: criteria must not be empty")


@dataclass(frozen=True)
class Flag:
    """One yes/no question the judge answers about a candidate (e.g. `uses_context`)."""

    name: str
    question: str

    def __post_init__(self) -> None:
        _check_name("flag", self.name)


@dataclass(frozen=True)
class Rubric:
    """What a judge scores, and how; `instructions` open the task description."""

    name: str
    instructions: str
    dimensions: tuple[Dimension, ...]
    compares_to: CompareTo = "reference"
    flags: tuple[Flag, ...] = ()
    lang: Lang = field(default="en", repr=False)
    """The language of the instructions and criteria; the judge's framing follows it. Left
    out of `repr`, so the prompt digests tracks take of their English rubrics stay put."""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a rubric needs a name")
        if self.lang not in FRAMINGS:
            raise ValueError(f"rubric {self.name!r}: lang must be one of {sorted(FRAMINGS)}")
        if not self.dimensions:
            raise ValueError(f"rubric {self.name!r} has no dimensions")
        names = [d.name for d in self.dimensions] + [f.name for f in self.flags]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"rubric {self.name!r}: repeated names {repeated}")

    def dimension(self, name: str) -> Dimension:
        """The dimension called `name`; `KeyError` naming the known ones otherwise."""
        for d in self.dimensions:
            if d.name == name:
                return d
        known = ", ".join(d.name for d in self.dimensions)
        raise KeyError(f"rubric {self.name!r} has no dimension {name!r} (it has: {known})")


def _score_fields(rubric: Rubric) -> dict[str, Any]:
    wording = FRAMINGS[rubric.lang]
    fields: dict[str, Any] = {"reason": (str, Field(description=wording.reason_help))}
    for d in rubric.dimensions:
        help_ = wording.score_help.format(criteria=d.criteria.strip(), low=d.low, high=d.high)
        fields[d.name] = (int, Field(ge=d.low, le=d.high, description=help_))
    for f in rubric.flags:
        fields[f.name] = (bool, Field(description=f.question))
    return fields


def verdict_schema(rubric: Rubric) -> type[BaseModel]:
    """The reply schema for scoring one candidate."""
    model: type[BaseModel] = create_model("JudgeVerdict", **_score_fields(rubric))
    return model


class _BlindReply(BaseModel):
    """Base of blinded reply schemas: each label must appear exactly once."""

    candidates: list[Any]

    @field_validator("candidates")
    @classmethod
    def _labels_once(cls, items: list[Any]) -> list[Any]:
        labels = [item.label for item in items]
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            raise ValueError(f"each label must appear exactly once; repeated: {repeated}")
        return items


def blind_schema(rubric: Rubric, labels: tuple[str, ...]) -> type[BaseModel]:
    """The reply schema for scoring several candidates known only by `labels`."""
    if not labels:
        raise ValueError("blind scoring needs at least one label")
    wording = FRAMINGS[rubric.lang]
    label_type: Any = Literal[labels]
    item: type[BaseModel] = create_model(
        "CandidateVerdict",
        label=(label_type, Field(description=wording.label_help)),
        **_score_fields(rubric),
    )
    n = len(labels)
    described = Field(min_length=n, max_length=n, description=wording.entries_help)
    model: type[BaseModel] = create_model(
        "BlindJudgeVerdict",
        __base__=_BlindReply,
        candidates=(list[item], described),  # type: ignore[valid-type]
    )
    return model


def blind_labels(n: int) -> tuple[str, ...]:
    """`n` labels: A, B, ..., Z, AA, AB, ..."""
    out: list[str] = []
    for i in range(n):
        label, k = "", i + 1
        while k:
            k, rem = divmod(k - 1, 26)
            label = chr(ord("A") + rem) + label
        out.append(label)
    return tuple(out)
