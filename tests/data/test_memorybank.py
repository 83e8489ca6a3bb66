"""MemoryBank loader: real-data checks (the `memorybank_dir` fixture skips without
DIALOGBENCH_DATA) and small synthetic cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogbench.data.errors import DataError
from dialogbench.data.io import sha256_file
from dialogbench.data.memorybank import load_memorybank


def test_real_users_messages_profile(memorybank_dir: Path) -> None:
    ds = load_memorybank(memorybank_dir)
    assert ds.name == "memorybank" and ds.licence == "MIT"
    assert len(ds.subjects) == 15
    for s in ds.subjects:
        assert s.id == s.id.strip() and s.id
        assert len(s.messages) > 0 and len(s.messages) % 2 == 0
        assert [m.position for m in s.messages] == list(range(len(s.messages)))
        assert all(m.id == m.id.strip() for m in s.messages)
        assert s.messages[0].role == "user" and s.messages[0].speaker == s.id
        assert s.messages[1].role == "assistant" and s.messages[1].speaker == "companion"
        assert {c.field for c in s.profile} >= {"name", "hobbies"}
        assert {p.dimension for p in s.persona} == {"personality", "speaking style"}
    ids = {s.id for s in ds.subjects}
    assert {"Jason", "Linda", "Ivy", "Roland", "John Zhang"} <= ids


def test_real_questions_join_users(memorybank_dir: Path) -> None:
    ds = load_memorybank(memorybank_dir)
    questions = [q for s in ds.subjects for q in s.questions]
    assert len(questions) == 100
    assert all(s.questions for s in ds.subjects)
    jason = next(s for s in ds.subjects if s.id == "Jason")
    assert jason.questions[0].id == "Jason-q0"
    assert all(q.answer is None and q.evidence_ids == [] for q in questions)
    assert all(q.category == "probing" for q in questions)


def test_real_file_path_and_digest(memorybank_dir: Path) -> None:
    folder = memorybank_dir
    by_file = load_memorybank(folder / "memory_bank_en.json")
    by_folder = load_memorybank(folder)
    assert by_file.sha256 == by_folder.sha256
    assert by_file.sha256 != sha256_file(folder / "memory_bank_en.json")  # two files hashed


def _bank(tmp_path: Path, users: object, questions: list[dict[str, object]] | None = None) -> Path:
    (tmp_path / "memory_bank_en.json").write_text(json.dumps(users), encoding="utf-8")
    if questions is not None:
        lines = "\n".join(json.dumps(q) for q in questions)
        (tmp_path / "probing_questions_en.jsonl").write_text(lines, encoding="utf-8")
    return tmp_path


def test_python_literals_and_stray_spaces(tmp_path: Path) -> None:
    users = {
        " Ada ": {
            "name": "Ada",
            "history": {
                "2023-05-02": [{"query": "Back again.", "response": "Welcome back."}],
                "2023-05-01": "[{'query': 'Hi, I paint.', 'response': 'Lovely!'}]",
            },
            "meta_information": "{'name': 'Ada', 'personality': 'calm, curious', "
            "'hobbies': 'painting, chess, and rowing', 'speaking_style': 'brief'}",
        }
    }
    ds = load_memorybank(_bank(tmp_path, users, [{" Ada ": ["What do I paint?"]}]))
    (ada,) = ds.subjects
    assert ada.id == "Ada"
    assert [m.id for m in ada.messages] == [
        "2023-05-01#0u",
        "2023-05-01#0a",
        "2023-05-02#0u",
        "2023-05-02#0a",
    ]
    assert ada.messages[0].session == "2023-05-01"
    assert ada.messages[0].timestamp is not None and ada.messages[0].timestamp.day == 1
    hobbies = [c.statement for c in ada.profile if c.field == "hobbies"]
    assert hobbies == ["painting", "chess", "rowing"]
    assert [p.statement for p in ada.persona] == ["calm", "curious", "brief"]
    assert ada.questions[0].id == "Ada-q0"
    assert ds.sha256 != sha256_file(tmp_path / "memory_bank_en.json")


def test_single_file_digest(tmp_path: Path) -> None:
    users = {"Bo": {"history": {"2023-01-01": [{"query": "a", "response": "b"}]}}}
    ds = load_memorybank(_bank(tmp_path, users))
    assert ds.sha256 == sha256_file(tmp_path / "memory_bank_en.json")
    assert any("no meta_information" in w for w in ds.warnings)


def test_unparseable_literal(tmp_path: Path) -> None:
    users = {
        "Bo": {
            "history": {"2023-01-01": [{"query": "a", "response": "b"}]},
            "meta_information": "{'name': 'Bo', ",
        }
    }
    with pytest.raises(DataError) as e:
        load_memorybank(_bank(tmp_path, users))
    assert e.value.record == "user 'Bo'" and e.value.field == "meta_information"
    assert "memory_bank_en.json" in e.value.path and e.value.fix


def test_missing_response(tmp_path: Path) -> None:
    users = {"Bo": {"history": {"2023-01-01": [{"query": "a"}]}}}
    with pytest.raises(DataError) as e:
        load_memorybank(_bank(tmp_path, users))
    assert e.value.field == "response" and "history.2023-01-01[0]" in str(e.value.record)


def test_bad_date(tmp_path: Path) -> None:
    users = {"Bo": {"history": {"1st May": [{"query": "a", "response": "b"}]}}}
    with pytest.raises(DataError) as e:
        load_memorybank(_bank(tmp_path, users))
    assert e.value.field == "history.1st May"


def test_question_for_unknown_user(tmp_path: Path) -> None:
    users = {"Bo": {"history": {"2023-01-01": [{"query": "a", "response": "b"}]}}}
    with pytest.raises(DataError) as e:
        load_memorybank(_bank(tmp_path, users, [{"Cy": ["Who am I?"]}]))
    assert e.value.record == "line 1" and "probing_questions_en.jsonl" in e.value.path


# -- bad input that used to be taken for data --------------------------------------------------


def _user(name: str) -> dict[str, object]:
    return {"history": {"2023-04-27": [{"query": f"I am {name}.", "response": "Hi!"}]}}


def test_duplicate_user_key_is_an_error(tmp_path: Path) -> None:
    text = '{"Emily": ' + json.dumps(_user("a")) + ',\n "Emily": ' + json.dumps(_user("b")) + "}"
    (tmp_path / "memory_bank_en.json").write_text(text)
    with pytest.raises(DataError) as info:
        load_memorybank(tmp_path)
    assert info.value.path.endswith("memory_bank_en.json")
    assert (info.value.record, info.value.field) == ("line 2", "Emily")
    assert "appears twice" in str(info.value)


def test_empty_bank_is_not_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="holds no subjects"):
        load_memorybank(_bank(tmp_path, {}))


@pytest.mark.parametrize("value", [True, None, {"a": 1}, [True]])
def test_meta_value_that_is_not_text(tmp_path: Path, value: object) -> None:
    user = {**_user("Emily"), "meta_information": {"name": "Emily", "hobbies": value}}
    with pytest.raises(DataError, match=r"field 'meta_information\.hobbies") as info:
        load_memorybank(_bank(tmp_path, {"Emily": user}))
    assert info.value.record == "user 'Emily'"


def test_literal_with_a_repeated_key_or_infinite_number(tmp_path: Path) -> None:
    for literal in (
        "{'history': {'2023-04-27': []}, 'history': {'2023-04-28': []}}",
        "{'history': {'2023-04-27': [{'query': 'hi', 'response': 1e400}]}}",
    ):
        with pytest.raises(DataError, match="expected dict"):
            load_memorybank(_bank(tmp_path, {"Emily": literal}))


def test_lone_surrogate_in_a_literal(tmp_path: Path) -> None:
    literal = "{'history': {'2023-04-27': [{'query': '\\ud800', 'response': 'x'}]}}"
    with pytest.raises(DataError, match="lone surrogate"):
        load_memorybank(_bank(tmp_path, {"Emily": literal}))


def test_name_is_the_stem_or_given(tmp_path: Path) -> None:
    (tmp_path / "my_bank").mkdir()
    ds = load_memorybank(_bank(tmp_path / "my_bank", {"Emily": _user("Emily")}))
    assert ds.name == "my_bank"
    assert load_memorybank(tmp_path / "my_bank", name="memorybank").name == "memorybank"
