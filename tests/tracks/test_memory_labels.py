"""tracks/realcompanion/memory.py: required references, the paper's dependent items and cold
opens, each against a hand count."""

from __future__ import annotations

from dialogbench.data.model import ChatItem, Message, Subject
from dialogbench.tracks.realcompanion.memory import (
    cold_open,
    labels_of,
    memory_labels,
    session_openers,
)


def _item(refs: list[str], **labels: object) -> ChatItem:
    return ChatItem(probe_id="p", reference_ids=refs, **labels)  # type: ignore[arg-type]


def test_required_references_are_the_far_ones_of_a_memory_item() -> None:
    # probe at 40; references 1, 12 and 30 back
    lab = memory_labels(_item(["a", "b", "c"], needs_memory=True), 40, [39, 28, 10])
    assert (lab.nearest, lab.furthest) == (1, 30)  # every reference
    assert lab.required == (12, 30) and lab.required_nearest == 12  # 1 back is no demand
    near = memory_labels(_item(["a", "b"], needs_memory=False), 40, [39, 35])
    assert near.required == (1, 5)  # an item needing no memory: all of them
    assert memory_labels(_item([], needs_memory=False), 40, []).required_nearest is None


def test_the_papers_dependent_items_reach_past_the_last_three() -> None:
    def dep(back: list[int], dependent: bool) -> bool:
        lab = memory_labels(
            _item(["x"] * len(back), dependent=dependent), 50, [50 - b for b in back]
        )
        return lab.depends_past_last_three

    assert not dep([1], True) and not dep([1, 3], True)  # C1 shows them all
    assert dep([1, 4], True) and dep([20], True)
    assert not dep([20], False) and not dep([], True)


def test_cold_opens_need_no_memory_and_open_a_session() -> None:
    assert cold_open(False, "abstention", False) and cold_open(False, "proportional", True)
    assert not cold_open(True, "abstention", True)  # a positive, not a cold open
    assert not cold_open(False, "proportional", False)
    msgs = [
        Message(id=f"m{i}", speaker="P" if i % 2 == 0 else "b",
                role="user" if i % 2 == 0 else "assistant", text="x", position=i,
                session="s1" if i < 4 else "s2")
        for i in range(8)
    ]  # fmt: skip
    subject = Subject(id="s", messages=msgs, chat_items=[ChatItem(probe_id="m4")])
    assert session_openers(subject) == [0, 4]
    assert labels_of(subject)["m4"].required == ()
