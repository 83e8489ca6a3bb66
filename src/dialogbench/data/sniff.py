"""What a chat export looks like: the layout `data import --dry-run` reports, and the
`ImportConfig` values (so the `data import` options) that read it.

`sniff(path)` reads the file (a folder: its first export file), finds where the
conversations are (a list, a JSON Lines file, values of an object by id, a list under a
key, one conversation object), how each holds its turns (a list under a key, LoCoMo-style
`session_1` ... keys, a list of sessions each a list of turns) and its questions, and which
keys hold the text, speaker, turn id, time and image caption, trying the common names in
order (`TEXT_KEYS` ...). A LoCoMo-shaped export (session keys under `conversation`, turn
ids under `dia_id`, categories 1-5) also gets LoCoMo's category names. What it cannot tell
is left at the defaults, for the import's own errors to name.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dialogbench.data.generic import (
    QUESTION_KEYS,
    SPEAKER_KEYS,
    TEXT_KEYS,
    ImportConfig,
    export_files,
    layout_options,
    option_args,
)
from dialogbench.data.io import read_json, read_jsonl_values
from dialogbench.data.locomo import CATEGORIES

TURN_ID_KEYS = ("dia_id", "turn_id", "message_id", "msg_id", "utterance_id", "id", "turn")
TIME_KEYS = ("timestamp", "time", "date", "datetime", "created_at", "sent_at", "ts")
CAPTION_KEYS = ("blip_caption", "caption", "image_caption")
CONVERSATION_ID_KEYS = (
    "sample_id",
    "conversation_id",
    "conv_id",
    "dialogue_id",
    "dialog_id",
    "thread_id",
    "thread",
    "chat_id",
)
ANSWER_KEYS = ("answer", "a", "gold_answer")
EVIDENCE_KEYS = ("evidence", "evidence_ids", "supporting_turns")
CATEGORY_KEYS = ("category", "type", "question_type")
_PLAIN = ImportConfig()


@dataclass(frozen=True)
class Sniffed:
    """An export's layout in words, and the config values that differ from the defaults."""

    layout: str
    options: dict[str, Any]

    def command(self, path: Path, out: Path, extra: Iterable[str] = ()) -> str:
        """The `dialogbench data import` command line that imports `path` into `out`."""
        head = ["dialogbench", "data", "import", str(path), "--out", str(out)]
        return " ".join([shlex.join(head), *option_args(self.options), *extra])


def sniff(path: Path) -> Sniffed:
    """The layout of the export `path` (a file, or a folder of them) and its options."""
    files = export_files(Path(path))
    found: dict[str, Any] = {}
    rows, words = _rows(files[0], found)
    words += _conversation_keys(rows, found)
    if len(files) > 1:
        words = f"a folder of {len(files)} export files; the first, {files[0].name}: {words}"
    options = {
        f.name: found[f.name]
        for f in fields(ImportConfig)
        if f.name in found and found[f.name] != getattr(_PLAIN, f.name)
    }
    return Sniffed(layout=words, options=options)


def _rows(path: Path, found: dict[str, Any]) -> tuple[list[Any], str]:
    """The conversation rows (or turn rows) of one file, in words; sets rows and the key
    of the list of conversations in `found`."""
    if path.suffix == ".jsonl":
        lines = [value for _, value in read_jsonl_values(path)]
        return _list_rows(lines, found, f"JSON Lines of {len(lines)}", "one a line")
    raw = read_json(path)
    if isinstance(raw, list):
        return _list_rows(raw, found, f"a list of {len(raw)}", "")
    if not isinstance(raw, dict):
        return [], f"a {type(raw).__name__}, not a list or object: no layout read"
    values = list(raw.values())
    found["by_id"] = True  # unless it is one conversation, or a key below holds a list
    if values and all(_is_sessions(v) for v in values):
        found["rows"] = "nested"
        return values, (
            f"an object of {len(values)} conversations by id, each a list of sessions, "
            "each a list of turns"
        )
    if values and all(isinstance(v, dict) and layout_options(v, _PLAIN) for v in values):
        return values, f"an object of {len(values)} conversation objects by id"
    if layout_options(raw, _PLAIN):
        found["by_id"] = False
        return [raw], "one conversation object"
    for key, value in raw.items():
        inner = list(value.values()) if isinstance(value, dict) else value
        if isinstance(inner, list) and inner and all(isinstance(v, dict) for v in inner):
            found["conversations_field"] = str(key)
            found["by_id"] = isinstance(value, dict)
            by_id = " by id" if isinstance(value, dict) else ""
            return inner, f"an object with {len(inner)} conversation objects{by_id} under '{key}'"
    keys = ", ".join(map(str, raw))
    return [], f"an object whose keys ({keys}) hold no conversations seen: no layout read"


def _list_rows(
    rows: list[Any], found: dict[str, Any], head: str, each: str
) -> tuple[list[Any], str]:
    """The rows of a JSON list or a JSON Lines file, in words."""
    tail = f" ({each})" if each else ""
    if rows and all(_is_turn(r) for r in rows):
        found["rows"] = "turns"
        ids = _first_key(rows, CONVERSATION_ID_KEYS)
        found["id_field"] = ids
        grouped = f", grouped into conversations by '{ids}'" if ids else ", one conversation"
        return rows, f"{head} turns{tail}{grouped}"
    if _is_sessions(rows) and not all(_is_sessions(r) for r in rows):
        found["rows"] = "nested"
        return [rows], f"one conversation: {head} sessions, each a list of turns"
    if rows and all(_is_sessions(r) for r in rows):
        found["rows"] = "nested"
        return rows, f"{head} conversations{tail}, each a list of sessions, each a list of turns"
    return rows, f"{head} conversation objects{tail}"


def _conversation_keys(rows: list[Any], found: dict[str, Any]) -> str:
    """Where the first conversation keeps its turns and questions, and the keys of both, in
    words; sets them in `found`."""
    if not rows:
        return ""
    first = rows[0]
    if found.get("rows") == "turns":
        return _turn_keys(rows, found)
    if found.get("rows") == "nested":
        return _turn_keys([t for session in first for t in session], found)
    if not isinstance(first, dict):
        return ""
    words = ""
    if not found.get("by_id"):
        ids = _first_key(rows, (*CONVERSATION_ID_KEYS, "id", "user_id"))
        found["id_field"] = ids if ids and _unique(rows, ids) else None
        words += f"; conversation id '{ids}'" if found["id_field"] else ""
    where = layout_options(first, _PLAIN)
    found.update(where)
    body = first.get(where.get("body_field") or "", first)
    if where.get("session_keys"):
        sessions = sorted(k for k in body if _session_number(k) is not None)
        turns = [t for k in sessions for t in body[k] if isinstance(body[k], list)]
        under = f" under '{where['body_field']}'" if where.get("body_field") else ""
        words += f"; sessions as keys session_1 ... session_{len(sessions)}{under}"
    elif where.get("sessions_field"):
        sessions, inner = body[where["sessions_field"]], where.get("turns_field")
        turns = [t for s in sessions for t in (s[inner] if inner else s)]
        words += f"; sessions as a list under '{where['sessions_field']}', each "
        words += f"an object with its turns under '{inner}'" if inner else "a list of turns"
    elif where:
        turns = body[where["turns_field"]]
        words += f"; turns under '{where['turns_field']}'"
    else:
        return words + "; no list of turns seen"
    words += _turn_keys(turns, found)
    if where.get("sessions_field") and where.get("turns_field") and not found["timestamp_field"]:
        found["session_time_field"] = _first_key(body[where["sessions_field"]], TIME_KEYS)
        if found["session_time_field"]:
            words += f"; session times under '{found['session_time_field']}'"
    suffix = _time_suffix(body) if where.get("session_keys") else None
    if suffix and not found["timestamp_field"]:  # the turns' own times come first
        found["session_time_suffix"] = suffix
        words += f"; session times under session_N{suffix}"
    return words + _questions(first, found)


def _turn_keys(turns: list[Any], found: dict[str, Any]) -> str:
    """The keys of the turns' fields, in words; set in `found`."""
    turns = [t for t in turns if isinstance(t, dict)]
    keys = {
        "text_field": _first_key(turns, TEXT_KEYS),
        "speaker_field": _first_key(turns, SPEAKER_KEYS),
        "turn_id_field": _first_key(turns, TURN_ID_KEYS),
        "timestamp_field": _first_key(turns, TIME_KEYS),
        "caption_field": _first_key(turns, CAPTION_KEYS),
    }
    named = _named(keys)
    for attr in ("text_field", "speaker_field", "caption_field"):
        keys[attr] = keys[attr] or getattr(_PLAIN, attr)
    found.update(keys)
    speakers = {str(t.get(found["speaker_field"])) for t in turns}
    if "user" in speakers and speakers <= {"user", "assistant", "system", "bot"}:
        found["user_speakers"] = ("user",)
    return f"; turn keys: {named or 'none of the common names'}"


def _questions(conversation: dict[str, Any], found: dict[str, Any]) -> str:
    """Where the conversation's questions are and their keys, in words; set in `found`."""
    lists = (
        (key, value)
        for key, value in conversation.items()
        if isinstance(value, list) and value and all(_is_question(q) for q in value)
    )
    key, value = next(lists, (None, None))
    if key is None or value is None:
        return ""
    found["questions_field"] = str(key)
    keys = {
        "question_field": _first_key(value, QUESTION_KEYS),
        "answer_field": _first_key(value, ANSWER_KEYS),
        "evidence_field": _first_key(value, EVIDENCE_KEYS),
        "category_field": _first_key(value, CATEGORY_KEYS),
    }
    found.update(keys)
    named = _named(keys)
    words = f"; questions under '{key}' ({named})"
    categories = [q.get(keys["category_field"] or "") for q in value]
    locomo = found.get("body_field") == "conversation" and found.get("turn_id_field") == "dia_id"
    if locomo and all(type(c) is int and c in CATEGORIES for c in categories):
        found["category_names"] = tuple(f"{n}={name}" for n, name in CATEGORIES.items())
        found["unanswerable_categories"] = (CATEGORIES[5],)
        words += "; LoCoMo-shaped: its category numbers get LoCoMo's names"
    return words


def _named(keys: dict[str, str | None]) -> str:
    """`{"text_field": "body", ...}` in words: `text 'body', ...` (the keys found)."""
    return ", ".join(f"{attr.removesuffix('_field')} '{k}'" for attr, k in keys.items() if k)


def _first_key(objects: list[Any], candidates: tuple[str, ...]) -> str | None:
    """The first of `candidates` that some object of `objects` has."""
    present = {k for o in objects if isinstance(o, dict) for k in o}
    return next((k for k in candidates if k in present), None)


def _unique(rows: list[Any], key: str) -> bool:
    values = [r.get(key) for r in rows if isinstance(r, dict)]
    return all(isinstance(v, str | int) for v in values) and len(set(values)) == len(values)


def _session_number(key: str) -> int | None:
    prefix, _, number = key.partition(_PLAIN.session_prefix)
    return int(number) if not prefix and number.isdigit() else None


def _time_suffix(body: dict[str, Any]) -> str | None:
    """The suffix of the keys beside `session_1` that hold its time (`_date_time`)."""
    first = f"{_PLAIN.session_prefix}1"
    suffixes = [k[len(first) :] for k in body if k.startswith(first) and k != first]
    suffixes = [s for s in suffixes if not s[0].isdigit() and isinstance(body[first + s], str)]
    return next((s for s in suffixes if "date" in s or "time" in s), None)


def _is_turn(value: Any) -> bool:
    return isinstance(value, dict) and bool(set(TEXT_KEYS) & set(value))


def _is_sessions(value: Any) -> bool:
    """A list of sessions, each a list of turn objects."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(s, list) and s and all(_is_turn(t) for t in s) for s in value)
    )


def _is_question(value: Any) -> bool:
    return isinstance(value, dict) and bool(set(QUESTION_KEYS) & set(value))
