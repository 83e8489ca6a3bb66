"""Reading and writing JSON / JSON Lines with errors that point at the line, and hashing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dialogbench.data.errors import DataError


def read_json(path: Path) -> Any:
    """Parse a whole JSON file, naming the line and column on a syntax error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(path, "file not found", fix="check the path") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(
            path,
            f"not valid JSON: {e.msg} at column {e.colno}",
            record=f"line {e.lineno}",
            fix="repair the JSON syntax at that position",
        ) from None


def expect_object(
    obj: Any, path: Path, record: str, fix: str, field: str | None = None
) -> dict[str, Any]:
    """`obj` if it is a JSON object, else a `DataError` saying what was found instead."""
    if not isinstance(obj, dict):
        raise DataError(
            path,
            f"expected an object, found {type(obj).__name__}",
            record=record,
            field=field,
            fix=fix,
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
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(
                    path,
                    f"not valid JSON: {e.msg} at column {e.colno}",
                    record=f"line {lineno}",
                    fix="each line must hold one complete JSON object",
                ) from None
            if not isinstance(obj, dict):
                raise DataError(
                    path,
                    f"expected a JSON object, found {type(obj).__name__}",
                    record=f"line {lineno}",
                    fix="each line must hold one JSON object",
                )
            yield lineno, obj


_M = TypeVar("_M", bound=BaseModel)


def parse_record(model: type[_M], obj: Any, path: Path, record: str) -> _M:
    """Validate `obj` as `model`, turning the first pydantic error into a `DataError`."""
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        problem = err["msg"]
        if err["type"] == "missing":
            problem = "required field is missing"
            fix = f"add '{field}' to this record"
        elif err["type"] == "extra_forbidden":
            problem = "unknown field"
            fix = f"remove '{field}' or check its spelling"
        else:
            fix = f"give '{field}' a valid value"
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
