"""Answers produced elsewhere: read a file of answers to a dataset's questions, match each to
its question, and see which category map the file uses.

Formats (`FORMATS`; the fields are documented in docs/answers.md):

    dialogbench   JSON Lines, one answer per line: `subject` (its id, or its position as
                  a number), `question_id` and/or `question` (its text), `answer` (null with
                  `error` when the system failed), and optional `category`, `gold` (a
                  number read as its text), `system`, `model`, `evidence_ids`,
                  `latency_s`, `tokens`, `grade` (the producer's own 0-1 grade), `meta`;
                  any other field is ignored and counted (an error when read `strict`)
    mem0          the per-question result files of mem0's evaluation scripts: one JSON
                  object, conversation index (its position in locomo10.json) -> a list of
                  {question, answer (the gold), category, evidence, response, ...}; the
                  scores file its `evals.py` writes adds bleu_score, f1_score, llm_score

Matching (`match_answers`): by question id when the record gives one, else by question text
normalised (case, punctuation, spacing), within the record's subject when it names one. A
text that fits several questions is narrowed by the record's gold answer and category; what
still fits several different questions is *ambiguous*. Unmatched, ambiguous and repeated
records are reported, never dropped silently, and never scored.

Category maps (`detect_category_map`): LoCoMo's numbers as its official evaluation uses
them are ours (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial). Many
published tables name them otherwise, e.g. mem0's (1 single-hop, 2 temporal, 3 multi-hop,
4 open-domain). The file's category of each matched question is compared with the dataset's.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from dialogbench.data.errors import DataError
from dialogbench.data.io import json_lines, sha256_file
from dialogbench.data.locomo import CATEGORIES
from dialogbench.data.model import Dataset, Question

FORMATS = ("dialogbench", "mem0")
Format = Literal["dialogbench", "mem0"]

MEM0_NAMES: dict[int, str] = {
    1: "single-hop",
    2: "temporal",
    3: "multi-hop",
    4: "open-domain",
    5: "adversarial",
}
"""How mem0's evaluation (and scripts forked from it) names LoCoMo's category numbers."""

CATEGORY_NUMBERS = {name: n for n, name in CATEGORIES.items()}


def _number_as_text(*kinds: type) -> BeforeValidator:
    """Read a JSON number of `kinds` (never a boolean) as its text, as the official scorer
    reads a gold answer (`str(answer)`: LoCoMo has integer answers)."""

    def convert(value: Any) -> Any:
        if isinstance(value, kinds) and not isinstance(value, bool):
            return str(value)
        return value

    return BeforeValidator(convert)


SubjectText = Annotated[str, _number_as_text(int)]
"""A subject id, or its position in the dataset as a number (`0`) or a string (`"0"`)."""
GoldText = Annotated[str, _number_as_text(int, float)]
"""A gold answer: a string, or a number read as the official scorer does (`str(answer)`)."""


class AnswerRecord(BaseModel):
    """One answer as the file gives it (our schema; other formats are read into it)."""

    model_config = ConfigDict(extra="forbid")

    subject: SubjectText | None = None
    question_id: str | None = None
    question: str | None = None
    answer: str | None
    error: str | None = None
    category: int | str | None = None
    gold: GoldText | None = None
    system: str | None = None
    model: str | None = None
    evidence_ids: list[str] = Field(default_factory=list)
    latency_s: float | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    grade: float | None = Field(default=None, ge=0, le=1)
    meta: dict[str, Any] = Field(default_factory=dict)


FIXES: dict[str, str] = {
    "answer": "give the system's answer as a string (null, with `error`, when it failed)",
    "subject": "give the subject (conversation) id as a string, or its position as a number",
    "question_id": "give the dataset's question id as a string",
    "question": "give the question's text as a string",
    "error": "give why the answer failed as a string",
    "category": "give the category as a number or a name",
    "gold": "give the gold answer as a string or a number",
    "system": "give the memory system's name as a string",
    "model": "give the answer model's name as a string",
    "evidence_ids": 'give a list of message ids, e.g. ["D1:3"]',
    "latency_s": "give seconds as a number of at least 0",
    "tokens": "give a whole number of at least 0",
    "grade": "give the producer's own grade as a number from 0 to 1",
    "meta": "put anything else under meta as an object",
}


@dataclass(frozen=True)
class Given:
    """A record and where it is in the file (`line 3`, `conversation '0', item 5`)."""

    where: str
    record: AnswerRecord


@dataclass(frozen=True)
class AnswersFile:
    """A read answers file: its records, format and sha256, and the fields it gives that
    our schema does not know (ignored, unless read `strict`)."""

    path: Path
    format: str
    sha256: str
    records: list[Given]
    unknown: dict[str, list[str]] = field(default_factory=dict)
    """Unknown field -> where each record that gives it is (`line 3`)."""

    def unknown_warning(self) -> str | None:
        """One line counting the records with unknown fields, by field; None when none."""
        if not self.unknown:
            return None
        records = len({w for where in self.unknown.values() for w in where})
        each = ", ".join(
            f"{name!r} ({len(where)} records, e.g. {where[0]})"
            for name, where in sorted(self.unknown.items())
        )
        return (
            f"{records} answer records give fields our schema does not know, ignored: {each}; "
            "move them under meta, or pass --strict to refuse such a file"
        )


def read_answers(path: Path, fmt: str, *, strict: bool = False) -> AnswersFile:
    """Read an answers file in format `fmt`; a `DataError` naming file, record, field and fix.
    A field our schema does not know is ignored and counted (`AnswersFile.unknown`), or,
    `strict`, an error."""
    if fmt not in FORMATS:
        raise ValueError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise DataError(path, "no such answers file", fix="give the path of a file of answers")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(path, f"not UTF-8 text ({e.reason})", fix="save it as UTF-8") from None
    unknown: dict[str, list[str]] = {}
    if fmt == "dialogbench":
        records = _read_ours(path, text, None if strict else unknown)
    else:
        records = _read_mem0(path, text)
    if not records:
        raise DataError(path, "holds no answers", fix="give a file with at least one answer")
    return AnswersFile(path, fmt, sha256_file(path), records, unknown)


def _validated(
    path: Path, where: str, raw: Any, unknown: dict[str, list[str]] | None = None
) -> AnswerRecord:
    """The record `raw`, checked. Fields our schema does not know are left out and noted
    in `unknown` (field -> where); without `unknown` they are an error."""
    if not isinstance(raw, dict):
        raise DataError(path, "expected a JSON object", record=where, fix="one object per answer")
    if unknown is not None:
        extra = [k for k in raw if k not in AnswerRecord.model_fields]
        for name in extra:
            unknown.setdefault(name, []).append(where)
        raw = {k: v for k, v in raw.items() if k not in extra}
    try:
        record = AnswerRecord.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        name = ".".join(str(p) for p in first["loc"]) or "?"
        top = str(first["loc"][0]) if first["loc"] else ""
        if first["type"] == "extra_forbidden":
            fix = (
                f"remove it or move it under meta (known fields: {', '.join(FIXES)}), or "
                "leave out --strict to ignore it"
            )
            raise DataError(path, "unknown field", record=where, field=name, fix=fix) from None
        problem = "missing" if first["type"] == "missing" else first["msg"]
        raise DataError(path, problem, record=where, field=name, fix=FIXES.get(top)) from None
    if record.question_id is None and record.question is None:
        raise DataError(
            path,
            "the record names no question",
            record=where,
            field="question_id",
            fix="give question_id (the dataset's id) or question (its text)",
        )
    return record


def _read_ours(path: Path, text: str, unknown: dict[str, list[str]] | None) -> list[Given]:
    lines = json_lines(path, text, "write one JSON object per line")
    return [Given(f"line {n}", _validated(path, f"line {n}", raw, unknown)) for n, raw in lines]


def _text(value: Any) -> str | None:
    """A gold answer as the official scorer sees it: `str(answer)` (numbers too)."""
    return None if value is None else str(value)


def _read_mem0(path: Path, text: str) -> list[Given]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(
            path,
            f"not JSON ({e.msg} at line {e.lineno})",
            fix="give the JSON file mem0's search or evals script wrote",
        ) from None
    if not isinstance(data, dict):
        raise DataError(
            path,
            f"expected an object of conversation index -> list of results, found a "
            f"{type(data).__name__}",
            fix="give the JSON file mem0's search or evals script wrote",
        )
    out = []
    for key, items in data.items():
        conv = f"conversation {key!r}"
        if not isinstance(items, list):
            raise DataError(path, "expected a list of results", record=conv, fix="one per question")
        for i, item in enumerate(items):
            where = f"{conv}, item {i}"
            if not isinstance(item, dict):
                raise DataError(
                    path, "expected a JSON object", record=where, fix="one per question"
                )
            for name in ("question", "response"):
                if name not in item:
                    raise DataError(
                        path,
                        "missing",
                        record=where,
                        field=name,
                        fix="each result needs the question and the system's response",
                    )
            times = [
                item[k]
                for k in ("speaker_1_memory_time", "speaker_2_memory_time", "response_time")
                if isinstance(item.get(k), int | float)
            ]
            meta = {k: item[k] for k in ("f1_score", "bleu_score") if k in item}
            raw = {
                "subject": str(key),
                "question": item["question"],
                "answer": _text(item["response"]),
                "gold": _text(item.get("answer")),
                "category": item.get("category"),
                "evidence_ids": item.get("evidence", []),
                "latency_s": sum(times) if times else None,
                "grade": item.get("llm_score"),
                "meta": meta,
            }
            if isinstance(raw["category"], str) and raw["category"].strip().isdigit():
                raw["category"] = int(raw["category"])
            out.append(Given(where, _validated(path, where, raw)))
    return out


# -- matching ---------------------------------------------------------------------------------

_PUNCT = re.compile(r"[^\w\s]")


def normalise(text: str) -> str:
    """A question's text for matching: NFKC, lowercase, punctuation dropped, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_PUNCT.sub(" ", text).split())


@dataclass(frozen=True)
class Matched:
    """A record and the dataset question it answers."""

    where: str
    record: AnswerRecord
    subject_id: str
    question: Question
    by: Literal["id", "text"]


@dataclass
class Matching:
    """What matching found: the matched records, and every record that was not."""

    matched: list[Matched] = field(default_factory=list)
    unmatched: list[dict[str, str]] = field(default_factory=list)
    """{where, why} of each record that fits no question."""
    ambiguous: list[dict[str, Any]] = field(default_factory=list)
    """{where, candidates} of each record that fits several different questions."""
    repeated: list[dict[str, str]] = field(default_factory=list)
    """{where, first}: a second answer to a question already answered (the first is kept)."""
    in_order: int = 0
    """Records whose text fits several identical questions, given out in file order."""
    gold_differs: list[str] = field(default_factory=list)
    """Matched records whose own gold answer is not the dataset's."""
    text_differs: list[str] = field(default_factory=list)
    """Records matched by id whose question text is not the dataset's."""
    not_answered: list[str] = field(default_factory=list)
    """`subject/question` of the dataset's questions no record answers."""

    def report(self) -> dict[str, Any]:
        """matching.json: counts, then the records themselves."""
        by = Counter(m.by for m in self.matched)
        return {
            "records": len(self.matched)
            + len(self.unmatched)
            + len(self.ambiguous)
            + len(self.repeated),
            "matched": len(self.matched),
            "matched_by": {"id": by["id"], "text": by["text"]},
            "unmatched": self.unmatched,
            "ambiguous": self.ambiguous,
            "repeated": self.repeated,
            "identical_questions_in_file_order": self.in_order,
            "gold_differs": self.gold_differs,
            "text_differs": self.text_differs,
            "not_answered": len(self.not_answered),
            "not_answered_ids": self.not_answered,
        }

    def warnings(self) -> list[str]:
        """One line for each kind of record that was not scored, or that looks off."""
        out = []
        for what, items, after in (
            ("fit no question of the dataset", self.unmatched, "not scored"),
            ("fit several different questions", self.ambiguous, "not scored"),
            ("answer a question answered before", self.repeated, "the first is scored"),
        ):
            if items:
                first = items[0]
                out.append(
                    f"{len(items)} answer records {what} ({after}; listed in matching.json), "
                    f"e.g. {first['where']}" + (f": {first['why']}" if "why" in first else "")
                )
        if self.gold_differs:
            out.append(
                f"{len(self.gold_differs)} matched records carry a gold answer that is not the "
                f"dataset's (e.g. {self.gold_differs[0]}): the file may come from another "
                "version of the data; scored against the dataset's gold"
            )
        if self.text_differs:
            out.append(
                f"{len(self.text_differs)} records matched by id have another question text "
                f"(e.g. {self.text_differs[0]})"
            )
        if self.not_answered:
            out.append(
                f"{len(self.not_answered)} of the dataset's questions have no answer in the file"
            )
        return out


def _subject_of(dataset: Dataset, name: str) -> str | None:
    """A subject id from a record's `subject`: the id itself, else a position (mem0 writes
    the conversation's index in the file)."""
    ids = [s.id for s in dataset.subjects]
    if name in ids:
        return name
    if name.isdigit() and int(name) < len(ids):
        return ids[int(name)]
    return None


def _category_fits(q: Question, category: int | str | None) -> bool:
    if category is None:
        return True
    if isinstance(category, int):
        return CATEGORY_NUMBERS.get(q.category) == category
    return normalise(category) == normalise(q.category)


def match_answers(dataset: Dataset, records: Sequence[Given]) -> Matching:
    """Match each record to one dataset question (see the module docstring)."""
    found = Matching()
    by_subject = {s.id: s.questions for s in dataset.subjects}
    everywhere = [(s.id, q) for s in dataset.subjects for q in s.questions]
    by_id: dict[str, list[tuple[str, Question]]] = {}
    by_text: dict[tuple[str | None, str], list[tuple[str, Question]]] = {}
    for s, q in everywhere:
        by_id.setdefault(q.id, []).append((s, q))
        by_text.setdefault((s, normalise(q.text)), []).append((s, q))
        by_text.setdefault((None, normalise(q.text)), []).append((s, q))
    taken: dict[tuple[str, str], str] = {}
    for given in records:
        r, where = given.record, given.where
        sid: str | None = None
        if r.subject is not None:
            sid = _subject_of(dataset, r.subject)
            if sid is None:
                known = ", ".join(list(by_subject)[:5])
                why = f"no subject {r.subject!r} in {dataset.name} (its subjects: {known}, ...)"
                found.unmatched.append({"where": where, "why": why})
                continue
        how: Literal["id", "text"]
        if r.question_id is not None:
            how = "id"
            fits = [c for c in by_id.get(r.question_id, []) if sid is None or c[0] == sid]
            if not fits:
                why = f"no question with id {r.question_id!r}" + (f" in {sid}" if sid else "")
                found.unmatched.append({"where": where, "why": why})
                continue
        else:
            how = "text"
            text = normalise(r.question or "")
            fits = list(by_text.get((sid, text), []))
            if not fits:
                why = f"no question reads {r.question!r}" + (f" in {sid}" if sid else "")
                found.unmatched.append({"where": where, "why": why})
                continue
            if len(fits) > 1 and r.gold is not None:
                gold = normalise(r.gold)
                fits = [c for c in fits if normalise(c[1].answer or "") == gold] or fits
            if len(fits) > 1:
                fits = [c for c in fits if _category_fits(c[1], r.category)] or fits
        if len({(c[1].text, c[1].answer, c[1].category, c[1].answerable) for c in fits}) > 1:
            cands = [f"{s}/{q.id}" for s, q in fits]
            found.ambiguous.append({"where": where, "candidates": cands})
            continue
        free = [c for c in fits if (c[0], c[1].id) not in taken]
        if not free:
            first = taken[(fits[0][0], fits[0][1].id)]
            found.repeated.append({"where": where, "first": first})
            continue
        if len(fits) > 1:
            found.in_order += 1  # identical questions: given out in file order
        chosen, q = free[0]
        taken[(chosen, q.id)] = where
        found.matched.append(Matched(where, r, chosen, q, how))
        if r.gold is not None and q.answer is not None and normalise(r.gold) != normalise(q.answer):
            found.gold_differs.append(where)
        if how == "id" and r.question is not None and normalise(r.question) != normalise(q.text):
            found.text_differs.append(where)
    found.not_answered = [f"{s}/{q.id}" for s, q in everywhere if (s, q.id) not in taken]
    return found


# -- category maps ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CategoryMap:
    """How the file's categories relate to the dataset's."""

    status: Literal["ours", "mem0-names", "another", "inconsistent", "none"]
    """ours: the file's categories are the dataset's; mem0-names: named as mem0 names
    LoCoMo's numbers; another: a consistent relabelling; inconsistent: they disagree with
    the dataset's in no consistent way; none: the file gives no categories."""
    mapping: dict[str, str]
    """File category -> the dataset's category it stands for (the most common)."""
    agree: int
    """Matched questions whose file category maps to their dataset category."""
    compared: int
    message: str


def _label(value: int | str) -> str:
    return str(value) if isinstance(value, int) else normalise(value).replace(" ", "-")


def _ours(value: int | str, category: str) -> bool:
    if isinstance(value, int):
        return CATEGORIES.get(value) == category
    return _label(value) == _label(category)


def detect_category_map(
    pairs: Iterable[tuple[int | str | None, str]], fmt: str = "dialogbench"
) -> CategoryMap:
    """Compare (file category, dataset category) over the matched questions."""
    seen = [(f, ours) for f, ours in pairs if f is not None]
    if not seen:
        return CategoryMap("none", {}, 0, 0, "the file gives no categories: the dataset's are used")
    table: dict[str, Counter[str]] = {}
    for f, ours in seen:
        table.setdefault(_label(f), Counter())[ours] += 1
    mapping = {f: c.most_common(1)[0][0] for f, c in sorted(table.items())}
    agree = sum(c[mapping[f]] for f, c in table.items())
    n = len(seen)
    shown = ", ".join(f"{f} = {o}" for f, o in mapping.items())
    if all(_ours(f, ours) for f, ours in seen):
        message = "the file's categories are the dataset's (LoCoMo's numbers, as ours)"
        if fmt == "mem0" and all(isinstance(f, int) for f, _ in seen):
            message += (
                "; note that mem0's scripts name these numbers 1 single-hop, 3 multi-hop, "
                "4 open-domain, so their per-category tables swap those names; ours are "
                "1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial"
            )
        return CategoryMap("ours", mapping, agree, n, message)
    names = {f: ours for f, ours in seen if isinstance(f, str)}
    if names and all(
        isinstance(f, str) and _label(f) == MEM0_NAMES.get(CATEGORY_NUMBERS.get(ours, 0))
        for f, ours in seen
    ):
        return CategoryMap(
            "mem0-names",
            mapping,
            agree,
            n,
            f"the file names categories as mem0 does ({shown}); the figures use the "
            "dataset's own categories",
        )
    if agree == n and len(set(mapping.values())) == len(mapping):
        return CategoryMap(
            "another",
            mapping,
            agree,
            n,
            f"the file uses another category map ({shown}); the figures use the dataset's",
        )
    return CategoryMap(
        "inconsistent",
        mapping,
        agree,
        n,
        f"the file's categories disagree with the dataset's in no consistent way "
        f"({n - agree} of {n} questions off the most common map {shown}); the figures use "
        "the dataset's",
    )
