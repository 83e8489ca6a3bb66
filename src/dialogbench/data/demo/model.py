"""The typed model of DEMO's dialogue elements, shared by every DEMO loader and track.

A `DemoDialogue` holds the three stages of a conversation:

- prelude: the `Scene` (time, location, medium, topic, relationship, familiarity 0-10),
  two `Persona`s and each side's goal;
- interlocution: the `Utterance`s, each with optional `UtteranceLabels` (intent, sentiment,
  emotion, dialogue act, stance as aspect/viewpoint pairs, strategy);
- epilogue: `Epilogue` (goal completion 0-10 with its reason, topic, workflow steps, one
  summary per participant).

Every field a corpus does not label is None (or empty): adapters map only what the labels
really say, and the element-awareness gold is built from what is present. An interaction
`Episode` is a prelude without utterances. An `AwarenessItem` is one element-awareness task
on one dialogue, with the gold in the paper's JSON shape for that task.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dialogbench.lang import Lang as Lang  # re-exported: the one definition

Task = Literal["goal", "persona", "scene", "utterance"]
TASKS: tuple[Task, ...] = get_args(Task)
TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
"""Big Five traits, in the order DEMO lists them; levels are `high` or `low`."""
Level = Literal["high", "low"]
AGE_BANDS = (
    "childhood",
    "adolescence",
    "youth",
    "adulthood",
    "middle age",
    "old age",
    "advanced age",
)
"""DEMO's age bands (6-11, 12-15, 15-24, 25-40, 40-60, 60+, 70+ years)."""
Gender = Literal["male", "female"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Scene(_Record):
    """Where, when and how the conversation happens, and between whom."""

    time: str | None = None
    location: str | None = None
    medium: str | None = Field(default=None, description="DEMO's `talkway`: face-to-face, ...")
    topic: str | None = None
    relationship: str | None = None
    familiarity: int | None = Field(default=None, ge=0, le=10)


class Persona(_Record):
    """One participant. `background` is free text (DEMO's `background`, SOTOPIA's profile)."""

    name: str
    gender: Gender | None = None
    age: str | None = Field(default=None, description="one of AGE_BANDS, or the corpus's own")
    big_five: dict[str, Level] = Field(default_factory=dict, description="trait -> high|low")
    education: str | None = None
    occupation: str | None = None
    culture: str | None = None
    speaking_style: str | None = None
    hobby: str | None = None
    background: str | None = None
    values: str | None = Field(
        default=None,
        description="what the person values (SOTOPIA: moral and Schwartz values, "
        "decision style); shown to the person themself, never to the partner",
    )
    secret: str | None = Field(
        default=None,
        description="what the person keeps to themself (SOTOPIA's `secret`); "
        "shown to the person themself and the judge, never to the partner",
    )

    @model_validator(mode="after")
    def _traits(self) -> Persona:
        bad = sorted(set(self.big_five) - set(TRAITS))
        if bad:
            raise ValueError(f"unknown Big Five traits {bad}; use {list(TRAITS)}")
        return self


class Stance(_Record):
    aspect: str
    viewpoint: str


class Strategy(_Record):
    description: str
    type: str | None = Field(default=None, description="the turn it gives the conversation")


class UtteranceLabels(_Record):
    """What one utterance conveys; None where the corpus has no such label."""

    intent: str | None = None
    sentiment: str | None = Field(default=None, description="positive | negative | neutral")
    emotion: str | None = None
    dialogue_act: str | None = None
    stance: list[Stance] = Field(default_factory=list)
    strategy: Strategy | None = None
    strategy_labels: list[str] = Field(
        default_factory=list, description="a corpus's categorical strategy tags (CaSiNo)"
    )


class Utterance(_Record):
    id: str
    speaker: str
    text: str
    labels: UtteranceLabels | None = None


class Epilogue(_Record):
    """How the conversation ended."""

    goal_completion: float | None = Field(default=None, ge=0, le=10)
    completion_reason: str | None = None
    topic: str | None = None
    workflow: list[str] = Field(default_factory=list)
    summaries: dict[str, str] = Field(default_factory=dict, description="participant -> summary")


class DemoDialogue(_Record):
    """One conversation with its elements (see the module docstring)."""

    id: str
    lang: Lang
    scene: Scene = Scene()
    participants: tuple[Persona, Persona]
    goals: tuple[str | None, str | None] = (None, None)
    utterances: list[Utterance] = Field(default_factory=list)
    epilogue: Epilogue = Epilogue()
    source: str = Field(default="", description="corpus and record it came from")

    @model_validator(mode="after")
    def _speakers(self) -> DemoDialogue:
        names = {p.name for p in self.participants}
        if len(names) != 2:
            raise ValueError("the two participants must have different names")
        stray = sorted({u.speaker for u in self.utterances} - names)
        if stray:
            raise ValueError(f"utterances by {stray}, who are not participants {sorted(names)}")
        return self


class Episode(_Record):
    """An interaction episode: the prelude two agents play out (no utterances yet)."""

    id: str
    lang: Lang
    scene: Scene
    participants: tuple[Persona, Persona]
    goals: tuple[str, str]
    source: str = ""


class AwarenessItem(_Record):
    """One element-awareness task on one dialogue.

    `gold` follows the paper's answer shape for the task (appendix G), holding only the
    fields the source labels; `target` is the utterance index for utterance mining.
    `instruction` is the released prompt when the item comes from DEMO's own files (their
    wording is kept only to run their items as released; our prompts are our own), and
    `released_answer` the released gold as written there.
    """

    id: str
    task: Task
    lang: Lang
    dialogue_id: str
    transcript: str
    target: int | None = None
    gold: dict[str, Any]
    options: dict[str, list[str]] = Field(
        default_factory=dict,
        description="closed label sets of categorical gold fields (e.g. `emotion`); prompts "
        "offer them and the objective metrics score against them",
    )
    instruction: str | None = None
    released_answer: str | None = Field(
        default=None,
        description="the gold as released in DEMO's file (its JSON text, in its language): "
        "the judge's reference under `--protocol paper`",
    )


class DemoSet(BaseModel):
    """A loaded DEMO-style corpus: dialogues, awareness items and/or episodes."""

    model_config = ConfigDict(extra="forbid")

    name: str
    dialogues: list[DemoDialogue] = Field(default_factory=list)
    items: list[AwarenessItem] = Field(default_factory=list)
    episodes: list[Episode] = Field(default_factory=list)
    sha256: str
    source: str
    warnings: list[str] = Field(default_factory=list)
    licence: str | None = None
