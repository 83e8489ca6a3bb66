"""LongMemEval loader, on a hand-written fixture in LongMemEval's schema."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from dialogbench.data.errors import DataError
from dialogbench.data.io import sha256_file
from dialogbench.data.longmemeval import load_longmemeval, parse_date

FIXTURE = Path(__file__).parent.parent / "fixtures" / "longmemeval_mini.json"


def test_subjects_and_messages() -> None:
    ds = load_longmemeval(FIXTURE)
    assert ds.name == "longmemeval_mini" and ds.sha256 == sha256_file(FIXTURE)  # its file stem
    assert [s.id for s in ds.subjects] == [
        "ssu_0001",
        "ssa_0002",
        "ku_0003",
        "tr_0004_abs",
        "ms_0005",
    ]
    first = ds.subjects[0]
    assert [m.id for m in first.messages] == [
        "sharegpt_a1:0",
        "sharegpt_a1:1",
        "answer_ssu_0001:0",
        "answer_ssu_0001:1",
        "answer_ssu_0001:2",
        "answer_ssu_0001:3",
    ]
    assert [m.position for m in first.messages] == list(range(6))
    assert first.messages[2].session == "answer_ssu_0001"
    assert first.messages[2].timestamp == datetime(2023, 5, 22, 18, 5)
    assert [m.role for m in first.messages[:2]] == ["user", "assistant"]
    assert first.speakers == ["user"]


def test_questions() -> None:
    subjects = {s.id: s for s in load_longmemeval(FIXTURE).subjects}
    (q,) = subjects["ssu_0001"].questions
    assert q.category == "single-session-user" and q.answer == "A border collie"
    assert q.evidence_ids == ["answer_ssu_0001:0"] and q.answerable
    assert q.asked_at == datetime(2023, 6, 1, 10, 0)
    assert subjects["ssa_0002"].questions[0].evidence_ids == ["answer_ssa_0002:1"]
    abstention = subjects["tr_0004_abs"].questions[0]
    assert not abstention.answerable and abstention.category == "temporal-reasoning"
    assert subjects["ms_0005"].questions[0].answer == "3"


def test_fallback_evidence_is_warned() -> None:
    ds = load_longmemeval(FIXTURE)
    ku = next(s for s in ds.subjects if s.id == "ku_0003")
    assert ku.questions[0].evidence_ids == [
        "answer_ku_0003_1:0",
        "answer_ku_0003_2:0",
        "answer_ku_0003_2:2",
    ]
    assert any(w.startswith("ku_0003:") and "has_answer" in w for w in ds.warnings)


def test_unparseable_date_is_none() -> None:
    ds = load_longmemeval(FIXTURE)
    ms = next(s for s in ds.subjects if s.id == "ms_0005")
    assert ms.messages[0].timestamp is None
    assert ms.messages[2].timestamp == datetime(2023, 11, 2, 7, 30)
    assert any(w.startswith("ms_0005:") for w in ds.warnings)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023/05/20 (Sat) 02:21", datetime(2023, 5, 20, 2, 21)),
        ("2023/05/20 (Saturday) 02:21", datetime(2023, 5, 20, 2, 21)),
        ("2023/05/20", datetime(2023, 5, 20)),
        ("2023-05-20T02:21:00", datetime(2023, 5, 20, 2, 21)),
        ("last spring", None),
        (None, None),
    ],
)
def test_parse_date(text: str | None, expected: datetime | None) -> None:
    assert parse_date(text) == expected


def _write(tmp_path: Path, instances: list[dict[str, object]]) -> Path:
    path = tmp_path / "longmemeval_bad.json"
    path.write_text(json.dumps(instances), encoding="utf-8")
    return path


def _instances() -> list[dict[str, object]]:
    data: list[dict[str, object]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def test_missing_haystack_sessions(tmp_path: Path) -> None:
    instances = _instances()
    del instances[2]["haystack_sessions"]
    with pytest.raises(DataError) as e:
        load_longmemeval(_write(tmp_path, instances))
    assert e.value.record == "instance 2 (ku_0003)"
    assert e.value.field == "haystack_sessions"
    assert "longmemeval_bad.json" in e.value.path and e.value.fix
    assert "instance 2" in str(e.value) and "haystack_sessions" in str(e.value)


def test_mismatched_dates(tmp_path: Path) -> None:
    instances = _instances()
    instances[0]["haystack_dates"] = ["2023/05/20 (Sat) 02:21"]
    with pytest.raises(DataError) as e:
        load_longmemeval(_write(tmp_path, instances))
    assert e.value.record == "instance 0 (ssu_0001)" and e.value.field == "haystack_dates"


def test_bad_role(tmp_path: Path) -> None:
    instances = _instances()
    sessions = instances[1]["haystack_sessions"]
    assert isinstance(sessions, list)
    sessions[0][1]["role"] = "bot"
    with pytest.raises(DataError) as e:
        load_longmemeval(_write(tmp_path, instances))
    assert e.value.field == "haystack_sessions[0][1].role"


def test_duplicate_question_id(tmp_path: Path) -> None:
    instances = _instances()
    instances[1]["question_id"] = "ssu_0001"
    with pytest.raises(DataError) as e:
        load_longmemeval(_write(tmp_path, instances))
    assert e.value.record == "instance 1" and e.value.field == "question_id"


def test_repeated_session_id(tmp_path: Path) -> None:
    instances = _instances()
    instances[0]["haystack_session_ids"] = ["s", "s"]
    ds = load_longmemeval(_write(tmp_path, instances))
    ids = [m.id for m in ds.subjects[0].messages]
    assert ids[:3] == ["s:0", "s:1", "s~2:0"] and len(set(ids)) == len(ids)
    assert any("repeats" in w for w in ds.warnings)


def test_folder_with_one_file(tmp_path: Path) -> None:
    _write(tmp_path, _instances())
    assert len(load_longmemeval(tmp_path).subjects) == 5
    _write(tmp_path, _instances()).rename(tmp_path / "longmemeval_other.json")
    _write(tmp_path, _instances())
    with pytest.raises(DataError):
        load_longmemeval(tmp_path)


# -- bad input that used to be taken for data --------------------------------------------------


def _error(tmp_path: Path, instances: list[dict[str, object]] | str) -> DataError:
    path = tmp_path / "lme.json"
    path.write_text(instances if isinstance(instances, str) else json.dumps(instances))
    with pytest.raises(DataError) as info:
        load_longmemeval(path)
    assert info.value.path == str(path)
    return info.value


@pytest.mark.parametrize("value", [None, True, [], {}])
@pytest.mark.parametrize("key", ["question_id", "question_type", "question", "answer"])
def test_text_field_that_is_not_text(tmp_path: Path, key: str, value: object) -> None:
    data = _instances()
    if key == "answer" and value is None:
        return  # a null answer is allowed: no gold
    data[1][key] = value
    e = _error(tmp_path, data)
    assert e.record is not None and e.record.startswith("instance 1") and e.field == key
    assert "expected text, found" in str(e)


def test_non_finite_text(tmp_path: Path) -> None:
    text = json.dumps(_instances()).replace('"A border collie"', "-1e400", 1)
    e = _error(tmp_path, text)
    assert "too large for a float" in str(e) and e.record == "line 1"


@pytest.mark.parametrize("value", [[1], {"d": 1}, 5])
def test_date_that_is_not_text(tmp_path: Path, value: object) -> None:
    data = _instances()
    data[0]["haystack_dates"] = ["2023/05/20 (Sat) 02:21", value]
    e = _error(tmp_path, data)
    assert e.field == "haystack_dates[1]" and "expected a date string" in str(e)
    data = _instances()
    data[0]["question_date"] = value
    e = _error(tmp_path, data)
    assert e.field == "question_date" and "expected a date string" in str(e)


def test_nan_date(tmp_path: Path) -> None:
    text = json.dumps(_instances()).replace('"2023/06/01 (Thu) 10:00"', "NaN", 1)
    assert "NaN is not a JSON number" in str(_error(tmp_path, text))


def test_session_id_that_is_not_text(tmp_path: Path) -> None:
    data = _instances()
    data[0]["haystack_session_ids"] = [None, "answer_ssu_0001"]
    e = _error(tmp_path, data)
    assert e.field == "haystack_session_ids[0]" and "found null" in str(e)


def test_has_answer_must_be_a_flag(tmp_path: Path) -> None:
    data = _instances()
    data[0]["haystack_sessions"][1][0]["has_answer"] = "yes"  # type: ignore[index]
    e = _error(tmp_path, data)
    assert e.field == "haystack_sessions[1][0].has_answer"


def test_lone_surrogate(tmp_path: Path) -> None:
    text = json.dumps(_instances()).replace("A border collie", "\\ud800", 1)
    e = _error(tmp_path, text)
    assert e.field == "[0].answer" and "lone surrogate" in str(e)


def test_deep_nesting_and_bad_utf8(tmp_path: Path) -> None:
    assert "nested too deeply" in str(_error(tmp_path, "[" * 100_000 + "]" * 100_000))
    path = tmp_path / "lme.json"
    path.write_bytes(FIXTURE.read_bytes().replace(b"border", b"b\xffrder", 1))
    with pytest.raises(DataError, match="not UTF-8"):
        load_longmemeval(path)


def test_empty_file_is_not_a_dataset(tmp_path: Path) -> None:
    assert "holds no subjects" in str(_error(tmp_path, []))


def test_huge_question_id(tmp_path: Path) -> None:
    data = _instances()
    data[0]["question_id"] = "q" * 5_000_000
    e = _error(tmp_path, data)
    assert e.field == "question_id" and "at most 200 bytes" in str(e) and len(str(e)) < 400
