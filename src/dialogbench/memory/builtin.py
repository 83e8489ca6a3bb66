"""Built-in memory systems: any retriever as a stateless memory, and full context.

bm25, recency, recency-user, random, dense, hybrid
    the retriever of that name (`retrieval/`), returning message ids best first; stateless:
    it keeps the messages and masks each query's future itself
full-context
    every message before the query, newest first, until the budget is spent (the harness
    cuts at `Budget.tokens` and `Budget.k`); the figure a memory layer must beat
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from dialogbench.data.model import Message, Subject
from dialogbench.memory.base import Budget, Memory, Query, Recall
from dialogbench.retrieval.base import BatchRetriever, Probe


class RetrieverMemory:
    """A `BatchRetriever` as a stateless memory system (one ranking call per subject)."""

    stateless = True

    def __init__(self, retriever: BatchRetriever, name: str | None = None) -> None:
        self.retriever = retriever
        self.name = name or retriever.name
        self._messages: dict[str, list[Message]] = {}

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        """Keep the messages; a retriever with `prepare(subject)` (dense, hybrid: embed the
        messages) does its indexing here, so it is charged to ingest, not to recall."""
        held = self._messages.setdefault(subject, [])
        held.extend(messages)
        prepare = getattr(self.retriever, "prepare", None)
        if callable(prepare):
            prepare(Subject(id=subject, messages=held))

    def reset(self, subject: str) -> None:
        self._messages.pop(subject, None)

    def dump(self, subject: str) -> list[Memory]:
        return [Memory(message_id=m.id) for m in self._messages.get(subject, [])]

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        return self.recall_batch(subject, [query], budget)[0]

    def recall_batch(self, subject: str, queries: Sequence[Query], budget: Budget) -> list[Recall]:
        messages = self._messages.get(subject, [])
        if not queries:
            return []
        held = Subject(id=subject, messages=messages)
        at = [m.position for m in messages]  # all of them, or a window's (`memory.replay`)
        probes = [
            Probe(q.id, subject, q.kind, q.text, bisect_left(at, q.cutoff), (), q.speakers)
            for q in queries
        ]
        depth = budget.k if budget.k is not None else max(1, max(p.cutoff for p in probes))
        top = self.retriever.rank(held, probes, depth).top
        return [
            Recall(tuple(Memory(message_id=messages[int(t)].id) for t in row if t >= 0))
            for row in np.asarray(top)
        ]


class FullContextMemory:
    """Every message before the query, newest first; the harness cuts it to the budget."""

    name = "full-context"
    stateless = True

    def __init__(self) -> None:
        self._messages: dict[str, list[Message]] = {}

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        self._messages.setdefault(subject, []).extend(messages)

    def reset(self, subject: str) -> None:
        self._messages.pop(subject, None)

    def dump(self, subject: str) -> list[Memory]:
        return [Memory(message_id=m.id) for m in self._messages.get(subject, [])]

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        held = self._messages.get(subject, [])
        history = held[: bisect_left([m.position for m in held], query.cutoff)]
        if budget.k is not None:
            history = history[-budget.k :] if budget.k else []
        return Recall(tuple(Memory(message_id=m.id) for m in reversed(history)))
