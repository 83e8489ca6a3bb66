"""The benchmark tracks; importing this package registers every one of them with the runner
(`dialogbench.runner.REGISTRY`), which is how `dialogbench run TRACK` finds them."""

from dialogbench.tracks import demo, realcompanion

__all__ = ["demo", "realcompanion"]
