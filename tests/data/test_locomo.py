"""LoCoMo loader on the real file: category map, adversarial gold, evidence repair."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

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
    ds = load_locomo(_locomo_shaped(tmp_path, ["08/05/2023", ["2023"], float("nan")]))
    assert all(m.timestamp is None for m in ds.subjects[0].messages)
    (warning,) = [w for w in ds.warnings if "session dates" in w]
    assert warning.startswith("3 session dates are missing or could not be read")
    assert "6 messages have no timestamp" in warning
    assert "sample 0 (c1), session_1_date_time: '08/05/2023'" in warning


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
