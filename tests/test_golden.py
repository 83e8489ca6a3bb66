"""Golden test: every track's result files, run through the CLI, byte for byte as frozen
(JSON floats up to a relative 1e-6: BLAS kernels differ across CPUs in their last digits).

The cases (argv of `dialogbench run TRACK ...` on fixed small inputs, model tracks against
a scripted loopback server) are in `tests/golden/cases.py`; the frozen files in
`tests/golden/fixtures/<case>/`. A failure here means a change moved a figure (or a record,
or a warning). If that is intended, regenerate and review the diff:

    DIALOGBENCH_DATA=/path/to/corpora python -m tests.golden.regen [CASE ...]
    git diff --stat tests/golden/fixtures
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from golden.cases import CASES, Case, missing, result_files, run_case, stored_files

REGEN = "DIALOGBENCH_DATA=/path/to/corpora python -m tests.golden.regen {case}"


def _first_json_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """The JSON path of the first place `a` (fixture) and `b` (new run) differ, with both."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in b:
                return f"{path}.{key}: in the fixture only (was {_short(a[key])})"
            if key not in a:
                return f"{path}.{key}: new in this run ({_short(b[key])})"
            found = _first_json_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        if list(a) != list(b):
            return f"{path}: same keys in another order ({list(a)} -> {list(b)})"
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _first_json_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: length {len(a)} -> {len(b)}"
        return None
    if a != b or type(a) is not type(b):
        return f"{path}: {_short(a)} -> {_short(b)}"
    return None


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(name: str, old: bytes, new: bytes) -> str:
    """A short, readable account of the first difference between two versions of a file."""
    old_lines, new_lines = old.decode().splitlines(), new.decode().splitlines()
    if name.endswith(".json"):
        with_json = _first_json_difference(json.loads(old), json.loads(new))
        if with_json:
            return f"{name}: {with_json}"
    for i, (x, y) in enumerate(zip(old_lines, new_lines, strict=False), start=1):
        if x != y:
            if name.endswith(".jsonl"):
                try:
                    inner = _first_json_difference(json.loads(x), json.loads(y))
                except ValueError:
                    inner = None
                if inner:
                    return f"{name} line {i}: {inner}"
            return f"{name} line {i}:\n  fixture: {x[:200]}\n  new:     {y[:200]}"
    if len(old_lines) != len(new_lines):
        return f"{name}: {len(old_lines)} lines in the fixture, {len(new_lines)} now"
    return f"{name}: differs in whitespace or line endings only"


REL_TOL, ABS_TOL = 1e-6, 1e-12
"""Floats may differ in their last digits across CPUs (BLAS kernels sum in other orders;
MiniLM's float32 similarities carry about 7 significant digits)."""


def same_within_rounding(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal, floats up to REL_TOL (keys in the same order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_within_rounding(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_within_rounding, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return type(a) is type(b) and a == b


def _rounding_only(name: str, old: bytes, new: bytes) -> bool:
    """Whether a JSON or JSONL file differs from its fixture only by float rounding."""
    try:
        if name.endswith(".json"):
            return same_within_rounding(json.loads(old), json.loads(new))
        if name.endswith(".jsonl"):
            a, b = old.decode().splitlines(), new.decode().splitlines()
            pairs = zip(a, b, strict=False)
            return len(a) == len(b) and all(
                same_within_rounding(json.loads(x), json.loads(y)) for x, y in pairs
            )
    except ValueError:
        return False
    return False


def compare(case: Case, stored: dict[str, bytes], new: dict[str, bytes]) -> list[str]:
    """Every problem: missing files, new files, changed files (first difference of each)."""
    problems = []
    gone = sorted(set(stored) - set(new))
    added = sorted(set(new) - set(stored))
    if gone:
        problems.append(f"files in the fixture that the run no longer writes: {gone}")
    if added:
        problems.append(f"result files the run writes that are not in the fixture: {added}")
    problems += [
        describe(name, stored[name], new[name])
        for name in sorted(set(stored) & set(new))
        if stored[name] != new[name] and not _rounding_only(name, stored[name], new[name])
    ]
    return problems


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case: Case, tmp_path: Path) -> None:
    why = missing(case)
    if why is not None:
        pytest.skip(why)
    stored = stored_files(case)
    assert stored, f"no fixture for {case.name}; create it with: {REGEN.format(case=case.name)}"
    code, output = run_case(case, tmp_path / "out", tmp_path / "cache.sqlite")
    assert code == 0, f"{' '.join(case.argv(tmp_path / 'out', '<url>'))} failed:\n{output}"
    problems = compare(case, stored, result_files(tmp_path / "out"))
    if problems:
        pytest.fail(
            f"{case.name}: the run no longer matches tests/golden/fixtures/{case.name}/\n"
            + "\n".join(f"- {p}" for p in problems)
            + "\nIf the change is intended, regenerate and review the fixture diff:\n  "
            + REGEN.format(case=case.name),
            pytrace=False,
        )


def test_describe_names_the_first_difference() -> None:
    old = b'{"a": {"value": 0.5, "n": 3}, "b": [1, 2]}'
    new = b'{"a": {"value": 0.25, "n": 3}, "b": [1, 2], "c": 1}'
    assert describe("summary.json", old, new) == "summary.json: $.a.value: 0.5 -> 0.25"
    lines = describe("items.jsonl", b'{"x": 1}\n{"x": 2}\n', b'{"x": 1}\n{"x": 3}\n')
    assert lines == "items.jsonl line 2: $.x: 2 -> 3"
    case = CASES[0]
    problems = compare(case, {"a.json": b"{}", "b.json": b"{}"}, {"b.json": b"{}", "c.csv": b""})
    assert problems == [
        "files in the fixture that the run no longer writes: ['a.json']",
        "result files the run writes that are not in the fixture: ['c.csv']",
    ]


def test_rounding_is_tolerated_and_nothing_else() -> None:
    assert same_within_rounding({"a": 0.011303294825238796}, {"a": 0.011303294825238803})
    assert not same_within_rounding({"a": 0.01130329}, {"a": 0.01130339})
    assert not same_within_rounding({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same_within_rounding({"a": 1}, {"a": 1.0})
    assert _rounding_only("x.jsonl", b'{"v": 0.1}\n', b'{"v": 0.10000000000000002}\n')
    assert not _rounding_only("x.txt", b"0.1", b"0.10000000000000002")
