"""The native release format: one folder per subject (see docs/release-format.md).

DATASET/
  dataset.json              optional: name, licence, description
  <subject id>/
    conversation.jsonl      one message per line, in order
    profile.json            {"claims": [...]}          optional
    persona.json            {"entries": [...]}         optional
    chat.jsonl              one chat item per line      optional
    questions.jsonl         one question per line       optional
    census.jsonl            census labels, one a line   optional (build realcompanion --census)
    reread.jsonl            re-readings, one a line     optional (build realcompanion --reread)
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from dialogbench.data.errors import DataError
from dialogbench.data.io import (
    expect_list,
    parse_record,
    read_json,
    read_jsonl,
    sha256_files,
    short,
    source_name,
    write_jsonl,
)
from dialogbench.data.labels import check_labels
from dialogbench.data.model import (
    MAX_ID,
    RECENT_WINDOW,
    ChatItem,
    Dataset,
    FolderId,
    Id,
    Message,
    PersonaEntry,
    ProfileClaim,
    Question,
    Reread,
    Subject,
    Text,
)
from dialogbench.data.safe_names import check_name, check_unique, inside

CONVERSATION = "conversation.jsonl"
PROFILE = "profile.json"
PERSONA = "persona.json"
CHAT = "chat.jsonl"
QUESTIONS = "questions.jsonl"
CENSUS = "census.jsonl"
REREAD = "reread.jsonl"
DATASET_META = "dataset.json"
SUBJECT_FILES = (CONVERSATION, PROFILE, PERSONA, CHAT, QUESTIONS, CENSUS, REREAD)


def is_release(path: Path) -> bool:
    """True for a release folder or a single subject folder (one holding any subject file)."""
    if not path.is_dir():
        return False
    return _is_subject(path) or any(_is_subject(p) for p in path.iterdir() if p.is_dir())


def _is_subject(folder: Path) -> bool:
    return any((folder / f).exists() for f in SUBJECT_FILES)


class ReleaseMeta(BaseModel):
    """`dataset.json`: what the release calls itself (all optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Id | None = None
    licence: Text | None = None
    description: Text | None = None
    converted_from: Text | None = Field(default=None, description="written by write_release")


def load_release(path: Path, name: str | None = None) -> Dataset:
    """Load and validate a release folder (or one subject folder)."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(
            path, "not a folder", fix="point at a release folder (docs/release-format.md)"
        )
    subject_dirs = [path] if _is_subject(path) else sorted(p for p in path.iterdir() if p.is_dir())
    for folder in subject_dirs:
        if not (folder / CONVERSATION).exists() and _is_subject(folder):
            raise DataError(
                folder,
                f"a subject folder without {CONVERSATION}",
                fix=f"add the subject's {CONVERSATION}, or remove the folder",
            )
    subject_dirs = [d for d in subject_dirs if (d / CONVERSATION).exists()]
    if not subject_dirs:
        raise DataError(
            path,
            f"no subject folder with a {CONVERSATION} inside",
            fix="see docs/release-format.md for the layout",
        )
    meta = ReleaseMeta()
    if (path / DATASET_META).exists():
        meta = parse_record(ReleaseMeta, read_json(path / DATASET_META), path / DATASET_META, None)
    subjects = [_load_subject(d) for d in subject_dirs]
    files = [d / f for d in subject_dirs for f in SUBJECT_FILES if (d / f).exists()]
    return new_dataset(
        path,
        name=name or meta.name or path.name,
        subjects=subjects,
        sha256=sha256_files(files, root=path),
        licence=meta.licence,
        records=[f"subject folder {short(d.name)}" for d in subject_dirs],
        id_field="(the folder's name)",
    )


def new_dataset(
    path: Path,
    name: str,
    subjects: list[Subject],
    sha256: str,
    warnings: list[str] | None = None,
    licence: str | None = None,
    records: list[str] | None = None,
    id_field: str | None = "id",
) -> Dataset:
    """The `Dataset` a loader read from `path`; a `DataError` if it holds no subject, or two
    whose ids would name one folder (`records` names each subject's record, `id_field`
    what the file calls the id)."""
    if not subjects:
        raise DataError(path, "the dataset holds no subjects", fix="add at least one conversation")
    names = records or [f"subject '{s.id}'" for s in subjects]
    check_unique(
        ((s.id, r) for s, r in zip(subjects, names, strict=True)), path=path, field=id_field
    )
    return Dataset(
        name=name,
        subjects=subjects,
        sha256=sha256,
        source=str(path),
        warnings=warnings or [],
        licence=licence,
    )


def _load_subject(folder: Path) -> Subject:
    conv = folder / CONVERSATION
    messages: list[Message] = []
    lines: list[str] = []
    for lineno, obj in read_jsonl(conv):
        position = len(messages)
        given = obj.setdefault("position", position)
        record = f"line {lineno}"
        if type(given) is not int or given != position:
            raise DataError(
                conv,
                f"position {short(given)} does not match the line order ({position})",
                record=record,
                field="position",
                fix="drop 'position' (line order is the position) or renumber",
            )
        messages.append(parse_record(Message, obj, conv, record))
        lines.append(record)
    if not messages:
        raise DataError(conv, "the conversation is empty", fix="add at least one message")

    profile = _load_records(folder / PROFILE, "claims", ProfileClaim)
    persona = _load_records(folder / PERSONA, "entries", PersonaEntry)
    chat = _load_lines(folder / CHAT, ChatItem)
    questions = _load_lines(folder / QUESTIONS, Question)
    census = _load_lines(folder / CENSUS, ChatItem)
    reread = _load_lines(folder / REREAD, Reread)
    meta_speakers = sorted({m.speaker for m in messages if m.role == "user"})
    subject = Subject(
        id=_subject_id(folder),
        messages=messages,
        profile=profile,
        persona=persona,
        chat_items=[c for _, c in chat],
        questions=[q for _, q in questions],
        census=[c for _, c in census],
        reread=[r for _, r in reread],
        speakers=meta_speakers,
    )
    check_subject(
        subject,
        files={
            "conversation": (conv, lines),
            "chat": (folder / CHAT, [n for n, _ in chat]),
            "questions": (folder / QUESTIONS, [n for n, _ in questions]),
            "census": (folder / CENSUS, [n for n, _ in census]),
            "reread": (folder / REREAD, [n for n, _ in reread]),
            "profile": (folder / PROFILE, None),
            "persona": (folder / PERSONA, None),
        },
    )
    return subject


def _subject_id(folder: Path) -> str:
    """The folder's name, which is the subject id (so it must be a valid id that can name
    a folder anywhere the release is copied)."""
    try:
        return TypeAdapter(FolderId).validate_python(folder.name)
    except ValidationError as e:
        err = e.errors()[0]
        unsafe = err["type"] == "unsafe_name"
        problem = f"{short(folder.name)} {err['ctx']['problem']}" if unsafe else err["msg"]
        raise DataError(
            folder.parent,
            f"the folder name is not a usable subject id: {problem}",
            record=f"subject folder {short(folder.name)}",
            field="(the folder's name)",
            fix=err["ctx"]["fix"] if unsafe else f"rename the folder (at most {MAX_ID} characters)",
        ) from None


_Rec = TypeVar("_Rec", ProfileClaim, PersonaEntry)


def _load_records(path: Path, key: str, model: type[_Rec]) -> list[_Rec]:
    """The records of `profile.json` / `persona.json`: `{key: [...]}` or a bare list."""
    if not path.exists():
        return []
    raw = read_json(path)
    fix = f'write {{"{key}": [...]}}'
    if isinstance(raw, dict):
        extra = sorted(set(raw) - {key})
        if extra:
            raise DataError(
                path, "unknown field", field=extra[0], fix=f"{fix}; '{key}' is the only key"
            )
        raw = raw.get(key, [])
        records = expect_list(raw, path, None, key, fix)
    else:
        records = expect_list(raw, path, None, None, fix)
    return [parse_record(model, c, path, f"{key}[{i}]") for i, c in enumerate(records)]


_Line = TypeVar("_Line", ChatItem, Question, Reread)


def _load_lines(path: Path, model: type[_Line]) -> list[tuple[str, _Line]]:
    if not path.exists():
        return []
    rows = []
    for n, obj in read_jsonl(path):
        record = f"line {n}"
        rows.append((record, parse_record(model, obj, path, record)))
    return rows


def check_subject(
    subject: Subject,
    files: dict[str, tuple[Path | str, list[str] | None]] | None = None,
    path: Path | str | None = None,
) -> None:
    """Raise `DataError` if ids repeat (messages, questions, chat probes, census and
    re-read messages), any derived record cites a missing message or the probe's future, a
    chat or census item's labels contradict its references (`dialogbench.data.labels`), a
    census label is given to a chat item's probe or a stratum is in the wrong file, or a
    re-reading's `needs_memory` contradicts where its referents sit.

    `files` maps 'conversation' / 'chat' / 'questions' / 'census' / 'reread' / 'profile' /
    'persona' to (path,
    record names) so that errors name the line; kinds it leaves out are reported in `path`
    (the loader's file) as `<kind>[i]`.
    """
    files = files or {}

    def locate(kind: str, i: int) -> tuple[Path | str, str]:
        where, records = files.get(kind, (path or f"<{subject.id}:{kind}>", None))
        return where, (records[i] if records else f"{kind}[{i}]")

    def error(kind: str, i: int, field: str, problem: str, fix: str) -> DataError:
        """`problem` with record `i` of `kind`, on `field`, named where it was read."""
        where, record = locate(kind, i)
        return DataError(where, problem, record=record, field=field, fix=fix)

    def unique(kind: str, what: str, field: str, ids: list[str]) -> None:
        first: dict[str, int] = {}
        for i, key in enumerate(ids):
            if key in first:
                earlier = locate(kind, first[key])[1]
                problem = f"duplicate {what} '{key}' (first on {earlier})"
                raise error(kind, i, field, problem, f"give every {what} a unique value")
            first[key] = i

    unique("conversation", "message id", "id", [m.id for m in subject.messages])
    unique("questions", "question id", "id", [q.id for q in subject.questions])
    unique("chat", "probe_id", "probe_id", [c.probe_id for c in subject.chat_items])
    unique("census", "probe_id", "probe_id", [c.probe_id for c in subject.census])
    unique("reread", "probe_id", "probe_id", [r.probe_id for r in subject.reread])
    pos = subject.position_of()
    sessions = {m.id: m.session for m in subject.messages}

    def missing(kind: str, i: int, field: str, ref: str) -> DataError:
        problem = f"message id '{ref}' is not in {CONVERSATION}"
        return error(kind, i, field, problem, "cite ids that exist in the subject's conversation")

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
                problem = f"'{ref}' (position {pos[ref]}) is not before {point}"
                raise error(kind, i, field, problem, fix)

    probes = {c.probe_id for c in subject.chat_items}
    for kind, items in (("chat", subject.chat_items), ("census", subject.census)):
        for i, item in enumerate(items):
            if item.probe_id not in pos:
                raise missing(kind, i, "probe_id", item.probe_id)
            if (item.stratum == "census") != (kind == "census"):
                want = "census" if kind == "census" else "proportional, enriched or abstention"
                wrong = f"stratum '{item.stratum}' does not belong in {kind} items"
                raise error(kind, i, "stratum", wrong, f"set 'stratum' to {want}")
            if kind == "census" and item.probe_id in probes:
                twice = f"'{item.probe_id}' is a chat item's probe: it is labelled there"
                raise error(kind, i, "probe_id", twice, "drop the census line")
            probe_at = pos[item.probe_id]
            cited(
                kind,
                i,
                "reference_ids",
                item.reference_ids,
                probe_at,
                f"the probe '{item.probe_id}' (position {probe_at})",
                "a reply may only draw on earlier messages; remove or correct the id",
            )
            problem = check_labels(item, probe_at, pos, sessions)
            if problem is not None:
                field, why, fix = problem
                where, record = locate(kind, i)
                raise DataError(where, why, record=record, field=field, fix=fix)
    for i, r in enumerate(subject.reread):
        if r.probe_id not in pos:
            raise missing("reread", i, "probe_id", r.probe_id)
        at = pos[r.probe_id]
        cited(
            "reread",
            i,
            "referent_ids",
            r.referent_ids,
            at,
            f"the message '{r.probe_id}' (position {at})",
            "a referent lies before the message; remove or correct the id",
        )
        far = any(at - pos[ref] > RECENT_WINDOW for ref in r.referent_ids)
        if r.needs_memory != far:
            says = "a referent lies" if far else "no referent lies"
            why = (
                f"is {str(r.needs_memory).lower()}, but {says} more than {RECENT_WINDOW} "
                "messages before the message"
            )
            fix = f"set 'needs_memory' to {str(far).lower()}, or correct 'referent_ids'"
            raise error("reread", i, "needs_memory", why, fix)
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


def check_release_names(dataset: Dataset, path: Path) -> None:
    """Refuse, before anything is written, a subject id that cannot name its folder in
    `path`: an unsafe name, two that one file system takes for one, a folder outside."""
    for s in dataset.subjects:
        record = f"subject '{s.id}'"
        check_name(s.id, path=path, record=record, field="id", what="the subject's id")
        inside(path / s.id, path, record=record, field="id")
    check_unique(((s.id, f"subject '{s.id}'") for s in dataset.subjects), path=path, field="id")


def write_release(dataset: Dataset, path: Path) -> None:
    """Write `dataset` in the native format (the inverse of `load_release`); nothing is
    written when a subject id could not name its own folder inside `path`."""
    check_release_names(dataset, path)
    path.mkdir(parents=True, exist_ok=True)
    meta = {
        "name": dataset.name,
        "licence": dataset.licence,
        "converted_from": source_name(dataset.source),
    }
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
        if s.census:
            write_jsonl(d / CENSUS, s.census)
        if s.reread:
            write_jsonl(d / REREAD, s.reread)


def write_new_release(dataset: Dataset, path: Path, *, force: bool = False) -> None:
    """Write `dataset` as the release folder `path`, never mixed with files already there.

    A folder that holds anything is refused, unless `force` and it is a release (an
    earlier import): the new one is then written beside it and swapped in, so the folder
    holds one release or the other, whole. A folder of other files is never replaced."""
    check_release_names(dataset, path)
    if path.exists() and not path.is_dir():
        raise DataError(path, "the output is a file, not a folder", fix="pass --out a folder")
    try:
        _write_new(dataset, path, force)
    except OSError as e:
        raise DataError(
            path,
            f"cannot write the release: {e.strerror or e}",
            fix="check the folder's permissions and the free space",
        ) from None


def _write_new(dataset: Dataset, path: Path, force: bool) -> None:
    if not (path.is_dir() and any(path.iterdir())):
        write_release(dataset, path)
        return
    if not force:
        raise DataError(
            path,
            "the output folder already holds files (an earlier import?); importing into it "
            "would mix the two",
            fix="pass --out a new folder, or --force to replace the earlier release whole",
        )
    if not is_release(path):
        raise DataError(
            path,
            "the output folder holds files that are not a release; --force replaces only a "
            "release folder",
            fix="pass --out a new or empty folder",
        )
    new = Path(tempfile.mkdtemp(prefix=f".{path.name}.new-", dir=path.parent))
    try:
        write_release(dataset, new)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    old = new.with_name(new.name.replace(".new-", ".old-"))
    path.rename(old)
    try:
        new.rename(path)
    except OSError:
        old.rename(path)  # the earlier release stays whole
        shutil.rmtree(new, ignore_errors=True)
        raise
    shutil.rmtree(old)
