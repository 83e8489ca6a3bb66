"""Wording (our own) of the chat track: the reply prompt, its two framings, and the judge rubric.

The model under test sees one user message: the supplied messages (if any) under a heading,
then the person's new message. The heading is one template, `CONTEXT_HEADING`, whose only
variable part is the label of `FRAMINGS`: "turns" calls the same messages earlier turns of
this chat, "memories" calls them retrieved memories. Budget, heading layout, tags and order
(oldest first) do not change with the framing. A condition with no messages shows no block.

The judge scores every condition's reply to one probe in one blinded call (`CHAT_RUBRIC`):
`content_match` from 0 to 3 against the reference reply, and the flag
`uses_earlier_context`. The judge sees only the probe, so the flag asks whether the reply
draws on something the person did not say in that message.

A memory system's condition (`--memory`) shows what it recalled in the memories framing:
its message memories under the same heading as the other conditions' "Retrieved memories"
(oldest first), its text memories as a list of notes under `NOTES_HEADING` (in the order
recalled); nothing else changes.

`PROMPT_SHA256` digests every constant here, so a change of wording starts a run afresh;
`MEMORY_PROMPT_SHA256` digests the memory wording (recorded only in runs with `--memory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from dialogbench.data.model import Message
from dialogbench.judging.rubric import Dimension, Flag, Rubric
from dialogbench.models.types import ChatMessage
from dialogbench.runner.record import digest
from dialogbench.tracks.common import prompt_digest, render_message

Framing = Literal["turns", "memories"]

REPLY_SYSTEM = (
    "You are a warm, attentive companion in a chat you have been having with one person "
    "for weeks or months. Reply to their new message the way you would in the chat itself: "
    "a few natural sentences, in plain words, with no lists or headings."
)

FRAMINGS: dict[str, str] = {
    "turns": "Earlier turns from this chat",
    "memories": "Retrieved memories",
}
"""The label words of each framing; nothing else in the prompt depends on the framing."""

CONTEXT_HEADING = "{label}, oldest first:"

MESSAGE_CHARS = 800
"""Each message of the block is cut to this many characters (`render`)."""

NEW_MESSAGE_HEADING = "The person's new message:"

REPLY_TASK = "Write your reply to the new message."

CONTENT_MATCH = Dimension(
    name="content_match",
    low=0,
    high=3,
    criteria=(
        "How far the candidate says what the reference reply says. 0: unrelated to the "
        "reference, or contradicts it. 1: on the same topic, but misses what the reference "
        "actually says. 2: carries part of the reference's substance (a key fact, question or "
        "point) and misses or garbles the rest. 3: carries all of the reference's substance, "
        "in any wording."
    ),
)

USES_EARLIER_CONTEXT = Flag(
    name="uses_earlier_context",
    question=(
        "Does the candidate use something from before the person's message: a fact, event, "
        "name, plan or feeling that the message itself does not state?"
    ),
)

CHAT_RUBRIC = Rubric(
    name="chat-content-match",
    instructions=(
        "Several candidate replies to one message a person sent to a companion are shown. "
        "Compare each candidate with the reference reply, which was written knowing what the "
        "conversation had established; judge substance, not style or length."
    ),
    dimensions=(CONTENT_MATCH,),
    compares_to="reference",
    flags=(USES_EARLIER_CONTEXT,),
)


NOTES_HEADING = "Notes from memory, most relevant first:"


PROMPT_SHA256 = prompt_digest(
    globals(),
    "MESSAGE_CHARS REPLY_SYSTEM FRAMINGS CONTEXT_HEADING NEW_MESSAGE_HEADING REPLY_TASK",
    rubric=repr(CHAT_RUBRIC),
)
MEMORY_PROMPT_SHA256 = digest({"NOTES_HEADING": NOTES_HEADING, "base": PROMPT_SHA256})


def render(message: Message) -> str:
    """One message as shown: date (when known), speaker and text, cut to `MESSAGE_CHARS`."""
    return render_message(message, MESSAGE_CHARS)


def context_block(messages: Sequence[Message], framing: Framing) -> str:
    """The supplied messages under the framing's heading, oldest first; "" when none."""
    if not messages:
        return ""
    ordered = sorted(messages, key=lambda m: m.position)
    body = "\n".join(render(m) for m in ordered)
    heading = CONTEXT_HEADING.format(label=FRAMINGS[framing])
    return f"{heading}\n<context>\n{body}\n</context>"


def reply_messages(
    supplied: Sequence[Message], probe: Message, framing: Framing
) -> list[ChatMessage]:
    """The reply prompt: the supplied messages (if any), then the probe."""
    new = f"{NEW_MESSAGE_HEADING}\n<new_message>\n{render(probe)}\n</new_message>"
    parts = [p for p in (context_block(supplied, framing), new, REPLY_TASK) if p]
    return [
        {"role": "system", "content": REPLY_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def notes_block(notes: Sequence[str]) -> str:
    """Text memories as a list under `NOTES_HEADING`; "" when none."""
    if not notes:
        return ""
    body = "\n".join("- " + " ".join(n.split()) for n in notes)
    return f"{NOTES_HEADING}\n<notes>\n{body}\n</notes>"


def memory_reply_messages(
    messages: Sequence[Message], notes: Sequence[str], probe: Message
) -> list[ChatMessage]:
    """The reply prompt of a memory system's condition: its recalled messages (memories
    framing), its notes, then the probe."""
    new = f"{NEW_MESSAGE_HEADING}\n<new_message>\n{render(probe)}\n</new_message>"
    blocks = (context_block(messages, "memories"), notes_block(notes), new, REPLY_TASK)
    return [
        {"role": "system", "content": REPLY_SYSTEM},
        {"role": "user", "content": "\n\n".join(p for p in blocks if p)},
    ]


def judge_context(probe: Message) -> str:
    """What the judge sees of the conversation: the probe alone."""
    return render(probe)
