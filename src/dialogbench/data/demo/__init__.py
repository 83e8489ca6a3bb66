"""DEMO's dialogue elements: the data model, loaders for DEMO's files and adapters from
human-labelled corpora (CPED, CaSiNo, SOTOPIA)."""

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

__all__ = [
    "AGE_BANDS",
    "TASKS",
    "TRAITS",
    "AwarenessItem",
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
]
