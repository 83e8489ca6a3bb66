"""Wording (our own) of the privacy track's language-model attributor, its reply schema and
the prompt built from them.

The model sees N writers, each as a numbered block of messages from their own history
(`Writer 1` ... `Writer N`, in an order shuffled per trial so a number says nothing about
who it is), then an unattributed sample, and answers with one JSON object, `AuthorGuess`:

    {"writer": K}          K in 1..N: the writer who wrote the sample

Messages are shown as bare text, one a line, without names, dates or ids (those would name
the conversation rather than the writer), cut to `MESSAGE_CHARS` characters. Unlike the
stylometric attributor the model reads content as well as form, which is the point: it
measures what anonymised text still gives away. `PROMPT_SHA256` digests every constant
here, so a change of wording starts the model's trials afresh.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field, create_model

from dialogbench.models.types import ChatMessage
from dialogbench.tracks.common import prompt_digest

MESSAGE_CHARS = 300
"""Longest message text shown; longer ones are cut and end in `[...]`."""

ATTRIBUTE_SYSTEM = (
    "You compare pieces of writing and decide who wrote them. You judge from everything "
    "in the text: habits of spelling, punctuation and phrasing, topics, and the life the "
    "messages describe. Answer with one JSON object and nothing else."
)

ATTRIBUTE_TASK = (
    "Each of the {n} writers below is shown through some messages they sent in a chat "
    "with an AI companion. After them comes a sample of {k} message(s) that one of these "
    "writers sent in the same chat. Decide which writer sent the sample. Exactly one of "
    "them did."
)

WRITER_HEADING = "Writer {number}"

ANSWER_FORMAT = (
    'Reply with {{"writer": K}}, where K is the number (1 to {n}) of the writer who sent '
    "the sample."
)


class AuthorGuess(BaseModel):
    """The model's answer: which numbered writer sent the sample."""

    writer: int = Field(ge=1, description="the number of the writer who sent the sample")


def guess_model(n: int) -> type[AuthorGuess]:
    """`AuthorGuess` with `writer` bounded to 1..n (a number outside is unusable)."""
    bounded: type[AuthorGuess] = create_model(
        "AuthorGuess",
        __base__=AuthorGuess,
        writer=(int, Field(ge=1, le=n, description="the number of the writer who sent it")),
    )
    return bounded


PROMPT_SHA256 = prompt_digest(
    globals(),
    "MESSAGE_CHARS ATTRIBUTE_SYSTEM ATTRIBUTE_TASK WRITER_HEADING ANSWER_FORMAT",
    schema=AuthorGuess.model_json_schema(),
)


def shown(text: str) -> str:
    """One message as shown: on one line, cut to `MESSAGE_CHARS`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[:MESSAGE_CHARS].rstrip() + " [...]"


def _block(tag: str, texts: Sequence[str]) -> str:
    body = "\n".join(f"- {shown(t)}" for t in texts)
    return f"<{tag}>\n{body}\n</{tag}>"


def attribution_messages(
    writers: Sequence[Sequence[str]], sample: Sequence[str]
) -> list[ChatMessage]:
    """The prompt: each writer's messages (Writer 1 first), then the sample to attribute."""
    n = len(writers)
    blocks = [
        f"{WRITER_HEADING.format(number=i)}\n{_block('messages', texts)}"
        for i, texts in enumerate(writers, 1)
    ]
    user = "\n\n".join(
        [
            ATTRIBUTE_TASK.format(n=n, k=len(sample)),
            *blocks,
            f"The sample\n{_block('sample', sample)}",
            ANSWER_FORMAT.format(n=n),
        ]
    )
    return [{"role": "system", "content": ATTRIBUTE_SYSTEM}, {"role": "user", "content": user}]
