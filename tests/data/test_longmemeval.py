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
