"""Wording (our own) of the model detectors, the reply schema, and the messages built from them.

Both model detectors answer with one JSON object, `MemoryNeed`:

    {"needs_memory": true | false, "likelihood": 0..10}

`needs_memory` is the detector's own yes/no decision; `likelihood` (0 = certainly not,
10 = certainly) is its graded score, read as `likelihood / 10` so that every detector
scores on [0, 1]. A 0-10 integer scale is easier for small models to fill in than a
probability, and gives AUROC eleven levels to rank with.

Shown messages are wrapped in tags and cut to `MESSAGE_CHARS` characters. `PROMPT_SHA256`
digests every constant here, so a change of wording starts a run afresh; `MEMORY_TASK` and
`NOTES_HEADING`, the model-memory detector's own wording, are digested apart
(`MEMORY_PROMPT_SHA256`, recorded only in runs with `--memory`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from dialogbench.data.model import Message
from dialogbench.models.types import ChatMessage
from dialogbench.runner.record import digest
from dialogbench.tracks.common import prompt_digest, render_message

MESSAGE_CHARS = 800

DETECT_SYSTEM = (
    "You help a conversational assistant decide when to look back through a long "
    "conversation it has been having with someone for weeks or months. You judge one "
    "message at a time. Answer with one JSON object and nothing else."
)

CONTEXT_TASK = (
    "Below are the last {n} messages of a long conversation, then a new message. Decide "
    "whether a good reply to the new message needs something from earlier in the "
    "conversation than the messages shown: a fact, an event, a name, a plan or a feeling "
    "that was mentioned before and that the shown messages do not contain. Most messages "
    "need nothing older; say yes only when a reply that ignored the older conversation "
    "would miss something the person expects to be remembered."
)

RETRIEVED_TASK = (
    "Below is a new message from a long conversation, then {n} earlier messages that a "
    "search of the conversation found for it. Decide whether a good reply to the new "
    "message needs what these earlier messages say. Search results often match words "
    "without mattering; say yes only when a reply that ignored them would miss something "
    "the person expects to be remembered."
)

NO_MESSAGES = "(none: nothing was said before this message)"

MEMORY_TASK = (
    "Below is a new message from a long conversation, then what a memory system recalled "
    "for it: {n} earlier messages and {k} notes. Decide whether a good reply to the new "
    "message needs what these memories say. Recalled memories often match words without "
    "mattering; say yes only when a reply that ignored them would miss something the "
    "person expects to be remembered."
)

NOTES_HEADING = "notes"
"""The tag around the memory system's text memories (one per line, as a list)."""

ANSWER_FORMAT = (
    'Reply with {"needs_memory": true or false, "likelihood": N}, where N is an integer '
    "from 0 (a good reply certainly needs nothing older) to 10 (it certainly does)."
)


class MemoryNeed(BaseModel):
    """A model detector's answer."""

    needs_memory: bool
    likelihood: int = Field(ge=0, le=10, description="0 = certainly not, 10 = certainly")


PROMPT_SHA256 = prompt_digest(
    globals(),
    "MESSAGE_CHARS DETECT_SYSTEM CONTEXT_TASK RETRIEVED_TASK NO_MESSAGES ANSWER_FORMAT",
    schema=MemoryNeed.model_json_schema(),
)
MEMORY_PROMPT_SHA256 = digest(
    {"MEMORY_TASK": MEMORY_TASK, "NOTES_HEADING": NOTES_HEADING, "base": PROMPT_SHA256}
)


def render(message: Message) -> str:
    """One message as shown: date (when known), speaker and text, cut to `MESSAGE_CHARS`."""
    return render_message(message, MESSAGE_CHARS)


def _block(tag: str, messages: Sequence[Message]) -> str:
    body = "\n".join(render(m) for m in messages) if messages else NO_MESSAGES
    return f"<{tag}>\n{body}\n</{tag}>"


def _ask(task: str, blocks: Sequence[str]) -> list[ChatMessage]:
    return [
        {"role": "system", "content": DETECT_SYSTEM},
        {"role": "user", "content": "\n\n".join([task, *blocks, ANSWER_FORMAT])},
    ]


def _new(probe: str, speaker: str | None) -> str:
    said = f"{speaker}: {probe.strip()}" if speaker else probe.strip()
    return f"<new_message>\n{said}\n</new_message>"


def context_messages(
    preceding: Sequence[Message], probe: str, speaker: str | None
) -> list[ChatMessage]:
    """The model-context detector's prompt: the preceding messages, then the probe.

    `speaker` is None for an authored question, which is shown without a name."""
    task = CONTEXT_TASK.format(n=len(preceding))
    return _ask(task, [_block("last_messages", preceding), _new(probe, speaker)])


def retrieved_messages(
    found: Sequence[Message], probe: str, speaker: str | None
) -> list[ChatMessage]:
    """The model-retrieved detector's prompt: the probe, then what the search found."""
    task = RETRIEVED_TASK.format(n=len(found))
    return _ask(task, [_new(probe, speaker), _block("search_results", found)])


def memory_messages(
    found: Sequence[Message], notes: Sequence[str], probe: str, speaker: str | None
) -> list[ChatMessage]:
    """The model-memory detector's prompt: the probe, then the recalled messages (in
    conversation order) and the recalled notes (in the order recalled)."""
    task = MEMORY_TASK.format(n=len(found), k=len(notes))
    listed = "\n".join("- " + " ".join(n.split()) for n in notes)
    blocks = [_new(probe, speaker), _block("recalled_messages", found)]
    if notes:
        blocks.append(f"<{NOTES_HEADING}>\n{listed}\n</{NOTES_HEADING}>")
    return _ask(task, blocks)
