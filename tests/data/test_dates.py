"""The shared date parser: the formats it reads, the ones it refuses, and the hints."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dialogbench.data.dates import Unreadable, hint, parse_date


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("10:01 a.m. on 3 January, 2024", datetime(2024, 1, 3, 10, 1)),
        ("8 May 2023", datetime(2023, 5, 8)),
        ("8th May, 2023", datetime(2023, 5, 8)),
        ("May 8, 2023", datetime(2023, 5, 8)),
        ("Saturday, May 8, 2023 at 3pm", datetime(2023, 5, 8, 15)),
        ("29.12.2023, 22:42:04", datetime(2023, 12, 29, 22, 42, 4)),
        ("2023/05/08 14:02", datetime(2023, 5, 8, 14, 2)),
        ("2023/05/20 (Sat) 02:21", datetime(2023, 5, 20, 2, 21)),
        ("2023-05-08", datetime(2023, 5, 8)),
        ("2023-05-08T14:02:00Z", datetime(2023, 5, 8, 14, 2, tzinfo=UTC)),
        (1709391600, datetime(2024, 3, 2, 15, 0, tzinfo=UTC)),
        (1709391600000, datetime(2024, 3, 2, 15, 0, tzinfo=UTC)),
        (None, None),
    ],
)
def test_reads_common_formats(value: Any, expected: datetime | None) -> None:
    assert parse_date(value) == expected


@pytest.mark.parametrize(
    "value", ["08/05/2023", "05-08-2023", "sometime in spring", "May 2023", [2023], {}, True]
)
def test_refuses_what_is_no_date_or_ambiguous(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_date(value)


def test_nan_and_huge_numbers_are_no_dates() -> None:
    for value in (float("nan"), float("inf"), 10**30):
        with pytest.raises(ValueError):
            parse_date(value)


def test_format_reads_day_month_order() -> None:
    assert parse_date("08/05/2023", "%d/%m/%Y") == datetime(2023, 5, 8)
    assert parse_date("08/05/2023", "%m/%d/%Y") == datetime(2023, 8, 5)


def test_hint_names_the_format() -> None:
    assert "'%d/%m/%Y' or '%m/%d/%Y'" in hint("08/05/2023 10:00")
    assert "day comes first" in hint("13/05/2023") and "'%d/%m/%Y'" in hint("13/05/2023")
    assert "month comes first" in hint("05-13-2023") and "'%m-%d-%Y'" in hint("05-13-2023")
    assert "strptime" in hint([1])


def test_unreadable_counts_with_an_example() -> None:
    dates = Unreadable("session dates")
    assert dates.read("s1", "8 May 2023") == datetime(2023, 5, 8)
    assert dates.warning(0) is None
    assert dates.read("s2", "08/05/2023") is None
    assert dates.read("s3", None) is None
    warning = dates.warning(7)
    assert warning is not None
    assert warning.startswith("2 session dates are missing or could not be read")
    assert "7 messages have no timestamp" in warning and "s2: '08/05/2023'" in warning
