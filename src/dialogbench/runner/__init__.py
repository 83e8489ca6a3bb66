"""One runner for every track: the `Track` protocol, model roles, self-describing config
options and the run record. Read docs/architecture.md first."""

from dialogbench.runner.options import OptionError, check, option
from dialogbench.runner.record import DatasetInfo, Manifest, Progress, RunFolder, to_json
from dialogbench.runner.roles import Role, RoleSpec, judge_role, model_role
from dialogbench.runner.runner import Finished, run_track
from dialogbench.runner.track import REGISTRY, Outcome, Plan, Track, TrackBase, register

__all__ = [
    "REGISTRY",
    "DatasetInfo",
    "Finished",
    "Manifest",
    "OptionError",
    "Outcome",
    "Plan",
    "Progress",
    "Role",
    "RoleSpec",
    "RunFolder",
    "Track",
    "TrackBase",
    "check",
    "judge_role",
    "model_role",
    "option",
    "register",
    "run_track",
    "to_json",
]
