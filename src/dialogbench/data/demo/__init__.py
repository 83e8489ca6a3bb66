"""DEMO's dialogue elements: the data model, loaders for DEMO's files and adapters from
human-labelled corpora (CPED, CaSiNo, SOTOPIA)."""

from dialogbench.data.demo.items import awareness_items, persona_options, render_transcript
from dialogbench.data.demo.labels import (
    age_band,
    normalise_age,
    normalise_gender,
    normalise_level,
    normalise_sentiment,
    normalise_trait,
    parse_big_five,
)
from dialogbench.data.demo.model import (
    AGE_BANDS,
    TASKS,
    TRAITS,
    AwarenessItem,
    DemoDialogue,
    DemoSet,
    Epilogue,
    Episode,
    Persona,
    Scene,
    Stance,
    Strategy,
    Utterance,
    UtteranceLabels,
)
from dialogbench.data.demo.registry import DEMO_DATASETS, DemoDatasetSpec, load_demo
from dialogbench.data.demo.release import (
    load_awareness,
    load_interaction,
    load_release,
    parse_familiarity,
)

__all__ = [
    "AGE_BANDS",
    "DEMO_DATASETS",
    "TASKS",
    "TRAITS",
    "AwarenessItem",
    "DemoDatasetSpec",
    "DemoDialogue",
    "DemoSet",
    "Epilogue",
    "Episode",
    "Persona",
    "Scene",
    "Stance",
    "Strategy",
    "Utterance",
    "UtteranceLabels",
    "age_band",
    "awareness_items",
    "load_awareness",
    "load_demo",
    "load_interaction",
    "load_release",
    "normalise_age",
    "normalise_gender",
    "normalise_level",
    "normalise_sentiment",
    "normalise_trait",
    "parse_big_five",
    "parse_familiarity",
    "persona_options",
    "render_transcript",
]
