""" "Needs memory", in one place: what each chat item's labels say about its memory demand.

Every RealCompanion track that splits probes by memory need reads it from here. The item's
own verified labels decide (`ChatItem.memory_needed`): the *recorded* reading (a verified
reference lies outside the recent thread of RECENT_WINDOW messages) and the *strict* reading
(and the reference reply depends on it). An item without labels falls back to its
references: it needs memory when the furthest lies more than RECENT_WINDOW messages back.

Distances count messages back from the probe: the message just before it is 1 back.
References at or after the probe are ignored (a loader may have let one through).

An item is *dependent* in the paper's sense (its "167 items whose reference reply depends
on the recorded messages", about a tenth of them) when its reference reply depends on the
recorded messages (`dependent`) and one of them lies beyond the last LAST_THREE messages:
what the recorded messages add to the last three (the chat track's C1). An item whose
every reference is among the last three depends on nothing C1 lacks; our reading of the
paper, which does not spell it out (`depends_past_last_three`).

The *required* references are the paper's "required messages": for an item that needs
memory (recorded reading), the ones that make it need memory, outside the recent thread (a
reference inside it is no memory demand); for any other item, all of them. "How far back
the required message sits" and "does a window find the required message" read these.
"""

from __future__ import annotations

from dataclasses import dataclass

from dialogbench.data.model import RECENT_WINDOW, ChatItem, Reading, Subject

READINGS: tuple[Reading, ...] = ("recorded", "strict")
LAST_THREE = 3
"""The last messages before the probe that C1 shows."""
READING_HELP = (
    "which reading of 'needs memory': recorded (a verified reference outside the recent "
    "thread) or strict (and the reference reply depends on it)"
)
__all__ = [
    "READINGS",
    "READING_HELP",
    "RECENT_WINDOW",
    "MemoryLabels",
    "cold_open",
    "labels_of",
    "memory_labels",
    "session_openers",
]


@dataclass(frozen=True)
class MemoryLabels:
    """One chat item's memory demand under both readings, and where its references sit."""

    recorded: bool
    strict: bool
    dependent: bool
    """The reference reply depends on the recorded messages (false when unlabelled)."""
    locus: str | None
    nearest: int | None
    """How many messages back the nearest reference sits (None: no reference before it)."""
    furthest: int | None
    """How many messages back the furthest reference sits."""
    required: tuple[int, ...] = ()
    """How many messages back each required reference sits, nearest first."""

    @property
    def depends_past_last_three(self) -> bool:
        """Dependent, on a reference beyond the last LAST_THREE messages (the paper's
        dependent items)."""
        return self.dependent and self.furthest is not None and self.furthest > LAST_THREE

    @property
    def required_nearest(self) -> int | None:
        """The nearest required reference (None: no reference)."""
        return self.required[0] if self.required else None

    @property
    def required_furthest(self) -> int | None:
        """The furthest required reference."""
        return self.required[-1] if self.required else None

    def needs(self, reading: Reading) -> bool:
        """Whether the item needs memory under `reading`."""
        return self.recorded if reading == "recorded" else self.strict

    def fields(self) -> dict[str, object]:
        """The labels as row fields (items.jsonl)."""
        return {
            "needs_memory": self.recorded,
            "needs_memory_strict": self.strict,
            "dependent": self.dependent,
            "depends_past_last_three": self.depends_past_last_three,
            "locus": self.locus,
        }


def memory_labels(
    item: ChatItem, probe_position: int, reference_positions: list[int]
) -> MemoryLabels:
    """The labels of `item`, whose probe sits at `probe_position` and whose references at
    `reference_positions` (any order; those at or after the probe are ignored)."""
    back = sorted(probe_position - r for r in reference_positions if r < probe_position)
    nearest, furthest = (back[0], back[-1]) if back else (None, None)
    recorded = item.memory_needed("recorded", furthest)
    far = [d for d in back if d > RECENT_WINDOW]
    return MemoryLabels(
        recorded=recorded,
        strict=item.memory_needed("strict", furthest),
        dependent=bool(item.dependent),
        locus=item.locus,
        nearest=nearest,
        furthest=furthest,
        required=tuple(far if recorded and far else back),
    )


def session_openers(subject: Subject) -> list[int]:
    """Positions of the first user message of each session (of the conversation, when
    messages carry no session)."""
    seen: set[str | None] = set()
    out = []
    for m in subject.messages:
        if m.role == "user" and m.session not in seen:
            seen.add(m.session)
            out.append(m.position)
    return out


def cold_open(needs: bool, stratum: str, opener: bool) -> bool:
    """A *cold open*: a probe that needs no memory and opens a session, an item of the
    `abstention` stratum or the person's first message of a session (`session_openers`).
    The chat track's misfire and the detection track's negatives read the same items."""
    return not needs and (stratum == "abstention" or opener)


def labels_of(subject: Subject) -> dict[str, MemoryLabels]:
    """Probe id -> labels, for every chat item of `subject`."""
    pos = subject.position_of()
    return {
        item.probe_id: memory_labels(
            item, pos[item.probe_id], [pos[r] for r in item.reference_ids if r in pos]
        )
        for item in subject.chat_items
    }
