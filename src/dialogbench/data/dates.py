"""One date parser for every loader: the formats chat exports and corpora write dates in.

`parse_date(value)` reads, in this order:

* numbers as Unix time: seconds, or milliseconds above 1e11 (UTC);
* ISO 8601 strings (`2023-05-08`, `2023-05-08T14:02:00+02:00`, `20230508`);
* a date with an optional time before or after it, where the date is one of
  `8 May 2023`, `8 May, 2023`, `May 8, 2023`, `8th May 2023`, `Sat 8 May 2023`,
  `2023/05/08`, `2023.05.08`, or `29.12.2023` (dotted dates with the year last are
  day.month.year), and the time one of `14:02`, `14:02:05`, `1:56 pm`, `1 pm`, joined
  by a space, a comma, `on` or `at` (LoCoMo's `1:56 pm on 8 May, 2023`, LongMemEval's
  `2023/05/20 (Sat) 02:21`, chat apps' `29.12.2023, 22:42:04`).

Dates with slashes or dashes and the year last (`08/05/2023`) are never read: day/month
and month/day cannot be told apart, and a guess would move events by months without a
word. Pass a `strptime` format for them (`fmt`, the importer's `--timestamp-format`);
`hint` names the formats that would read such a value. Two-digit years are not read either.

A list, an object, a boolean or NaN is not a date. Month and weekday names are English.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_DATES = (
    "%d %B %Y",
    "%d %b %Y",
    "%B %d %Y",
    "%b %d %Y",
    "%Y/%m/%d",
    "%Y.%m.%d",
    "%d.%m.%Y",
)
_TIMES = ("%H:%M", "%H:%M:%S", "%I:%M %p", "%I:%M:%S %p", "%I %p")
_FORMATS = (
    _DATES
    + tuple(f"{d} {t}" for d in _DATES for t in _TIMES)
    + tuple(f"{t} {d}" for d in _DATES for t in _TIMES)
)
_WEEKDAY = r"(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|urday|sday)?\.?"
_WEEKDAY_WORD = re.compile(rf"\(\s*{_WEEKDAY}\s*\)|\b{_WEEKDAY}(?=[\s,]|$)", re.IGNORECASE)
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b", re.IGNORECASE)
_MERIDIEM = re.compile(r"(?<=\d)\s*([ap])\.?m\.?(?=[\s,]|$)", re.IGNORECASE)
_JOINER = re.compile(r"\s*,\s*|\s+(?:on|at)\s+|\s+", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_KNOWN: dict[str, str] = {}
"""Shape of a cleaned date (digits as 0) -> the format that last read it: tried first."""
_DAY_MONTH_YEAR = re.compile(r"(\d{1,2})[/-](\d{1,2})[/-](\d{4})")


def parse_date(value: Any, fmt: str | None = None) -> datetime | None:
    """The moment `value` names (None for None); `ValueError` when it is no readable date.

    With `fmt`, strings are read by `datetime.strptime(value, fmt)` alone."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a date: {value!r}")
        try:
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=UTC)
        except (OverflowError, OSError):
            raise ValueError(f"not a date: {value!r} is out of range as Unix time") from None
    if not isinstance(value, str):
        raise ValueError(f"not a date: {type(value).__name__} {value!r}")
    text = value.strip()
    if fmt:
        return datetime.strptime(text, fmt)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    cleaned = _clean(text)
    shape = _DIGIT.sub("0", cleaned)
    known = _KNOWN.get(shape)
    for candidate in ((known,) if known else ()) + _FORMATS:
        try:
            when = datetime.strptime(cleaned, candidate)
        except ValueError:
            continue
        if len(_KNOWN) < 1000:
            _KNOWN[shape] = candidate
        return when
    raise ValueError(f"not a date in a known format: {value!r}")


def _clean(text: str) -> str:
    text = _WEEKDAY_WORD.sub(" ", text)
    text = _ORDINAL.sub(r"\1", text)
    text = _MERIDIEM.sub(r" \1m", text)
    return " ".join(p for p in _JOINER.split(text) if p)


def hint(value: Any) -> str:
    """How to make `value` readable: the `strptime` formats to pass, where one can be named."""
    m = _DAY_MONTH_YEAR.search(value) if isinstance(value, str) else None
    if m is None:
        return "a strptime format such as '%d/%m/%Y %H:%M'"
    sep = value[m.end(1)]
    day_first, month_first = f"%d{sep}%m{sep}%Y", f"%m{sep}%d{sep}%Y"
    if int(m.group(1)) > 12:
        return f"the day comes first here: '{day_first}'"
    if int(m.group(2)) > 12:
        return f"the month comes first here: '{month_first}'"
    return f"day/month order is ambiguous: '{day_first}' or '{month_first}'"


@dataclass
class Unreadable:
    """Dates a loader could not read (or found missing) and left empty: counted, the first
    kept as an example."""

    what: str
    """What the dates are, plural, e.g. 'session dates'."""
    count: int = 0
    example: str | None = None

    def read(self, where: str, value: Any) -> datetime | None:
        """`parse_date(value)`; a missing or unreadable `value` (at `where`) is counted and
        gives None."""
        try:
            when = parse_date(value)
        except ValueError:
            when = None
        if when is None:
            self.count += 1
            if self.example is None:
                self.example = f"{where}: {value!r}"
        return when

    def warning(self, messages: int) -> str | None:
        """The warning to report (`messages` are left without a timestamp), or None when
        every date was read."""
        if not self.count:
            return None
        return (
            f"{self.count} {self.what} are missing or could not be read, so {messages} "
            f"messages have no timestamp (e.g. {self.example}; readable: ISO 8601, '8 May 2023', "
            "'1:56 pm on 8 May, 2023', '2023/05/08 14:02', '29.12.2023, 22:42:04')"
        )
