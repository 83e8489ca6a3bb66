"""Wording (our own) of the reconstruction track, the reply schema, and the prompts built from it.

The model answers with one JSON object, `Reconstruction`:

    {"profile": [{"field": ..., "statement": ...}, ...],
     "persona": [{"dimension": ..., "statement": ..., "hypothesis": false}, ...]}

a subset of the release format's `profile.json` claims and `persona.json` entries (the track
scores fields and statements; confidence, validity windows and evidence ids are left out of
the reply to keep it short enough for small models). When the history is split into chunks,
each chunk gets the same task with a note saying which part of the conversation it is.

Messages are shown one a line as `[id] date speaker: text`. `PROMPT_SHA256` digests every
constant here, so a change of wording starts a run afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from dialogbench.data.model import Message
from dialogbench.models.types import ChatMessage
from dialogbench.tracks.common import prompt_digest, render_message

RECON_SYSTEM = (
    "You read long conversations between a person and an AI companion and write down who "
    "the person is. You only record what the conversation supports. Answer with one JSON "
    "object and nothing else."
)

RECON_TASK = (
    "Below is {scope} between {person} and a companion. Write {person}'s profile and "
    "persona.\n"
    "- profile: facts {person} stated about their own life, one claim each, as "
    '{{"field": ..., "statement": ...}}. Use short lower-case fields such as occupation, '
    "family, pets, hobbies, health, friends, home, education, name.\n"
    "- persona: how {person} thinks, feels and decides, one entry each, as "
    '{{"dimension": ..., "statement": ..., "hypothesis": ...}}. Use dimensions such as '
    "personality, values, coping style, anxieties, humour, speaking style, decision making; "
    "set hypothesis to true for a working guess rather than something shown repeatedly.\n"
    "Write each statement as one plain sentence about {person}. Leave out the companion's "
    "own views and anything {person} did not say or show.\n"
    "Optionally give each claim a confidence from 0 to 1, valid_from / valid_to dates when "
    "it held only for a while, and evidence_ids: the [id]s of the messages that show it; "
    "give each persona entry its grounds the same way."
)

WHOLE_SCOPE = "the whole conversation"
CHUNK_SCOPE = "part {part} of {parts} of a conversation (the parts are read separately)"

ANSWER_FORMAT = (
    'Reply with {"profile": [...], "persona": [...]}. Either list may be empty when the '
    "text shows nothing of that kind."
)

MESSAGE_CHARS = 2000
"""Longest message text shown; longer ones are cut (the chunker may cut further)."""


class ClaimReply(BaseModel):
    """One profile claim as the model writes it (the release format's claim fields)."""

    field: str = Field(description="what the claim is about, e.g. occupation")
    statement: str
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    valid_from: str | None = Field(default=None, description="date the claim began to hold")
    valid_to: str | None = Field(default=None, description="date it stopped holding")
    evidence_ids: list[str] = Field(default_factory=list, description="ids of messages")


class PersonaReply(BaseModel):
    """One persona entry as the model writes it."""

    dimension: str = Field(description="e.g. values, coping style")
    statement: str
    hypothesis: bool = False
    grounds: list[str] = Field(default_factory=list, description="ids of messages")


class Reconstruction(BaseModel):
    """The model's profile and persona of one subject (or of one chunk of its history)."""

    profile: list[ClaimReply] = Field(default_factory=list)
    persona: list[PersonaReply] = Field(default_factory=list)


MAX_IDS, MAX_LABEL, MAX_STATEMENT = 5, 40, 240
"""Per record, when a reply is bounded: ids, characters of a field name, of a statement."""


def reply_model(max_claims: int | None, max_persona: int | None) -> type[Reconstruction]:
    """`Reconstruction`, with its lists bounded when limits are given.

    Bounds (on the lists, and then on each record's ids too) let grammar-constrained
    decoding (GGUF models) close the JSON within the reply budget; a model that writes more
    than the bound gets a corrective message.
    """
    if max_claims is None and max_persona is None:
        return Reconstruction
    ids: Any = (list[str], Field(default_factory=list, max_length=MAX_IDS))
    label: Any = (str, Field(max_length=MAX_LABEL))
    text: Any = (str, Field(max_length=MAX_STATEMENT))
    claim: type[ClaimReply] = create_model(
        "ClaimReply", __base__=ClaimReply, field=label, statement=text, evidence_ids=ids
    )
    entry: type[PersonaReply] = create_model(
        "PersonaReply", __base__=PersonaReply, dimension=label, statement=text, grounds=ids
    )
    bounded: type[Reconstruction] = create_model(
        "Reconstruction",
        __base__=Reconstruction,
        profile=(list[claim], Field(default_factory=list, max_length=max_claims)),  # type: ignore[valid-type]
        persona=(list[entry], Field(default_factory=list, max_length=max_persona)),  # type: ignore[valid-type]
    )
    return bounded


PROMPT_SHA256 = prompt_digest(
    globals(),
    "RECON_SYSTEM RECON_TASK WHOLE_SCOPE CHUNK_SCOPE ANSWER_FORMAT MESSAGE_CHARS",
    schema=Reconstruction.model_json_schema(),
)


def render(message: Message, text: str | None = None) -> str:
    """One message as shown: `[id] date speaker: text` (`text` overrides a cut message)."""
    return render_message(message, MESSAGE_CHARS, with_id=True, text=text)


def task_text(person: str, part: int, parts: int) -> str:
    """The instructions for the whole history (`parts` == 1) or for part `part` (1-based)."""
    scope = WHOLE_SCOPE if parts == 1 else CHUNK_SCOPE.format(part=part, parts=parts)
    return RECON_TASK.format(scope=scope, person=person)


def reconstruction_messages(
    person: str, lines: Sequence[str], part: int = 1, parts: int = 1
) -> list[ChatMessage]:
    """The prompt for rendered message `lines` (the whole history or one chunk)."""
    body = "\n".join(lines)
    user = "\n\n".join(
        [task_text(person, part, parts), f"<conversation>\n{body}\n</conversation>", ANSWER_FORMAT]
    )
    return [{"role": "system", "content": RECON_SYSTEM}, {"role": "user", "content": user}]


# -- the judge's claim matching (`--matcher judge`) ------------------------------------------

MATCH_SYSTEM = (
    "You compare two notes written about the same person and say whether they record the "
    "same fact. Answer with one JSON object and nothing else."
)

MATCH_TASK = (
    "Two notes about one person, each a heading and a statement:\n"
    "A. {field_a}: {statement_a}\n"
    "B. {field_b}: {statement_b}\n\n"
    "Which one holds?\n"
    '- "same": both record one fact about the person, however it is worded: other words, '
    "another language, another unit or way of writing a number, an everyday name for the "
    "same thing, a heading named differently. One note may carry a detail the other lacks "
    "when nothing in them conflicts.\n"
    '- "contradicts": both are about one thing, and they cannot both be true (different '
    "values, names or numbers; one says it is so and the other that it is not).\n"
    '- "different": they record different facts, though the topic may be close: a plan is '
    "not a fact, a past state is not a present one, liking or knowing about something is "
    "not doing it, one relative is not another.\n"
    "Use what is common knowledge to see that two wordings name the same thing."
)

MATCH_FORMAT = (
    'Reply with {"reason": "<one short sentence>", "verdict": "same" | "contradicts" | '
    '"different"}.'
)

VERDICTS = ("same", "contradicts", "different")


class ClaimVerdict(BaseModel):
    """The judge's reading of two records: do they state the same claim?"""

    reason: str = Field(default="", max_length=400)
    verdict: Literal["same", "contradicts", "different"]


MATCH_PROMPT_SHA256 = prompt_digest(
    globals(),
    "MATCH_SYSTEM MATCH_TASK MATCH_FORMAT",
    schema=ClaimVerdict.model_json_schema(),
)


def match_messages(a: tuple[str, str], b: tuple[str, str]) -> list[ChatMessage]:
    """The judge's prompt for records `a` and `b` ((field, statement) each)."""
    task = MATCH_TASK.format(
        field_a=a[0].strip() or "(no heading)",
        statement_a=a[1].strip(),
        field_b=b[0].strip() or "(no heading)",
        statement_b=b[1].strip(),
    )
    return [
        {"role": "system", "content": MATCH_SYSTEM},
        {"role": "user", "content": f"{task}\n\n{MATCH_FORMAT}"},
    ]
