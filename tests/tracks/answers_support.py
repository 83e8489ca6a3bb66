"""A scripted loopback judge of answers (lenient and strict rules) and answer files written
by hand in our schema, shared by the answers track's and `compare`'s tests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dialogbench.data.locomo import CATEGORIES
from dialogbench.data.model import Dataset
from dialogbench.judging.prompts import JUDGE_SYSTEM
from dialogbench.judging.qa_rubrics import LENIENT_RUBRIC, STRICT_RUBRIC
from dialogbench.tracks.realcompanion import questions_prompts as qp
from dialogbench.tracks.realcompanion.answers_file import normalise

NUMBERS = {name: n for n, name in CATEGORIES.items()}
_TAG = {n: re.compile(rf"<{n}>\n(.*?)\n</{n}>", re.DOTALL) for n in ("candidate", "reference")}


def _tag(name: str, text: str) -> str | None:
    found = _TAG[name].search(text)
    return found.group(1) if found else None


def words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if len(w) >= 4}


def lenient(candidate: str, reference: str) -> bool:
    """The scripted lenient judge: a word of four letters or more in common."""
    return bool(words(candidate) & words(reference))


def strict(candidate: str, reference: str) -> bool:
    """The scripted strict judge: the same words."""
    return normalise(candidate) == normalise(reference)


def judge_reply(body: dict[str, Any]) -> str:
    """Judge by the rules above (which rubric: from its instructions); abstention by phrase."""
    system, prompt = body["messages"][0]["content"], body["messages"][1]["content"]
    assert system == JUDGE_SYSTEM
    candidate, reference = _tag("candidate", prompt) or "", _tag("reference", prompt)
    if reference is None:
        declined = "no information available" in candidate.lower()
        return json.dumps({"reason": "checked", "abstains": int(declined)})
    rule = lenient if LENIENT_RUBRIC.instructions in prompt else strict
    assert rule is lenient or STRICT_RUBRIC.instructions in prompt
    return json.dumps({"reason": "compared", "correct": int(rule(candidate, reference))})


def answer_for(i: int, gold: str | None, answerable: bool) -> str:
    """Right, half right (its first word) or wrong, in turn; the abstention phrase when
    unanswerable."""
    if not answerable:
        return qp.NOT_AVAILABLE
    gold = gold or ""
    return [gold, gold.split()[0] + " something", "a quite different thing"][i % 3]


def our_file(
    ds: Dataset,
    path: Path,
    *,
    shift: int = 0,
    system: str = "acme-memory",
    model: str = "acme/model-1",
) -> list[dict[str, Any]]:
    """Every question answered (`answer_for(i + shift, ...)`): the first subject by id, the
    second by its text (case and punctuation changed); plus a record that fits no question,
    one that fits a question of each subject (an id without a subject) and a repeated one."""
    lines: list[dict[str, Any]] = []
    for si, s in enumerate(ds.subjects):
        for i, q in enumerate(s.questions):
            rec: dict[str, Any] = {
                "answer": answer_for(i + shift, q.answer, q.answerable),
                "system": system,
                "model": model,
                "latency_s": 0.1 * (i + 1),
                "tokens": 100 + i,
            }
            if q.category in NUMBERS:  # LoCoMo's number; our own categories have none
                rec["category"] = NUMBERS[q.category]
            if si == 0:
                rec |= {"subject": s.id, "question_id": q.id}
            else:
                rec |= {"subject": s.id, "question": q.text.upper().rstrip("?") + " ?!"}
            lines.append(rec)
    lines.append(
        {
            "subject": ds.subjects[0].id,
            "question": "Who won the 1930 world cup?",
            "answer": "Uruguay",
        }
    )
    lines.append({"question_id": ds.subjects[0].questions[0].id, "answer": "x"})
    lines.append(dict(lines[0]))
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return lines
