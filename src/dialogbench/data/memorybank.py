"""MemoryBank / SiliconFriend (Zhong et al., AAAI 2024): simulated user <-> companion chats.

`memory_bank_en.json` maps each user to `{name, summary, personality, overall_history,
history{"YYYY-MM-DD": [{query, response}]}, meta_information{name, personality, hobbies,
speaking_style}}`. Each user becomes one subject (id = the name, stray spaces stripped).

Message ids: exchange `i` (0-based, within its day) of day `D` gives the user's query
`"D#iu"` and the companion's response `"D#ia"`, e.g. `"2023-04-27#3u"`, `"2023-04-27#3a"`.
Days are read in date order; each message's session is the day and its timestamp that
day's midnight.

`meta_information` becomes the subject's profile and persona: `personality` (one entry per
comma-separated trait) and `speaking_style` are persona entries (dimensions `personality`
and `speaking style`); every other key is a profile claim whose statement is the value
as written (`hobbies` gives one claim per comma-separated hobby). None cite evidence.
`summary`, `personality` and `overall_history` at the user level are MemoryBank's own
generated memory summaries (empty in the released file) and are not read.

Some releases store values as Python literals (`"{'name': 'Emily', ...}"`) rather than
JSON; those are parsed with `ast.literal_eval`.

`probing_questions_en.jsonl`, when it sits next to the bank, adds each user's probing
questions (category `probing`). They carry no gold answers and no evidence ids, so they
can drive a judged or qualitative evaluation but not answer or retrieval scoring.
"""

from __future__ import annotations

import ast
import cmath
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar

from dialogbench.data.errors import DataError
from dialogbench.data.io import (
    as_text,
    clip,
    corpus_json,
    expect_object,
    parse_json,
    parse_record,
    read_jsonl,
    sha256_file,
    sha256_files,
    short,
    unencodable,
)
from dialogbench.data.model import (
    Dataset,
    Message,
    PersonaEntry,
    ProfileClaim,
    Question,
    Role,
    Subject,
)
from dialogbench.data.release import check_subject, new_dataset
from dialogbench.data.safe_names import check_name

FILENAME = "memory_bank_en.json"
QUESTIONS_FILENAME = "probing_questions_en.jsonl"
COMPANION = "companion"
PERSONA_KEYS = {"personality": "personality", "speaking_style": "speaking style"}
"""meta_information keys that describe how the person is, mapped to persona dimensions."""
SPLIT_KEYS = {"personality", "hobbies"}
"""meta_information keys whose comma-separated values are split into one record each."""

_T = TypeVar("_T")


def load_memorybank(path: Path, name: str | None = None, raw: Any = None) -> Dataset:
    """Load `memory_bank_en.json` (or a folder holding it) and, if present beside it,
    `probing_questions_en.jsonl` (questions without gold answers); `raw` is the bank
    already parsed. The dataset is called `name`, by default the stem of `path`."""
    path, name, raw = corpus_json(path, FILENAME, name, raw)
    users = expect_object(raw, path, None, f"pass MemoryBank's {FILENAME} (an object of users)")
    warnings: list[str] = []
    subjects: dict[str, Subject] = {}
    for key, user in users.items():
        subject = _load_user(path, key, user, warnings)
        if subject.id in subjects:
            raise DataError(
                path,
                f"two users are named '{subject.id}' once spaces are stripped",
                record=f"user {short(key)}",
                fix="rename or merge one of them",
            )
        subjects[subject.id] = subject
    files = [path]
    qpath = path.parent / QUESTIONS_FILENAME
    if qpath.exists():
        files.append(qpath)
        questions = _load_questions(qpath, set(subjects))
        for sid, qs in questions.items():
            subjects[sid] = subjects[sid].model_copy(update={"questions": qs})
    for subject in subjects.values():
        check_subject(subject, path=path)
    digest = sha256_file(path) if len(files) == 1 else sha256_files(files, root=path.parent)
    return new_dataset(
        path,
        name=name,
        subjects=list(subjects.values()),
        sha256=digest,
        warnings=warnings,
        licence="MIT",
        id_field="(the user's name)",
    )


def _literal(value: Any, kind: type[_T], path: Path, record: str, field: str) -> _T:
    """Return `value` as `kind`, parsing a JSON or Python-literal string if need be."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and kind is not str:
        for parse in (_json_literal, _python_literal):
            try:
                parsed = parse(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(parsed, kind):
                bad = unencodable(parsed)
                if bad is not None:
                    raise DataError(
                        path,
                        "holds a lone surrogate, which cannot be written as UTF-8",
                        record=record,
                        field=f"{field}.{bad}",
                        fix="remove the unpaired \\ud800-\\udfff escape",
                    )
                return parsed
    raise DataError(
        path,
        f"expected {kind.__name__}, found {type(value).__name__} {short(value)}",
        record=record,
        field=field,
        fix=f"give '{field}' a JSON {kind.__name__} (or a Python literal of one)",
    )


def _json_literal(text: str) -> Any:
    """`text` parsed strictly as JSON (ValueError if it is not plain JSON data)."""
    try:
        return parse_json(text, "<string>")
    except DataError as e:
        raise ValueError(str(e)) from None


def _python_literal(text: str) -> Any:
    """`text` parsed as a Python literal; a dict literal naming a key twice, or a number
    too large for a float, is a ValueError."""
    tree = ast.parse(text.strip(), mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [ast.dump(k) for k in node.keys if k is not None]
            if len(set(keys)) != len(keys):
                raise ValueError("a key appears twice")
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, float | complex) and not cmath.isfinite(value):
            raise ValueError("a number is too large")
    return ast.literal_eval(tree)


def _load_user(path: Path, key: str, user: Any, warnings: list[str]) -> Subject:
    record = f"user {key!r}"
    user = _literal(user, dict, path, record, key)
    name = key.strip()
    if not name:
        raise DataError(
            path, "the user's name is empty", record=record, fix="give every user a non-empty name"
        )
    check_name(name, path=path, record=record, field=None, what="the user's name is the subject id")
    stated = user.get("name")
    if isinstance(stated, str) and stated.strip() and stated.strip() != name:
        warnings.append(f"{name}: field 'name' says {stated.strip()!r}; the key is used")
    if "history" not in user:
        raise DataError(
            path,
            "required field is missing",
            record=record,
            field="history",
            fix="add the user's dated exchanges under 'history'",
        )
    messages = _messages(
        path, record, name, _literal(user["history"], dict, path, record, "history")
    )
    if not messages:
        raise DataError(
            path,
            "the user has no exchanges",
            record=record,
            field="history",
            fix="add at least one {query, response} exchange",
        )
    profile: list[ProfileClaim] = []
    persona: list[PersonaEntry] = []
    meta = user.get("meta_information")
    if meta in (None, "", {}):
        warnings.append(f"{name}: no meta_information; the subject has no profile or persona")
    else:
        meta = _literal(meta, dict, path, record, "meta_information")
        profile, persona = _meta(path, record, name, meta, warnings)
    fields = {
        "id": name,
        "messages": messages,
        "profile": profile,
        "persona": persona,
        "speakers": [name],
    }
    return parse_record(Subject, fields, path, record, {"id": "(the user's name)"})


def _messages(path: Path, record: str, name: str, history: dict[str, Any]) -> list[Message]:
    days: list[tuple[date, str, Any]] = []
    for day, exchanges in history.items():
        try:
            when = date.fromisoformat(str(day).strip())
        except ValueError:
            raise DataError(
                path,
                f"'{day}' is not a YYYY-MM-DD date",
                record=record,
                field=f"history.{day}",
                fix="key each day by its YYYY-MM-DD date",
            ) from None
        if any(d == when for d, _, _ in days):
            raise DataError(
                path,
                f"the day {when} appears twice",
                record=record,
                field=f"history.{day}",
                fix="merge the two days' exchanges",
            )
        days.append((when, str(day).strip(), exchanges))
    messages: list[Message] = []
    for when, day, exchanges in sorted(days, key=lambda d: d[0]):
        stamp = datetime(when.year, when.month, when.day)
        exchanges = _literal(exchanges, list, path, record, f"history.{day}")
        for i, exchange in enumerate(exchanges):
            where = f"history.{day}[{i}]"
            exchange = _literal(exchange, dict, path, record, where)
            for key, suffix, role, speaker in _sides(name):
                if not isinstance(exchange.get(key), str):
                    problem = (
                        "required field is missing"
                        if key not in exchange
                        else f"expected text, found {type(exchange[key]).__name__}"
                    )
                    raise DataError(
                        path,
                        problem,
                        record=f"{record}, {where}",
                        field=key,
                        fix=f"give every exchange a '{key}' string",
                    )
                fields = {
                    "id": f"{day}#{i}{suffix}",
                    "position": len(messages),
                    "speaker": speaker,
                    "role": role,
                    "text": exchange[key],
                    "timestamp": stamp,
                    "session": day,
                }
                messages.append(parse_record(Message, fields, path, f"{record}, {where}"))
    return messages


def _sides(name: str) -> tuple[tuple[str, str, Role, str], ...]:
    """(field, id suffix, role, speaker) for the two halves of an exchange."""
    return (("query", "u", "user", name), ("response", "a", "assistant", COMPANION))


def _meta(
    path: Path, record: str, name: str, meta: dict[str, Any], warnings: list[str]
) -> tuple[list[ProfileClaim], list[PersonaEntry]]:
    profile: list[ProfileClaim] = []
    persona: list[PersonaEntry] = []
    for key, value in meta.items():
        field = f"meta_information.{key}"
        items = _values(path, record, field, key, value)
        cleaned = [_unquote(v, f"{name}: {field}", warnings) for v in items]
        for statement in (c for c in cleaned if c):
            if key in PERSONA_KEYS:
                entry = {"dimension": PERSONA_KEYS[key], "statement": statement}
                persona.append(
                    parse_record(PersonaEntry, entry, path, record, {"statement": field})
                )
            else:
                claim = {"field": key, "statement": statement, "confidence": 1.0}
                names = {"field": f"{field} (its key)", "statement": field}
                profile.append(parse_record(ProfileClaim, claim, path, record, names))
    return profile, persona


def _values(path: Path, record: str, field: str, key: str, value: Any) -> list[str]:
    """The value's statements: list items, or comma-separated parts for SPLIT_KEYS."""
    if isinstance(value, list):
        return [as_text(v, path, record, f"{field}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return [as_text(value, path, record, field)]
    if key not in SPLIT_KEYS:
        return [value]
    parts = [p.strip() for p in value.split(",")]
    return [p[4:] if p.lower().startswith("and ") else p for p in parts]


def _unquote(text: str, where: str, warnings: list[str]) -> str:
    """Strip spaces and an unbalanced stray double quote (one value in the release has one)."""
    text = text.strip()
    if text.count('"') % 2 == 1 and (text.startswith('"') or text.endswith('"')):
        warnings.append(f"{where}: stray '\"' removed from {text!r}")
        text = text.strip('"').strip()
    return text


def _load_questions(path: Path, users: set[str]) -> dict[str, list[Question]]:
    out: dict[str, list[Question]] = {}
    for lineno, obj in read_jsonl(path):
        for raw_name, texts in obj.items():
            name = str(raw_name).strip()
            record = f"line {lineno}"
            if name not in users:
                raise DataError(
                    path,
                    f"user '{clip(name)}' is not in {FILENAME}",
                    record=record,
                    field=clip(raw_name),
                    fix="use a name that matches a user in the bank",
                )
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise DataError(
                    path,
                    "expected a list of question strings",
                    record=record,
                    field=clip(raw_name),
                    fix='write {"NAME": ["question", ...]}',
                )
            questions = out.setdefault(name, [])
            for text in texts:
                fields = {
                    "id": f"{name}-q{len(questions)}",
                    "category": "probing",
                    "text": text,
                    "answer": None,
                    "evidence_ids": [],
                    "answerable": True,
                }
                names = {"text": clip(raw_name), "id": clip(raw_name)}  # the id is NAME-qN
                questions.append(parse_record(Question, fields, path, record, names))
    return out
