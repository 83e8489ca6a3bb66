"""Executors: where a run's units are solved and scored.

The runner plans, keeps what a previous run saved, and aggregates; an executor does the
units in between (first each earlier stage's, in stage order, then solve and score) and
hands back each finished unit's record, which the runner's `save` writes to `parts/` at
once (so an interrupted run resumes the same way, whichever executor ran it). Two executors:

- `LocalExecutor` (the default): every unit in this process, concurrently on one asyncio
  loop, each model's own connection limit bounding its requests;
- `RayExecutor` (`runner/executor_ray.py`, `--executor ray --ray-address ...`): the units
  spread over a Ray cluster's workers, in batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dialogbench.models.cache import ResponseCache
from dialogbench.runner.heap import frozen_heap
from dialogbench.runner.record import Progress, StoredStage, UnitRecord
from dialogbench.runner.roles import Given
from dialogbench.runner.track import Need, Plan, Track

if TYPE_CHECKING:
    from dialogbench.runner.runner import Reachability

Save = Callable[[StoredStage, UnitRecord], None]
Lost = tuple[dict[str, str], dict[str, dict[str, dict[str, Any]]]]
"""Units whose failed call came through: key -> why, and key -> what they spent."""


@dataclass
class Work:
    """What an executor is asked to do: every unit of `plan` not in `kept` yet."""

    track: Track[Any, Any]
    data: Any
    plan: Plan[Any]
    config: Any
    given: Mapping[str, Given]
    kept: dict[StoredStage, dict[str, UnitRecord]]
    """Units already done (filled in as units finish)."""
    save: Save
    """Called with each finished unit's record, in the driving process."""
    progress: Progress | None
    lost: Lost
    watch: Reachability
    caches: dict[int, ResponseCache] = field(default_factory=dict)
    """The response caches of the models opened in this process (by id), filled in as
    they open: what they stored is told on Ctrl-C (replies of units not finished)."""

    def replies_stored(self) -> int:
        """Model replies stored in the response cache by this run (in this process)."""
        return sum(c.stored for c in self.caches.values())

    def to_do(self) -> tuple[list[str], list[str]]:
        """The keys to solve, and the keys to score (judged tracks), in plan order."""
        to_solve = [k for k in self.plan.units if k not in self.kept["solved"]]
        judged = self.track.judged
        to_score = [k for k in self.plan.units if judged and k not in self.kept["scored"]]
        return to_solve, to_score

    def stages_to_do(self) -> dict[str, list[str]]:
        """Each earlier stage's keys to run, in plan order: units not kept that a unit
        still to do needs (a unit that no unit needs runs when it is not kept). Nothing
        runs for units already solved: `dialogbench score` and a finished rerun call no
        stage's role."""
        plan = self.plan
        needed: set[Need] = {n for k in self.to_do()[0] for n in plan.needs.get(("solve", k), [])}
        needed_by_any = {n for ns in plan.needs.values() for n in ns}
        out: dict[str, list[str]] = {}
        for stage in reversed(self.track.stages):
            units = plan.stages.get(stage.name, {})
            keys = [
                k
                for k in units
                if k not in self.kept[stage.name]
                and ((stage.name, k) in needed or (stage.name, k) not in needed_by_any)
            ]
            for k in keys:
                needed.update(plan.needs.get((stage.name, k), []))
            out[stage.name] = keys
        return {s.name: out[s.name] for s in self.track.stages}


class Executor(Protocol):
    """Runs a `Work`; returns (units solved, units scored) in this run."""

    name: str

    def run(self, work: Work) -> tuple[int, int]: ...


class LocalExecutor:
    """Every unit in this process, on one asyncio loop, with what was alive before the
    units start (dataset, plan, saved records) out of the garbage collector's walks
    (`runner/heap.py`)."""

    name = "local"

    def run(self, work: Work) -> tuple[int, int]:
        from dialogbench.runner.runner import work_units

        with frozen_heap():
            return asyncio.run(work_units(work))


EXECUTORS = ("local", "ray")


def make_executor(name: str, ray_address: str | None = None) -> Executor:
    """The executor `--executor NAME` names (`ray` needs the `ray` package)."""
    if name == "local":
        return LocalExecutor()
    if name == "ray":
        from dialogbench.runner.executor_ray import RayExecutor

        return RayExecutor(address=ray_address)
    raise ValueError(f"--executor: unknown executor {name!r}; known: {', '.join(EXECUTORS)}")
