"""Rubrics as data: a JSON file names the dimensions, their ranges and criteria per language.

    {
      "name": "sotopia",
      "about": "where the dimensions come from",
      "per_agent": true,                  # score each participant on every dimension
      "overall": "overall",               # the name of the mean of the dimensions
      "instructions": {"en": "...", "zh": "..."},
      "dimensions": [
        {"name": "secret", "short": "SEC", "low": -10, "high": 0,
         "criteria": {"en": "...", "zh": "..."}},
        ...
      ]
    }

`load_rubric_file(name_or_path)` reads a built-in one by name (the files in
`dialogbench/judging/rubrics/`, e.g. `sotopia`), an installed one (an entry point in
`dialogbench.rubrics`: `dialogbench.plugins`) or any file by path, and checks it
(`DataError` naming the file, the field and the fix). `RubricFile.rubric(lang)` is the
`Rubric` a `Judge` scores with; a per-agent rubric becomes one dimension per participant
and dimension (`p1_goal`, `p2_goal`, ...), so one verdict scores both, each on the
dimension's own range: a reply out of range fails validation, is sent back for a fix, and
is kept unscored (counted) if it stays out of range, never clipped. A language the file
does not give falls back to English (`fell_back`).
"""

from __future__ import annotations

import functools
import json
import os
from importlib.metadata import EntryPoint
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dialogbench import plugins
from dialogbench.data.errors import DataError
from dialogbench.judging.rubric import Dimension, Rubric
from dialogbench.lang import Lang

BUILT_IN = Path(__file__).parent / "rubrics"
PARTICIPANTS = ("p1", "p2")
AGENT_LABEL = {
    "en": ("participant 1 (who speaks first)", "participant 2"),
    "zh": ("参与者 1（先开口的一方）", "参与者 2"),
}


class DimensionSpec(BaseModel):
    """One dimension of a rubric file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    short: str = ""
    low: int
    high: int
    criteria: dict[str, str]

    @field_validator("criteria")
    @classmethod
    def _english(cls, v: dict[str, str]) -> dict[str, str]:
        if "en" not in v:
            raise ValueError("criteria need at least an English ('en') text")
        return v


class RubricFile(BaseModel):
    """A rubric read from JSON (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    about: str = ""
    per_agent: bool = False
    overall: str = "average"
    instructions: dict[str, str]
    dimensions: list[DimensionSpec] = Field(min_length=1)
    source: str = ""
    sha256: str = ""

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def fell_back(self, lang: str) -> bool:
        """Whether `lang` has no text of its own here (English is used instead)."""
        return lang not in self.instructions or any(lang not in d.criteria for d in self.dimensions)

    def rubric(self, lang: Lang) -> Rubric:
        """The rubric a judge scores with, in `lang` (English where the file lacks it)."""
        use: Lang = "en" if self.fell_back(lang) else lang
        dims: list[Dimension] = []
        for d in self.dimensions:
            criteria = d.criteria[use]
            if not self.per_agent:
                dims.append(Dimension(d.name, d.low, d.high, criteria))
                continue
            for key, who in zip(PARTICIPANTS, AGENT_LABEL[use], strict=True):
                dims.append(Dimension(f"{key}_{d.name}", d.low, d.high, f"For {who}: {criteria}"))
        return Rubric(
            name=self.name,
            instructions=self.instructions[use],
            dimensions=tuple(dims),
            compares_to="context",
            lang=use,
        )

    def agent_scores(self, scores: dict[str, int]) -> dict[str, dict[str, int]]:
        """A per-agent verdict's scores by participant: {"p1": {dim: n}, "p2": {...}}."""
        return {key: {d: scores[f"{key}_{d}"] for d in self.names} for key in PARTICIPANTS}


@functools.lru_cache(maxsize=32)
def _read(path: Path) -> RubricFile:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DataError(
            path, f"cannot read the rubric: {e.strerror}", fix="check the path"
        ) from None
    return _parse(text, path)


def _parse(text: str, path: str | Path) -> RubricFile:
    """A rubric file's text, checked (`path` names it in errors and as its source)."""
    import hashlib

    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(
            path,
            f"not JSON: {e.msg} at line {e.lineno}",
            record=f"line {e.lineno}",
            fix="write the rubric as one JSON object (see docs/demo.md)",
        ) from None
    try:
        spec = RubricFile.model_validate(data)
        spec.rubric("en")  # names and ranges checked as a judge would use them
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "rubric"
        raise DataError(
            path,
            first["msg"],
            field=where,
            fix="see docs/demo.md for the rubric file's fields",
        ) from None
    except ValueError as e:
        raise DataError(path, str(e), field="dimensions", fix="fix the dimension") from None
    sha = hashlib.sha256(text.encode()).hexdigest()
    return spec.model_copy(update={"source": str(path), "sha256": sha})


def built_in() -> list[str]:
    """The names of the rubric files that come with dialogbench."""
    return sorted(p.stem for p in BUILT_IN.glob("*.json"))


def load_rubric_file(name_or_path: str) -> RubricFile:
    """A built-in rubric by name (`sotopia`), an installed one (an entry point of
    `dialogbench.rubrics`), or a rubric file by path."""
    path = BUILT_IN / f"{name_or_path}.json"
    if name_or_path in built_in():
        plugins.refuse(plugins.RUBRICS, name_or_path, "rubric")
        return _read(path)
    ep = plugins.named(plugins.RUBRICS, name_or_path)
    if ep is not None:
        return _plugin(ep)
    given = Path(name_or_path)
    if not given.exists():
        raise DataError(
            name_or_path,
            "no such rubric",
            fix=f"use demo, {', '.join(built_in())}, an entry point in '{plugins.RUBRICS}', "
            "or a path to a rubric JSON file",
        )
    return _read(given.resolve())


@functools.lru_cache(maxsize=32)
def _plugin(ep: EntryPoint) -> RubricFile:
    """The rubric an entry point names: a RubricFile, its JSON object, or its file's path
    (a str, a Path or an importlib.resources file), checked as a file is."""
    loaded = plugins.load(ep)
    where = plugins.origin(ep)
    if isinstance(loaded, RubricFile):
        return _parse(loaded.model_dump_json(exclude={"source", "sha256"}), where)
    if isinstance(loaded, dict):
        return _parse(json.dumps(loaded, ensure_ascii=False, sort_keys=True), where)
    if isinstance(loaded, str | os.PathLike):
        return _read(Path(loaded).resolve())
    if isinstance(loaded, Traversable):
        try:
            text = loaded.read_text(encoding="utf-8")
        except OSError as e:
            raise plugins.PluginError(f"cannot read the rubric of {where}: {e}") from None
        return _parse(text, where)
    raise plugins.PluginError(
        f"{where} is not a rubric: give a rubric file's path, its JSON object or a RubricFile"
    )
