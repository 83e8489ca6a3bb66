"""DataError messages stay readable whatever the input names its records."""

from __future__ import annotations

from dialogbench.data.errors import DataError
from dialogbench.testing.fuzz import MAX_MESSAGE


def test_a_huge_record_name_is_cut_in_the_message() -> None:
    # found by the loader fuzz: a 2 MB conversation id became a 2 MB error message
    e = DataError("f.jsonl", "x" * 5000, record="conversation '" + "h" * 2_000_000 + "'",
                  field="t" * 10_000, fix="y" * 5000)  # fmt: skip
    assert len(str(e)) <= MAX_MESSAGE and str(e).startswith("f.jsonl, conversation 'hhh")
    assert e.record is not None and len(e.record) > 2_000_000  # the attribute keeps it whole
