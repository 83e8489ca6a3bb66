"""The `Track` protocol: plan units from data, solve each with model roles, score it,
aggregate the scored rows. The runner does everything around it (see `runner.run_track`).

    plan(data, config)                  -> Plan: units by key, warnings, digests
    run_stage(stage, unit, models, ...) -> rows of an earlier stage's unit (e.g. a recall)
    solve(unit, models, config)         -> rows (the outputs of the system under test)
    score(unit, rows, models, config)   -> rows with verdicts (judged tracks only)
    aggregate(plan, rows, config)       -> Outcome: summary.json, other files, warnings

A unit is whatever a track finds natural to redo as a whole: a probe, an item, an episode,
a retriever over every probe. Its rows go to items.jsonl in plan order.

A track may declare *stages* that run before solve (`Track.stages`), each charged to one
role: the RealCompanion tracks' `recall` stage, whose role is `memory`, replays each
subject into each memory system once. The plan lists each stage's units
(`Plan.stages`) and which of them each later unit needs (`Plan.needs`); the runner runs
every stage's units through the executor, saves them to `parts/<stage>.jsonl` under the
stage's own identity, and hands a later unit the finished rows it needs
(`Plan.upstream`). So a rerun, or `dialogbench score`, never repeats a finished stage unit;
it does again one with a failed call, and every saved unit that needs it. A stage may call
model roles: a `Role` whose `stage` names it (`build demo`'s five steps are such stages).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from rich.table import Table

from dialogbench import plugins
from dialogbench.models.model import Model
from dialogbench.runner.record import DatasetInfo
from dialogbench.runner.roles import Role

C = TypeVar("C")
U = TypeVar("U")
Rows = list[dict[str, Any]]
Models = Mapping[str, Model]
Corpus = Literal["realcompanion", "demo"]


@dataclass(frozen=True)
class Stage:
    """A stage a track runs before solve: its name (`parts/<name>.jsonl`), the role its
    calls are charged to in usage.json, what it does (for docs and progress) and, for a
    stage whose units need nothing but themselves, the function that does one."""

    name: str
    role: str
    help: str
    run: Callable[[Any], Awaitable[Rows]] | None = None
    """Does one unit of the stage (`TrackBase.run_stage` calls it); None: the track's own
    `run_stage` does."""


Need = tuple[str, str]
"""(stage, unit key) of an earlier stage's unit that a unit needs."""


@dataclass
class Plan(Generic[U]):
    """What a run will do: its units in order, and what it found on the way."""

    units: dict[str, U]
    """Unit key -> unit, in the order their rows go to items.jsonl."""
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    """What the run says before it starts (large or capped planned work); also printed with
    its results and kept in warnings.json."""
    resolved: dict[str, Any] = field(default_factory=dict)
    """Recorded in the manifest and part of the run's identity (prompt digests, ...)."""
    context: Any = None
    """Whatever the track's own steps share (probes, indexes, ...)."""
    dataset: DatasetInfo | None = None
    """The manifest's dataset record (default: from the data's name, source and sha256)."""
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Stage name -> its units by key (the track's `stages`, in order)."""
    needs: dict[Need, list[Need]] = field(default_factory=dict)
    """(stage, key) of a unit (`("solve", key)` for a solve unit) -> the earlier-stage
    units it needs."""
    stage_resolved: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Stage name -> what decides its outputs beyond the dataset and its config fields
    (memory systems and budget): that stage's identity, also in the manifest. Under
    `"score"`: what decides the scoring beyond its fields and roles (a judge prompt's
    digest), part of the score identity only."""
    done: dict[str, dict[str, Rows]] = field(default_factory=dict)
    """Stage name -> unit key -> rows of the finished units (filled in by the runner)."""

    def upstream(self, key: str, stage: str = "solve") -> dict[Need, Rows]:
        """The finished rows of every earlier-stage unit that unit `key` of `stage` needs."""
        needs = self.needs.get((stage, key), [])
        return {need: self.done[need[0]][need[1]] for need in needs}


@dataclass
class Outcome:
    """A track's figures: summary.json, its other files, and what it warns about."""

    summary: Any
    """summary.json (nested dicts of Estimates and plain values)."""
    files: dict[str, Any] = field(default_factory=dict)
    """Other result files by name (JSON content, or text for other suffixes)."""
    warnings: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    """Extra keys of warnings.json (e.g. `skipped` counts)."""
    result: Any = None
    """The track's typed result, for the Python API and the printed tables."""
    failures: dict[str, int] = field(default_factory=dict)
    """Rows that could not be scored, by cause (counted, never scored 0)."""
    flags: dict[str, str] = field(default_factory=dict)
    """System (as its tables name it) -> how its context was cut or fell back, with the
    count: marked in the printed tables and the report (warnings.json `flagged`)."""


class Track(Protocol[C, U]):
    """A benchmark track written against the runner."""

    name: ClassVar[str]
    """`dialogbench run NAME`."""
    summary: ClassVar[str]
    """One line for `dialogbench run --help`."""
    config_type: type[C]
    roles: ClassVar[tuple[Role, ...]]
    corpus: ClassVar[Corpus]
    """Which loader reads `--dataset`: a RealCompanion-shaped dataset, or a DEMO set."""
    judged: ClassVar[bool]
    """Whether the track has a score step over saved outputs (a judge, or matching against
    gold): score-stage settings then re-score without calling the model under test."""
    version: ClassVar[int]
    """The layout of the track's unit rows; part of the resume identity, so bump it when a
    change to solve or score would make saved units unreadable."""
    stages: ClassVar[tuple[Stage, ...]]
    """Stages run before solve, in order (most tracks: none)."""

    def configure(self, config: C, roles: frozenset[str]) -> C: ...

    def plan(self, data: Any, config: C) -> Plan[U]: ...

    async def run_stage(
        self, stage: str, unit: Any, models: Models, config: C, plan: Plan[U]
    ) -> Rows: ...

    async def solve(self, unit: U, models: Models, config: C, plan: Plan[U]) -> Rows: ...

    async def score(
        self, unit: U, rows: Rows, models: Models, config: C, plan: Plan[U]
    ) -> Rows: ...

    def aggregate(self, plan: Plan[U], rows: Rows, config: C) -> Outcome: ...

    def show(self, outcome: Outcome, config: C) -> Sequence[Table | str]: ...

    def judgments(self, rows: Rows) -> dict[str, float]: ...

    def unfinished(self, plan: Plan[U], key: str, rows: Rows) -> bool: ...

    def headline(self, outcome: Outcome) -> dict[str, float]: ...


class TrackBase(Generic[C, U]):
    """Defaults for a track: no roles, no judge, nothing to show beyond the summary."""

    name: ClassVar[str]
    summary: ClassVar[str]
    config_type: type[C]
    roles: ClassVar[tuple[Role, ...]] = ()
    corpus: ClassVar[Corpus] = "realcompanion"
    judged: ClassVar[bool] = False
    version: ClassVar[int] = 1
    stages: ClassVar[tuple[Stage, ...]] = ()

    def configure(self, config: C, roles: frozenset[str]) -> C:
        """The config as run, given which roles are played (e.g. detectors by default)."""
        return config

    async def run_stage(
        self, stage: str, unit: Any, models: Models, config: C, plan: Plan[U]
    ) -> Rows:
        """Do one unit of an earlier stage: the stage's own `run` (a track whose stage has
        none overrides this)."""
        for declared in self.stages:
            if declared.name == stage and declared.run is not None:
                return await declared.run(unit)
        raise NotImplementedError(f"track {self.name!r} declares no stage {stage!r}")

    async def score(self, unit: U, rows: Rows, models: Models, config: C, plan: Plan[U]) -> Rows:
        return rows

    def show(self, outcome: Outcome, config: C) -> Sequence[Table | str]:
        return []

    def judgments(self, rows: Rows) -> dict[str, float]:
        """Row id -> one judged number, for agreement across judges (judged tracks)."""
        return {}

    def headline(self, outcome: Outcome) -> dict[str, float]:
        """The figures to compare across judges: name -> value."""
        return {}

    def unfinished(self, plan: Plan[U], key: str, rows: Rows) -> bool:
        """Whether a saved solved unit is done again on a rerun, as one with a failed call
        is (e.g. a reply that could not be used); the track may note in `plan.context`
        what the redo needs. Default: never."""
        return False


def describe(data: Any) -> DatasetInfo:
    """A manifest's dataset record for a loaded Dataset or DemoSet."""
    count = len(getattr(data, "subjects", None) or getattr(data, "dialogues", None) or [])
    return DatasetInfo(name=data.name, source=str(data.source), sha256=data.sha256, subjects=count)


REGISTRY: dict[str, Any] = {}
"""Track name -> track instance, in the order `dialogbench run --help` lists them."""


def register(track: Any) -> Any:
    """Add a track instance to the registry (and return it)."""
    REGISTRY[track.name] = track
    return track


PLUGINS: dict[str, Any] = {}
"""Tracks loaded from the entry-point group `dialogbench.tracks` (also in REGISTRY)."""

_MEMBERS = (
    *("name", "summary", "config_type", "roles", "corpus", "judged", "version", "stages"),
    *("configure", "plan", "run_stage", "solve", "score", "aggregate", "show"),
    *("judgments", "unfinished", "headline"),
)


def _builtins() -> None:
    """Register the built-in tracks (first: no plugin takes their names)."""
    importlib.import_module("dialogbench.tracks")


def plugin_tracks() -> list[str]:
    """The tracks installed packages declare (entry points of `dialogbench.tracks`) that
    are not in the registry yet; nothing of theirs is imported."""
    _builtins()
    return [n for n in plugins.names(plugins.TRACKS) if n not in REGISTRY]


def find_track(name: str) -> Any:
    """The track called `name`: a registered one, else the plugin of that name, imported
    now and registered (None if neither). A plugin that cannot be used is a `PluginError`."""
    _builtins()
    if name in REGISTRY:
        if name not in PLUGINS:
            plugins.refuse(plugins.TRACKS, name, "track")
        return REGISTRY[name]
    ep = plugins.named(plugins.TRACKS, name)
    if ep is None:
        return None
    before = dict(REGISTRY)
    try:
        track: Any = plugins.build(plugins.load(ep), ep)
    finally:  # what a module registers as it is imported counts for nothing
        REGISTRY.clear()
        REGISTRY.update(before)
    missing = [m for m in _MEMBERS if not hasattr(track, m)]
    if missing or not dataclasses.is_dataclass(getattr(track, "config_type", None)):
        lacks = ", ".join(missing) or "a dataclass config_type"
        raise plugins.PluginError(
            f"{plugins.origin(ep)} is not a track: it lacks {lacks} (subclass "
            "dialogbench.runner.TrackBase; docs/architecture.md)"
        )
    if track.name != name:
        raise plugins.PluginError(
            f"{plugins.origin(ep)} gives the track {track.name!r}: name the entry point "
            "after its track"
        )
    PLUGINS[name] = register(track)
    return track
