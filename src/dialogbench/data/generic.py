"""Import other people's chat exports (LoCoMo-like JSON or JSON Lines) by naming their fields.

An `ImportConfig` says where each thing lives. Three layouts are read:

* `rows="conversations"` (default): each row is a conversation whose turns are a list under
  `turns_field`, or, with `session_keys=True`, LoCoMo-style `session_1`, `session_2` ...
  lists (numeric order; the session is the key, and `session_N<session_time_suffix>`
  may hold its time), or, with `sessions_field`, a list of sessions (each a list of turns,
  or an object holding them under `turns_field` and its time under `session_time_field`).
  `body_field` names an object inside the conversation that holds the turns (LoCoMo's
  `conversation`); questions are read from the row itself.
* `rows="turns"`: each row is one turn; rows are grouped into conversations by `id_field`
  (all one conversation when it is None), in order of first appearance.
* `rows="nested"`: each row is a conversation written as a bare list of sessions, each a
  bare list of turn objects (`[[[{"speaker": ..., "text": ...}, ...], ...], ...]`, a list
  of episodes). Sessions are `session_1`, `session_2` ... in list order. A file that is a
  list of lists of turn objects is one such conversation (a folder of one-episode files).

Rows come from a JSON list, the list (or id -> conversation object) under
`conversations_field`, a top-level object of conversations by id (each value a
conversation), a single conversation object, or the lines of a `.jsonl` file (a line may
hold a nested conversation). `dialogbench.data.sniff` tells which layout a file has and the
options that read it (`data import --dry-run`).
A folder is read as its `*.json` and `*.jsonl` files (not its subfolders), sorted by
name, each holding one conversation or a list of them; errors name the file.

Ids: conversations without `id_field` are named after their file: the stem (`chat_a`) when
the file holds one conversation, `<stem>-<i>` (0-based) when it holds several. Turns
without `turn_id_field` are `t<position>`, or `<session>:<index in session>` with
`session_keys`, `sessions_field` or `rows="nested"`. Questions are
`<conversation id>-q<i>`, `i` counting every question of the conversation (also the ones
left out).

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
conversation or turn, the field and the option to pass (`text_field` -> `--text-field`);
a layout the options do not fit names the options not given yet that would read it.
Answers are optional per question (an answer field no question carries is an error); an
image caption (`caption_field`) is written into the turn's text as `data/locomo.py` does.
When more than `DANGLING_LIMIT` of the cited evidence ids name no turn the import stops,
naming the turn key that holds them, unless `allow_dangling`.
"""

from __future__ import annotations

import re
import shlex
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
    read_jsonl_values,
    sha256_file,
    sha256_files,
    short,
    with_caption,
)
from dialogbench.data.model import Dataset, Message, Question, Role, Subject
from dialogbench.data.release import check_subject
from dialogbench.data.safe_names import check_name, collision, fold

Rows = Literal["conversations", "turns", "nested"]
DANGLING_LIMIT = 0.25
"""The share of cited evidence ids naming no turn (empty ones aside) above which an import
stops unless `allow_dangling`: the turn ids are then probably read from the wrong place."""
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
    sessions_field: str | None = None
    """A list of sessions in the conversation (or its body): each a list of turns, or an
    object holding them under `turns_field` (and its time under `session_time_field`)."""
    session_time_field: str | None = None
    session_prefix: str = "session_"
    session_time_suffix: str | None = None
    session_field: str | None = None
    text_field: str = "text"
    caption_field: str | None = "blip_caption"
    """An image a turn shares, written into its text as the LoCoMo loader does; optional."""
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
    allow_dangling: bool = False
    """Import even when more than `DANGLING_LIMIT` of the cited ids name no turn."""
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
        if self.rows != "conversations" and (
            self.session_keys or self.sessions_field or self.questions_field
        ):
            raise ValueError(
                f"rows='{self.rows}' cannot use session_keys, sessions_field or questions_field"
            )
        if self.session_keys and self.sessions_field:
            raise ValueError(
                f"{flag('session_keys')} and {flag('sessions_field')} are two layouts; pass one"
            )
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
    "sessions_field": "list of sessions, each a list of turns or an object holding them under "
    "--turns-field",
    "session_time_field": "session time, in a session object of --sessions-field",
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
    "caption_field": "image caption, appended to the text as the LoCoMo loader does "
    "(optional per turn; '' leaves captions out)",
    "allow_dangling": "import even when more than a quarter of the cited evidence ids name no turn "
    "(each is dropped as --on-missing-evidence says)",
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
    "sessions_field",
    "session_time_field",
    "caption_field",
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
    first_question: tuple[Path, str, Any] | None = None
    answered: int = 0
    """Questions that carry the answer field (null included)."""
    unanswered: int = 0
    cited: int = 0
    """Evidence ids cited (after repair), those that name no turn included."""
    dangling: list[tuple[_Conversation, str, list[str]]] = field(default_factory=list)
    """(conversation, question record, the ids it cites that name no turn)."""


def import_chat_export(path: Path, config: ImportConfig) -> Dataset:
    """Read a JSON or JSON Lines chat export (or a folder of them) laid out as `config` says."""
    path = Path(path)
    files = export_files(path)
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
    _check_answers(notes, config)
    _check_dangling(notes, config)
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


def export_files(path: Path) -> list[Path]:
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


def _check_answers(notes: _Notes, config: ImportConfig) -> None:
    """Answers are optional, but an answer field that no question carries is misnamed."""
    if notes.first_question is None or not config.answer_field:
        return
    if not notes.answered:
        path, record, question = notes.first_question
        raise _missing(path, record, question, "answer_field", config.answer_field)
    if notes.unanswered:
        notes.warnings.append(
            f"{notes.unanswered} questions have no '{config.answer_field}' and were imported "
            "without an answer"
        )


def _check_dangling(notes: _Notes, config: ImportConfig) -> None:
    """Stop when more than `DANGLING_LIMIT` of the cited ids name no turn (the turn ids are
    probably read from the wrong place), unless `allow_dangling`."""
    dropped = sum(len(ids) for _, _, ids in notes.dangling)
    if config.allow_dangling or not dropped or dropped <= DANGLING_LIMIT * notes.cited:
        return
    conv, record, ids = notes.dangling[0]
    key = _id_key(notes.dangling, config)
    if key is not None:
        cause = f"the turns carry the cited ids under '{key}': pass {flag('turn_id_field')} {key}"
    elif config.turn_id_field:
        cause = f"check {flag('turn_id_field')} {config.turn_id_field}"
    else:
        cause = (
            f"the turns' ids are generated ('{_generated_id(config)}', ...), not the export's: "
            f"pass {flag('turn_id_field')} with the key of the turns' own ids"
        )
    raise DataError(
        conv.path,
        f"{dropped} of {notes.cited} cited evidence ids name no turn (first: "
        f"{', '.join(map(repr, ids[:3]))})",
        record=record,
        field=config.evidence_field,
        fix=f"{cause}, or pass {flag('allow_dangling')} to import anyway (each dropped id "
        "is then a warning)",
    )


def _generated_id(config: ImportConfig) -> str:
    """The id a conversation's first turn gets without `turn_id_field`."""
    return "session_1:0" if _in_sessions(config) else "t0"


def _in_sessions(config: ImportConfig) -> bool:
    """Turns come in sessions (named `session_N`), so generated ids are `session_N:i`."""
    return config.session_keys or config.rows == "nested" or bool(config.sessions_field)


def _id_key(
    dangling: list[tuple[_Conversation, str, list[str]]], config: ImportConfig
) -> str | None:
    """The turn key whose values are most of the dangling ids: where the turns keep their ids."""
    hits: Counter[str] = Counter()
    for conv, _, ids in dangling:
        values: dict[str, set[str]] = {}
        for _, turn, _, _ in conv.turns:
            for key, value in turn.items() if isinstance(turn, dict) else ():
                if isinstance(value, str | int) and not isinstance(value, bool):
                    values.setdefault(str(key), set()).add(str(value))
        for key, found in values.items():
            hits[key] += len(ids) - len(repair_evidence(ids, found).dropped)
    hits.pop(config.turn_id_field or "", None)
    total = sum(len(ids) for _, _, ids in dangling)
    best = hits.most_common(1)
    return best[0][0] if best and 2 * best[0][1] > total else None


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
        lines = read_jsonl(path) if config.rows == "turns" else read_jsonl_values(path)
        return [(f"line {n}", None, row) for n, row in lines]
    raw = read_json(path)
    label = "turn" if config.rows == "turns" else "conversation"
    if config.conversations_field:
        cf = config.conversations_field
        raw = _get(path, "top level", raw, "conversations_field", cf)
        label = cf
    elif isinstance(raw, dict):
        if config.rows == "conversations" and _looks_like_conversation(raw, config):
            return [("top level", None, raw)]
        if not _by_id(raw, config):
            raise _top_level_error(path, raw, config)
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


def _by_id(raw: dict[str, Any], config: ImportConfig) -> bool:
    """True when every value of the top-level object `raw` is a conversation (by its id)."""
    if config.rows == "nested":
        return bool(raw) and all(_is_session_list(v) for v in raw.values())
    return (
        config.rows == "conversations"
        and bool(raw)
        and all(isinstance(v, dict) and _looks_like_conversation(v, config) for v in raw.values())
    )


def _top_level_error(path: Path, raw: dict[str, Any], config: ImportConfig) -> DataError:
    """A top-level object read as no conversation: the options that would read it."""
    first = next(iter(raw.values()), None)
    if layout := _layout_hint(raw, config):
        fix = f"it looks like one conversation: pass {layout}"
    elif all(isinstance(v, dict) for v in raw.values()) and (layout := _layout_hint(first, config)):
        fix = f"it looks like conversations by id: pass {layout}"
    elif config.rows != "nested" and _is_session_list(first):
        fix = f"it looks like conversations by id, lists of sessions: pass {flag('rows')} nested"
    else:
        fix = (
            f"pass {flag('conversations_field')} NAME with the key that holds the "
            f"{config.rows} (keys here: {', '.join(map(str, raw))})"
        )
    return DataError(path, "the top level is an object, not a list", record="top level", fix=fix)


def _is_session_list(value: Any) -> bool:
    """A conversation written as a list of sessions, each a list of turn objects."""
    return isinstance(value, list) and bool(value) and all(_is_turn_list(v) for v in value)


def _is_turn_list(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(v, dict) for v in value)


def _session_keys(obj: dict[str, Any], config: ImportConfig) -> bool:
    return any(re.fullmatch(re.escape(config.session_prefix) + r"\d+", str(k)) for k in obj)


def _looks_like_conversation(obj: dict[str, Any], config: ImportConfig) -> bool:
    body = obj.get(config.body_field, {}) if config.body_field else obj
    if not isinstance(body, dict):
        return False
    if config.sessions_field:
        return config.sessions_field in body
    return _session_keys(body, config) if config.session_keys else config.turns_field in body


def layout_options(obj: Any, config: ImportConfig) -> dict[str, Any]:
    """The config values that would read `obj` as one conversation, when its keys tell
    (`{}` when they do not): where its turns are."""
    if not isinstance(obj, dict):
        return {}
    if _session_keys(obj, config):
        return {"session_keys": True, "body_field": None}
    for key, value in obj.items():
        if isinstance(value, dict) and _session_keys(value, config):
            return {"session_keys": True, "body_field": str(key)}
    for key, value in obj.items():
        if isinstance(value, list) and value and all(_is_turn(v, config) for v in value):
            return {"session_keys": False, "body_field": None, "turns_field": str(key)}
    for key, value in obj.items():
        if _is_session_list(value):
            return {"session_keys": False, "body_field": None, "sessions_field": str(key)}
        if turns := _session_turns_key(value, config):
            where = {"session_keys": False, "body_field": None, "sessions_field": str(key)}
            return {**where, "turns_field": turns}
    return {}


def _session_turns_key(value: Any, config: ImportConfig) -> str | None:
    """The key under which every session object of the list `value` holds its turns."""
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        return None
    keys = [k for k, v in value[0].items() if isinstance(v, list) and v]
    for key in keys:
        if all(
            isinstance(s.get(key), list) and all(_is_turn(t, config) for t in s[key]) for s in value
        ):
            return str(key)
    return None


def option_args(options: dict[str, Any]) -> list[str]:
    """`data import`'s arguments, quoted for a shell, that set config `options`
    (`{"rows": "nested"}` -> `["--rows", "nested"]`; None -> `''`, the CLI's way to unset a
    field; a switch that is off is left out)."""
    args: list[str] = []
    for attr, value in options.items():
        if isinstance(value, bool):
            args += [flag(attr)] if value else []
        else:
            text = ",".join(value) if isinstance(value, tuple) else value
            args += [flag(attr), shlex.quote("" if text is None else str(text))]
    return args


def _layout_hint(obj: Any, config: ImportConfig) -> str | None:
    """The options, not given yet, that would read `obj` as one conversation."""
    options = layout_options(obj, config)
    missing = {a: v for a, v in options.items() if getattr(config, a) != v}
    hint = " ".join(option_args(missing))
    off = [flag(a) for a, v in missing.items() if v is False]
    return " ".join([hint, *(f"without {f}" for f in off)]).strip() or None


TEXT_KEYS = ("text", "content", "message", "utterance", "body", "says")
"""Keys that commonly hold a turn's text, most likely first (also read by `sniff`)."""
SPEAKER_KEYS = ("speaker", "role", "author", "sender", "from", "who", "name", "user")
"""Keys that commonly hold a turn's speaker, most likely first."""
QUESTION_KEYS = ("question", "q", "query")
"""Keys that commonly hold a question's text, most likely first (also read by `sniff`)."""


def _is_turn(value: Any, config: ImportConfig) -> bool:
    """A turn object: it has a text or speaker key (the configured ones or common ones)."""
    keys = {config.text_field, config.speaker_field, *TEXT_KEYS, "speaker", "role"}
    return isinstance(value, dict) and bool(keys & set(value))


def _is_question_list(value: Any, config: ImportConfig) -> bool:
    keys = {config.question_field, *QUESTION_KEYS}
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
    if config.sessions_field:
        sessions = _get(path, record, body, "sessions_field", config.sessions_field)
        turns = _session_list(path, record, sessions, config)
    elif config.session_keys:
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
                if layout
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
        if config.turns_field not in body and (layout := _layout_hint(row, config)):
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
    return _Conversation(
        id=cid, path=path, record=record, turns=_session_list(path, record, row, config)
    )


def _session_list(
    path: Path, record: str, sessions: Any, config: ImportConfig
) -> list[tuple[str, Any, str | None, Any]]:
    """The turns of a list of sessions (`rows='nested'`, `sessions_field`): each session a
    list of turns, or (`sessions_field`) an object with them under `turns_field`."""
    key = config.sessions_field or "sessions"
    fix = (
        f"{flag('sessions_field')} names a list of sessions, each a list of turns or an "
        f"object holding them under {flag('turns_field')}"
        if config.sessions_field
        else f"with {flag('rows')} nested each conversation is a list of sessions, each a "
        "list of turns"
    )
    turns: list[tuple[str, Any, str | None, Any]] = []
    for s, session in enumerate(_list(path, record, sessions, key, fix)):
        where, when = f"{record}, session {s}", None
        if config.sessions_field and isinstance(session, dict):
            if config.session_time_field:
                when = _get(path, where, session, "session_time_field", config.session_time_field)
            session = _get(path, where, session, "turns_field", config.turns_field)
        items = _list(path, where, session, "turns", fix)
        turns += [(f"{where}[{t}]", turn, f"session_{s + 1}", when) for t, turn in enumerate(items)]
    return turns


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
        if config.caption_field and turn.get(config.caption_field) is not None:
            caption = _field_text(path, record, turn, "caption_field", config.caption_field)
            text = with_caption(text, caption)
        speaker = _field_text(path, record, turn, "speaker_field", config.speaker_field)
        if config.session_field:
            session = _field_text(path, record, turn, "session_field", config.session_field)
        index = per_session.get(session, 0)
        per_session[session] = index + 1
        if config.turn_id_field:
            mid = _field_text(path, record, turn, "turn_id_field", config.turn_id_field)
        elif _in_sessions(config):
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
            key = config.session_time_field or f"{session}{config.session_time_suffix or ''}"
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
        notes.first_question = notes.first_question or (path, record, q)
        answer: str | None = None
        if config.answer_field and config.answer_field in q:
            notes.answered += 1
            raw = q[config.answer_field]
            answer = None if raw is None else as_text(raw, path, record, config.answer_field)
        elif config.answer_field:
            notes.unanswered += 1
        written = "unspecified"
        if config.category_field:
            written = _field_text(path, record, q, "category_field", config.category_field)
        category = names.get(written, written)
        if names and written not in names:
            notes.unnamed[written] += 1
        evidence: list[str] = []
        if config.evidence_field:
            raw = _get(path, record, q, "evidence_field", config.evidence_field)
            kept = _evidence(conv, record, qid, raw, ids, config, notes)
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
    conv: _Conversation,
    record: str,
    qid: str,
    raw: Any,
    ids: set[str],
    config: ImportConfig,
    notes: _Notes,
) -> list[str] | None:
    """The usable evidence ids of question `qid`, or None when the question is dropped."""
    path = conv.path
    key = config.evidence_field or "evidence"
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    evidence = repair_evidence([as_text(item, path, record, key) for item in items], ids)
    named = [item for item in evidence.dropped if item.strip()]  # an empty item cites nothing
    notes.cited += len(evidence.ids) + len(named)
    if named:
        notes.dangling.append((conv, record, named))
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
