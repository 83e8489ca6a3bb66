"""The native release format: round trip, the built-in sample, and one test per bad input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dialogbench.data.errors import DataError
from dialogbench.data.registry import load_dataset
from dialogbench.data.release import load_release, write_release


def _write(folder: Path, name: str, rows: list[dict[str, object]] | str) -> Path:
    path = folder / name
    if isinstance(rows, str):
        path.write_text(rows)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _subject(tmp_path: Path) -> Path:
    folder = tmp_path / "ana"
    folder.mkdir(parents=True)
    _write(
        folder,
        "conversation.jsonl",
        [
            {"id": "m1", "speaker": "Ana", "role": "user", "text": "My cat is called Miso."},
            {"id": "m2", "speaker": "bot", "role": "assistant", "text": "Lovely name!"},
            {"id": "m3", "speaker": "Ana", "role": "user", "text": "Miso was sick today."},
        ],
    )
    _write(
        folder,
        "chat.jsonl",
        [
            {
                "probe_id": "m3",
                "stratum": "enriched",
                "tier": "recent",
                "reference_ids": ["m1"],
                "reference_reply": "Oh no, poor Miso.",
            },
        ],
    )
    _write(
        folder,
        "questions.jsonl",
        [
            {
                "id": "q1",
                "category": "single-hop",
                "text": "What is Ana's cat called?",
                "answer": "Miso",
                "evidence_ids": ["m1"],
            },
        ],
    )
    return folder


def test_loads_a_subject_folder(tmp_path: Path) -> None:
    ds = load_release(_subject(tmp_path))
    (s,) = ds.subjects
    assert [m.position for m in s.messages] == [0, 1, 2]
    assert s.chat_items[0].reference_ids == ["m1"]
    assert s.questions[0].answer == "Miso"
    assert s.speakers == ["Ana"]
    assert len(ds.sha256) == 64


def test_round_trip(tmp_path: Path) -> None:
    ds = load_release(_subject(tmp_path / "a"))
    write_release(ds, tmp_path / "out")
    again = load_release(tmp_path / "out")
    assert again.subjects == ds.subjects


def test_builtin_sample_loads() -> None:
    ds = load_dataset("sample")
    assert len(ds.subjects) >= 2
    for s in ds.subjects:
        assert s.chat_items and s.questions and s.profile and s.persona
        assert {c.stratum for c in s.chat_items} >= {"proportional", "enriched", "abstention"}


def _error(tmp_path: Path) -> DataError:
    with pytest.raises(DataError) as info:
        load_release(tmp_path / "ana")
    return info.value


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    lines = (folder / "conversation.jsonl").read_text().splitlines()
    lines[1] = lines[1][:-1]  # drop the closing brace
    (folder / "conversation.jsonl").write_text("\n".join(lines) + "\n")
    e = _error(tmp_path)
    assert e.path.endswith("conversation.jsonl") and e.record == "line 2"
    assert "not valid JSON" in str(e)


def test_missing_field_names_record_and_field(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(folder, "questions.jsonl", [{"id": "q1", "text": "What?", "evidence_ids": []}])
    e = _error(tmp_path)
    assert e.path.endswith("questions.jsonl")
    assert (e.record, e.field) == ("line 1", "category")
    assert "missing" in str(e) and "add 'category'" in str(e)


def test_duplicate_message_ids(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    with (folder / "conversation.jsonl").open("a") as f:
        f.write(json.dumps({"id": "m2", "speaker": "Ana", "text": "again"}) + "\n")
    e = _error(tmp_path)
    assert (e.record, e.field) == ("line 4", "id")
    assert "duplicate message id 'm2' (first on line 2)" in str(e)


def test_reference_that_does_not_exist(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(folder, "chat.jsonl", [{"probe_id": "m3", "reference_ids": ["m9"]}])
    e = _error(tmp_path)
    assert e.path.endswith("chat.jsonl")
    assert (e.record, e.field) == ("line 1", "reference_ids")
    assert "'m9' is not in conversation.jsonl" in str(e)


def test_probe_referencing_the_future(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(folder, "chat.jsonl", [{"probe_id": "m2", "reference_ids": ["m3"]}])
    e = _error(tmp_path)
    assert (e.record, e.field) == ("line 1", "reference_ids")
    assert "is not before the probe" in str(e)


def test_question_evidence_after_the_question(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(
        folder,
        "questions.jsonl",
        [
            {"id": "q1", "category": "x", "text": "?", "evidence_ids": ["m3"], "after_id": "m1"},
        ],
    )
    e = _error(tmp_path)
    assert e.field == "evidence_ids" and "is not before the point the question is asked" in str(e)


def test_missing_probe_id(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(folder, "chat.jsonl", [{"probe_id": "nope"}])
    e = _error(tmp_path)
    assert e.field == "probe_id"


def test_position_must_match_line_order(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(
        folder,
        "conversation.jsonl",
        [
            {"id": "m1", "speaker": "Ana", "text": "hi", "position": 5},
        ],
    )
    (folder / "chat.jsonl").unlink()
    (folder / "questions.jsonl").unlink()
    e = _error(tmp_path)
    assert e.field == "position"


def test_unknown_dataset_name_says_what_exists() -> None:
    with pytest.raises(DataError, match="use one of sample, locomo"):
        load_dataset("no-such-thing")


# -- bad input that used to crash or be taken for data ---------------------------------------


@pytest.mark.parametrize("content", ["null", "0", '"claims"', '{"claims": null}'])
def test_profile_of_the_wrong_shape(tmp_path: Path, content: str) -> None:
    folder = _subject(tmp_path)
    (folder / "profile.json").write_text(content)
    e = _error(tmp_path)
    assert e.path.endswith("profile.json") and "expected a list" in str(e)


def test_profile_with_an_unknown_key(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    (folder / "profile.json").write_text('{"claim": []}')
    e = _error(tmp_path)
    assert e.field == "claim" and "unknown field" in str(e)


@pytest.mark.parametrize(
    ("content", "field", "problem"),
    [
        ("[]", None, "expected an object, found a list"),
        ('{"name": 5}', "name", "valid string, found a number"),
        ('{"licence": ["CC0"]}', "licence", "valid string, found a list"),
        ('{"nmae": "x"}', "nmae", "unknown field"),
    ],
)
def test_dataset_json_of_the_wrong_shape(
    tmp_path: Path, content: str, field: str | None, problem: str
) -> None:
    _subject(tmp_path / "ds")
    (tmp_path / "ds" / "dataset.json").write_text(content)
    with pytest.raises(DataError) as info:
        load_release(tmp_path / "ds")
    assert info.value.path.endswith("dataset.json") and info.value.field == field
    assert problem in str(info.value)


def test_duplicate_question_ids(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    q: dict[str, object] = {"id": "q1", "category": "x", "text": "?", "evidence_ids": ["m1"]}
    _write(folder, "questions.jsonl", [q, {**q, "text": "again?"}])
    e = _error(tmp_path)
    assert e.path.endswith("questions.jsonl") and (e.record, e.field) == ("line 2", "id")
    assert "duplicate question id 'q1' (first on line 1)" in str(e)


def test_duplicate_probe_ids(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(folder, "chat.jsonl", [{"probe_id": "m3"}, {"probe_id": "m2"}, {"probe_id": "m3"}])
    e = _error(tmp_path)
    assert e.path.endswith("chat.jsonl") and (e.record, e.field) == ("line 3", "probe_id")
    assert "duplicate probe_id 'm3' (first on line 1)" in str(e)


def test_subject_folder_without_conversation(tmp_path: Path) -> None:
    _subject(tmp_path / "ds")
    ghost = tmp_path / "ds" / "ghost"
    ghost.mkdir()
    _write(ghost, "chat.jsonl", [{"probe_id": "m1"}])
    (ghost / "profile.json").write_text('{"claims": []}')
    with pytest.raises(DataError, match=r"a subject folder without conversation\.jsonl") as info:
        load_release(tmp_path / "ds")
    assert info.value.path == str(ghost)
    # a lone subject folder missing its conversation too
    with pytest.raises(DataError, match=r"without conversation\.jsonl"):
        load_dataset(str(ghost))


def test_stratum_must_be_known(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(folder, "chat.jsonl", [{"probe_id": "m3", "stratum": "banana"}])
    e = _error(tmp_path)
    assert (e.record, e.field) == ("line 1", "stratum")
    assert "'proportional', 'enriched', 'abstention' or 'census'" in str(e)


@pytest.mark.parametrize("reads", [["verify"], ["nowhere"], ["resolve", "resolve2"]])
def test_trace_stage_reads_only_earlier_stages(tmp_path: Path, reads: list[str]) -> None:
    folder = _subject(tmp_path)
    trace = [
        {"stage": "resolve", "output": "x", "reads": reads},
        {"stage": "verify", "output": "y", "reads": ["resolve"]},
    ]
    if reads[0] == "resolve":
        trace[0]["reads"] = []
        trace[1]["reads"] = reads
    _write(folder, "chat.jsonl", [{"probe_id": "m3", "trace": trace}])
    e = _error(tmp_path)
    assert e.field == "trace" and "which is not an earlier stage of this item" in str(e)


def test_validity_window_must_not_be_reversed(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    claim = {
        "field": "job",
        "statement": "x",
        "valid_from": "2024-05-13T00:00:00",
        "valid_to": "2024-05-10T00:00:00",
    }
    (folder / "profile.json").write_text(json.dumps({"claims": [claim]}))
    e = _error(tmp_path)
    assert (e.record, e.field) == ("claims[0]", "valid_to") and "is before valid_from" in str(e)


def test_lone_surrogate_in_a_message(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    (folder / "conversation.jsonl").write_text(
        '{"id": "m1", "speaker": "Ana", "text": "ok"}\n'
        '{"id": "m2", "speaker": "Ana", "text": "bad \\ud800"}\n'
    )
    (folder / "chat.jsonl").unlink()
    (folder / "questions.jsonl").unlink()
    e = _error(tmp_path)
    assert (e.record, e.field) == ("line 2", "text") and "lone surrogate" in str(e)


def test_huge_id_is_rejected_fast(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    with (folder / "conversation.jsonl").open("a") as f:
        f.write(json.dumps({"id": "x" * 5_000_000, "speaker": "Ana", "text": "hi"}) + "\n")
    start = time.perf_counter()
    e = _error(tmp_path)
    assert time.perf_counter() - start < 2
    assert (e.record, e.field) == ("line 4", "id") and "at most 256 characters" in str(e)
    assert len(str(e)) < 300


def test_deeply_nested_line(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    (folder / "questions.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    e = _error(tmp_path)
    assert e.record == "line 1" and "nested too deeply" in str(e)


def test_position_true_is_not_one(tmp_path: Path) -> None:
    folder = _subject(tmp_path)
    _write(
        folder,
        "conversation.jsonl",
        [
            {"id": "m1", "speaker": "A", "text": "x"},
            {"id": "m2", "speaker": "A", "text": "y", "position": True},
        ],
    )
    e = _error(tmp_path)
    assert e.field == "position"


def test_census_and_rereadings_load_round_trip_and_are_checked(tmp_path: Path) -> None:
    """census.jsonl holds stratum-census labels of messages that are no chat item, checked
    like chat items; reread.jsonl's needs_memory must say whether a referent lies more than
    8 messages back."""
    folder = _subject(tmp_path / "a")
    _write(folder, "census.jsonl", [{"probe_id": "m1", "stratum": "census", "locus": "none"}])
    _write(folder, "reread.jsonl", [{"probe_id": "m3", "needs_memory": False}])
    ds = load_release(folder)
    (s,) = ds.subjects
    assert [c.probe_id for c in s.census] == ["m1"] and s.reread[0].needs_memory is False
    write_release(ds, tmp_path / "out")
    assert load_release(tmp_path / "out").subjects == ds.subjects
    assert (tmp_path / "out" / "ana" / "census.jsonl").exists()
    cases: list[tuple[str, list[dict[str, object]], str, str]] = [
        ("census.jsonl", [{"probe_id": "m1", "stratum": "enriched"}], "stratum", "census"),
        ("census.jsonl", [{"probe_id": "m3", "stratum": "census"}], "probe_id", "chat item"),
        (
            "census.jsonl",
            [{"probe_id": "m3", "stratum": "census", "reference_ids": ["m1"], "locus": "none"}],
            "probe_id",
            "chat item",
        ),
        (
            "reread.jsonl",
            [{"probe_id": "m3", "needs_memory": True, "referent_ids": ["m1"]}],
            "needs_memory",
            "no referent lies more than 8",
        ),
        (
            "reread.jsonl",
            [{"probe_id": "m3", "needs_memory": False, "referent_ids": ["m9"]}],
            "referent_ids",
            "not in",
        ),
    ]
    for name, rows, field, says in cases:
        f = _subject(tmp_path / f"bad{len(list(tmp_path.iterdir()))}")
        _write(f, name, rows)
        with pytest.raises(DataError) as info:
            load_release(f)
        assert info.value.field == field and says in str(info.value), (name, str(info.value))
    chat = tmp_path / "chat-census"
    f = _subject(chat)
    _write(f, "chat.jsonl", [{"probe_id": "m3", "stratum": "census"}])
    with pytest.raises(DataError, match="does not belong in chat items"):
        load_release(f)
