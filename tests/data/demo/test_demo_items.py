"""Awareness items from labelled dialogues: gold per task, seeded targets, ids, options."""

from __future__ import annotations

from dialogbench.data.demo.items import awareness_items, persona_options, render_transcript
from dialogbench.data.demo.model import (
    DemoDialogue,
    Epilogue,
    Persona,
    Scene,
    Stance,
    Strategy,
    Utterance,
    UtteranceLabels,
)


def _dialogue(dialogue_id: str = "d1", labelled: bool = True) -> DemoDialogue:
    labels = UtteranceLabels(sentiment="positive", emotion="happy") if labelled else None
    return DemoDialogue(
        id=dialogue_id,
        lang="en",
        scene=Scene(location="park", familiarity=6, medium="face-to-face"),
        participants=(
            Persona(name="Ana", gender="female", big_five={"openness": "high"}),
            Persona(name="Bo", age="youth"),
        ),
        goals=("Borrow the bike", None),
        utterances=[
            Utterance(id="u0", speaker="Ana", text="Can I borrow your bike?", labels=labels),
            Utterance(id="u1", speaker="Bo", text="Sure, bring it back by six."),
            Utterance(
                id="u2",
                speaker="Ana",
                text="Thanks, you are the best!",
                labels=UtteranceLabels(
                    sentiment="positive",
                    stance=[Stance(aspect="Bo", viewpoint="generous")],
                    strategy=Strategy(description="praise"),
                ),
            ),
            Utterance(id="u3", speaker="Bo", text="Ha, no problem."),
        ],
        epilogue=Epilogue(
            goal_completion=8.6,
            completion_reason="Ana gets the bike.",
            summaries={"Ana": "asks", "Bo": "lends"},
            workflow=["ask", "agree"],
        ),
    )


def test_render_transcript_one_line_per_utterance() -> None:
    assert render_transcript(_dialogue()).splitlines() == [
        "Ana: Can I borrow your bike?",
        "Bo: Sure, bring it back by six.",
        "Ana: Thanks, you are the best!",
        "Bo: Ha, no problem.",
    ]


def test_gold_for_each_task() -> None:
    items = {i.task: i for i in awareness_items([_dialogue()])}
    assert [i.id for i in items.values()] == ["d1:goal", "d1:persona", "d1:scene", "d1:utterance"]
    assert items["goal"].gold == {
        "goal1": "Borrow the bike",
        "goal_completion": 9,
        "reason": "Ana gets the bike.",
    }
    assert items["persona"].gold == {
        "participant1": {"name": "Ana", "gender": "female", "big_five": {"openness": "high"}},
        "participant2": {"name": "Bo", "age": "youth"},
    }
    assert items["scene"].gold == {
        "familiarity": 6,
        "talkway": "face-to-face",
        "location": "park",
        "workflow": ["ask", "agree"],
        "summary": ["asks", "lends"],
    }
    utterance = items["utterance"]
    assert utterance.target in (0, 2)
    assert utterance.transcript == render_transcript(_dialogue())
    line = utterance.transcript.splitlines()[utterance.target or 0]
    assert line == f"{utterance.gold['person']}: {utterance.gold['content']}"


def test_target_is_seeded_and_only_labelled() -> None:
    dialogues = [_dialogue(f"d{i}") for i in range(30)]
    first = [i.target for i in awareness_items(dialogues, tasks=("utterance",), seed=1)]
    again = [i.target for i in awareness_items(dialogues[::-1], tasks=("utterance",), seed=1)]
    assert first == again[::-1]  # per dialogue, not per position
    other = [i.target for i in awareness_items(dialogues, tasks=("utterance",), seed=2)]
    assert first != other
    assert set(first) <= {0, 2}
    only = awareness_items([_dialogue(labelled=False)], tasks=("utterance",))
    assert only[0].target == 2
    assert only[0].gold["strategy"] == {"description": "praise"}
    assert only[0].gold["stance"] == [{"aspect": "Bo", "viewpoint": "generous"}]


def test_no_item_without_gold() -> None:
    bare = DemoDialogue(
        id="bare",
        lang="zh",
        participants=(Persona(name="甲"), Persona(name="乙")),
        utterances=[Utterance(id="0", speaker="甲", text="你好")],
    )
    assert awareness_items([bare]) == []


def test_options_kept_only_for_gold_paths() -> None:
    options = {
        "sentiment": ["positive", "negative", "neutral"],
        "emotion": ["happy", "sad"],
        **persona_options(gender=("male", "female"), age=("youth",), big_five=("high", "low")),
    }
    items = {i.task: i for i in awareness_items([_dialogue()], options=options)}
    assert set(items["persona"].options) == {
        "participant1.gender",
        "participant1.big_five.openness",
        "participant2.age",
    }
    assert items["goal"].options == {}
    assert "sentiment" in items["utterance"].options
