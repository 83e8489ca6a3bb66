"""Errors raised on bad input: each names the file, the record, the field and the fix."""

from __future__ import annotations

from pathlib import Path


class DataError(ValueError):
    """A problem in an input file, located precisely enough to fix by hand."""

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        record: str | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path = str(path)
        self.problem = problem
        self.record = record
        self.field = field
        self.fix = fix
        where = _cut(self.path, 300)
        if record is not None:
            where += f", {_cut(record, 200)}"
        if field is not None:
            where += f", field '{_cut(field, 120)}'"
        message = f"{where}: {_cut(problem, 800)}"
        if fix:
            message += f" (fix: {_cut(fix, 400)})"
        super().__init__(message)


def _cut(text: str, limit: int) -> str:
    """`text` cut to `limit` characters: a name or value taken from the input (a 2 MB
    conversation id) never makes the message unreadable."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
