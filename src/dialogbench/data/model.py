"""The typed data model every loader produces and every track reads.

A `Dataset` holds `Subject`s. A subject is one person's record: the conversation
(`Message`s in order) and the four derived files of the release format: profile
claims, persona entries, chat items (probes with the messages a good reply may
draw on) and questions. Loaders fill in what their corpus has; tracks ask for
what they need and say which part is missing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant", "system"]
"""`user` is a person under study; `assistant` the companion or other party.

In corpora where both speakers are people (LoCoMo), both are `user`."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Message(_Record):
    """One message of a conversation."""

    id: str
    position: int = Field(ge=0, description="0-based index in the subject's conversation")
    speaker: str
    role: Role = "user"
    text: str
    timestamp: datetime | None = None
    session: str | None = None


class ProfileClaim(_Record):
    """Something the person stated about themselves, with its evidence."""

    field: str = Field(description="what the claim is about, e.g. 'occupation' or 'hobbies'")
    statement: str
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    evidence_ids: list[str] = Field(default_factory=list)


class PersonaEntry(_Record):
    """How the person thinks, feels or decides, with the grounds for saying so."""

    dimension: str
    statement: str
    grounds: list[str] = Field(default_factory=list, description="message ids")
    hypothesis: bool = Field(default=False, description="a named working hypothesis")


class TraceStage(_Record):
    """One stage of the staged derivation that produced a chat item."""

    stage: str
    output: str
    reads: list[str] = Field(default_factory=list, description="earlier stages this one read")


class ChatItem(_Record):
    """A probe (a message the person really sent) and what a correct reply may draw on."""

    probe_id: str
    stratum: str = Field(default="proportional", description="proportional | enriched | abstention")
    tier: str = Field(default="", description="the item's class under the derivation's rules")
    reference_ids: list[str] = Field(default_factory=list)
    reference_reply: str = ""
    trace: list[TraceStage] = Field(default_factory=list)


class Question(_Record):
    """An authored question about the subject, with evidence."""

    id: str
    category: str
    text: str
    answer: str | None = None
    evidence_ids: list[str] = Field(default_factory=list)
    answerable: bool = True
    after_id: str | None = Field(
        default=None,
        description="asked after this message; None means after the last message",
    )
    asked_at: datetime | None = Field(default=None, description="when the question is asked")


class Subject(_Record):
    """One person's record: the conversation and what was derived from it."""

    id: str
    messages: list[Message]
    profile: list[ProfileClaim] = Field(default_factory=list)
    persona: list[PersonaEntry] = Field(default_factory=list)
    chat_items: list[ChatItem] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)
    speakers: list[str] = Field(default_factory=list, description="people under study")

    def position_of(self) -> dict[str, int]:
        """Map message id -> position."""
        return {m.id: m.position for m in self.messages}


class Dataset(BaseModel):
    """A loaded corpus: subjects plus where they came from and what was repaired."""

    model_config = ConfigDict(extra="forbid")

    name: str
    subjects: list[Subject]
    sha256: str = Field(description="digest over the source files, in a fixed order")
    source: str = Field(description="path or built-in name it was loaded from")
    warnings: list[str] = Field(default_factory=list)
    licence: str | None = None
