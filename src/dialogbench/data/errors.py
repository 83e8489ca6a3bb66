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
        where = self.path
        if record is not None:
            where += f", {record}"
        if field is not None:
            where += f", field '{field}'"
        message = f"{where}: {problem}"
        if fix:
            message += f" (fix: {fix})"
        super().__init__(message)
