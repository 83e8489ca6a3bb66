"""The memory-system protocol: what a memory layer must do to be measured here.

A memory system ingests a subject's messages as they arrive and, asked a query, recalls
memories. A memory is either a message id (scorable against the gold evidence as it is) or a
free text (a fact, a summary, a graph edge) with the message ids it cites when it knows them.

    class MyMemory:
        name = "my-memory"
        def ingest(self, subject: str, messages: Sequence[Message]) -> None: ...  # or a SystemCost
        def recall(self, subject: str, query: Query, budget: Budget) -> Recall: ...

Optional methods, used when present: `wait_until_indexed(subject)` (called before each
recall that follows an ingest, for systems that index in the background), `reset(subject)`
(called before a subject is replayed, so a rerun starts clean), `dump(subject)` (every
stored memory, for inspection) and, for stateless systems, `recall_batch(subject, queries,
budget)` (many queries in one call).

The harness (`memory/harness.py`) guarantees no future leakage: it feeds a subject's
messages in time order up to each query and asks at that point, queries in time order. A
system that sets `stateless = True` keeps nothing between calls that the query's `cutoff`
does not mask, so it may be given the whole history at once and must itself honour
`Query.cutoff` (the built-ins do, by the same masking the retrieval track uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from dialogbench.data.model import Message

QueryKind = Literal["chat", "question"]


@dataclass(frozen=True)
class Query:
    """What a memory system is asked at one point of a subject's conversation."""

    id: str
    """The probe's id (a chat item's probe message, or a question)."""
    subject_id: str
    text: str
    """The message the person sent, or the question."""
    kind: QueryKind
    cutoff: int
    """Only messages at positions below this were shown; stateless systems must mask the rest
    by `Message.position` (under an ingestion window they hold only some of the messages)."""
    speakers: tuple[str, ...] = ()
    """Whose messages the query is about (the probe's person, or the people a question names)."""
    asked_at: datetime | None = None


@dataclass(frozen=True)
class Budget:
    """How much a recall may return: at most `k` memories and at most `tokens` tokens of
    memory text (counted by the run's token counter: `memory/costs.py`); None: no limit.

    The harness enforces both: memories past either limit are cut, best first kept."""

    k: int | None = 10
    tokens: int | None = None


@dataclass(frozen=True)
class Memory:
    """One recalled memory: a message id, or a free text with the ids it cites."""

    message_id: str | None = None
    text: str | None = None
    cites: tuple[str, ...] = ()
    """Message ids a text memory was drawn from, when the system knows them."""
    score: float | None = None

    def __post_init__(self) -> None:
        if (self.message_id is None) == (self.text is None):
            raise ValueError("a Memory holds exactly one of message_id or text")

    @property
    def ids(self) -> tuple[str, ...]:
        """The message ids this memory stands for: its own id, or the ids it cites."""
        return (self.message_id,) if self.message_id is not None else self.cites


@dataclass(frozen=True)
class SystemCost:
    """What the memory system itself spent on one call, when it reports it."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: SystemCost) -> SystemCost:
        return SystemCost(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class Recall:
    """What one recall returned, best first, and what it cost the system (None: not reported)."""

    memories: tuple[Memory, ...] = ()
    cost: SystemCost | None = None


@runtime_checkable
class MemorySystem(Protocol):
    """The protocol every memory system implements (see the module docstring)."""

    name: str

    def ingest(self, subject: str, messages: Sequence[Message]) -> SystemCost | None:
        """Store `messages` (the next ones of `subject`'s conversation, in time order); return
        what storing them cost the system (`SystemCost`) when it knows, else None."""
        ...

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        """Memories for `query` from what `subject` has ingested, best first."""
        ...


@runtime_checkable
class Indexing(Protocol):
    """A system that indexes in the background: the harness waits before recalling."""

    def wait_until_indexed(self, subject: str) -> None: ...


@runtime_checkable
class Resettable(Protocol):
    """A system that can forget a subject (called before the subject is replayed)."""

    def reset(self, subject: str) -> None: ...


@runtime_checkable
class Dumpable(Protocol):
    """A system that can list every memory it holds for a subject."""

    def dump(self, subject: str) -> list[Memory]: ...


@runtime_checkable
class BatchRecall(Protocol):
    """A stateless system that answers many queries of one subject in one call."""

    def recall_batch(
        self, subject: str, queries: Sequence[Query], budget: Budget
    ) -> list[Recall]: ...


def is_stateless(system: object) -> bool:
    """Whether `system` declares itself stateless (`stateless = True`)."""
    return bool(getattr(system, "stateless", False))


@dataclass
class Recalled:
    """One query's recall as the harness saw it: the memories, timing and validity."""

    query: Query
    memories: tuple[Memory, ...]
    latency_s: float
    """Wall time of this recall (for a batch recall: the batch's time over its queries)."""
    cost: SystemCost | None = None
    invalid_ids: tuple[str, ...] = ()
    """Ids the system returned that are not messages before the query (dropped, counted)."""
    positions: tuple[int, ...] = field(default_factory=tuple)
    """Positions of the valid message-id memories, best first, duplicates removed."""
    cited_positions: tuple[int, ...] = field(default_factory=tuple)
    """Positions cited by text memories, in order of first citation, duplicates removed."""
    ingested: int = 0
    """Messages handed to `ingest` just before this recall (for a stateless system, the
    whole history goes with the first query asked)."""
    ingest_s: float = 0.0
    """Wall time of that ingest (and `wait_until_indexed`)."""
    context_tokens: int = 0
    """Tokens of the kept memories' text (`costs.memory_text`, the replay's token counter)."""
    cut: int = 0
    """Memories the system returned that the budget left out (past `k`, or past `tokens`)."""

    @property
    def id_memories(self) -> Sequence[Memory]:
        return [m for m in self.memories if m.message_id is not None]

    @property
    def text_memories(self) -> Sequence[Memory]:
        return [m for m in self.memories if m.text is not None]
