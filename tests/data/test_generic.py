"""Generic chat-export importer: fixtures in two layouts, release round trip, errors."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dialogbench.data.errors import DataError
from dialogbench.data.generic import ImportConfig, import_chat_export
from dialogbench.data.io import sha256_file, sha256_files
from dialogbench.data.model import Dataset
from dialogbench.data.release import load_release, write_release
from dialogbench.testing.fuzz import NESTED_CONFIG as FUZZ_NESTED_CONFIG
from dialogbench.testing.fuzz import TURNS_CONFIG

FIXTURES = Path(__file__).parent.parent / "fixtures"
JSONL = FIXTURES / "chat_export.jsonl"
NESTED = FIXTURES / "chat_export_nested.json"

JSONL_CONFIG = TURNS_CONFIG  # the fixtures' configurations, shared with the fuzz suite
NESTED_CONFIG = replace(FUZZ_NESTED_CONFIG, name="nested-demo", licence="CC0")


def test_jsonl_turns() -> None:
    ds = import_chat_export(JSONL, JSONL_CONFIG)
    assert ds.name == "chat_export" and ds.sha256 == sha256_file(JSONL)
    maya, sam = ds.subjects
    assert (maya.id, sam.id) == ("t-100", "t-200")
    assert [m.id for m in maya.messages] == ["m1", "m2", "m4"]
    assert [m.position for m in maya.messages] == [0, 1, 2]
    assert [m.role for m in maya.messages] == ["user", "assistant", "user"]
    assert maya.speakers == ["maya"] and sam.speakers == ["sam"]
    assert maya.messages[0].timestamp == datetime(2024, 3, 1, 8, 55)
    assert sam.messages[0].timestamp == datetime(2024, 3, 2, 15, 0, tzinfo=UTC)
    assert sam.messages[1].timestamp is None
    assert ds.warnings == []


def test_nested_sessions_and_questions() -> None:
    ds = import_chat_export(NESTED, NESTED_CONFIG)
    assert ds.name == "nested-demo" and ds.licence == "CC0"
    alpha, beta = ds.subjects
    assert [m.id for m in alpha.messages] == ["A1.1", "A1.2", "A1.3", "A2.1", "A2.2"]
    assert [m.session for m in alpha.messages] == ["session_1"] * 3 + ["session_2"] * 2
    assert alpha.messages[3].timestamp == datetime(2023, 5, 15, 18, 30)
    assert alpha.speakers == ["Ana", "Ben"]
    q0, q1, q2 = alpha.questions
    assert (q0.id, q0.category, q0.answer, q0.evidence_ids) == (
        "alpha-q0",
        "single-hop",
        "1:58",
        ["A2.2"],
    )
    assert q1.evidence_ids == ["A1.3", "A2.2"]
    assert q2.answer is None and not q2.answerable
    assert beta.questions[0].evidence_ids == ["B1.1"]


@pytest.mark.parametrize(("path", "config"), [(JSONL, JSONL_CONFIG), (NESTED, NESTED_CONFIG)])
def test_release_round_trip(tmp_path: Path, path: Path, config: ImportConfig) -> None:
    ds = import_chat_export(path, config)
    write_release(ds, tmp_path / "release")
    back = load_release(tmp_path / "release")
    assert back.name == ds.name and back.licence == ds.licence
    assert back.subjects == ds.subjects


def _write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        assert isinstance(data, list)
        path.write_text("".join(json.dumps(row) + "\n" for row in data), encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_generated_ids_and_top_level_list(tmp_path: Path) -> None:
    data = [
        {"turns": [{"speaker": "a", "text": "hi"}, {"speaker": "b", "text": "yo"}]},
        {"turns": [{"speaker": "a", "text": 42}]},
    ]
    ds = import_chat_export(_write(tmp_path, "x.json", data), ImportConfig())
    assert [s.id for s in ds.subjects] == ["x-0", "x-1"]
    assert [m.id for m in ds.subjects[0].messages] == ["t0", "t1"]
    assert ds.subjects[1].messages[0].text == "42"
    assert all(m.role == "user" for s in ds.subjects for m in s.messages)


def test_person_ids_are_read_kept_and_written(tmp_path: Path) -> None:
    """--person-field: a turn's person id (text or a number) becomes the message's `person`;
    a turn without one has none; the release folder keeps it."""
    data = [
        {
            "turns": [
                {"speaker": "Ann", "text": "hi", "uid": "u7"},
                {"speaker": "bot", "text": "yo"},
            ]
        },
        {
            "turns": [
                {"speaker": "Ann", "text": "me again", "uid": 7},
                {"speaker": "x", "text": "?", "uid": None},
            ]
        },
    ]
    config = ImportConfig(person_field="uid")
    ds = import_chat_export(_write(tmp_path, "p.json", data), config)
    people = [[m.person for m in s.messages] for s in ds.subjects]
    assert people == [["u7", None], ["7", None]]
    write_release(ds, tmp_path / "release")
    again = load_release(tmp_path / "release")
    assert [[m.person for m in s.messages] for s in again.subjects] == people
    with pytest.raises(DataError) as raised:
        bad = [{"turns": [{"speaker": "Ann", "text": "hi", "uid": ["u7"]}]}]
        import_chat_export(_write(tmp_path, "bad.json", bad), config)
    assert raised.value.field == "uid" and raised.value.record is not None
    plain = import_chat_export(_write(tmp_path, "p2.json", data), ImportConfig())
    assert all(m.person is None for s in plain.subjects for m in s.messages)


def test_generated_session_ids(tmp_path: Path) -> None:
    data = {
        "session_2": [{"speaker": "a", "text": "later"}],
        "session_1": [{"speaker": "a", "text": "first"}, {"speaker": "b", "text": "ok"}],
    }
    config = ImportConfig(session_keys=True)
    (subject,) = import_chat_export(_write(tmp_path, "one.json", data), config).subjects
    assert [m.id for m in subject.messages] == ["session_1:0", "session_1:1", "session_2:0"]
    assert subject.messages[0].timestamp is None


def test_jsonl_conversation_rows_and_dict_of_conversations(tmp_path: Path) -> None:
    rows = [
        {"id": "c1", "turns": [{"speaker": "a", "text": "x"}]},
        {"id": "c2", "turns": [{"speaker": "a", "text": "y"}]},
    ]
    ds = import_chat_export(_write(tmp_path, "r.jsonl", rows), ImportConfig(id_field="id"))
    assert [s.id for s in ds.subjects] == ["c1", "c2"]
    keyed = {"chats": {"k1": {"turns": [{"speaker": "a", "text": "x"}]}}}
    ds = import_chat_export(
        _write(tmp_path, "k.json", keyed), ImportConfig(conversations_field="chats")
    )
    assert [s.id for s in ds.subjects] == ["k1"]


def test_epoch_milliseconds_and_format(tmp_path: Path) -> None:
    rows = [
        {"speaker": "a", "text": "x", "at": 1709391600000},
        {"speaker": "a", "text": "y", "at": "02/03/2024 15:00"},
    ]
    path = _write(tmp_path, "t.jsonl", rows[:1])
    ds = import_chat_export(path, ImportConfig(rows="turns", timestamp_field="at"))
    assert ds.subjects[0].messages[0].timestamp == datetime(2024, 3, 2, 15, 0, tzinfo=UTC)
    path = _write(tmp_path, "f.jsonl", rows[1:])
    config = ImportConfig(rows="turns", timestamp_field="at", timestamp_format="%d/%m/%Y %H:%M")
    assert import_chat_export(path, config).subjects[0].messages[0].timestamp == datetime(
        2024, 3, 2, 15, 0
    )


def test_unknown_user_speaker_warns() -> None:
    config = replace(JSONL_CONFIG, user_speakers=("maya", "sammy"))
    ds = import_chat_export(JSONL, config)
    assert any("'sammy'" in w for w in ds.warnings)


# --- errors -------------------------------------------------------------------------------


def _error(path: Path, config: ImportConfig) -> DataError:
    with pytest.raises(DataError) as e:
        import_chat_export(path, config)
    assert e.value.path == str(path)
    return e.value


def test_missing_text_field_names_line_and_flag() -> None:
    config = replace(JSONL_CONFIG, text_field="body")
    err = _error(JSONL, config)
    assert err.record == "line 1" and err.field == "body"
    assert err.fix is not None and "--text-field" in err.fix and "content" in err.fix


def test_missing_speaker_in_nested_turn(tmp_path: Path) -> None:
    data = json.loads(NESTED.read_text(encoding="utf-8"))
    del data["conversations"][1]["dialogue"]["session_1"][1]["who"]
    err = _error(_write(tmp_path, "n.json", data), NESTED_CONFIG)
    assert err.record == "conversations[1] (id 'beta'), session_1[1]"
    assert err.field == "who" and err.fix is not None and "--speaker-field" in err.fix


def test_missing_turns_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.json", [{"messages": []}])
    err = _error(path, ImportConfig())
    assert err.record == "conversation 0 (id 'x')" and err.field == "turns"
    assert err.fix is not None and "--turns-field" in err.fix and "messages" in err.fix


def test_missing_conversation_id(tmp_path: Path) -> None:
    rows = [{"turns": [{"speaker": "a", "text": "x"}]}]
    err = _error(_write(tmp_path, "r.jsonl", rows), ImportConfig(id_field="uuid"))
    assert err.record == "line 1" and err.field == "uuid"
    assert err.fix is not None and "--id-field" in err.fix


def test_top_level_object_needs_conversations_field(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "x.json", {"data": []}), ImportConfig())
    assert err.record == "top level" and err.fix is not None
    assert "--conversations-field" in err.fix and "data" in err.fix


def test_missing_conversations_field(tmp_path: Path) -> None:
    err = _error(
        _write(tmp_path, "x.json", {"data": []}), ImportConfig(conversations_field="conversations")
    )
    assert err.field == "conversations" and err.record == "top level"


def test_missing_session_time(tmp_path: Path) -> None:
    data = json.loads(NESTED.read_text(encoding="utf-8"))
    del data["conversations"][0]["dialogue"]["session_2_date_time"]
    err = _error(_write(tmp_path, "n.json", data), NESTED_CONFIG)
    assert err.field == "session_2_date_time" and err.record == "conversations[0] (id 'alpha')"


def test_bad_timestamp_names_format_flag(tmp_path: Path) -> None:
    rows = [{"speaker": "a", "text": "x", "ts": "yesterday"}]
    err = _error(
        _write(tmp_path, "t.jsonl", rows), ImportConfig(rows="turns", timestamp_field="ts")
    )
    assert err.record == "line 1" and err.field == "ts"
    assert err.fix is not None and "--timestamp-format" in err.fix


def test_dangling_evidence_fails_when_asked(tmp_path: Path) -> None:
    data = json.loads(NESTED.read_text(encoding="utf-8"))
    data["conversations"][0]["qa"][0]["evidence"] = ["A9.9"]
    config = replace(NESTED_CONFIG, on_missing_evidence="fail")
    err = _error(_write(tmp_path, "n.json", data), config)
    assert err.record == "conversations[0] (id 'alpha'), qa[0]" and err.field == "evidence"
    assert "'A9.9'" in err.problem
    assert err.fix is not None and "--on-missing-evidence drop-id" in err.fix


def test_answers_are_optional_but_a_misnamed_answer_field_is_an_error(tmp_path: Path) -> None:
    """Issue 26, point 4: a question without an answer (LoCoMo's adversarial ones) is kept,
    without one; an answer field that no question carries names the option."""
    data = json.loads(NESTED.read_text(encoding="utf-8"))
    del data["conversations"][1]["qa"][0]["a"]
    ds = import_chat_export(_write(tmp_path, "n.json", data), NESTED_CONFIG)
    (cat,) = ds.subjects[1].questions
    assert (cat.id, cat.answer, cat.evidence_ids) == ("beta-q0", None, ["B1.1"])
    assert ds.subjects[0].questions[0].answer == "1:58"
    assert "1 questions have no 'a' and were imported without an answer" in ds.warnings
    for qa in data["conversations"][0]["qa"]:
        del qa["a"]
    err = _error(_write(tmp_path, "n.json", data), NESTED_CONFIG)
    assert err.record == "conversations[0] (id 'alpha'), qa[0]" and err.field == "a"
    assert err.fix is not None and "--answer-field" in err.fix and "q, evidence, type" in err.fix


def test_duplicate_turn_id(tmp_path: Path) -> None:
    rows = [{"id": "1", "speaker": "a", "text": "x"}, {"id": "1", "speaker": "a", "text": "y"}]
    err = _error(_write(tmp_path, "t.jsonl", rows), ImportConfig(rows="turns", turn_id_field="id"))
    assert err.record == "line 2" and err.field == "id"


def test_duplicate_conversation_id(tmp_path: Path) -> None:
    rows = [{"id": "c", "turns": [{"speaker": "a", "text": "x"}]}] * 2
    err = _error(_write(tmp_path, "r.json", rows), ImportConfig(id_field="id"))
    assert err.field == "id" and "repeats" in err.problem


def test_unsafe_conversation_id(tmp_path: Path) -> None:
    rows = [{"id": "../x", "turns": [{"speaker": "a", "text": "x"}]}]
    err = _error(_write(tmp_path, "r.json", rows), ImportConfig(id_field="id"))
    assert err.field == "id" and err.record == "conversation 0"


def test_empty_conversation(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "r.json", [{"turns": []}]), ImportConfig())
    assert "no turns" in err.problem


def test_conversations_field_rejected_for_jsonl(tmp_path: Path) -> None:
    rows = [{"turns": [{"speaker": "a", "text": "x"}]}]
    err = _error(_write(tmp_path, "r.jsonl", rows), ImportConfig(conversations_field="c"))
    assert err.fix is not None and "--conversations-field" in err.fix


def test_turn_rows_cannot_carry_questions() -> None:
    with pytest.raises(ValueError, match="rows='turns'"):
        ImportConfig(rows="turns", questions_field="qa")


def test_dataset_type() -> None:
    assert isinstance(import_chat_export(JSONL, JSONL_CONFIG), Dataset)


# --- real shapes: one LoCoMo-like conversation, nested episodes, folders ------------------

LOCOMO_LIKE = FIXTURES / "locomo_like_sample.json"
EPISODES = FIXTURES / "episodes_nested.json"
LOCOMO_LIKE_CONFIG = ImportConfig(
    id_field="sample_id",
    body_field="conversation",
    session_keys=True,
    session_time_suffix="_date_time",
    turn_id_field="dia_id",
    questions_field="qa",
    category_names=("1=multi-hop", "2=temporal", "3=open-domain", "4=single-hop", "5=adversarial"),
    unanswerable_categories=("adversarial",),
)


def test_locomo_like_conversation_object() -> None:
    ds = import_chat_export(LOCOMO_LIKE, LOCOMO_LIKE_CONFIG)
    (subject,) = ds.subjects
    assert subject.id == "ana-ben"
    assert subject.messages[0].timestamp == datetime(2023, 5, 8, 13, 56)
    assert subject.messages[-1].timestamp == datetime(2023, 5, 15, 18, 30)
    goal, when, met, trap, after = subject.questions
    assert (goal.category, goal.evidence_ids) == ("single-hop", ["D1:3", "D1:4"])
    assert (when.category, when.evidence_ids) == ("temporal", ["D1:1", "D2:2"])
    assert (met.category, met.evidence_ids) == ("multi-hop", ["D1:3", "D2:2"])
    assert trap.category == "adversarial" and not trap.answerable and trap.evidence_ids == []
    assert after.category == "6" and after.answerable
    text = "\n".join(ds.warnings)
    assert "ana-ben-q0: evidence id 'D1:3-D1:4' repaired to ['D1:3', 'D1:4']" in text
    assert "ana-ben-q1: evidence id 'D2:02.' repaired to ['D2:2']" in text
    assert "ana-ben-q2: evidence id 'D3:1' names no message; dropped" in text
    assert "ana-ben-q3: evidence id '' is empty; dropped" in text
    assert "2 cited evidence ids name no turn and were dropped, their questions kept" in text
    assert "categories '6' (1 questions) have no name in --category-names" in text


def test_missing_evidence_drops_the_question_when_asked() -> None:
    config = replace(LOCOMO_LIKE_CONFIG, on_missing_evidence="drop-question")
    ds = import_chat_export(LOCOMO_LIKE, config)
    assert [q.id for q in ds.subjects[0].questions] == ["ana-ben-q0", "ana-ben-q1", "ana-ben-q4"]
    assert "ana-ben-q2: left out: evidence 'D3:1' names no turn" in ds.warnings
    assert any(w.startswith("2 questions cite evidence that names no turn") for w in ds.warnings)


def test_missing_evidence_can_fail() -> None:
    err = _error(LOCOMO_LIKE, replace(LOCOMO_LIKE_CONFIG, on_missing_evidence="fail"))
    assert err.record == "top level (id 'ana-ben'), qa[2]" and "'D3:1'" in err.problem


def test_other_ids_are_repaired_too(tmp_path: Path) -> None:
    data = {
        "turns": [{"speaker": "a", "text": str(i)} for i in range(13)],
        "qa": [{"question": "?", "answer": "!", "evidence": ["t12.", "t1; t2"], "category": "x"}],
    }
    ds = import_chat_export(_write(tmp_path, "one.json", data), ImportConfig(questions_field="qa"))
    assert ds.subjects[0].questions[0].evidence_ids == ["t12", "t1", "t2"]


def test_single_object_hints_name_the_session_options(tmp_path: Path) -> None:
    err = _error(LOCOMO_LIKE, ImportConfig())
    assert err.fix is not None and "--session-keys --body-field conversation" in err.fix
    assert "--conversations-field" not in err.fix
    top = {"session_1": [{"speaker": "a", "text": "x"}]}
    err = _error(_write(tmp_path, "s.json", top), ImportConfig())
    assert err.fix is not None and "pass --session-keys" in err.fix
    chat = {"title": "x", "messages": [{"role": "user", "content": "hi"}]}
    err = _error(_write(tmp_path, "m.json", chat), ImportConfig())
    assert err.fix is not None and "--turns-field messages" in err.fix
    err = _error(_write(tmp_path, "l.json", [json.loads(LOCOMO_LIKE.read_text())]), ImportConfig())
    assert err.field == "turns" and err.fix is not None
    assert "--session-keys --body-field conversation" in err.fix


def test_unimported_questions_warn() -> None:
    config = replace(LOCOMO_LIKE_CONFIG, questions_field=None)
    ds = import_chat_export(LOCOMO_LIKE, config)
    assert ds.subjects[0].questions == []
    assert ds.warnings == [
        "1 conversations hold a question list under 'qa' that was not imported; "
        "pass --questions-field qa to import it"
    ]


def test_missing_defaulted_field_says_how_to_unset(tmp_path: Path) -> None:
    data = json.loads(LOCOMO_LIKE.read_text())
    for qa in data["qa"]:
        del qa["answer"]
    err = _error(_write(tmp_path, "x.json", data), LOCOMO_LIKE_CONFIG)
    assert err.fix is not None and "pass --answer-field '' if the export has none" in err.fix


def test_nested_episodes() -> None:
    config = ImportConfig(rows="nested", timestamp_field="time", user_speakers=("user",))
    ds = import_chat_export(EPISODES, config)
    first, second = ds.subjects
    assert (first.id, second.id) == ("episodes_nested-0", "episodes_nested-1")
    assert [m.id for m in first.messages] == [
        "session_1:0",
        "session_1:1",
        "session_2:0",
        "session_2:1",
        "session_2:2",
    ]
    assert [m.session for m in first.messages] == ["session_1"] * 2 + ["session_2"] * 3
    assert first.messages[2].timestamp == datetime(2024, 1, 15, 20, 2)
    assert [m.role for m in second.messages] == ["user", "assistant"]
    assert ds.warnings == []


def test_nested_single_episode_and_hint(tmp_path: Path) -> None:
    episode = json.loads(EPISODES.read_text())[0]
    path = _write(tmp_path, "one.json", episode)
    (subject,) = import_chat_export(path, ImportConfig(rows="nested")).subjects
    assert subject.id == "one" and len(subject.messages) == 5
    err = _error(EPISODES, ImportConfig())
    assert err.fix is not None and "--rows nested" in err.fix


def test_nested_rejects_bad_shapes(tmp_path: Path) -> None:
    err = _error(
        _write(tmp_path, "x.json", [[[{"speaker": "a", "text": "x"}]], "oops"]),
        ImportConfig(rows="nested"),
    )
    assert err.record == "conversation 1 (id 'x-1')" and err.field == "sessions"
    err = _error(
        _write(tmp_path, "y.json", [[{"speaker": "a", "text": "x"}], "oops"]),
        ImportConfig(rows="nested"),
    )
    assert err.record == "conversation 0 (id 'y-0'), session 0" and err.field == "turns"
    with pytest.raises(ValueError, match="rows='nested'"):
        ImportConfig(rows="nested", questions_field="qa")
    with pytest.raises(ValueError, match="--rows must be one of"):
        ImportConfig(rows="sessions")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("layout", "config"),
    [
        (
            {"turns": [{"speaker": "a", "text": "x", "at": "08/05/2023 14:02"}]},
            ImportConfig(timestamp_field="at"),
        ),
        (
            {"session_1": [{"speaker": "a", "text": "x"}], "session_1_when": "08/05/2023 14:02"},
            ImportConfig(session_keys=True, session_time_suffix="_when"),
        ),
        (
            [[[{"speaker": "a", "text": "x", "at": "08/05/2023 14:02"}]]],
            ImportConfig(rows="nested", timestamp_field="at"),
        ),
        (
            [{"speaker": "a", "text": "x", "at": "08/05/2023 14:02"}],
            ImportConfig(rows="turns", timestamp_field="at"),
        ),
    ],
)
def test_timestamp_format_on_every_route(
    tmp_path: Path, layout: object, config: ImportConfig
) -> None:
    path = _write(tmp_path, "x.json", layout)
    err = _error(path, config)
    assert err.fix is not None and "'%d/%m/%Y' or '%m/%d/%Y'" in err.fix
    assert "--timestamp-format" in err.fix
    ds = import_chat_export(path, replace(config, timestamp_format="%d/%m/%Y %H:%M"))
    assert ds.subjects[0].messages[0].timestamp == datetime(2023, 5, 8, 14, 2)


def test_common_formats_need_no_format(tmp_path: Path) -> None:
    rows = [
        {"speaker": "a", "text": "x", "at": when}
        for when in ("1:56 pm on 8 May, 2023", "29.12.2023, 22:42:04", "May 8, 2023")
    ]
    path = _write(tmp_path, "t.jsonl", rows)
    ds = import_chat_export(path, ImportConfig(rows="turns", timestamp_field="at"))
    assert [m.timestamp for m in ds.subjects[0].messages] == [
        datetime(2023, 5, 8, 13, 56),
        datetime(2023, 12, 29, 22, 42, 4),
        datetime(2023, 5, 8),
    ]


@pytest.mark.parametrize("value", [["2023-05-08"], {"date": "2023-05-08"}, float("nan")])
def test_non_dates_are_errors(tmp_path: Path, value: object) -> None:
    rows = [{"speaker": "a", "text": "x", "at": value}]
    err = _error(
        _write(tmp_path, "t.jsonl", rows), ImportConfig(rows="turns", timestamp_field="at")
    )
    # NaN is not JSON at all: the reader stops at its line and column; the others name the field
    assert err.fix is not None and (err.field == "at" or "NaN" in err.problem)


def test_folder_of_files(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    one = {"turns": [{"speaker": "a", "text": "hi"}]}
    _write(folder, "chat_b.json", [one, one])
    _write(folder, "chat_a.json", one)
    _write(folder, "chat_c.jsonl", [{"turns": [{"speaker": "b", "text": "yo"}]}])
    (folder / "notes.txt").write_text("not an export")
    ds = import_chat_export(folder, ImportConfig())
    assert [s.id for s in ds.subjects] == ["chat_a", "chat_b-0", "chat_b-1", "chat_c"]
    assert ds.name == "exports" and ds.source == str(folder)
    assert ds.sha256 == sha256_files(sorted(folder.glob("*.json*")), root=folder)
    _write(folder, "chat_d.json", [{"messages": []}])
    err = _error(folder / "chat_d.json", ImportConfig())
    with pytest.raises(DataError) as e:
        import_chat_export(folder, ImportConfig())
    assert e.value.path == str(folder / "chat_d.json") and e.value.record == err.record


def test_empty_folder_says_what_it_reads(tmp_path: Path) -> None:
    err = _error(tmp_path, ImportConfig())
    assert "no .json or .jsonl files" in err.problem


def test_category_names_must_be_pairs() -> None:
    with pytest.raises(ValueError, match="CATEGORY=NAME"):
        ImportConfig(category_names=("multi-hop",))


def test_overlong_turn_id_is_a_data_error_naming_the_option(tmp_path: Path) -> None:
    rows = [{"speaker": "a", "text": "x", "mid": "m" * 5000}]
    config = ImportConfig(rows="turns", turn_id_field="mid")
    err = _error(_write(tmp_path, "t.jsonl", rows), config)
    assert err.field == "mid" and err.record == "line 1"
    assert len(str(err)) < 400  # the 5,000-character id is not quoted whole


def test_overlong_bad_value_is_not_quoted_whole(tmp_path: Path) -> None:
    rows = [{"speaker": "a", "text": "x", "at": "not a date " * 10_000}]
    err = _error(
        _write(tmp_path, "t.jsonl", rows), ImportConfig(rows="turns", timestamp_field="at")
    )
    assert err.field == "at" and len(str(err)) < 600


def test_captions_are_kept_as_the_locomo_loader_keeps_them(tmp_path: Path) -> None:
    """Issue 26, point 4: a turn's image caption is part of its text, as in data/locomo.py."""
    data = json.loads(LOCOMO_LIKE.read_text())
    data["conversation"]["session_2"][1]["blip_caption"] = "a photo of a finisher's medal"
    data["conversation"]["session_2"][0]["blip_caption"] = None
    path = _write(tmp_path, "x.json", data)
    messages = import_chat_export(path, LOCOMO_LIKE_CONFIG).subjects[0].messages
    assert messages[-1].text == (
        "Finished in 1:58, a personal best! [shares an image: a photo of a finisher's medal]"
    )
    assert messages[-2].text == "How did the half marathon go?"
    plain = import_chat_export(path, replace(LOCOMO_LIKE_CONFIG, caption_field=None))
    assert plain.subjects[0].messages[-1].text == "Finished in 1:58, a personal best!"


def test_session_keys_hint_names_only_what_is_missing(tmp_path: Path) -> None:
    """Issue 26, point 3: --session-keys was given; what is wrong is --body-field."""
    err = _error(
        _write(tmp_path, "l.json", [json.loads(LOCOMO_LIKE.read_text())]),
        ImportConfig(session_keys=True),
    )
    assert err.fix == "pass --body-field conversation"
    err = _error(LOCOMO_LIKE, ImportConfig(session_keys=True))
    assert err.fix == "it looks like one conversation: pass --body-field conversation"
    chat = {"title": "x", "messages": [{"role": "user", "content": "hi"}]}
    err = _error(_write(tmp_path, "m.json", chat), ImportConfig(session_keys=True))
    assert err.fix == (
        "it looks like one conversation: pass --turns-field messages without --session-keys"
    )


def test_dangling_evidence_share_is_an_error_naming_the_turn_id_field(tmp_path: Path) -> None:
    """Issue 26, point 3: every cited id naming no turn is an error that names the key the
    turns keep their ids under, unless --allow-dangling."""
    config = replace(LOCOMO_LIKE_CONFIG, turn_id_field=None)
    err = _error(LOCOMO_LIKE, config)
    assert err.record == "top level (id 'ana-ben'), qa[0]" and err.field == "evidence"
    assert err.problem == "7 of 7 cited evidence ids name no turn (first: 'D1:3-D1:4')"
    assert err.fix is not None and err.fix.startswith(
        "the turns carry the cited ids under 'dia_id': pass --turn-id-field dia_id, or pass "
        "--allow-dangling"
    )
    ds = import_chat_export(LOCOMO_LIKE, replace(config, allow_dangling=True))
    assert all(q.evidence_ids == [] for q in ds.subjects[0].questions)
    assert "8 cited evidence ids name no turn and were dropped" in "\n".join(ds.warnings)
    data = json.loads(LOCOMO_LIKE.read_text())
    for session in ("session_1", "session_2"):
        for turn in data["conversation"][session]:
            del turn["dia_id"]
    err = _error(_write(tmp_path, "x.json", data), config)
    assert err.fix is not None and err.fix.startswith(
        "the turns' ids are generated ('session_1:0', ...), not the export's: pass "
        "--turn-id-field with the key of the turns' own ids"
    )
