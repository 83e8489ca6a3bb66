"""Memory-system plug-ins for the track tests (loaded by `--memory module:Class`).

`Notes` is a stateful text memory: it keeps a note per ingested message and recalls the
notes of the last two messages it was given, newest first, citing them. It checks the
harness's promise: it is never given a message at or after the query's cutoff.
`Flaky` fails on the subjects named in its class attribute `fail_on`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from dialogbench.data.model import Message
from dialogbench.memory import Budget, Memory, Query, Recall

NOTE = "noted: {text}"


class Notes:
    """Two notes per recall: the last two messages ingested, newest first."""

    name = "notes"

    def __init__(self) -> None:
        self.held: dict[str, list[Message]] = {}

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        self.held.setdefault(subject, []).extend(messages)

    def reset(self, subject: str) -> None:
        self.held.pop(subject, None)

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        held = self.held.get(subject, [])
        future = [m.id for m in held if m.position >= query.cutoff]
        if future:
            raise AssertionError(f"shown the future of {query.id}: {future}")
        last = held[-2:][::-1]
        return Recall(tuple(Memory(text=NOTE.format(text=m.text), cites=(m.id,)) for m in last))


class Flaky(Notes):
    """`Notes` that fails on the subjects in `fail_on`."""

    name = "flaky"
    fail_on: ClassVar[set[str]] = set()

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        if subject in self.fail_on:
            raise ConnectionError(f"the memory service is down for {subject}")
        return super().recall(subject, query, budget)


NOTES_SPEC = f"{Notes.__module__}:Notes"
FLAKY_SPEC = f"{Flaky.__module__}:Flaky"
