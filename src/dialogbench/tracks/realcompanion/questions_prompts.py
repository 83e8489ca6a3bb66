"""Wording (our own) of the question track: the answer prompt and the two judge rubrics.

The model under test sees one user message: the context messages under a heading (which
says whether they are the conversation so far or what a search found), oldest first, each
with its date and speaker; then the question; then `ANSWER_TASK`, which asks for a short
answer and for the exact phrase `NOT_AVAILABLE` when the messages do not hold the
information. That phrase contains LoCoMo's official abstention string, so the official
scorer's rule and our prompt agree on what declining looks like.

Judging (temperature 0):

* answerable questions: `CORRECTNESS_RUBRIC`, `correct` from 0 to 2 against the gold
  answer (0 wrong or declined, 1 partly right, 2 fully right); the track reports
  `correct / 2`, so the judge score lies on [0, 1] like the F1 scores.
* unanswerable questions: `ABSTENTION_RUBRIC`, `abstains` 0 or 1 (1: the answer declines
  or says the information is not there; 0: it asserts an answer, hedged or not).

A memory system (`--memory`) answers from what it recalled: its message memories under
`MEMORY_HEADING` (oldest first, rendered as above), its text memories as a list of notes
under `NOTES_HEADING` (in the order recalled); the question, the task and the system prompt
are the same as for the other systems.

`PROMPT_SHA256` digests every constant here, so a change of wording starts a run afresh;
`MEMORY_PROMPT_SHA256` digests the memory wording (recorded only in runs with `--memory`, so
runs without it keep their identity).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dialogbench.data.model import Message
from dialogbench.judging.rubric import Dimension, Rubric
from dialogbench.models.types import ChatMessage
from dialogbench.runner.record import digest
from dialogbench.tracks.common import prompt_digest, render_message

MESSAGE_CHARS = 800

NOT_AVAILABLE = "No information available."

ANSWER_SYSTEM = (
    "You answer questions about a long conversation between people. Use only what the "
    "messages you are shown say; do not guess and do not add facts of your own."
)

HEADINGS: dict[str, str] = {
    "full": "The conversation so far, oldest first:",
    "retrieval": "Messages a search of the conversation found for this question, oldest first:",
}
"""The heading of the context block, by how the messages were chosen."""

NO_MESSAGES = "(no messages)"

ASKED_AT = "The question is asked on {date}."

ANSWER_TASK = (
    "Answer the question in as few words as you can: a name, a date, a number or a short "
    "phrase, not a full sentence and no explanation. Work out dates from the dates shown "
    "with the messages. If the messages do not contain what is needed to answer, reply "
    f"with exactly: {NOT_AVAILABLE}"
)

CORRECT = Dimension(
    name="correct",
    low=0,
    high=2,
    criteria=(
        "Whether the candidate answer agrees with the reference answer. 0: it contradicts "
        "the reference, gives something else, or declines to answer. 1: it gets part of "
        "the reference right (one of several facts, or a date or amount that is close but "
        "not the same) and misses or garbles the rest. 2: it says what the reference says, "
        "in any wording; extra detail is fine unless it contradicts the reference."
    ),
)

CORRECTNESS_RUBRIC = Rubric(
    name="question-correctness",
    instructions=(
        "A system answered a question about a conversation. Compare its answer with the "
        "reference answer; judge the facts only, not style or length."
    ),
    dimensions=(CORRECT,),
    compares_to="reference",
)

ABSTAINS = Dimension(
    name="abstains",
    low=0,
    high=1,
    criteria=(
        "1: the candidate declines to answer, or says the conversation does not contain "
        "the information or that it does not know. 0: it gives an answer of any kind, even "
        "a hedged or partial one."
    ),
)

ABSTENTION_RUBRIC = Rubric(
    name="question-abstention",
    instructions=(
        "A system was asked a question about a conversation that never contains the answer. "
        "The right behaviour is to say so. Decide only whether the candidate declined."
    ),
    dimensions=(ABSTAINS,),
    compares_to="context",
)


MEMORY_HEADING = "Messages a memory system recalled for this question, oldest first:"

NOTES_HEADING = "Notes a memory system kept about the conversation, most relevant first:"


PROMPT_SHA256 = prompt_digest(
    globals(),
    "MESSAGE_CHARS NOT_AVAILABLE ANSWER_SYSTEM HEADINGS NO_MESSAGES ASKED_AT ANSWER_TASK",
    rubrics=[repr(CORRECTNESS_RUBRIC), repr(ABSTENTION_RUBRIC)],
)
MEMORY_PROMPT_SHA256 = digest(
    {"MEMORY_HEADING": MEMORY_HEADING, "NOTES_HEADING": NOTES_HEADING, "base": PROMPT_SHA256}
)


def render(message: Message) -> str:
    """One message as shown: date (when known), speaker and text, cut to `MESSAGE_CHARS`."""
    return render_message(message, MESSAGE_CHARS)


def question_block(question: str, asked_at: datetime | None) -> str:
    """The question, with the day it is asked when known."""
    when = ASKED_AT.format(date=f"{asked_at:%Y-%m-%d}") + "\n" if asked_at else ""
    return f"{when}<question>\n{question.strip()}\n</question>"


def answer_messages(
    lines: Sequence[str], mode: str, question: str, asked_at: datetime | None = None
) -> list[ChatMessage]:
    """The answer prompt: the rendered context `lines` under the heading for `mode`, then the
    question and the task."""
    body = "\n".join(lines) if lines else NO_MESSAGES
    context = f"{HEADINGS[mode]}\n<messages>\n{body}\n</messages>"
    user = "\n\n".join([context, question_block(question, asked_at), ANSWER_TASK])
    return [
        {"role": "system", "content": ANSWER_SYSTEM},
        {"role": "user", "content": user},
    ]


def note(text: str) -> str:
    """One text memory as shown: a list item on one line."""
    return "- " + " ".join(text.split())


def memory_answer_messages(
    lines: Sequence[str],
    notes: Sequence[str],
    question: str,
    asked_at: datetime | None = None,
) -> list[ChatMessage]:
    """The answer prompt of a memory system: the recalled messages' rendered `lines` (shown
    when there are any, or when there are no notes either), its `notes`, then the question
    and the task."""
    blocks = []
    if lines or not notes:
        body = "\n".join(lines) if lines else NO_MESSAGES
        blocks.append(f"{MEMORY_HEADING}\n<messages>\n{body}\n</messages>")
    if notes:
        body = "\n".join(note(n) for n in notes)
        blocks.append(f"{NOTES_HEADING}\n<notes>\n{body}\n</notes>")
    user = "\n\n".join([*blocks, question_block(question, asked_at), ANSWER_TASK])
    return [
        {"role": "system", "content": ANSWER_SYSTEM},
        {"role": "user", "content": user},
    ]
