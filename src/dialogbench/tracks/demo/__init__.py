"""DEMO tracks: element awareness and dialogue agent interaction."""

from dialogbench.tracks.demo.awareness import AWARENESS, AwarenessConfig, run_awareness
from dialogbench.tracks.demo.interaction import INTERACTION, InteractionConfig, run_interaction

__all__ = [
    "AWARENESS",
    "INTERACTION",
    "AwarenessConfig",
    "InteractionConfig",
    "run_awareness",
    "run_interaction",
]
