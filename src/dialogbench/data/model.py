"""The typed data model every loader produces and every track reads.

A `Dataset` holds `Subject`s. A subject is one person's record: the conversation
(`Message`s in order) and the four derived files of the release format: profile
claims, persona entries, chat items (probes with the messages a good reply may
draw on) and questions. Loaders fill in what their corpus has; tracks ask for
what they need and say which part is missing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from dialogbench.data.safe_names import safe_name

Role = Literal["user", "assistant", "system"]
"""`user` is a person under study; `assistant` the companion or other party.

In corpora where both speakers are people (LoCoMo), both are `user`."""

MAX_ID = 256
"""The longest id (of a message, subject, question or stage) a record may hold."""
Stratum = Literal["proportional", "enriched", "abstention", "census"]
"""The three sampled strata of chat.jsonl, and `census`: the labels `census.jsonl` gives the
person's other messages (stages A to C of the derivation, no reference reply)."""
Locus = Literal["none", "recent", "session", "distant"]
"""Where an item's verified references sit: nowhere, within the recent thread (the last
RECENT_WINDOW messages), earlier in the probe's own session, or in an earlier session."""
Reading = Literal["recorded", "strict"]
"""Two readings of "this message needs memory": *recorded* (a verified reference lies outside the
recent thread) and *strict* (and the reference reply depends on it)."""

RECENT_WINDOW = 8
"""A reference at most this many messages before the probe is in the recent thread."""


def _utf8(text: str) -> str:
    """`text`, if it can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"holds a lone surrogate at character {e.start}, which cannot be written as UTF-8"
        ) from None
    return text


Text = Annotated[str, AfterValidator(_utf8)]
"""Free text: any string that can be written as UTF-8."""
Id = Annotated[str, Field(max_length=MAX_ID), AfterValidator(_utf8)]
"""An identifier, or a name used as one: at most MAX_ID characters of UTF-8-writable text."""
FolderId = Annotated[Id, AfterValidator(safe_name)]
"""An identifier that also names a folder (a subject's): one safe path component
(`data.safe_names`: no `/`, `\\`, `..`, control character, over-long name)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Message(_Record):
    """One message of a conversation."""

    id: Id
    position: int = Field(ge=0, description="0-based index in the subject's conversation")
    speaker: Text
    role: Role = "user"
    text: Text
    timestamp: datetime | None = None
    session: Id | None = None
    person: Id | None = Field(
        default=None,
        description="who the speaker is across subjects, where the data says (a person id); "
        "None: the speaker is known only within the subject",
    )


class ProfileClaim(_Record):
    """Something the person stated about themselves, with its evidence."""

    field: Id = Field(description="what the claim is about, e.g. 'occupation' or 'hobbies'")
    statement: Text
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    evidence_ids: list[Id] = Field(default_factory=list)

    @field_validator("valid_to")
    @classmethod
    def _window(cls, valid_to: datetime | None, info: ValidationInfo) -> datetime | None:
        valid_from = info.data.get("valid_from")
        if valid_from and valid_to and _later(valid_from, valid_to):
            raise ValueError(
                f"is before valid_from ({valid_from.isoformat()}); the validity window is empty"
            )
        return valid_to


class PersonaEntry(_Record):
    """How the person thinks, feels or decides, with the grounds for saying so."""

    dimension: Id
    statement: Text
    grounds: list[Id] = Field(default_factory=list, description="message ids")
    hypothesis: bool = Field(default=False, description="a named working hypothesis")
    name: Text | None = Field(
        default=None, description="the working hypothesis's name (e.g. 'avoids conflict at work')"
    )


class TraceStage(_Record):
    """One stage of the staged derivation that produced a chat item."""

    stage: Id
    output: Text
    reads: list[Id] = Field(default_factory=list, description="earlier stages this one read")


class ChatItem(_Record):
    """A probe (a message the person really sent) and what a correct reply may draw on."""

    probe_id: Id
    stratum: Stratum = "proportional"
    tier: Text = Field(default="", description="the item's class under the derivation's rules")
    reference_ids: list[Id] = Field(default_factory=list)
    reference_reply: Text = ""
    trace: list[TraceStage] = Field(default_factory=list)
    rule: Id | None = Field(default=None, description="the numbered rule that set the tier")
    locus: Locus | None = Field(default=None, description="where the verified references sit")
    needs_memory: bool | None = Field(
        default=None,
        description="recorded reading: a verified reference lies outside the recent thread",
    )
    needs_memory_strict: bool | None = Field(
        default=None, description="strict reading: memory is needed and the reply depends on it"
    )
    dependent: bool | None = Field(
        default=None, description="the reference reply depends on the recorded messages"
    )
    surface_tier: Text = Field(default="", description="the pre-verification surface signal's tier")
    supported: bool | None = Field(
        default=None, description="stage E: the reference reply is supported by its context"
    )

    @field_validator("needs_memory_strict")
    @classmethod
    def _strict_within_recorded(cls, strict: bool | None, info: ValidationInfo) -> bool | None:
        if strict and info.data.get("needs_memory") is False:
            raise ValueError(
                "is true while needs_memory is false; the strict reading implies the recorded one"
            )
        return strict

    def memory_needed(self, reading: Reading, distance: int | None) -> bool:
        """Whether this item needs memory under `reading`.

        The item's own labels decide when it has them; an unlabelled item falls back to its
        references: needed when the furthest lies more than RECENT_WINDOW messages back
        (`distance`, None for no references), and under the strict reading only when the
        item is also marked dependent.
        """
        recorded = self.needs_memory
        if recorded is None:
            recorded = distance is not None and distance > RECENT_WINDOW
        if reading == "recorded":
            return recorded
        if self.needs_memory_strict is not None:
            return self.needs_memory_strict
        return recorded and bool(self.dependent)

    @field_validator("trace")
    @classmethod
    def _reads_earlier_stages(cls, trace: list[TraceStage]) -> list[TraceStage]:
        earlier: set[str] = set()
        for i, stage in enumerate(trace):
            for name in stage.reads:
                if name not in earlier:
                    raise ValueError(
                        f"stage {i} ({stage.stage!r}) reads {name!r}, which is not an "
                        "earlier stage of this item"
                    )
            earlier.add(stage.stage)
        return trace


class Reread(_Record):
    """The re-reading of one person message under the verification (stage B) instruction:
    the earlier messages, outside the recent thread, it was verified to point at."""

    probe_id: Id
    needs_memory: bool = Field(
        description="a verified referent lies outside the recent thread (more than "
        "RECENT_WINDOW messages before the message)"
    )
    referent_ids: list[Id] = Field(default_factory=list, description="the verified referents")
    trace: list[TraceStage] = Field(default_factory=list)


class Question(_Record):
    """An authored question about the subject, with evidence."""

    id: Id
    category: Id
    text: Text
    answer: Text | None = None
    evidence_ids: list[Id] = Field(default_factory=list)
    answerable: bool = True
    after_id: Id | None = Field(
        default=None,
        description="asked after this message; None means after the last message",
    )
    asked_at: datetime | None = Field(default=None, description="when the question is asked")


class Subject(_Record):
    """One person's record: the conversation and what was derived from it."""

    id: FolderId
    messages: list[Message]
    profile: list[ProfileClaim] = Field(default_factory=list)
    persona: list[PersonaEntry] = Field(default_factory=list)
    chat_items: list[ChatItem] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)
    census: list[ChatItem] = Field(
        default_factory=list,
        description="census labels of person messages that are no chat item (stratum census)",
    )
    reread: list[Reread] = Field(
        default_factory=list, description="re-readings of person messages (reread.jsonl)"
    )
    speakers: list[Text] = Field(default_factory=list, description="people under study")

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


def _later(a: datetime, b: datetime) -> bool:
    """Whether `a` is after `b`; a naive and an aware time compare by their clock readings."""
    if (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    return a > b
