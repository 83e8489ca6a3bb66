"""LoCoMo (Maharana et al., ACL 2024): ten long two-person chats with evidence-linked QA.

Each sample becomes one subject; both speakers are people, so both have role `user`.
Questions keep LoCoMo's numeric categories under explicit names (the official evaluation
code's numbering; other tools number them differently). Category 5 (adversarial) asks
about something the conversation never says: the question is unanswerable and its
`answer` holds the trap answer LoCoMo stores in `adversarial_answer`.

Evidence ids are repaired where the intent is unambiguous (`'D8:6; D9:17'` and
space-joined lists are split, `'D30:05'` loses its leading zero) and every repair or
drop is recorded in `Dataset.warnings`.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from dialogbench.data.errors import DataError
from dialogbench.data.io import read_json, sha256_file
from dialogbench.data.model import Dataset, Message, Question, Subject
from dialogbench.data.release import check_subject

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
_DIA_ID = re.compile(r"D(\d+):(\d+)")


def load_locomo(path: Path) -> Dataset:
    """Load `locomo10.json` (or a folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    raw = read_json(path)
    if not isinstance(raw, list):
        raise DataError(path, "expected a list of samples", fix="pass LoCoMo's locomo10.json")
    warnings: list[str] = []
    subjects = [_load_sample(path, i, s, warnings) for i, s in enumerate(raw)]
    return Dataset(
        name="locomo",
        subjects=subjects,
        sha256=sha256_file(path),
        source=str(path),
        warnings=warnings,
        licence="CC BY-NC 4.0",
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


def _parse_when(text: str) -> datetime | None:
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None


def _load_sample(path: Path, index: int, sample: Any, warnings: list[str]) -> Subject:
    record = f"sample {index}"
    if not isinstance(sample, dict):
        raise DataError(path, "expected an object", record=record, fix="pass locomo10.json")
    sid = str(_require(path, sample, "sample_id", record))
    record = f"sample {index} ({sid})"
    conv = _require(path, sample, "conversation", record)
    speakers = [conv.get("speaker_a"), conv.get("speaker_b")]
    sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION.fullmatch(key)))
    messages: list[Message] = []
    for number, key in sessions:
        when = _parse_when(str(conv.get(f"{key}_date_time", "")))
        for t, turn in enumerate(conv[key]):
            trec = f"{record}, {key}[{t}]"
            text = str(_require(path, turn, "text", trec))
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            messages.append(
                Message(
                    id=str(_require(path, turn, "dia_id", trec)),
                    position=len(messages),
                    speaker=str(_require(path, turn, "speaker", trec)),
                    role="user",
                    text=text,
                    timestamp=when,
                    session=f"session_{number}",
                )
            )
    ids = {m.id for m in messages}
    questions = []
    for q_index, qa in enumerate(_require(path, sample, "qa", record)):
        qrec = f"{record}, qa[{q_index}]"
        category = int(_require(path, qa, "category", qrec))
        if category not in CATEGORIES:
            raise DataError(
                path,
                f"unknown category {category}",
                record=qrec,
                field="category",
                fix=f"expected one of {sorted(CATEGORIES)}",
            )
        answerable = category != 5
        answer = qa.get("answer") if answerable else qa.get("adversarial_answer", qa.get("answer"))
        qid = f"{sid}-q{q_index}"
        questions.append(
            Question(
                id=qid,
                category=CATEGORIES[category],
                text=str(_require(path, qa, "question", qrec)),
                answer=None if answer is None else str(answer),
                evidence_ids=repair_evidence(qa.get("evidence", []), ids, qid, warnings),
                answerable=answerable,
            )
        )
    subject = Subject(
        id=sid,
        messages=messages,
        questions=questions,
        speakers=[s for s in speakers if s],
    )
    check_subject(subject)
    return subject


def repair_evidence(raw: list[str], ids: set[str], qid: str, warnings: list[str]) -> list[str]:
    """Return the usable evidence ids, repairing unambiguous defects and reporting the rest."""
    out: list[str] = []
    for item in raw:
        repaired: list[str] = []
        for piece in (p for p in re.split(r"[;,\s]+", str(item)) if p):
            m = _DIA_ID.fullmatch(piece)
            fixed = f"D{int(m.group(1))}:{int(m.group(2))}" if m else None
            if fixed is None:
                warnings.append(f"{qid}: evidence id {piece!r} is malformed; dropped")
            elif fixed not in ids:
                warnings.append(f"{qid}: evidence id {piece!r} names no message; dropped")
            else:
                repaired.append(fixed)
        if repaired and repaired != [item]:
            warnings.append(f"{qid}: evidence id {item!r} repaired to {repaired}")
        out.extend(r for r in repaired if r not in out)
    if not out:
        warnings.append(f"{qid}: no usable evidence; the question cannot be a retrieval probe")
    return out
