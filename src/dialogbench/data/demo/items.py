"""Element-awareness items built from labelled dialogues (the gold contract's shapes).

Each `DemoDialogue` gives at most one item per task, and only when the task has gold
beyond names and utterance text:

- goal: `goal1`, `goal2` (the participants' goals), `goal_completion` (the epilogue's
  0-10 score, rounded once to a whole number, halves up) and `reason`, whichever are known;
- persona: `participant1` / `participant2` with `name` and the labelled attributes
  (gender, age, big_five, education, occupation, culture, speaking_style, hobby);
- scene: topic, relationship, familiarity, talkway (the scene's medium), location, time,
  workflow and summary ([participant 1's, participant 2's]), whichever are known;
- utterance: one target chosen with a generator seeded by `seed` and the dialogue id
  among the utterances that carry labels; gold `person`, `content` and its labels.

Item ids are `<dialogue id>:<task>`. The transcript is the whole dialogue, one
`Name: text` line per utterance (for the utterance task too; `target` names the line).
`options` are the corpus's closed label sets (dotted gold paths) kept for the paths each
item's gold holds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dialogbench.data.demo.model import (
    TASKS,
    TRAITS,
    AwarenessItem,
    DemoDialogue,
    Persona,
    Task,
    Utterance,
    UtteranceLabels,
)

PARTICIPANTS = ("participant1", "participant2")


def render_transcript(dialogue: DemoDialogue) -> str:
    """The dialogue as text: one `Name: text` line per utterance, in order."""
    return "\n".join(f"{u.speaker}: {u.text}" for u in dialogue.utterances)


def persona_options(
    gender: Sequence[str] = (),
    age: Sequence[str] = (),
    big_five: Sequence[str] = (),
    **other: Sequence[str],
) -> dict[str, list[str]]:
    """Option paths for both participants: `participant1.gender`, `...big_five.openness`.

    `big_five` lists the levels (e.g. `("high", "low")`) offered for every trait; `other`
    adds any further closed person field (e.g. `education=[...]`).
    """
    fields: dict[str, Sequence[str]] = {"gender": gender, "age": age, **other}
    options: dict[str, list[str]] = {}
    for who in PARTICIPANTS:
        for name, labels in fields.items():
            if labels:
                options[f"{who}.{name}"] = list(labels)
        if big_five:
            for trait in TRAITS:
                options[f"{who}.big_five.{trait}"] = list(big_five)
    return options


def awareness_items(
    dialogues: Iterable[DemoDialogue],
    tasks: Sequence[Task] = TASKS,
    seed: int = 0,
    options: Mapping[str, Sequence[str]] | None = None,
) -> list[AwarenessItem]:
    """The element-awareness items of `dialogues` for `tasks` (see the module docstring)."""
    items: list[AwarenessItem] = []
    for dialogue in dialogues:
        transcript = render_transcript(dialogue)
        for task in tasks:
            built = _gold(dialogue, task, seed)
            if built is None:
                continue
            gold, target = built
            items.append(
                AwarenessItem(
                    id=f"{dialogue.id}:{task}",
                    task=task,
                    lang=dialogue.lang,
                    dialogue_id=dialogue.id,
                    transcript=transcript,
                    target=target,
                    gold=gold,
                    options=_options_for(gold, options or {}),
                )
            )
    return items


def labelled(labels: UtteranceLabels | None) -> bool:
    """True when an utterance carries at least one label."""
    return labels is not None and bool(_label_gold(labels))


def _gold(
    dialogue: DemoDialogue, task: Task, seed: int
) -> tuple[dict[str, Any], int | None] | None:
    if task == "goal":
        return _some(_goal_gold(dialogue))
    if task == "persona":
        people = [_person_gold(p) for p in dialogue.participants]
        if all(len(p) <= 1 for p in people):
            return None
        return dict(zip(PARTICIPANTS, people, strict=True)), None
    if task == "scene":
        return _some(_scene_gold(dialogue))
    return _utterance_gold(dialogue, seed)


def _some(gold: dict[str, Any]) -> tuple[dict[str, Any], None] | None:
    return (gold, None) if gold else None


def whole_score(value: float) -> int:
    """A 0-10 score as DEMO's whole-number gold: rounded once, halves up (8.5 -> 9), never
    Python's round-half-to-even (8.5 -> 8)."""
    return math.floor(value + 0.5)


def _goal_gold(dialogue: DemoDialogue) -> dict[str, Any]:
    gold: dict[str, Any] = {}
    for key, goal in zip(("goal1", "goal2"), dialogue.goals, strict=True):
        if goal:
            gold[key] = goal
    if dialogue.epilogue.goal_completion is not None:
        gold["goal_completion"] = whole_score(dialogue.epilogue.goal_completion)
    if dialogue.epilogue.completion_reason:
        gold["reason"] = dialogue.epilogue.completion_reason
    return gold


def _person_gold(person: Persona) -> dict[str, Any]:
    gold: dict[str, Any] = {"name": person.name}
    for key in ("gender", "age"):
        value = getattr(person, key)
        if value is not None:
            gold[key] = value
    if person.big_five:
        gold["big_five"] = {t: person.big_five[t] for t in TRAITS if t in person.big_five}
    for key in ("education", "occupation", "culture", "speaking_style", "hobby"):
        value = getattr(person, key)
        if value is not None:
            gold[key] = value
    return gold


def _scene_gold(dialogue: DemoDialogue) -> dict[str, Any]:
    scene, epilogue = dialogue.scene, dialogue.epilogue
    fields = {
        "topic": scene.topic or epilogue.topic,
        "relationship": scene.relationship,
        "familiarity": scene.familiarity,
        "talkway": scene.medium,
        "location": scene.location,
        "time": scene.time,
    }
    gold: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if epilogue.workflow:
        gold["workflow"] = list(epilogue.workflow)
    names = [p.name for p in dialogue.participants]
    if all(n in epilogue.summaries for n in names):
        gold["summary"] = [epilogue.summaries[n] for n in names]
    return gold


def _utterance_gold(dialogue: DemoDialogue, seed: int) -> tuple[dict[str, Any], int] | None:
    candidates = [i for i, u in enumerate(dialogue.utterances) if labelled(u.labels)]
    if not candidates:
        return None
    target = random.Random(f"{seed}:{dialogue.id}").choice(candidates)
    utterance: Utterance = dialogue.utterances[target]
    assert utterance.labels is not None
    gold: dict[str, Any] = {"person": utterance.speaker, "content": utterance.text}
    gold.update(_label_gold(utterance.labels))
    return gold, target


def _label_gold(labels: UtteranceLabels) -> dict[str, Any]:
    gold: dict[str, Any] = {}
    for key in ("intent", "sentiment", "emotion", "dialogue_act"):
        value = getattr(labels, key)
        if value is not None:
            gold[key] = value
    if labels.stance:
        gold["stance"] = [s.model_dump() for s in labels.stance]
    if labels.strategy is not None:
        gold["strategy"] = labels.strategy.model_dump(exclude_none=True)
    return gold


def _options_for(
    gold: Mapping[str, Any], options: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """The option sets whose dotted path leads to a value in `gold`."""
    return {p: list(labels) for p, labels in options.items() if get_path(gold, p) is not None}


def get_path(tree: Mapping[str, Any] | None, path: str) -> Any:
    """`tree["a"]["b"]` for "a.b"; None where a step is missing."""
    node: Any = tree
    for step in path.split("."):
        if not isinstance(node, Mapping) or step not in node:
            return None
        node = node[step]
    return node
