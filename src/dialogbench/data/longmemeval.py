"""LongMemEval (Wu et al., ICLR 2025): one question over its own haystack of chat sessions.

A file (`longmemeval_s.json`, `_m`, `_oracle` or a cleaned variant) is a list of instances
`{question_id, question_type, question, answer, question_date, haystack_session_ids,
haystack_dates, haystack_sessions, answer_session_ids}`. Each instance becomes one subject
(id = question_id) whose conversation is its haystack sessions flattened in the file's
order (sorted by date in `_s` and `_m`, not in `_oracle`). Turn `t` (0-based) of session
`S` gets the id `"S:t"`; a session id repeated within an instance gets `"~2"`, `"~3"` ...
appended to its later copies, with a warning. Roles are LongMemEval's own (the user is
the person under study, speaker `user`; the assistant is speaker `assistant`).

Each subject holds one question: category = question_type; ids ending in `_abs` are
abstention questions (`answerable=False`); evidence = the turns flagged `has_answer`.
Where no turn is flagged, evidence falls back to every user turn of the answer sessions
and a warning names the question. `question_date` becomes `Question.asked_at`; session
dates such as `"2023/05/20 (Sat) 02:21"` become message
timestamps (None, with a warning, where unparseable).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from dialogbench.data import dates
from dialogbench.data.errors import DataError
from dialogbench.data.io import (
    as_text,
    clip,
    date_text,
    expect_list,
    expect_object,
    json_type,
    parse_record,
    read_json,
    require_fields,
    sha256_file,
    short,
)
from dialogbench.data.model import Dataset, Message, Question, Role, Subject
from dialogbench.data.release import check_subject, new_dataset
from dialogbench.data.safe_names import check_name

REQUIRED = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "haystack_session_ids",
    "haystack_dates",
    "haystack_sessions",
    "answer_session_ids",
)
ROLES: tuple[Role, ...] = ("user", "assistant")


def load_longmemeval(path: Path, name: str | None = None, raw: Any = None) -> Dataset:
    """Load a LongMemEval file (or a folder holding exactly one `longmemeval*.json`);
    `raw` is the file already parsed. The dataset is called `name`, by default the stem
    of `path`."""
    name = name or Path(path).stem
    path = _resolve(Path(path))
    if raw is None:
        raw = read_json(path)
    instances = expect_list(
        raw, path, None, None, "pass a LongMemEval file such as longmemeval_s.json"
    )
    warnings: list[str] = []
    subjects: list[Subject] = []
    first: dict[str, int] = {}
    for index, instance in enumerate(instances):
        subject = _load_instance(path, index, instance, warnings)
        if subject.id in first:
            raise DataError(
                path,
                f"question_id '{subject.id}' is already instance {first[subject.id]}",
                record=f"instance {index}",
                field="question_id",
                fix="give every instance a unique question_id",
            )
        first[subject.id] = index
        subjects.append(subject)
    return new_dataset(
        path,
        name,
        subjects,
        sha256_file(path),
        warnings=warnings,
        licence="MIT",
        records=[f"instance {i}" for i in range(len(subjects))],
        id_field="question_id",
    )


def _resolve(path: Path) -> Path:
    if not path.is_dir():
        return path
    found = sorted(path.glob("longmemeval*.json"))
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise DataError(
            path,
            f"expected one longmemeval*.json in the folder, found {names}",
            fix="pass the file itself, e.g. longmemeval_s.json",
        )
    return found[0]


def parse_date(text: Any) -> datetime | None:
    """Parse a LongMemEval date like `2023/05/20 (Sat) 02:21` (`dialogbench.data.dates`);
    None if it is not a string or cannot be read."""
    if not isinstance(text, str):
        return None
    try:
        return dates.parse_date(text)
    except ValueError:
        return None


def _load_instance(path: Path, index: int, inst: Any, warnings: list[str]) -> Subject:
    record = f"instance {index}"
    expect_object(inst, path, record, "each list item must be one LongMemEval instance")
    require_fields(inst, ("question_id",), path, record)
    qid = as_text(inst["question_id"], path, record, "question_id")
    check_name(qid, path=path, record=record, field="question_id")
    record = f"instance {index} ({clip(qid)})"
    require_fields(inst, REQUIRED, path, record)
    sessions = _list(path, record, inst, "haystack_sessions")
    n = len(sessions)
    session_ids = _texts(path, record, inst, "haystack_session_ids", n)
    dates = _list(path, record, inst, "haystack_dates", n)
    for s, when_text in enumerate(dates):
        date_text(when_text, path, record, f"haystack_dates[{s}]")
    unique_ids = _dedupe(session_ids, qid, warnings)

    messages: list[Message] = []
    flagged: list[str] = []
    user_turns: dict[str, list[str]] = {}
    unparsed = 0
    rows = zip(session_ids, unique_ids, dates, sessions, strict=True)
    for s, (given_id, sid, when_text, turns) in enumerate(rows):
        when = parse_date(when_text)
        unparsed += when is None
        if not isinstance(turns, list):
            raise DataError(
                path,
                f"expected a list of turns, found {json_type(turns)}",
                record=record,
                field=f"haystack_sessions[{s}]",
                fix="each session must be a list of {role, content} turns",
            )
        for t, turn in enumerate(turns):
            field = f"haystack_sessions[{s}][{t}]"
            msg = _turn(path, record, field, turn, sid, t, when, len(messages))
            messages.append(msg)
            if turn.get("has_answer") is True:
                flagged.append(msg.id)
            if msg.role == "user":
                user_turns.setdefault(given_id, []).append(msg.id)
    if not messages:
        raise DataError(
            path,
            "the haystack has no turns",
            record=record,
            field="haystack_sessions",
            fix="add at least one session with turns",
        )
    if unparsed:
        warnings.append(
            f"{qid}: {unparsed} of {n} session dates could not be parsed; "
            "their timestamps are empty"
        )

    evidence = flagged
    answer_sessions = _texts(path, record, inst, "answer_session_ids")
    if not evidence:
        evidence = [m for a in answer_sessions for m in user_turns.get(a, [])]
        warnings.append(
            f"{qid}: no turn is flagged has_answer; evidence falls back to the "
            f"{len(evidence)} user turns of answer sessions {answer_sessions}"
        )
    answer = inst["answer"]
    question_date = date_text(inst.get("question_date"), path, record, "question_date")
    fields: dict[str, Any] = {
        "id": qid,
        "category": as_text(inst["question_type"], path, record, "question_type"),
        "text": as_text(inst["question"], path, record, "question"),
        "answer": None if answer is None else as_text(answer, path, record, "answer"),
        "evidence_ids": evidence,
        "answerable": not qid.endswith("_abs"),
        "asked_at": parse_date(question_date),
    }
    question = parse_record(Question, fields, path, record, _QUESTION_FIELDS)
    subject_fields = {
        "id": qid,
        "messages": messages,
        "questions": [question],
        "speakers": ["user"],
    }
    subject = parse_record(Subject, subject_fields, path, record, {"id": "question_id"})
    check_subject(subject, path=path)
    return subject


_QUESTION_FIELDS = {"id": "question_id", "category": "question_type", "text": "question"}


def _texts(
    path: Path, record: str, inst: dict[str, Any], key: str, length: int | None = None
) -> list[str]:
    """`inst[key]` as a list of ids (strings or numbers)."""
    values = _list(path, record, inst, key, length)
    return [as_text(v, path, record, f"{key}[{i}]") for i, v in enumerate(values)]


def _list(
    path: Path, record: str, inst: dict[str, Any], key: str, length: int | None = None
) -> list[Any]:
    value = expect_list(inst[key], path, record, key, f"make '{key}' a list")
    if length is not None and len(value) != length:
        raise DataError(
            path,
            f"has {len(value)} items but haystack_sessions has {length}",
            record=record,
            field=key,
            fix="give one entry per haystack session, in the same order",
        )
    return value


def _dedupe(session_ids: list[str], qid: str, warnings: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for sid in session_ids:
        seen[sid] = seen.get(sid, 0) + 1
        if seen[sid] > 1:
            warnings.append(
                f"{qid}: session id '{sid}' repeats; copy {seen[sid]} is '{sid}~{seen[sid]}'"
            )
            sid = f"{sid}~{seen[sid]}"
        out.append(sid)
    return out


def _turn(
    path: Path,
    record: str,
    field: str,
    turn: Any,
    sid: str,
    t: int,
    when: datetime | None,
    position: int,
) -> Message:
    expect_object(turn, path, record, "each turn must be {role, content}", field=field)
    role = turn.get("role")
    if role not in ROLES:
        raise DataError(
            path,
            f"role is {short(role)}",
            record=record,
            field=f"{field}.role",
            fix="set role to 'user' or 'assistant'",
        )
    content = turn.get("content")
    if not isinstance(content, str):
        problem = (
            "required field is missing"
            if "content" not in turn
            else f"content is not text but {json_type(content)}"
        )
        raise DataError(
            path,
            problem,
            record=record,
            field=f"{field}.content",
            fix="give every turn its text under 'content'",
        )
    if not isinstance(turn.get("has_answer", False), bool):
        raise DataError(
            path,
            f"has_answer is {json_type(turn['has_answer'])}, not true or false",
            record=record,
            field=f"{field}.has_answer",
            fix="flag evidence turns with has_answer: true (or leave it out)",
        )
    fields = {
        "id": f"{sid}:{t}",
        "position": position,
        "speaker": role,
        "role": role,
        "text": content,
        "timestamp": when,
        "session": sid,
    }
    names = {"id": "haystack_session_ids", "session": "haystack_session_ids"}  # "S:t", S
    return parse_record(Message, fields, path, record, names)
