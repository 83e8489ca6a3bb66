"""Import other people's chat exports (LoCoMo-like JSON or JSON Lines) by naming their fields.

An `ImportConfig` says where each thing lives. Three layouts are read:

* `rows="conversations"` (default): each row is a conversation whose turns are a list under
  `turns_field`, or, with `session_keys=True`, LoCoMo-style `session_1`, `session_2` ...
  lists (numeric order; the session is the key, and `session_N<session_time_suffix>`
  may hold its time). `body_field` names an object inside the conversation that holds
  the turns (LoCoMo's `conversation`); questions are read from the row itself.
* `rows="turns"`: each row is one turn; rows are grouped into conversations by `id_field`
  (all one conversation when it is None), in order of first appearance.
* `rows="nested"`: each row is a conversation written as a bare list of sessions, each a
  bare list of turn objects (`[[[{"speaker": ..., "text": ...}, ...], ...], ...]`, a list
  of episodes). Sessions are `session_1`, `session_2` ... in list order. A file that is a
  list of lists of turn objects is one such conversation (a folder of one-episode files).

Rows come from a JSON list, the list (or id -> conversation object) under
`conversations_field`, a single conversation object, or the lines of a `.jsonl` file.
A folder is read as its `*.json` and `*.jsonl` files (not its subfolders), sorted by
name, each holding one conversation or a list of them; errors name the file.

Ids: conversations without `id_field` are named after their file: the stem (`chat_a`) when
the file holds one conversation, `<stem>-<i>` (0-based) when it holds several. Turns
without `turn_id_field` are `t<position>`, or `<session>:<index in session>` with
`session_keys` or `rows="nested"`. Questions are `<conversation id>-q<i>`, `i` counting
every question of the conversation (also the ones left out).

Timestamps are read by `dialogbench.data.dates`: with `timestamp_format` by
`datetime.strptime` alone; otherwise as ISO 8601, `8 May 2023`, `1:56 pm on 8 May, 2023`,
`2023/05/08 14:02`, `29.12.2023, 22:42:04` and the other forms listed there, and numbers
as Unix seconds (milliseconds above 1e11). Slash dates with the year last (`08/05/2023`)
are never guessed: they need `timestamp_format`. A null timestamp means unknown; a
missing or unreadable one (a list, an object, NaN, text in no known format) is an error.

Evidence is repaired by `dialogbench.data.evidence` (ranges, lists, trailing punctuation,
leading zeros). Cited ids that still name no turn follow `on_missing_evidence`: `drop-id`
(default: the id is dropped, the question kept), `drop-question` (the question is left
out) or `fail` (a `DataError`); every case is listed in the dataset warnings and counted.

Categories are kept as written unless `category_names` names them (`1=multi-hop`); a
category it does not name stays as written, and a warning counts those.
`unanswerable_categories` may name a category as written or by its new name.

A conversation row holding a list of question-like objects (with a `question`, `q` or
`query` key) when `questions_field` is unset is imported without them, with a warning
naming the option.

Every configured field that is missing raises `DataError` naming the file, the
conversation or turn, the field and the option to pass (`text_field` -> `--text-field`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args

from dialogbench.data.dates import hint, parse_date
from dialogbench.data.errors import DataError
from dialogbench.data.evidence import repair_evidence
from dialogbench.data.io import (
    as_text,
    expect_list,
    expect_object,
    parse_record,
    read_json,
    read_jsonl,
    sha256_file,
    sha256_files,
    short,
)
from dialogbench.data.model import Dataset, Message, Question, Role, Subject
from dialogbench.data.release import check_subject
from dialogbench.data.safe_names import check_name, collision, fold

Rows = Literal["conversations", "turns", "nested"]
OnMissingEvidence = Literal["drop-id", "drop-question", "fail"]


@dataclass(frozen=True)
class ImportConfig:
    """Where a chat export keeps each thing; every `*_field` is a key in its JSON objects."""

    rows: Rows = "conversations"
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
    person_field: str | None = None
    """Key of a turn's person id: who the speaker is across conversations (None: no such key;
    a turn without the key, or with null, has none)."""
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
    """Question categories (as written or as named) whose questions get `answerable=False`."""
    category_names: tuple[str, ...] = ()
    """`CATEGORY=NAME` pairs (`1=multi-hop`); unnamed categories stay as written."""
    on_missing_evidence: OnMissingEvidence = "drop-id"
    """What a cited id that names no turn does: drop the id, drop the question, or fail."""
    name: str | None = None
    """Dataset name; default the file's (or folder's) stem."""
    licence: str | None = None

    def __post_init__(self) -> None:
        for attr, kind in (("rows", Rows), ("on_missing_evidence", OnMissingEvidence)):
            if getattr(self, attr) not in get_args(kind):
                allowed = ", ".join(get_args(kind))
                raise ValueError(
                    f"{flag(attr)} must be one of {allowed}, not {getattr(self, attr)!r}"
                )
        if self.rows != "conversations" and (self.session_keys or self.questions_field):
            raise ValueError(f"rows='{self.rows}' cannot use session_keys or questions_field")
        for pair in self.category_names:
            code, _, name = pair.partition("=")
            if not code.strip() or not name.strip():
                raise ValueError(
                    f"{flag('category_names')} takes CATEGORY=NAME pairs, not {pair!r} "
                    "(e.g. 1=multi-hop,2=temporal)"
                )

    def category_map(self) -> dict[str, str]:
        """`category_names` as a mapping: category as written -> name."""
        pairs = (pair.partition("=") for pair in self.category_names)
        return {code.strip(): name.strip() for code, _, name in pairs}


FIELD_HELP = {
    "rows": "'conversations' (a row per conversation), 'turns' (a row per turn) or 'nested' "
    "(a row per conversation given as a list of sessions, each a list of turns)",
    "session_keys": "turns live under LoCoMo-style session_1, session_2 ... keys",
    "session_prefix": "prefix of those session keys",
    "timestamp_format": "strptime format of timestamps, e.g. '%d/%m/%Y %H:%M' (default: ISO "
    "8601, '8 May 2023', '1:56 pm on 8 May, 2023', '29.12.2023, 22:42:04', Unix time ...)",
    "user_speakers": "speakers under study (role user); the rest are assistant",
    "unanswerable_categories": "question categories that have no answer",
    "category_names": "names for question categories, CATEGORY=NAME, e.g. 1=multi-hop,2=temporal",
    "on_missing_evidence": "evidence that names no turn: 'drop-id' (keep the question), "
    "'drop-question' or 'fail'",
    "name": "dataset name (default: the file's or folder's stem)",
    "licence": "licence to record with the data",
    "conversations_field": "list of conversations",
    "id_field": "conversation id",
    "body_field": "object holding the turns",
    "turns_field": "list of turns",
    "session_time_suffix": "session time (key = session key + suffix)",
    "session_field": "session",
    "text_field": "message text",
    "speaker_field": "speaker",
    "person_field": "speaker's person id (the same person across conversations)",
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
    path: Path
    record: str
    turns: list[tuple[str, Any, str | None, Any]]
    """(record, turn object, session, raw session time)."""
    row: dict[str, Any] | None = None


@dataclass
class _Notes:
    """What an import says besides its data: warnings, and the counts summed up at the end."""

    warnings: list[str] = field(default_factory=list)
    missing_evidence: int = 0
    dropped_questions: int = 0
    unnamed: Counter[str] = field(default_factory=Counter)
    unimported: Counter[str] = field(default_factory=Counter)
    """Question-like list key -> conversations holding one, when questions_field is unset."""


def import_chat_export(path: Path, config: ImportConfig) -> Dataset:
    """Read a JSON or JSON Lines chat export (or a folder of them) laid out as `config` says."""
    path = Path(path)
    files = _files(path)
    conversations = [conv for file in files for conv in _conversations(file, config)]
    notes = _Notes()
    seen: dict[str, tuple[str, str]] = {}  # by fold(id): two ids that name one folder
    subjects = []
    for conv in conversations:
        if (key := fold(conv.id)) in seen:
            other, where = seen[key]
            raise DataError(
                conv.path,
                f"conversation id {collision(conv.id, other)} ({where})",
                record=conv.record,
                field=config.id_field,
                fix="give every conversation a unique id (each names a folder of the release)",
            )
        where = conv.record if len(files) == 1 else f"{conv.record} of {conv.path.name}"
        seen[key] = (conv.id, where)
        subjects.append(_subject(conv, config, notes))
    if config.user_speakers is not None:
        present = {s for subject in subjects for s in subject.speakers}
        for speaker in config.user_speakers:
            if speaker not in present:
                notes.warnings.append(f"user speaker '{speaker}' never speaks; check its spelling")
    return Dataset(
        name=config.name or path.stem,
        subjects=subjects,
        sha256=sha256_file(path) if files == [path] else sha256_files(files, root=path),
        source=str(path),
        warnings=notes.warnings + _summary(notes),
        licence=config.licence,
    )


def _files(path: Path) -> list[Path]:
    """`[path]`, or the `*.json` / `*.jsonl` files of the folder `path`, sorted by name."""
    if not path.is_dir():
        return [path]
    files = sorted(
        (p for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl")),
        key=lambda p: p.name,
    )
    if not files:
        raise DataError(
            path,
            "the folder holds no .json or .jsonl files",
            fix="pass an export file, or a folder of them (*.json, *.jsonl; one conversation "
            "or a list of conversations each)",
        )
    return files


def _conversations(path: Path, config: ImportConfig) -> list[_Conversation]:
    rows = _rows(path, config)
    if config.rows == "turns":
        return _group(path, rows, config)
    read = _nested if config.rows == "nested" else _conversation
    return [
        read(path, rec, key, row, i, len(rows), config) for i, (rec, key, row) in enumerate(rows)
    ]


def _summary(notes: _Notes) -> list[str]:
    """The closing warnings: counts of what was dropped or left as it was."""
    out = []
    policy = flag("on_missing_evidence")
    if notes.missing_evidence:
        out.append(
            f"{notes.missing_evidence} cited evidence ids name no turn and were dropped, "
            f"their questions kept (each listed above; {policy} drop-question leaves such "
            "questions out, fail stops)"
        )
    if notes.dropped_questions:
        out.append(
            f"{notes.dropped_questions} questions cite evidence that names no turn and were "
            f"left out (each listed above; {policy} drop-id keeps them)"
        )
    if notes.unnamed:
        which = ", ".join(f"'{c}' ({n} questions)" for c, n in sorted(notes.unnamed.items()))
        out.append(f"categories {which} have no name in {flag('category_names')}; kept as written")
    for key, n in sorted(notes.unimported.items()):
        out.append(
            f"{n} conversations hold a question list under '{key}' that was not imported; "
            f"pass {flag('questions_field')} {key} to import it"
        )
    return out


def _missing(path: Path, record: str, obj: Any, attr: str, key: str) -> DataError:
    keys = ", ".join(map(str, obj)) if isinstance(obj, dict) else "none: not an object"
    what = FIELD_HELP[attr]
    fix = f"pass {flag(attr)} NAME with the key that holds the {what} (keys here: {keys})"
    if attr in _OPTIONAL and getattr(ImportConfig, attr, None) is None:
        fix += f", or leave {flag(attr)} unset"
    elif attr in _OPTIONAL:
        fix += f", or pass {flag(attr)} '' if the export has none"
    return DataError(path, "configured field is missing", record=record, field=key, fix=fix)


def _get(path: Path, record: str, obj: Any, attr: str, key: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _missing(path, record, obj, attr, key)
    return obj[key]


def _field_text(path: Path, record: str, obj: Any, attr: str, key: str) -> str:
    """The text under the configured key `key` (option `attr`) of `obj`."""
    return as_text(_get(path, record, obj, attr, key), path, record, key)


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
        if config.rows == "nested":
            raise DataError(
                path,
                "nested conversations (lists of sessions) cannot be JSON Lines rows",
                fix=f"pass a .json file with {flag('rows')} nested",
            )
        return [(f"line {n}", None, obj) for n, obj in read_jsonl(path)]
    raw = read_json(path)
    label = "turn" if config.rows == "turns" else "conversation"
    if config.conversations_field:
        cf = config.conversations_field
        raw = _get(path, "top level", raw, "conversations_field", cf)
        label = cf
    elif isinstance(raw, dict):
        if config.rows == "conversations" and _looks_like_conversation(raw, config):
            return [("top level", None, raw)]
        layout = _layout_hint(raw, config)
        fix = f"pass {flag('conversations_field')} NAME with the key that holds the {config.rows}"
        raise DataError(
            path,
            "the top level is an object, not a list",
            record="top level",
            fix=f"it looks like one conversation: pass {layout}"
            if layout
            else f"{fix} (keys here: {', '.join(map(str, raw))})",
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
    if config.rows == "nested" and raw and all(_is_turn_list(r) for r in raw):
        return [("top level", None, raw)]
    if label == config.conversations_field:
        return [(f"{label}[{i}]", None, row) for i, row in enumerate(raw)]
    return [(f"{label} {i}", None, row) for i, row in enumerate(raw)]


def _is_turn_list(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(v, dict) for v in value)


def _session_keys(obj: dict[str, Any], config: ImportConfig) -> bool:
    return any(re.fullmatch(re.escape(config.session_prefix) + r"\d+", str(k)) for k in obj)


def _looks_like_conversation(obj: dict[str, Any], config: ImportConfig) -> bool:
    body = obj.get(config.body_field, {}) if config.body_field else obj
    if not isinstance(body, dict):
        return False
    return _session_keys(body, config) if config.session_keys else config.turns_field in body


def _layout_hint(obj: Any, config: ImportConfig) -> str | None:
    """The options that would read `obj` as one conversation, when its keys tell."""
    if not isinstance(obj, dict):
        return None
    if _session_keys(obj, config):
        return flag("session_keys")
    for key, value in obj.items():
        if isinstance(value, dict) and _session_keys(value, config):
            return f"{flag('session_keys')} {flag('body_field')} {key}"
    for key, value in obj.items():
        if isinstance(value, list) and value and all(_is_turn(v, config) for v in value):
            return f"{flag('turns_field')} {key}"
    return None


def _is_turn(value: Any, config: ImportConfig) -> bool:
    keys = {config.text_field, config.speaker_field, "text", "content", "speaker", "role"}
    return isinstance(value, dict) and bool(keys & set(value))


def _is_question_list(value: Any, config: ImportConfig) -> bool:
    keys = {config.question_field, "question", "q", "query"}
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, dict) and keys & set(v) for v in value)
    )


def _conversation_id(path: Path, record: str, value: Any, key: str | None) -> str:
    cid = as_text(value, path, record, key or "id").strip()
    return check_name(cid, path=path, record=record, field=key)


def _default_id(path: Path, index: int, count: int) -> str:
    """A conversation without an id: the file's stem, numbered when the file holds several."""
    cid = path.stem if count == 1 else f"{path.stem}-{index}"
    what = "the file's name gives the conversation's id, which names a folder"
    return check_name(cid, path=path, record=f"conversation {index}", field=None, what=what)


def _conversation(
    path: Path,
    record: str,
    key: str | None,
    row: Any,
    index: int,
    count: int,
    config: ImportConfig,
) -> _Conversation:
    fix = "each conversation must be a JSON object"
    if isinstance(row, list) and all(_is_turn_list(r) for r in row):
        fix += f"; for lists of sessions of turns pass {flag('rows')} nested"
    expect_object(row, path, record, fix)
    if key is not None:
        cid = _conversation_id(path, record, key, None)
    elif config.id_field:
        cid = _conversation_id(
            path, record, _get(path, record, row, "id_field", config.id_field), config.id_field
        )
    else:
        cid = _default_id(path, index, count)
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
            layout = _layout_hint(row, config)
            raise DataError(
                path,
                f"no '{config.session_prefix}N' keys",
                record=record,
                field=f"{config.session_prefix}N",
                fix=f"pass {layout}"
                if layout and flag("body_field") in layout and not config.body_field
                else f"check {flag('session_prefix')}, or pass {flag('turns_field')} "
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
        if config.turns_field not in body and (layout := _layout_hint(body, config)):
            raise DataError(
                path,
                "configured field is missing",
                record=record,
                field=config.turns_field,
                fix=f"this conversation's layout needs {layout}",
            )
        items = _list(
            path,
            record,
            _get(path, record, body, "turns_field", config.turns_field),
            config.turns_field,
        )
        turns = [(f"{record}, turn {t}", turn, None, None) for t, turn in enumerate(items)]
    return _Conversation(id=cid, path=path, record=record, turns=turns, row=row)


def _nested(
    path: Path,
    record: str,
    key: str | None,
    row: Any,
    index: int,
    count: int,
    config: ImportConfig,
) -> _Conversation:
    """A conversation given as a list of sessions, each a list of turns (`rows='nested'`)."""
    cid = _conversation_id(path, record, key, None) if key is not None else None
    cid = cid or _default_id(path, index, count)
    record = f"{record} (id '{cid}')"
    turns: list[tuple[str, Any, str | None, Any]] = []
    fix = (
        f"with {flag('rows')} nested each conversation is a list of sessions, each a list of turns"
    )
    for s, session in enumerate(_list(path, record, row, "sessions", fix)):
        items = _list(path, f"{record}, session {s}", session, "turns", fix)
        turns += [
            (f"{record}, session {s}[{t}]", turn, f"session_{s + 1}", None)
            for t, turn in enumerate(items)
        ]
    return _Conversation(id=cid, path=path, record=record, turns=turns)


def _list(path: Path, record: str, value: Any, key: str, fix: str | None = None) -> list[Any]:
    return expect_list(value, path, record, key, fix or f"point the option at a list, not '{key}'")


def _group(
    path: Path, rows: list[tuple[str, str | None, Any]], config: ImportConfig
) -> list[_Conversation]:
    groups: dict[str, _Conversation] = {}
    for record, _, row in rows:
        cid = path.stem
        if config.id_field:
            cid = _conversation_id(
                path, record, _get(path, record, row, "id_field", config.id_field), config.id_field
            )
        if cid not in groups:
            groups[cid] = _Conversation(id=cid, path=path, record=f"conversation '{cid}'", turns=[])
        groups[cid].turns.append((record, row, None, None))
    return list(groups.values())


def _time(path: Path, record: str, value: Any, key: str, config: ImportConfig) -> datetime | None:
    fmt = config.timestamp_format
    try:
        return parse_date(value, fmt)
    except ValueError:
        if not isinstance(value, str):
            how = f"(a {type(value).__name__} that is no date or Unix time)"
            fix = f"give '{key}' a date string or a Unix time, or null when it is unknown"
        elif fmt:
            how = f"with the format {fmt!r}"
            fix = f"check {flag('timestamp_format')} (strptime syntax)"
        else:
            how = f"in any format read without {flag('timestamp_format')}"
            fix = f"pass {flag('timestamp_format')} FORMAT: {hint(value)}"
        raise DataError(
            path,
            f"cannot read {short(value)} as a time {how}",
            record=record,
            field=key,
            fix=fix,
        ) from None


def _subject(conv: _Conversation, config: ImportConfig, notes: _Notes) -> Subject:
    path = conv.path
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
        text = _field_text(path, record, turn, "text_field", config.text_field)
        speaker = _field_text(path, record, turn, "speaker_field", config.speaker_field)
        if config.session_field:
            session = _field_text(path, record, turn, "session_field", config.session_field)
        index = per_session.get(session, 0)
        per_session[session] = index + 1
        if config.turn_id_field:
            mid = _field_text(path, record, turn, "turn_id_field", config.turn_id_field)
        elif config.session_keys or config.rows == "nested":
            mid = f"{session}:{index}"
        else:
            mid = f"t{len(messages)}"
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
        fields = {
            "id": mid,
            "position": len(messages),
            "speaker": speaker,
            "role": _role(speaker, config),
            "text": text,
            "timestamp": when,
            "session": session,
        }
        person = turn.get(config.person_field) if config.person_field else None
        if person is not None:  # a turn without one (e.g. the assistant's) has no person
            fields["person"] = as_text(person, path, record, str(config.person_field))
        messages.append(parse_record(Message, fields, path, record, _turn_names(config)))
    questions = _questions(conv, {m.id for m in messages}, config, notes)
    fields = {
        "id": conv.id,
        "messages": messages,
        "questions": questions,
        "speakers": sorted({m.speaker for m in messages if m.role == "user"}),
    }
    subject = parse_record(Subject, fields, path, conv.record, {"id": config.id_field or "id"})
    check_subject(subject, path=path)
    return subject


def _turn_names(config: ImportConfig) -> dict[str, str]:
    """What the export calls each `Message` field, for error messages."""
    names = {
        "id": config.turn_id_field or "id",
        "text": config.text_field,
        "speaker": config.speaker_field,
        "session": config.session_field or "session",
    }
    if config.timestamp_field:
        names["timestamp"] = config.timestamp_field
    if config.person_field:
        names["person"] = config.person_field
    return names


def _question_names(config: ImportConfig) -> dict[str, str]:
    """What the export calls each `Question` field, for error messages."""
    return {"text": config.question_field, "category": config.category_field or "category"}


def _role(speaker: str, config: ImportConfig) -> Role:
    if config.user_speakers is None or speaker in config.user_speakers:
        return "user"
    return "assistant"


def _questions(
    conv: _Conversation, ids: set[str], config: ImportConfig, notes: _Notes
) -> list[Question]:
    path = conv.path
    if not config.questions_field:
        if config.rows == "conversations" and conv.row is not None:
            for key, value in conv.row.items():
                if _is_question_list(value, config):
                    notes.unimported[str(key)] += 1
        return []
    qf = config.questions_field
    items = _list(path, conv.record, _get(path, conv.record, conv.row, "questions_field", qf), qf)
    names = config.category_map()
    out = []
    for j, q in enumerate(items):
        record = f"{conv.record}, {qf}[{j}]"
        qid = f"{conv.id}-q{j}"
        text = _field_text(path, record, q, "question_field", config.question_field)
        answer: str | None = None
        if config.answer_field:
            raw = _get(path, record, q, "answer_field", config.answer_field)
            answer = None if raw is None else as_text(raw, path, record, config.answer_field)
        written = "unspecified"
        if config.category_field:
            written = _field_text(path, record, q, "category_field", config.category_field)
        category = names.get(written, written)
        if names and written not in names:
            notes.unnamed[written] += 1
        evidence: list[str] = []
        if config.evidence_field:
            raw = _get(path, record, q, "evidence_field", config.evidence_field)
            kept = _evidence(path, record, qid, raw, ids, config, notes)
            if kept is None:
                continue
            evidence = kept
        fields = {
            "id": qid,
            "category": category,
            "text": text,
            "answer": answer,
            "evidence_ids": evidence,
            "answerable": not {written, category} & set(config.unanswerable_categories),
        }
        out.append(parse_record(Question, fields, path, record, _question_names(config)))
    return out


def _evidence(
    path: Path,
    record: str,
    qid: str,
    raw: Any,
    ids: set[str],
    config: ImportConfig,
    notes: _Notes,
) -> list[str] | None:
    """The usable evidence ids of question `qid`, or None when the question is dropped."""
    key = config.evidence_field or "evidence"
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    evidence = repair_evidence([as_text(item, path, record, key) for item in items], ids)
    if evidence.dropped and config.on_missing_evidence == "fail":
        raise DataError(
            path,
            f"evidence {short(evidence.dropped[0])} names no turn of this conversation",
            record=record,
            field=key,
            fix=f"cite turn ids (from {flag('turn_id_field')}, or the generated ids) that exist "
            f"in the conversation, or pass {flag('on_missing_evidence')} drop-id (drop the "
            "id, keep the question) or drop-question",
        )
    if evidence.dropped and config.on_missing_evidence == "drop-question":
        notes.dropped_questions += 1
        notes.warnings.append(
            f"{qid}: left out: evidence {', '.join(map(repr, evidence.dropped))} names no turn"
        )
        return None
    notes.missing_evidence += len(evidence.dropped)
    notes.warnings.extend(evidence.warnings(qid))
    return evidence.ids
