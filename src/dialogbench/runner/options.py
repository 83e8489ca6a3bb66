"""Config fields that describe themselves: help, stage, range and choices in one place.

A track's config is a frozen dataclass whose fields are made with `option(...)`. The runner
reads the metadata to check a config (`check`) and to split it by stage (`stage_of`), and
the CLI builds `dialogbench run TRACK` from the same fields, so defaults, ranges and
help are written once.

    stage "solve"      changes what the models are asked (redo the units' model calls)
    stage "score"      changes how saved outputs are judged (re-judge, no call to the model)
    stage "aggregate"  changes only the figures drawn from scored units (no model call)
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import Field
from typing import Any, Literal, get_args, get_origin

Stage = Literal["solve", "score", "aggregate"]
STAGES: tuple[Stage, ...] = ("solve", "score", "aggregate")


class OptionError(ValueError):
    """A config value out of its field's type, range or choices; names the option."""

    def __init__(self, name: str, message: str, f: Field[Any] | None = None) -> None:
        super().__init__(f"{flag(name, f)}: {message}")
        self.field = name


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    stage: Stage = "solve",
    min: float | None = None,
    max: float | None = None,
    choices: Sequence[str] | None = None,
    parse: Callable[[str], Any] | None = None,
    flag: str | None = None,
    nonempty: bool = True,
    sort: bool = False,
    factory: Callable[[], Any] | None = None,
    panel: str | None = None,
) -> Any:
    """A config field with its one-line help, its stage, the range of its numbers (each
    element of a tuple too), `parse` for a CLI item (e.g. '8k' -> 8192), and `sort` to
    sort a list given on the CLI; `panel` groups it in `--help` (default: its stage's)."""
    meta = {
        "help": help,
        "stage": stage,
        "min": min,
        "max": max,
        "choices": tuple(choices) if choices is not None else None,
        "parse": parse,
        "flag": flag,
        "nonempty": nonempty,
        "sort": sort,
        "panel": panel,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag(name: str, f: Field[Any] | None = None) -> str:
    """`--n-boot` for `n_boot` (or the flag the field names)."""
    if f is not None and f.metadata.get("flag"):
        return str(f.metadata["flag"])
    return "--" + name.replace("_", "-")


def config_fields(config_type: type[Any]) -> list[Field[Any]]:
    return list(dataclasses.fields(config_type))


def stage_of(f: Field[Any]) -> Stage:
    stage: Stage = f.metadata.get("stage", "solve")
    return stage


def by_stage(config: Any) -> dict[Stage, dict[str, Any]]:
    """The config's values split by stage (JSON-ready: tuples as lists)."""
    out: dict[Stage, dict[str, Any]] = {s: {} for s in STAGES}
    for f in dataclasses.fields(config):
        out[stage_of(f)][f.name] = _plain(getattr(config, f.name))
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a field holds, read from its annotation."""

    base: type[Any]
    """int, float, bool or str (the element type of a tuple)."""
    optional: bool = False
    many: bool = False
    literal: tuple[str, ...] | None = None


def kind_of(config_type: type[Any], name: str) -> Kind:
    """The `Kind` of a config field (int | None, tuple[str, ...], Literal[...], ...)."""
    hint = typing.get_type_hints(config_type)[name]
    optional = False
    if get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        optional = len(args) < len(get_args(hint))
        hint = args[0] if len(args) == 1 else hint
    many = get_origin(hint) is tuple
    if many:
        hint = get_args(hint)[0]
    literal = None
    if get_origin(hint) is Literal:
        literal = tuple(str(a) for a in get_args(hint))
        hint = str
    if hint not in (int, float, bool, str):
        raise TypeError(f"{config_type.__name__}.{name}: unsupported option type {hint!r}")
    return Kind(hint, optional, many, literal)


def choices_of(config_type: type[Any], f: Field[Any]) -> tuple[str, ...] | None:
    given: tuple[str, ...] | None = f.metadata.get("choices")
    return given if given is not None else kind_of(config_type, f.name).literal


def check(config: Any) -> None:
    """Raise `OptionError` for the first value out of its field's type, range or choices."""
    cls = type(config)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kind = kind_of(cls, f.name)
        if value is None:
            if not kind.optional:
                raise OptionError(f.name, "a value is required", f)
            continue
        values = list(value) if kind.many else [value]
        if kind.many and not isinstance(value, tuple | list):
            raise OptionError(f.name, f"expected a list, got {value!r}", f)
        if kind.many and not values and f.metadata.get("nonempty", True):
            raise OptionError(f.name, "give at least one value", f)
        for v in values:
            _check_one(cls, f, kind, v)


def _check_one(cls: type[Any], f: Field[Any], kind: Kind, v: Any) -> None:
    if kind.base is bool:
        if not isinstance(v, bool):
            raise OptionError(f.name, f"expected true or false, got {v!r}", f)
        return
    if kind.base in (int, float):
        ok = isinstance(v, int) if kind.base is int else isinstance(v, int | float)
        if isinstance(v, bool) or not ok:
            what = "an integer" if kind.base is int else "a number"
            raise OptionError(f.name, f"expected {what}, got {v!r}", f)
        if not math.isfinite(v):
            raise OptionError(f.name, f"{v} is not a finite number", f)
        lo, hi = f.metadata.get("min"), f.metadata.get("max")
        if lo is not None and v < lo:
            raise OptionError(f.name, f"{v} is below the minimum {_num(lo)}{_range(lo, hi)}", f)
        if hi is not None and v > hi:
            raise OptionError(f.name, f"{v} is above the maximum {_num(hi)}{_range(lo, hi)}", f)
        return
    if not isinstance(v, str):
        raise OptionError(f.name, f"expected text, got {v!r}", f)
    allowed = choices_of(cls, f)
    if allowed is not None and v not in allowed:
        raise OptionError(f.name, f"{v!r} is not one of: {', '.join(allowed)}", f)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _range(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" (allowed: {_num(lo)} to {_num(hi)})"
    return ""


def describe(config_type: type[Any], f: Field[Any]) -> str:
    """The field's help with its range or choices, as `--help` shows it."""
    text = str(f.metadata.get("help", ""))
    allowed = choices_of(config_type, f)
    lo, hi = f.metadata.get("min"), f.metadata.get("max")
    extra = []
    if allowed is not None:
        extra.append("one of " + ", ".join(allowed))
    if lo is not None or hi is not None:
        extra.append(
            f"{_num(lo) if lo is not None else '-inf'}..{_num(hi) if hi is not None else 'inf'}"
        )
    kind = kind_of(config_type, f.name)
    if kind.many:
        extra.append("comma-separated")
    return text + (f" ({'; '.join(extra)})" if extra else "")


def metavar(config_type: type[Any], f: Field[Any]) -> str:
    """How `--help` shows a field's value: INT, X|Y, INT,INT,..."""
    kind = kind_of(config_type, f.name)
    allowed = choices_of(config_type, f)
    one = "|".join(allowed) if allowed else {int: "INT", float: "NUM", str: "TEXT"}[kind.base]
    if f.metadata.get("parse") is not None:
        one = "TEXT"
    return f"{one},..." if kind.many else one
