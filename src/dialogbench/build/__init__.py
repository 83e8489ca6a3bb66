"""Builders that derive ground truth from a loaded dataset (see docs/build.md).

`build_realcompanion` runs the RealCompanion derivation: probes in three strata
(`sampling`), five traced stages per probe with the numbered rules of `rules`, the profile
and persona passes, written as a release folder with its build.json.
"""

from dialogbench.build.realcompanion import (
    BUILD,
    BuildConfig,
    BuildResult,
    BuildTrack,
    build_realcompanion,
    rule_text,
)
from dialogbench.build.rules import RULE_IDS, RULES, Case, Decision, Rule, classify
from dialogbench.build.sampling import Pick, Sizes, Surface, sample_strata, surface

__all__ = [
    "BUILD",
    "RULES",
    "RULE_IDS",
    "BuildConfig",
    "BuildResult",
    "BuildTrack",
    "Case",
    "Decision",
    "Pick",
    "Rule",
    "Sizes",
    "Surface",
    "build_realcompanion",
    "classify",
    "rule_text",
    "sample_strata",
    "surface",
]
