"""The strict JSON readers: every kind of input that is not plain data is a DataError."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from dialogbench.data import io
from dialogbench.data.errors import DataError
from dialogbench.data.io import as_text, read_json, read_jsonl


def _json_error(tmp_path: Path, data: str | bytes, name: str = "f.json") -> DataError:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(DataError) as info:
        if name.endswith(".jsonl"):
            list(read_jsonl(path))
        else:
            read_json(path)
    assert info.value.path == str(path)
    return info.value


def test_deep_nesting(tmp_path: Path) -> None:
    e = _json_error(tmp_path, "\n" + "[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in str(e) and e.record == "line 2"
    e = _json_error(tmp_path, '{"a": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n", "f.jsonl")
    assert "nested too deeply" in str(e) and e.record == "line 2"


def test_invalid_utf8_names_line_and_byte(tmp_path: Path) -> None:
    e = _json_error(tmp_path, b'{"a": "ok",\n "b": "\xff"}')
    assert e.record == "line 2" and "not UTF-8: byte 0xff at column 8" in str(e)
    e = _json_error(tmp_path, b'{"a": 1}\n{"b": "\xc3"}\n', "f.jsonl")
    assert e.record == "line 2" and "not UTF-8" in str(e)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_non_finite_numbers(tmp_path: Path, token: str) -> None:
    e = _json_error(tmp_path, '{"a": 1,\n "category": ' + token + "}")
    assert e.record == "line 2" and "at column 14" in str(e)


def test_huge_integer(tmp_path: Path) -> None:
    e = _json_error(tmp_path, "[1, 2, 1" + "0" * 5000 + "]")
    assert "too many digits at column 8" in str(e) and e.record == "line 1"


def test_duplicate_key(tmp_path: Path) -> None:
    e = _json_error(tmp_path, '{"Emily": {"history": {}},\n "Emily": {"history": {}}}')
    assert (e.record, e.field) == ("line 2", "Emily") and "appears twice" in str(e)


def test_lone_surrogate_names_the_field(tmp_path: Path) -> None:
    e = _json_error(tmp_path, '[{"turns": [{"text": "ok"}, {"text": "bad \\ud800"}]}]')
    assert e.field == "[0].turns[1].text" and "lone surrogate" in str(e)
    # a proper pair (an emoji) is fine
    (tmp_path / "ok.json").write_text('["\\ud83d\\ude00"]')
    assert read_json(tmp_path / "ok.json") == ["\U0001f600"]


def test_jsonl_line_that_is_not_an_object(tmp_path: Path) -> None:
    e = _json_error(tmp_path, '{"a": 1}\n[1]\n', "f.jsonl")
    assert e.record == "line 2" and "expected an object, found a list" in str(e)


@pytest.mark.parametrize(
    ("value", "found"),
    [(None, "null"), (True, "true"), ([], "a list"), ({}, "an object"), (float("-inf"), "-inf")],
)
def test_as_text_rejects_what_is_not_text(value: object, found: str) -> None:
    with pytest.raises(DataError, match=f"field 'text': expected text, found .*{found}"):
        as_text(value, "f.json", "turn 3", "text")
    assert as_text(42, "f.json", None, "answer") == "42"


def test_huge_document_reads_in_linear_time(tmp_path: Path) -> None:
    """Four times the text takes about four times as long, not sixteen: a scaling ratio
    (best of three each), not a wall-clock limit, so a loaded machine does not fail it."""

    def seconds(n: int) -> float:
        path = tmp_path / f"big{n}.json"
        path.write_text('[{"id": "' + "x" * n + '", "k": 1, "k": 2}]')
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            with pytest.raises(DataError, match="appears twice"):
                read_json(path)
            best = min(best, time.perf_counter() - start)
        return best

    small, large = seconds(1_000_000), seconds(4_000_000)
    assert large < 8 * small + 0.05


def test_sources_and_commands_are_recorded_without_absolute_paths(tmp_path: Path) -> None:
    data = tmp_path / "home" / "ana" / "logs"
    data.mkdir(parents=True)
    run = tmp_path / "runs" / "chat"
    run.mkdir(parents=True)
    assert io.source_name(str(data)) == "logs" and io.source_name("sample") == "sample"
    assert io.source_name(str(data) + "/") == "logs"
    recorded = io.recorded_source(str(data), run)
    assert recorded == "../../home/ana/logs" and not Path(recorded).is_absolute()
    assert Path(io.source_from_record(recorded, run)).resolve() == data.resolve()
    assert io.recorded_source("locomo", run) == io.source_from_record("locomo", run) == "locomo"
    assert io.source_from_record("/old/absolute", run) == "/old/absolute"  # an older record
    argv = ["/opt/venv/bin/dialogbench", "run", "chat", "--dataset", str(data),
            f"--out={run}", "--model", "openai/x", "/no/such/path"]  # fmt: skip
    assert io.recorded_command(argv, run) == [
        "dialogbench", "run", "chat", "--dataset", "../../home/ana/logs",
        "--out=.", "--model", "openai/x", "/no/such/path",
    ]  # fmt: skip
