"""LoCoMo loader on the real file: category map, adversarial gold, evidence repair."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from dialogbench.data.errors import DataError
from dialogbench.data.locomo import CATEGORIES, load_locomo, repair_evidence


def test_category_map_and_counts(locomo_dir: Path) -> None:
    ds = load_locomo(locomo_dir)
    assert CATEGORIES == {
        1: "multi-hop",
        2: "temporal",
        3: "open-domain",
        4: "single-hop",
        5: "adversarial",
    }
    counts = Counter(q.category for s in ds.subjects for q in s.questions)
    assert counts == {
        "multi-hop": 282,
        "temporal": 321,
        "open-domain": 96,
        "single-hop": 841,
        "adversarial": 446,
    }
    assert len(ds.subjects) == 10
    assert sum(len(s.messages) for s in ds.subjects) == 5882
    assert ds.sha256 == "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"


def test_adversarial_gold_comes_from_adversarial_answer(locomo_dir: Path) -> None:
    ds = load_locomo(locomo_dir)
    adv = [q for s in ds.subjects for q in s.questions if q.category == "adversarial"]
    assert all(not q.answerable for q in adv)
    first = next(q for q in ds.subjects[0].questions if q.category == "adversarial")
    assert first.answer == "self-care is important"
    assert all(
        q.answerable for s in ds.subjects for q in s.questions if q.category != "adversarial"
    )


def test_evidence_repairs_and_reports(locomo_dir: Path) -> None:
    ds = load_locomo(locomo_dir)
    by_id = {q.id: q for s in ds.subjects for q in s.questions}
    assert by_id["conv-26-q37"].evidence_ids == ["D8:6", "D9:17"]
    assert by_id["conv-49-q31"].evidence_ids == ["D9:1", "D4:4", "D4:6"]
    assert by_id["conv-50-q69"].evidence_ids == ["D30:5"]
    text = "\n".join(ds.warnings)
    assert "conv-42-q88: evidence id 'D' is malformed" in text
    assert "conv-43-q18: evidence id 'D:11:26' is malformed" in text
    assert "conv-42-q58: evidence id 'D10:19' names no message" in text
    assert "conv-47-q38: evidence id 'D4:36' names no message" in text
    assert "repaired to ['D8:6', 'D9:17']" in text
    # the surviving evidence of partly broken items is kept
    assert by_id["conv-42-q88"].evidence_ids == ["D1:18", "D1:20"]
    no_evidence = [q.id for s in ds.subjects for q in s.questions if not q.evidence_ids]
    assert len(no_evidence) == 4
    assert all(f"{qid}: no usable evidence" in text for qid in no_evidence)


def test_image_captions_join_the_text(locomo_dir: Path) -> None:
    ds = load_locomo(locomo_dir)
    msg = next(m for m in ds.subjects[0].messages if m.id == "D1:5")
    assert "[shares an image:" in msg.text
    assert msg.timestamp is not None and msg.session == "session_1"


def _locomo_shaped(tmp_path: Path, dates: list[object]) -> Path:
    """A two-session LoCoMo-schema file with the given session dates."""
    conversation: dict[str, object] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for n, when in enumerate(dates, start=1):
        conversation[f"session_{n}"] = [
            {"speaker": "Ana", "dia_id": f"D{n}:1", "text": "hi"},
            {"speaker": "Ben", "dia_id": f"D{n}:2", "text": "hello"},
        ]
        conversation[f"session_{n}_date_time"] = when
    qa = [{"question": "q?", "answer": "a", "evidence": ["D1:1-D1:2"], "category": 4}]
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([{"sample_id": "c1", "conversation": conversation, "qa": qa}]))
    return path


def test_session_dates_in_other_formats_are_read(tmp_path: Path) -> None:
    ds = load_locomo(_locomo_shaped(tmp_path, ["2023-05-08T13:56:00", "9 May 2023"]))
    times = [m.timestamp for m in ds.subjects[0].messages]
    assert times == [datetime(2023, 5, 8, 13, 56)] * 2 + [datetime(2023, 5, 9)] * 2
    assert ds.subjects[0].questions[0].evidence_ids == ["D1:1", "D1:2"]
    assert ds.warnings == ["c1-q0: evidence id 'D1:1-D1:2' repaired to ['D1:1', 'D1:2']"]


def test_unreadable_session_dates_are_one_warning(tmp_path: Path) -> None:
    ds = load_locomo(_locomo_shaped(tmp_path, ["08/05/2023", "next Tuesday", None]))
    assert all(m.timestamp is None for m in ds.subjects[0].messages)
    (warning,) = [w for w in ds.warnings if "session dates" in w]
    assert warning.startswith("3 session dates are missing or could not be read")
    assert "6 messages have no timestamp" in warning
    assert "sample 0 (c1), session_1_date_time: '08/05/2023'" in warning


@pytest.mark.parametrize("value", [["2023"], {"d": "2023-05-08"}, float("nan"), 20230508])
def test_session_dates_that_are_not_text_are_errors(tmp_path: Path, value: object) -> None:
    """A list, an object, NaN or a number is not a date: an error, never "no date"."""
    with pytest.raises(DataError, match=r"session_1_date_time|NaN"):
        load_locomo(_locomo_shaped(tmp_path, [value, "8 May 2023", "8 May 2023"]))


def test_repair_evidence_unit() -> None:
    warnings: list[str] = []
    ids = {"D1:1", "D2:3"}
    assert repair_evidence(["D1:1 D2:3", "D2:03", "D9:9", "x"], ids, "q", warnings) == [
        "D1:1",
        "D2:3",
    ]
    assert len(warnings) == 4


def test_not_locomo_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "locomo10.json"
    bad.write_text('[{"sample_id": "c1"}]')
    with pytest.raises(DataError, match=r"sample 0 \(c1\), field 'conversation'"):
        load_locomo(bad)


# -- bad input that used to crash or be taken for data ---------------------------------------


def _sample() -> dict[str, Any]:
    return {
        "sample_id": "c1",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "I adopted a cat."},
                {"speaker": "B", "dia_id": "D1:2", "text": "Lovely!"},
            ],
        },
        "qa": [
            {
                "question": "What did A adopt?",
                "answer": "a cat",
                "evidence": ["D1:1"],
                "category": 4,
            }
        ],
    }


def _error(tmp_path: Path, data: object, raw: str | None = None) -> DataError:
    path = tmp_path / "locomo10.json"
    path.write_text(raw if raw is not None else json.dumps([data]))
    with pytest.raises(DataError) as info:
        load_locomo(path)
    assert info.value.path == str(path)
    return info.value


def test_small_sample_loads_and_is_named_after_its_file(tmp_path: Path) -> None:
    path = tmp_path / "my_chats.json"
    path.write_text(json.dumps([_sample()]))
    ds = load_locomo(path)
    assert ds.name == "my_chats" and [m.id for m in ds.subjects[0].messages] == ["D1:1", "D1:2"]
    assert load_locomo(path, name="locomo").name == "locomo"


def test_null_qa_entry(tmp_path: Path) -> None:
    sample = _sample()
    sample["qa"] = [None]
    e = _error(tmp_path, sample)
    assert e.record == "sample 0 (c1), qa[0]" and "expected an object, found null" in str(e)


@pytest.mark.parametrize("category", [1.5, "x", "4", 0, 6, True, None, [4]])
def test_category_must_be_a_whole_number_1_to_5(tmp_path: Path, category: object) -> None:
    sample = _sample()
    sample["qa"][0]["category"] = category
    e = _error(tmp_path, sample)
    assert (e.record, e.field) == ("sample 0 (c1), qa[0]", "category")
    assert "not a whole number from 1 to 5" in str(e)


@pytest.mark.parametrize("token", ["1e400", "NaN", "-Infinity"])
def test_category_that_is_not_a_number(tmp_path: Path, token: str) -> None:
    raw = json.dumps([_sample()]).replace('"category": 4', f'"category": {token}')
    e = _error(tmp_path, None, raw)
    assert e.record == "line 1" and "at column" in str(e)


def test_whole_float_category_is_read(tmp_path: Path) -> None:
    sample = _sample()
    sample["qa"][0]["category"] = 4.0
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([sample]))
    assert load_locomo(path).subjects[0].questions[0].category == "single-hop"


def test_duplicate_dia_id(tmp_path: Path) -> None:
    sample = _sample()
    sample["conversation"]["session_1"][1]["dia_id"] = "D1:1"
    e = _error(tmp_path, sample)
    assert (e.record, e.field) == ("sample 0 (c1), session_1[1]", "id")
    assert "duplicate message id 'D1:1' (first on sample 0 (c1), session_1[0])" in str(e)


@pytest.mark.parametrize("value", [None, True, [], {}])
@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("turn", "text"),
        ("turn", "speaker"),
        ("turn", "dia_id"),
        ("turn", "blip_caption"),
        ("qa", "question"),
        ("qa", "answer"),
        ("sample", "sample_id"),
    ],
)
def test_text_field_that_is_not_text(tmp_path: Path, where: str, key: str, value: object) -> None:
    if value is None and key in ("answer", "blip_caption"):
        return  # null means none
    sample = _sample()
    holder = {
        "turn": sample["conversation"]["session_1"][0],
        "qa": sample["qa"][0],
        "sample": sample,
    }[where]
    holder[key] = value
    e = _error(tmp_path, sample)
    assert e.field == key and "expected text, found" in str(e)


def test_minus_infinity_text(tmp_path: Path) -> None:
    raw = json.dumps([_sample()]).replace('"Lovely!"', "-1e400")
    assert "too large for a float" in str(_error(tmp_path, None, raw))


@pytest.mark.parametrize("value", [["1:56 pm on 8 May, 2023"], {"at": 1}, 5])
def test_session_date_that_is_not_text(tmp_path: Path, value: object) -> None:
    sample = _sample()
    sample["conversation"]["session_1_date_time"] = value
    e = _error(tmp_path, sample)
    assert e.field == "session_1_date_time" and "expected a date string" in str(e)


def test_nan_session_date(tmp_path: Path) -> None:
    raw = json.dumps([_sample()]).replace('"1:56 pm on 8 May, 2023"', "NaN")
    assert "NaN is not a JSON number" in str(_error(tmp_path, None, raw))


@pytest.mark.parametrize("evidence", [None, "D1:1", [["D1:1"]], [1]])
def test_evidence_must_be_a_list_of_ids(tmp_path: Path, evidence: object) -> None:
    sample = _sample()
    sample["qa"][0]["evidence"] = evidence
    assert _error(tmp_path, sample).field == "evidence"


def test_conversation_and_sessions_of_the_wrong_type(tmp_path: Path) -> None:
    sample = _sample()
    sample["conversation"]["session_1"] = {"0": "x"}
    assert _error(tmp_path, sample).field == "session_1"
    sample = _sample()
    sample["conversation"] = []
    assert _error(tmp_path, sample).field == "conversation"


def test_lone_surrogate_text(tmp_path: Path) -> None:
    raw = json.dumps([_sample()]).replace("Lovely!", "\\udc00")
    e = _error(tmp_path, None, raw)
    assert e.field == "[0].conversation.session_1[1].text" and "lone surrogate" in str(e)


def test_huge_dia_id_is_rejected_fast(tmp_path: Path) -> None:
    sample = _sample()
    sample["conversation"]["session_1"][1]["dia_id"] = "D" * 5_000_000
    start = time.perf_counter()
    e = _error(tmp_path, sample)
    assert time.perf_counter() - start < 2
    assert e.field == "dia_id" and "at most 256 characters" in str(e) and len(str(e)) < 300


def test_deep_nesting_bad_utf8_and_empty(tmp_path: Path) -> None:
    assert "nested too deeply" in str(_error(tmp_path, None, "[" * 100_000 + "]" * 100_000))
    path = tmp_path / "locomo10.json"
    path.write_bytes(json.dumps([_sample()]).encode().replace(b"cat", b"c\xe9t"))
    with pytest.raises(DataError, match="not UTF-8: byte 0xe9"):
        load_locomo(path)
    assert "holds no subjects" in str(_error(tmp_path, None, "[]"))
