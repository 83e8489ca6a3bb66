"""LoCoMo (Maharana et al., ACL 2024): ten long two-person chats with evidence-linked QA.

Each sample becomes one subject; both speakers are people, so both have role `user`.
Questions keep LoCoMo's numeric categories under explicit names (the official evaluation
code's numbering; other tools number them differently). Category 5 (adversarial) asks
about something the conversation never says: the question is unanswerable and its
`answer` holds the trap answer LoCoMo stores in `adversarial_answer`.

Evidence ids are repaired where the intent is unambiguous (`dialogbench.data.evidence`:
`'D8:6; D9:17'` and space-joined lists are split, `'D30:05'` loses its leading zero,
`'D12:3-D12:5'` is a range) and every repair or drop is recorded in `Dataset.warnings`.
Session dates are read by `dialogbench.data.dates` (LoCoMo's own `1:56 pm on 8 May, 2023`,
ISO 8601 and the other formats listed there); sessions whose date is missing or cannot be
read leave their messages without a timestamp, and one warning counts them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from dialogbench.data.dates import Unreadable
from dialogbench.data.errors import DataError
from dialogbench.data.evidence import repair_evidence as repair
from dialogbench.data.io import (
    as_text,
    clip,
    corpus_json,
    date_text,
    expect_list,
    expect_object,
    parse_record,
    sha256_file,
    short,
    with_caption,
)
from dialogbench.data.model import Dataset, Message, Question, Subject
from dialogbench.data.release import check_subject, new_dataset
from dialogbench.data.safe_names import check_name

FILENAME = "locomo10.json"

CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""LoCoMo's category numbers as its official evaluation code uses them."""

_SESSION = re.compile(r"session_(\d+)")


def load_locomo(path: Path, name: str | None = None, raw: Any = None) -> Dataset:
    """Load `locomo10.json` (or a folder holding it); `raw` is the file already parsed.

    The dataset is called `name`, by default the stem of `path`."""
    path, name, raw = corpus_json(path, FILENAME, name, raw)
    samples = expect_list(raw, path, None, None, "pass LoCoMo's locomo10.json (a list of samples)")
    warnings: list[str] = []
    dates = Unreadable("session dates")
    subjects = [_load_sample(path, i, s, warnings, dates) for i, s in enumerate(samples)]
    untimed = sum(m.timestamp is None for s in subjects for m in s.messages)
    if (warning := dates.warning(untimed)) is not None:
        warnings.append(warning)
    digest = sha256_file(path)
    return new_dataset(
        path,
        name,
        subjects,
        digest,
        warnings=warnings,
        licence="CC BY-NC 4.0",
        records=[f"sample {i}" for i in range(len(subjects))],
        id_field="sample_id",
    )


def _require(path: Path, obj: dict[str, Any], key: str, record: str) -> Any:
    if key not in obj:
        raise DataError(
            path,
            "required field is missing",
            record=record,
            field=key,
            fix=f"add '{key}'; is this LoCoMo's locomo10.json?",
        )
    return obj[key]


def _load_sample(
    path: Path, index: int, sample: Any, warnings: list[str], dates: Unreadable
) -> Subject:
    record = f"sample {index}"
    expect_object(sample, path, record, "each list item must be one LoCoMo sample")
    sid = as_text(_require(path, sample, "sample_id", record), path, record, "sample_id")
    check_name(sid, path=path, record=record, field="sample_id")
    record = f"sample {index} ({clip(sid)})"
    conv = expect_object(
        _require(path, sample, "conversation", record),
        path,
        record,
        "give the sample its conversation object",
        field="conversation",
    )
    speakers = [_optional_text(path, record, conv, f"speaker_{x}") for x in "ab"]
    sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION.fullmatch(key)))
    messages: list[Message] = []
    turn_records: list[str] = []
    for number, key in sessions:
        raw_when = date_text(conv.get(f"{key}_date_time"), path, record, f"{key}_date_time")
        when = dates.read(f"{record}, {key}_date_time", raw_when)
        turns = expect_list(conv[key], path, record, key, f"make '{key}' a list of turns")
        for t, turn in enumerate(turns):
            trec = f"{record}, {key}[{t}]"
            expect_object(turn, path, trec, "each turn must be {speaker, dia_id, text}")
            text = as_text(_require(path, turn, "text", trec), path, trec, "text")
            text = with_caption(text, _optional_text(path, trec, turn, "blip_caption"))
            fields = {
                "id": as_text(_require(path, turn, "dia_id", trec), path, trec, "dia_id"),
                "position": len(messages),
                "speaker": as_text(_require(path, turn, "speaker", trec), path, trec, "speaker"),
                "role": "user",
                "text": text,
                "timestamp": when,
                "session": f"session_{number}",
            }
            messages.append(parse_record(Message, fields, path, trec, _TURN_FIELDS))
            turn_records.append(trec)
    ids = {m.id for m in messages}
    questions = []
    question_records = []
    qas = expect_list(_require(path, sample, "qa", record), path, record, "qa", "make 'qa' a list")
    for q_index, qa in enumerate(qas):
        qrec = f"{record}, qa[{q_index}]"
        expect_object(qa, path, qrec, "each qa entry must be {question, answer, evidence, ...}")
        category = _category(path, qrec, _require(path, qa, "category", qrec))
        answerable = category != 5
        answer = qa.get("answer") if answerable else qa.get("adversarial_answer", qa.get("answer"))
        if answer is not None:
            key = "answer" if answerable or "adversarial_answer" not in qa else "adversarial_answer"
            answer = as_text(answer, path, qrec, key)
        _evidence_list(path, qrec, qa)
        qid = f"{sid}-q{q_index}"
        fields = {
            "id": qid,
            "category": CATEGORIES[category],
            "text": as_text(_require(path, qa, "question", qrec), path, qrec, "question"),
            "answer": answer,
            "evidence_ids": repair_evidence(qa.get("evidence", []), ids, qid, warnings),
            "answerable": answerable,
        }
        questions.append(parse_record(Question, fields, path, qrec, _QA_FIELDS))
        question_records.append(qrec)
    fields = {
        "id": sid,
        "messages": messages,
        "questions": questions,
        "speakers": [s for s in speakers if s],
    }
    subject = parse_record(Subject, fields, path, record, _SAMPLE_FIELDS)
    check_subject(
        subject,
        files={"conversation": (path, turn_records), "questions": (path, question_records)},
        path=path,
    )
    return subject


_TURN_FIELDS = {"id": "dia_id"}
_QA_FIELDS = {"text": "question", "id": "sample_id"}  # a question's id is sample_id-qN
_SAMPLE_FIELDS = {"id": "sample_id", "speakers": "conversation.speaker_a / speaker_b"}


def _optional_text(path: Path, record: str, obj: dict[str, Any], key: str) -> str | None:
    """`obj[key]` as text, or None where it is absent or null."""
    value = obj.get(key)
    return None if value is None else as_text(value, path, record, key)


def _category(path: Path, record: str, value: Any) -> int:
    """LoCoMo's category: a whole number 1-5."""
    whole = isinstance(value, int | float) and not isinstance(value, bool)
    if whole and math.isfinite(value) and value == int(value) and int(value) in CATEGORIES:
        return int(value)
    raise DataError(
        path,
        f"category is {short(value)}, not a whole number from 1 to 5",
        record=record,
        field="category",
        fix=f"use one of {sorted(CATEGORIES)} ({', '.join(CATEGORIES.values())})",
    )


def _evidence_list(path: Path, record: str, qa: dict[str, Any]) -> None:
    """A `DataError` unless the qa's `evidence` (when present) is a list of strings."""
    evidence = qa.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise DataError(
            path,
            f"expected a list of dia_id strings, found {short(evidence)}",
            record=record,
            field="evidence",
            fix='write the evidence as a list such as ["D1:3", "D2:7"]',
        )


def repair_evidence(raw: list[str], ids: set[str], qid: str, warnings: list[str]) -> list[str]:
    """The usable evidence ids (`dialogbench.data.evidence`); repairs and drops as warnings."""
    evidence = repair([str(item) for item in raw], ids)
    warnings.extend(evidence.warnings(qid))
    return evidence.ids
