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

import re
from pathlib import Path
from typing import Any

from dialogbench.data.dates import Unreadable
from dialogbench.data.errors import DataError
from dialogbench.data.evidence import repair_evidence as repair
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


def load_locomo(path: Path) -> Dataset:
    """Load `locomo10.json` (or a folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    raw = read_json(path)
    if not isinstance(raw, list):
        raise DataError(path, "expected a list of samples", fix="pass LoCoMo's locomo10.json")
    warnings: list[str] = []
    dates = Unreadable("session dates")
    subjects = [_load_sample(path, i, s, warnings, dates) for i, s in enumerate(raw)]
    untimed = sum(m.timestamp is None for s in subjects for m in s.messages)
    if (warning := dates.warning(untimed)) is not None:
        warnings.append(warning)
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


def _load_sample(
    path: Path, index: int, sample: Any, warnings: list[str], dates: Unreadable
) -> Subject:
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
        when = dates.read(f"{record}, {key}_date_time", conv.get(f"{key}_date_time"))
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
    """The usable evidence ids (`dialogbench.data.evidence`); repairs and drops as warnings."""
    evidence = repair([str(item) for item in raw], ids)
    warnings.extend(evidence.warnings(qid))
    return evidence.ids
