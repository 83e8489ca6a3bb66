"""DEMO tracks: element awareness and dialogue agent interaction. Run one with
`dialogbench.runner.run_track(AWARENESS, demo_set, out, config, roles).result()`
(`as_demo_set` makes a set of episodes given by hand)."""

from dialogbench.tracks.demo.awareness import AWARENESS, AwarenessConfig
from dialogbench.tracks.demo.interaction import INTERACTION, InteractionConfig, as_demo_set

__all__ = [
    "AWARENESS",
    "INTERACTION",
    "AwarenessConfig",
    "InteractionConfig",
    "as_demo_set",
]
