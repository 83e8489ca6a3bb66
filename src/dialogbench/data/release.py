"""The native release format: one folder per subject (see docs/release-format.md).

DATASET/
  dataset.json              optional: name, licence, description
  <subject id>/
    conversation.jsonl      one message per line, in order
    profile.json            {"claims": [...]}          optional
    persona.json            {"entries": [...]}         optional
    chat.jsonl              one chat item per line      optional
    questions.jsonl         one question per line       optional
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from dialogbench.data.errors import DataError
from dialogbench.data.io import parse_record, read_json, read_jsonl, sha256_files, write_jsonl
from dialogbench.data.model import (
    ChatItem,
    Dataset,
    Message,
    PersonaEntry,
    ProfileClaim,
    Question,
    Subject,
)

CONVERSATION = "conversation.jsonl"
PROFILE = "profile.json"
PERSONA = "persona.json"
CHAT = "chat.jsonl"
QUESTIONS = "questions.jsonl"
DATASET_META = "dataset.json"
SUBJECT_FILES = (CONVERSATION, PROFILE, PERSONA, CHAT, QUESTIONS)


def is_release(path: Path) -> bool:
    """True for a release folder or a single subject folder."""
    if not path.is_dir():
        return False
    return (path / CONVERSATION).exists() or any(
        (p / CONVERSATION).exists() for p in path.iterdir() if p.is_dir()
    )


def load_release(path: Path, name: str | None = None) -> Dataset:
    """Load and validate a release folder (or one subject folder)."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(
            path, "not a folder", fix="point at a release folder (docs/release-format.md)"
        )
    if (path / CONVERSATION).exists():
        subject_dirs = [path]
    else:
        subject_dirs = sorted(p for p in path.iterdir() if (p / CONVERSATION).exists())
    if not subject_dirs:
        raise DataError(
            path,
            f"no subject folder with a {CONVERSATION} inside",
            fix="see docs/release-format.md for the layout",
        )
    meta: dict[str, Any] = {}
    if (path / DATASET_META).exists():
        meta = read_json(path / DATASET_META)
    subjects = [_load_subject(d) for d in subject_dirs]
    files = [d / f for d in subject_dirs for f in SUBJECT_FILES if (d / f).exists()]
    return Dataset(
        name=name or meta.get("name") or path.name,
        subjects=subjects,
        sha256=sha256_files(files, root=path),
        source=str(path),
        licence=meta.get("licence"),
    )


def _load_subject(folder: Path) -> Subject:
    conv = folder / CONVERSATION
    messages: list[Message] = []
    seen: dict[str, int] = {}
    for lineno, obj in read_jsonl(conv):
        position = len(messages)
        given = obj.setdefault("position", position)
        record = f"line {lineno}"
        if given != position:
            raise DataError(
                conv,
                f"position {given} does not match the line order ({position})",
                record=record,
                field="position",
                fix="drop 'position' (line order is the position) or renumber",
            )
        msg = parse_record(Message, obj, conv, record)
        if msg.id in seen:
            raise DataError(
                conv,
                f"duplicate message id '{msg.id}' (first on line {seen[msg.id]})",
                record=record,
                field="id",
                fix="give every message a unique id",
            )
        seen[msg.id] = lineno
        messages.append(msg)
    if not messages:
        raise DataError(conv, "the conversation is empty", fix="add at least one message")

    profile: list[ProfileClaim] = []
    if (folder / PROFILE).exists():
        raw = read_json(folder / PROFILE)
        claims = raw.get("claims", []) if isinstance(raw, dict) else raw
        profile = [
            parse_record(ProfileClaim, c, folder / PROFILE, f"claims[{i}]")
            for i, c in enumerate(claims)
        ]
    persona: list[PersonaEntry] = []
    if (folder / PERSONA).exists():
        raw = read_json(folder / PERSONA)
        entries = raw.get("entries", []) if isinstance(raw, dict) else raw
        persona = [
            parse_record(PersonaEntry, c, folder / PERSONA, f"entries[{i}]")
            for i, c in enumerate(entries)
        ]
    chat = _load_lines(folder / CHAT, ChatItem)
    questions = _load_lines(folder / QUESTIONS, Question)
    meta_speakers = sorted({m.speaker for m in messages if m.role == "user"})
    subject = Subject(
        id=folder.name,
        messages=messages,
        profile=profile,
        persona=persona,
        chat_items=[c for _, c in chat],
        questions=[q for _, q in questions],
        speakers=meta_speakers,
    )
    check_subject(
        subject,
        files={
            "chat": (folder / CHAT, [n for n, _ in chat]),
            "questions": (folder / QUESTIONS, [n for n, _ in questions]),
            "profile": (folder / PROFILE, None),
            "persona": (folder / PERSONA, None),
        },
    )
    return subject


_Line = TypeVar("_Line", ChatItem, Question)


def _load_lines(path: Path, model: type[_Line]) -> list[tuple[int, _Line]]:
    if not path.exists():
        return []
    return [(n, parse_record(model, obj, path, f"line {n}")) for n, obj in read_jsonl(path)]


def check_subject(
    subject: Subject,
    files: dict[str, tuple[Path, list[int] | None]] | None = None,
) -> None:
    """Raise `DataError` if any derived record cites a missing message or the probe's future.

    `files` maps 'chat' / 'questions' / 'profile' / 'persona' to (path, line numbers)
    so that errors name the line; loaders without files pass nothing.
    """
    files = files or {}
    pos = subject.position_of()

    def locate(kind: str, i: int) -> tuple[Path | str, str]:
        path, lines = files.get(kind, (f"<{subject.id}:{kind}>", None))
        return path, (f"line {lines[i]}" if lines else f"{kind}[{i}]")

    def missing(kind: str, i: int, field: str, ref: str) -> DataError:
        path, record = locate(kind, i)
        return DataError(
            path,
            f"message id '{ref}' is not in {CONVERSATION}",
            record=record,
            field=field,
            fix="cite ids that exist in the subject's conversation",
        )

    def cited(
        kind: str,
        i: int,
        field: str,
        refs: list[str],
        before: int | None = None,
        point: str = "",
        fix: str = "",
    ) -> None:
        """Every id in `refs` exists and, when `before` is given, comes before `point`."""
        for ref in refs:
            if ref not in pos:
                raise missing(kind, i, field, ref)
            if before is not None and pos[ref] >= before:
                path, record = locate(kind, i)
                raise DataError(
                    path,
                    f"'{ref}' (position {pos[ref]}) is not before {point}",
                    record=record,
                    field=field,
                    fix=fix,
                )

    for i, item in enumerate(subject.chat_items):
        if item.probe_id not in pos:
            raise missing("chat", i, "probe_id", item.probe_id)
        probe_at = pos[item.probe_id]
        cited(
            "chat",
            i,
            "reference_ids",
            item.reference_ids,
            probe_at,
            f"the probe '{item.probe_id}' (position {probe_at})",
            "a reply may only draw on earlier messages; remove or correct the id",
        )
    for i, q in enumerate(subject.questions):
        asked_at = len(subject.messages)
        if q.after_id is not None:
            if q.after_id not in pos:
                raise missing("questions", i, "after_id", q.after_id)
            asked_at = pos[q.after_id] + 1
        cited(
            "questions",
            i,
            "evidence_ids",
            q.evidence_ids,
            asked_at,
            f"the point the question is asked (after '{q.after_id}')",
            "move 'after_id' later or correct the evidence",
        )
    for i, claim in enumerate(subject.profile):
        cited("profile", i, "evidence_ids", claim.evidence_ids, None)
    for i, entry in enumerate(subject.persona):
        cited("persona", i, "grounds", entry.grounds, None)


def write_profile_persona(
    folder: Path, profile: list[ProfileClaim], persona: list[PersonaEntry]
) -> None:
    """Write `profile.json` and `persona.json` (each only when it has records)."""
    folder.mkdir(parents=True, exist_ok=True)
    if profile:
        claims = [c.model_dump(mode="json", exclude_defaults=True) for c in profile]
        (folder / PROFILE).write_text(json.dumps({"claims": claims}, indent=2, ensure_ascii=False))
    if persona:
        entries = [e.model_dump(mode="json", exclude_defaults=True) for e in persona]
        (folder / PERSONA).write_text(
            json.dumps({"entries": entries}, indent=2, ensure_ascii=False)
        )


def write_release(dataset: Dataset, path: Path) -> None:
    """Write `dataset` in the native format (the inverse of `load_release`)."""
    path.mkdir(parents=True, exist_ok=True)
    meta = {"name": dataset.name, "licence": dataset.licence, "converted_from": dataset.source}
    (path / DATASET_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    for s in dataset.subjects:
        d = path / s.id
        d.mkdir(exist_ok=True)
        write_jsonl(d / CONVERSATION, s.messages)
        write_profile_persona(d, s.profile, s.persona)
        if s.chat_items:
            write_jsonl(d / CHAT, s.chat_items)
        if s.questions:
            write_jsonl(d / QUESTIONS, s.questions)
