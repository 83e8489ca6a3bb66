"""Import other people's chat exports (LoCoMo-like JSON or JSON Lines) by naming their fields.

An `ImportConfig` says where each thing lives. Two layouts are read:

* `rows="conversations"` (default): each row is a conversation whose turns are a list under
  `turns_field`, or, with `session_keys=True`, LoCoMo-style `session_1`, `session_2` ...
  lists (numeric order; the session is the key, and `session_N<session_time_suffix>`
  may hold its time). `body_field` names an object inside the conversation that holds
  the turns (LoCoMo's `conversation`); questions are read from the row itself.
* `rows="turns"`: each row is one turn; rows are grouped into conversations by `id_field`
  (all one conversation when it is None), in order of first appearance.

Rows come from a JSON list, the list (or id -> conversation object) under
`conversations_field`, a single conversation object, or the lines of a `.jsonl` file.

Ids: conversations without `id_field` are `conversation-<i>` (0-based); turns without
`turn_id_field` are `t<position>`, or `<session key>:<index in session>` with
`session_keys`. Questions are `<conversation id>-q<i>`.

Timestamps: with `timestamp_format` they are parsed by `datetime.strptime`; otherwise
as ISO 8601, and numbers as Unix seconds (milliseconds above 1e11). A null timestamp
means unknown; a missing or unreadable one is an error.

Every configured field that is missing raises `DataError` naming the file, the
conversation or turn, the field and the option to pass (`text_field` -> `--text-field`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from dialogbench.data.errors import DataError
from dialogbench.data.io import expect_object, read_json, read_jsonl, sha256_file
from dialogbench.data.model import Dataset, Message, Question, Role, Subject
from dialogbench.data.release import check_subject


@dataclass(frozen=True)
class ImportConfig:
    """Where a chat export keeps each thing; every `*_field` is a key in its JSON objects."""

    rows: Literal["conversations", "turns"] = "conversations"
    conversations_field: str | None = None
    id_field: str | None = None
    body_field: str | None = None
    turns_field: str = "turns"
    session_keys: bool = False
    session_prefix: str = "session_"
    session_time_suffix: str | None = None
    session_field: str | None = None
    text_field: str = "text"
    speaker_field: str = "speaker"
    turn_id_field: str | None = None
    timestamp_field: str | None = None
    timestamp_format: str | None = None
    user_speakers: tuple[str, ...] | None = None
    """Speakers with role `user`; the rest are `assistant`. None: everyone is a user."""
    questions_field: str | None = None
    question_field: str = "question"
    answer_field: str | None = "answer"
    evidence_field: str | None = "evidence"
    category_field: str | None = "category"
    unanswerable_categories: tuple[str, ...] = ()
    """Question categories whose questions get `answerable=False`."""
    name: str | None = None
    """Dataset name; default the file's stem."""
    licence: str | None = None

    def __post_init__(self) -> None:
        if self.rows == "turns" and (self.session_keys or self.questions_field):
            raise ValueError("rows='turns' cannot use session_keys or questions_field")


FIELD_HELP = {
    "rows": "'conversations' (a row per conversation) or 'turns' (a row per turn)",
    "session_keys": "turns live under LoCoMo-style session_1, session_2 ... keys",
    "session_prefix": "prefix of those session keys",
    "timestamp_format": "strptime format of timestamps (default: ISO 8601 or Unix time)",
    "user_speakers": "speakers under study (role user); the rest are assistant",
    "unanswerable_categories": "question categories that have no answer",
    "name": "dataset name (default: the file's stem)",
    "licence": "licence to record with the data",
    "conversations_field": "list of conversations",
    "id_field": "conversation id",
    "body_field": "object holding the turns",
    "turns_field": "list of turns",
    "session_time_suffix": "session time (key = session key + suffix)",
    "session_field": "session",
    "text_field": "message text",
    "speaker_field": "speaker",
    "turn_id_field": "turn id",
    "timestamp_field": "timestamp",
    "questions_field": "list of questions",
    "question_field": "question text",
    "answer_field": "answer",
    "evidence_field": "evidence turn ids",
    "category_field": "question category",
}
_OPTIONAL = {
    "id_field",
    "body_field",
    "session_time_suffix",
    "session_field",
    "turn_id_field",
    "timestamp_field",
    "questions_field",
    "answer_field",
    "evidence_field",
    "category_field",
    "conversations_field",
}


def flag(attr: str) -> str:
    """The command-line option named in fixes for config attribute `attr`."""
    return "--" + attr.replace("_", "-")


@dataclass
class _Conversation:
    id: str
    record: str
    turns: list[tuple[str, Any, str | None, Any]]
    """(record, turn object, session, raw session time)."""
    row: dict[str, Any] | None = None


def import_chat_export(path: Path, config: ImportConfig) -> Dataset:
    """Read a JSON or JSON Lines chat export laid out as `config` describes."""
    path = Path(path)
    rows = _rows(path, config)
    if config.rows == "turns":
        conversations = _group(path, rows, config)
    else:
        conversations = [
            _conversation(path, rec, key, row, i, config) for i, (rec, key, row) in enumerate(rows)
        ]
    warnings: list[str] = []
    seen: dict[str, str] = {}
    subjects = []
    for conv in conversations:
        if conv.id in seen:
            raise DataError(
                path,
                f"conversation id '{conv.id}' repeats ({seen[conv.id]})",
                record=conv.record,
                field=config.id_field,
                fix="give every conversation a unique id",
            )
        seen[conv.id] = conv.record
        subjects.append(_subject(path, conv, config))
    if config.user_speakers is not None:
        present = {s for subject in subjects for s in subject.speakers}
        for speaker in config.user_speakers:
            if speaker not in present:
                warnings.append(f"user speaker '{speaker}' never speaks; check its spelling")
    return Dataset(
        name=config.name or path.stem,
        subjects=subjects,
        sha256=sha256_file(path),
        source=str(path),
        warnings=warnings,
        licence=config.licence,
    )


def _missing(path: Path, record: str, obj: Any, attr: str, key: str) -> DataError:
    keys = ", ".join(map(str, obj)) if isinstance(obj, dict) else "none: not an object"
    what = FIELD_HELP[attr]
    fix = f"pass {flag(attr)} NAME with the key that holds the {what} (keys here: {keys})"
    if attr in _OPTIONAL:
        fix += f", or leave {flag(attr)} unset"
    return DataError(path, "configured field is missing", record=record, field=key, fix=fix)


def _get(path: Path, record: str, obj: Any, attr: str, key: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _missing(path, record, obj, attr, key)
    return obj[key]


def _text(path: Path, record: str, value: Any, key: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise DataError(
        path,
        f"expected text, found {type(value).__name__}",
        record=record,
        field=key,
        fix=f"give '{key}' a string value",
    )


def _rows(path: Path, config: ImportConfig) -> list[tuple[str, str | None, Any]]:
    """(record, dict key or None, row) for every conversation or turn row."""
    if path.suffix == ".jsonl":
        if config.conversations_field:
            raise DataError(
                path,
                "a JSON Lines file holds one row per line",
                field=config.conversations_field,
                fix=f"leave {flag('conversations_field')} unset for .jsonl",
            )
        return [(f"line {n}", None, obj) for n, obj in read_jsonl(path)]
    raw = read_json(path)
    label = "conversation" if config.rows == "conversations" else "turn"
    if config.conversations_field:
        cf = config.conversations_field
        raw = _get(path, "top level", raw, "conversations_field", cf)
        label = cf
    elif isinstance(raw, dict):
        if config.rows == "conversations" and _looks_like_conversation(raw, config):
            return [("top level", None, raw)]
        raise DataError(
            path,
            "the top level is an object, not a list",
            record="top level",
            fix=f"pass {flag('conversations_field')} NAME with the key that holds "
            f"the {config.rows} (keys here: {', '.join(map(str, raw))})",
        )
    if isinstance(raw, dict):
        return [(f"{label}[{k!r}]", str(k), v) for k, v in raw.items()]
    if not isinstance(raw, list):
        raise DataError(
            path,
            f"expected a list of {config.rows}, found {type(raw).__name__}",
            record="top level",
            field=config.conversations_field,
            fix=f"point {flag('conversations_field')} at the list",
        )
    if label == config.conversations_field:
        return [(f"{label}[{i}]", None, row) for i, row in enumerate(raw)]
    return [(f"{label} {i}", None, row) for i, row in enumerate(raw)]


def _looks_like_conversation(obj: dict[str, Any], config: ImportConfig) -> bool:
    body = obj.get(config.body_field, {}) if config.body_field else obj
    if not isinstance(body, dict):
        return False
    if config.session_keys:
        return any(re.fullmatch(re.escape(config.session_prefix) + r"\d+", str(k)) for k in body)
    return config.turns_field in body


def _conversation_id(path: Path, record: str, value: Any, key: str | None) -> str:
    cid = _text(path, record, value, key or "id").strip()
    if not cid or cid in (".", "..") or "/" in cid or "\\" in cid:
        raise DataError(
            path,
            f"conversation id {value!r} cannot name a folder",
            record=record,
            field=key,
            fix="use ids without slashes that are not empty, '.' or '..'",
        )
    return cid


def _conversation(
    path: Path, record: str, key: str | None, row: Any, index: int, config: ImportConfig
) -> _Conversation:
    expect_object(row, path, record, "each conversation must be a JSON object")
    if key is not None:
        cid = _conversation_id(path, record, key, None)
    elif config.id_field:
        cid = _conversation_id(
            path, record, _get(path, record, row, "id_field", config.id_field), config.id_field
        )
    else:
        cid = f"conversation-{index}"
    record = f"{record} (id '{cid}')"
    body = row
    if config.body_field:
        body = _get(path, record, row, "body_field", config.body_field)
        expect_object(
            body,
            path,
            record,
            f"point {flag('body_field')} at the object holding the turns",
            field=config.body_field,
        )
    turns: list[tuple[str, Any, str | None, Any]] = []
    if config.session_keys:
        pattern = re.compile(re.escape(config.session_prefix) + r"(\d+)")
        sessions = sorted((int(m.group(1)), k) for k in body if (m := pattern.fullmatch(str(k))))
        if not sessions:
            raise DataError(
                path,
                f"no '{config.session_prefix}N' keys",
                record=record,
                field=f"{config.session_prefix}N",
                fix=f"check {flag('session_prefix')}, or pass {flag('turns_field')} "
                "NAME without session keys",
            )
        for _, skey in sessions:
            when: Any = None
            if config.session_time_suffix:
                tkey = skey + config.session_time_suffix
                when = _get(path, record, body, "session_time_suffix", tkey)
            items = _list(path, record, body[skey], skey)
            turns += [(f"{record}, {skey}[{t}]", turn, skey, when) for t, turn in enumerate(items)]
    else:
        items = _list(
            path,
            record,
            _get(path, record, body, "turns_field", config.turns_field),
            config.turns_field,
        )
        turns = [(f"{record}, turn {t}", turn, None, None) for t, turn in enumerate(items)]
    return _Conversation(id=cid, record=record, turns=turns, row=row)


def _list(path: Path, record: str, value: Any, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise DataError(
            path,
            f"expected a list, found {type(value).__name__}",
            record=record,
            field=key,
            fix=f"point the option at a list, not '{key}'",
        )
    return value


def _group(
    path: Path, rows: list[tuple[str, str | None, Any]], config: ImportConfig
) -> list[_Conversation]:
    groups: dict[str, _Conversation] = {}
    for record, _, row in rows:
        cid = "conversation-0"
        if config.id_field:
            cid = _conversation_id(
                path, record, _get(path, record, row, "id_field", config.id_field), config.id_field
            )
        if cid not in groups:
            groups[cid] = _Conversation(id=cid, record=f"conversation '{cid}'", turns=[])
        groups[cid].turns.append((record, row, None, None))
    return list(groups.values())


def parse_time(value: Any, fmt: str | None) -> datetime | None:
    """Parse a timestamp as the module docstring describes; raise ValueError if unreadable."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, tz=UTC)
    if not isinstance(value, str):
        raise ValueError(f"not a date: {value!r}")
    if fmt:
        return datetime.strptime(value.strip(), fmt)
    return datetime.fromisoformat(value.strip())


def _time(path: Path, record: str, value: Any, key: str, config: ImportConfig) -> datetime | None:
    try:
        return parse_time(value, config.timestamp_format)
    except (ValueError, OverflowError, OSError):
        how = f"the format {config.timestamp_format!r}" if config.timestamp_format else "ISO 8601"
        raise DataError(
            path,
            f"cannot read {value!r} as a time with {how}",
            record=record,
            field=key,
            fix=f"pass {flag('timestamp_format')} FORMAT (strptime syntax, e.g. '%d/%m/%Y %H:%M')",
        ) from None


def _subject(path: Path, conv: _Conversation, config: ImportConfig) -> Subject:
    if not conv.turns:
        raise DataError(
            path,
            "the conversation has no turns",
            record=conv.record,
            fix="drop the conversation or add its turns",
        )
    messages: list[Message] = []
    first: dict[str, str] = {}
    per_session: dict[str | None, int] = {}
    for record, turn, session, session_time in conv.turns:
        expect_object(turn, path, record, "each turn must be a JSON object")
        text = _text(
            path,
            record,
            _get(path, record, turn, "text_field", config.text_field),
            config.text_field,
        )
        speaker = _text(
            path,
            record,
            _get(path, record, turn, "speaker_field", config.speaker_field),
            config.speaker_field,
        )
        if config.session_field:
            session = _text(
                path,
                record,
                _get(path, record, turn, "session_field", config.session_field),
                config.session_field,
            )
        index = per_session.get(session, 0)
        per_session[session] = index + 1
        if config.turn_id_field:
            mid = _text(
                path,
                record,
                _get(path, record, turn, "turn_id_field", config.turn_id_field),
                config.turn_id_field,
            )
        else:
            mid = f"{session}:{index}" if config.session_keys else f"t{len(messages)}"
        if mid in first:
            raise DataError(
                path,
                f"turn id '{mid}' repeats ({first[mid]})",
                record=record,
                field=config.turn_id_field,
                fix="give every turn a unique id",
            )
        first[mid] = record
        if config.timestamp_field:
            raw_time = _get(path, record, turn, "timestamp_field", config.timestamp_field)
            when = _time(path, record, raw_time, config.timestamp_field, config)
        else:
            key = f"{session}{config.session_time_suffix or ''}"
            when = _time(path, conv.record, session_time, key, config)
        messages.append(
            Message(
                id=mid,
                position=len(messages),
                speaker=speaker,
                role=_role(speaker, config),
                text=text,
                timestamp=when,
                session=session,
            )
        )
    questions = _questions(path, conv, {m.id for m in messages}, config)
    subject = Subject(
        id=conv.id,
        messages=messages,
        questions=questions,
        speakers=sorted({m.speaker for m in messages if m.role == "user"}),
    )
    check_subject(subject)
    return subject


def _role(speaker: str, config: ImportConfig) -> Role:
    if config.user_speakers is None or speaker in config.user_speakers:
        return "user"
    return "assistant"


def _questions(
    path: Path, conv: _Conversation, ids: set[str], config: ImportConfig
) -> list[Question]:
    if not config.questions_field:
        return []
    qf = config.questions_field
    items = _list(path, conv.record, _get(path, conv.record, conv.row, "questions_field", qf), qf)
    out = []
    for j, q in enumerate(items):
        record = f"{conv.record}, {qf}[{j}]"
        text = _text(
            path,
            record,
            _get(path, record, q, "question_field", config.question_field),
            config.question_field,
        )
        answer: str | None = None
        if config.answer_field:
            raw = _get(path, record, q, "answer_field", config.answer_field)
            answer = None if raw is None else _text(path, record, raw, config.answer_field)
        category = "unspecified"
        if config.category_field:
            category = _text(
                path,
                record,
                _get(path, record, q, "category_field", config.category_field),
                config.category_field,
            )
        evidence: list[str] = []
        if config.evidence_field:
            evidence = _evidence(
                path,
                record,
                _get(path, record, q, "evidence_field", config.evidence_field),
                ids,
                config,
            )
        out.append(
            Question(
                id=f"{conv.id}-q{j}",
                category=category,
                text=text,
                answer=answer,
                evidence_ids=evidence,
                answerable=category not in config.unanswerable_categories,
            )
        )
    return out


def _evidence(path: Path, record: str, raw: Any, ids: set[str], config: ImportConfig) -> list[str]:
    key = config.evidence_field or "evidence"
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    out = []
    for item in items:
        ref = _text(path, record, item, key)
        if ref not in ids:
            raise DataError(
                path,
                f"evidence '{ref}' names no turn of this conversation",
                record=record,
                field=key,
                fix=f"cite turn ids (from {flag('turn_id_field')}, or generated "
                "'t<position>' ids) that exist in the conversation",
            )
        out.append(ref)
    return out
