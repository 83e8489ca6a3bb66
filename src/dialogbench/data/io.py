"""Reading and writing JSON / JSON Lines with errors that point at the line, and hashing.

Every reader here is strict: bytes that are not UTF-8, NaN / Infinity / numbers too large
for a float, an object with the same key twice, nesting too deep to read and strings that
cannot be written back as UTF-8 (lone surrogates such as `"\\ud800"`) are each a
`DataError` naming the file and, where it can, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import reprlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dialogbench.data.errors import DataError

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlevel = 3


def short(value: Any) -> str:
    """`repr(value)`, cut to about 60 characters and 3 levels (for error messages)."""
    return _repr.repr(value)


def source_name(source: str | Path) -> str:
    """What a file meant to be shared records for the data it came from: a built-in or
    registered name as it is, a path as its last part (the full path would say whose
    machine, and whose folders, it was built on)."""
    text = str(source)
    if not _is_path(text):
        return text
    return Path(text.rstrip("/\\")).name or text


def _is_path(text: str) -> bool:
    return "/" in text or "\\" in text


def recorded_source(source: str | Path, run: Path) -> str:
    """A source as a run's record keeps it: a path relative to the run folder `run` (so the
    record names no home folder, and still finds the data when both move together); a
    name as it is."""
    text = str(source)
    if not _is_path(text):
        return text
    return os.path.relpath(Path(text).resolve(), run.resolve())


def recorded_command(argv: list[str], run: Path) -> list[str]:
    """A command line as a run's record keeps it: the program by its name, and every
    argument naming an existing path (`--out=PATH` too) relative to the run folder."""

    def one(arg: str) -> str:
        flag, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if _is_path(value) and Path(value).exists():
            return flag + eq + recorded_source(value, run)
        return arg

    return [Path(argv[0]).name, *(one(a) for a in argv[1:])] if argv else []


def source_from_record(recorded: str, run: Path) -> str:
    """The inverse of `recorded_source`: where a recorded source lies, seen from here (an
    absolute path, from an older record, as it is)."""
    if not _is_path(recorded) or Path(recorded).is_absolute():
        return recorded
    return str(run / recorded)


def clip(text: str, limit: int = 60) -> str:
    """`text`, cut to `limit` characters with '...' (for names inside error messages)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Bad(Exception):
    """A value json.loads must not turn into data; carries (problem, field, fix)."""

    def __init__(self, problem: str, field: str | None, fix: str) -> None:
        super().__init__(problem)
        self.problem, self.field, self.fix = problem, field, fix


def _constant(name: str) -> Any:
    raise _Bad(f"{name} is not a JSON number", None, "write a finite number, or null")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Bad(
            f"the number {text[:40]} is too large for a float", None, "write a smaller number"
        )
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for key, _ in pairs:
        if key not in seen:
            seen.add(key)
            continue
        raise _Bad(
            f"key {short(key)} appears twice in one object",
            key if len(key) <= 80 else None,
            "keep one of the two (a JSON reader would silently drop the first)",
        )
    return obj  # pragma: no cover - a shorter dict always has a repeated key


def unencodable(obj: Any) -> str | None:
    """The JSON path (`[0].turns[2].text`, or `<key of ...>`) of the first string in `obj`
    that cannot be encoded as UTF-8, or None."""
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if not _encodes(value):
                return where or "(the whole document)"
        elif isinstance(value, dict):
            for k, v in reversed(value.items()):
                if not _encodes(k):
                    return f"<key of {where or 'the top-level object'}>"
                stack.append((v, f"{where}.{k}" if where else k))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_json(text: str, path: Path | str, record: str | None = None) -> Any:
    """Strictly parse one JSON document (a whole file, or one line of a JSON Lines file
    when `record` names it), raising a `DataError` for anything that is not plain data."""
    try:
        obj = json.loads(
            text, object_pairs_hook=_object, parse_constant=_constant, parse_float=_float
        )
    except json.JSONDecodeError as e:
        raise DataError(
            path,
            f"not valid JSON: {e.msg} at column {e.colno}",
            record=record or f"line {e.lineno}",
            fix="repair the JSON syntax at that position"
            if record is None
            else "each line must hold one complete JSON object",
        ) from None
    except _Bad as e:
        where, at = _position(text, record)
        raise DataError(path, e.problem + at, record=where, field=e.field, fix=e.fix) from None
    except RecursionError:
        where, at = _position(text, record)
        raise DataError(
            path,
            f"nested too deeply to read{at}",
            record=where,
            fix=f"flatten the structure (no dataset nests lists or objects {_DEEP} deep)",
        ) from None
    except ValueError:  # an integer of more than 4300 digits
        where, at = _position(text, record)
        raise DataError(
            path, f"a number has too many digits{at}", record=where, fix="write a smaller number"
        ) from None
    if _SURROGATE_ESCAPE.search(text):
        bad = unencodable(obj)
        if bad is not None:
            raise DataError(
                path,
                "the text holds a lone surrogate (a \\ud800-\\udfff escape without its pair), "
                "which cannot be written as UTF-8",
                record=record,
                field=bad,
                fix="remove the escape or give the full surrogate pair",
            )
    return obj


_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"(\s*:)?|[{}\[\]]|NaN|-?Infinity|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?'
)
_DEEP = 500
_MAX_DIGITS = 4300


def _bad_number(token: str) -> bool:
    """Whether a number token is one `parse_json` rejects."""
    if token.lstrip("-") in ("NaN", "Infinity") or len(token) > _MAX_DIGITS:
        return True
    return not math.isfinite(float(token))


def _position(text: str, record: str | None) -> tuple[str | None, str]:
    """(record, ' at column C') of what the strict reader rejected in `text`; the record is
    `record` (one line of JSON Lines) or the line in the file."""
    offset = _offending(text)
    if offset is None:
        return record, ""
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return record or f"line {text.count(chr(10), 0, offset) + 1}", f" at column {column}"


def _offending(text: str) -> int | None:
    """The offset of the first thing `parse_json` rejects (NaN or Infinity, a number too
    large, a key repeated in its object, nesting deeper than _DEEP), found by a plain scan
    that runs only once parsing has failed."""
    stack: list[set[str] | None] = []
    for m in _TOKEN.finditer(text):
        token = m.group()
        head = token[0]
        if head == '"':
            keys = stack[-1] if stack else None
            if m.group(1) is None or keys is None:
                continue
            raw = token[: m.start(1) - m.start()]
            key = json.loads(raw) if "\\" in raw else raw[1:-1]
            if key in keys:
                return m.start()
            keys.add(key)
        elif head in "{[":
            stack.append(set() if head == "{" else None)
            if len(stack) > _DEEP:
                return m.start()
        elif head in "}]":
            if stack:
                stack.pop()
        elif _bad_number(token):
            return m.start()
    return None


def read_text(path: Path) -> str:
    """A file's text, which must be UTF-8; a `DataError` naming the line of a bad byte."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(path, "file not found", fix="check the path") from None
    except IsADirectoryError:
        raise DataError(path, "is a folder, not a file", fix="point at the file") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(
            path,
            f"not UTF-8: byte 0x{data[e.start]:02x} at column {column} ({e.reason})",
            record=f"line {line}",
            fix="save the file as UTF-8",
        ) from None


def read_json(path: Path) -> Any:
    """Parse a whole JSON file, naming the line and column on a syntax error."""
    return parse_json(read_text(path), path)


def corpus_json(path: Path, filename: str, name: str | None, raw: Any) -> tuple[Path, str, Any]:
    """What a one-file corpus loader reads: the file (`path`, or `filename` in the folder
    `path`), the dataset's name (`name`, by default the stem of `path`), and the parsed
    JSON (`raw` when the caller has it, else read strictly)."""
    path = Path(path)
    name = name or path.stem
    if path.is_dir():
        path = path / filename
    return path, name, read_json(path) if raw is None else raw


def json_type(value: Any) -> str:
    """What a JSON value is, in the words an error message uses."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, float) and not math.isfinite(value):
        return f"the non-finite number {value}"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def as_text(value: Any, path: Path | str, record: str | None, field: str) -> str:
    """`value` as text: a string as it is, a finite number written out; anything else
    (null, true/false, a list, an object, NaN or infinity) is a `DataError` naming `field`."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    raise DataError(
        path,
        f"expected text, found {json_type(value)}",
        record=record,
        field=field,
        fix=f"give '{field}' a string value",
    )


def date_text(value: Any, path: Path | str, record: str | None, field: str) -> str | None:
    """A date field's text (None where it is null); a number, list or object is a
    `DataError` naming `field`, never read as "no date"."""
    if value is None or isinstance(value, str):
        return value
    raise DataError(
        path,
        f"expected a date string, found {json_type(value)}",
        record=record,
        field=field,
        fix="write the date as text, or null where it is unknown",
    )


def expect_object(
    obj: Any, path: Path | str, record: str | None, fix: str, field: str | None = None
) -> dict[str, Any]:
    """`obj` if it is a JSON object, else a `DataError` saying what was found instead."""
    if not isinstance(obj, dict):
        raise DataError(
            path,
            f"expected an object, found {json_type(obj)}",
            record=record,
            field=field,
            fix=fix,
        )
    return obj


def expect_list(
    obj: Any, path: Path | str, record: str | None, field: str | None, fix: str
) -> list[Any]:
    """`obj` if it is a JSON list, else a `DataError` saying what was found instead."""
    if not isinstance(obj, list):
        raise DataError(
            path, f"expected a list, found {json_type(obj)}", record=record, field=field, fix=fix
        )
    return obj


def require_fields(
    obj: Any, fields: Iterable[str], path: Path, record: str, prefix: str = ""
) -> None:
    """A `DataError` naming the first of `fields` that `obj` lacks (every one, when `obj` is
    not a JSON object); the field is reported as `prefix + name`."""
    for name in fields:
        if not isinstance(obj, dict) or name not in obj:
            raise DataError(
                path,
                "required field is missing",
                record=record,
                field=f"{prefix}{name}",
                fix=f"add '{prefix}{name}' to this record",
            )


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line of a JSON Lines file."""
    for lineno, obj in read_jsonl_values(path):
        expect_object(obj, path, f"line {lineno}", "each line must hold one JSON object")
        yield lineno, obj


def read_jsonl_values(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, value) for each non-blank line of a JSON Lines file, strictly
    parsed (`parse_json`); a line may hold any JSON value."""
    text = read_text(path).replace("\r\n", "\n").replace("\r", "\n")
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield lineno, parse_json(line, path, f"line {lineno}")


def with_caption(text: str, caption: str | None) -> str:
    """A message's text with the image it shares (LoCoMo's `blip_caption`) written in."""
    return f"{text} [shares an image: {caption}]" if caption else text


def json_lines(path: Path, text: str, fix: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line of JSON Lines `text` read from `path`,
    plainly parsed (a record file a run wrote, an export); a line that is not JSON is a
    `DataError` naming it, with `fix`."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                path, f"not valid JSON: {e.msg}", record=f"line {lineno}", fix=fix
            ) from None
        yield lineno, value


_M = TypeVar("_M", bound=BaseModel)


def parse_record(
    model: type[_M],
    obj: Any,
    path: Path | str,
    record: str | None,
    names: dict[str, str] | None = None,
) -> _M:
    """Validate `obj` as `model`, turning the first pydantic error into a `DataError`.

    `names` maps model fields to what the input calls them, for the error's field."""
    expect_object(obj, path, record, f"write this record as a JSON object ({model.__name__})")
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        loc = [str(p) for p in err["loc"]]
        if names and loc and loc[0] in names:
            loc[0] = names[loc[0]]
        field = ".".join(loc) or None
        problem = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            problem = "required field is missing"
            fix = f"add '{field}' to this record"
        elif err["type"] == "extra_forbidden":
            problem = "unknown field"
            fix = f"remove '{field}' or check its spelling"
        elif err["type"] == "unsafe_name":  # data.safe_names: the name of a folder
            problem = f"{short(err['input'])} {err['ctx']['problem']}"
            fix = err["ctx"]["fix"]
        else:
            if err["type"].endswith("_type"):
                problem += f", found {json_type(err['input'])}"
            fix = "correct the record" if field is None else f"give '{field}' a valid value"
        raise DataError(path, problem, record=record, field=field, fix=fix) from None


def write_jsonl(path: Path, rows: Iterable[BaseModel | dict[str, Any]]) -> None:
    """Write one JSON object per line (pydantic models dumped without defaults' noise)."""
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            data = (
                row.model_dump(mode="json", exclude_defaults=True)
                if isinstance(row, BaseModel)
                else row
            )
            f.write(json.dumps(data, ensure_ascii=False) + "\n")


def sha256_files(paths: Iterable[Path], root: Path | None = None) -> str:
    """One digest over several files: each file's relative name and bytes, in sorted order."""
    h = hashlib.sha256()
    items = sorted(paths, key=lambda p: str(p.relative_to(root)) if root else str(p))
    for p in items:
        name = str(p.relative_to(root)) if root else p.name
        h.update(name.encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    """The plain sha256 of one file's bytes (what download pins are checked against)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
