"""The Ray executor (`--executor ray --ray-address ADDRESS`): a run's units spread over a Ray
cluster.

Each Ray worker is an actor that plans the run once (the same plan as the driver's: plans
are deterministic) and then does batches of units with the local executor's own code
(`runner.work_units`), so a unit's rows and usage are what a local run would write. The
driver saves each batch's records to `parts/` as it comes back, so an interrupted run
resumes as a local one does, and aggregates as always: the same run on either executor has
the same summary.

Each worker opens its own models: a remote server (vLLM, Ray Serve, any OpenAI-compatible
endpoint) is shared by all, each worker keeping to the role's `--*-max-connections`; an
embedded or local GGUF model is loaded once per worker (one replica per worker). An API
key is read on the worker from the role's `--*-api-key-env` variable, so set it in the
cluster's environment; it is never sent with the work.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dialogbench.models.model import Model
from dialogbench.runner.executor import Lost, Work
from dialogbench.runner.record import StoredStage, UnitRecord
from dialogbench.runner.roles import Given
from dialogbench.runner.track import Track

BATCHES_PER_WORKER = 4
"""Batches each worker gets (smaller batches: smoother progress and less redone on a kill)."""


@dataclass
class Batch:
    """What one batch of units came back with."""

    records: list[tuple[StoredStage, UnitRecord]] = field(default_factory=list)
    lost: Lost = field(default_factory=lambda: ({}, {}))
    stopped: str | None = None
    """A role whose server could not be reached (the batch stopped there)."""
    where: dict[str, str] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


class UnitWorker:
    """A Ray actor: one plan of the run and one set of open models (an embedded or GGUF
    model is loaded once per worker), then batches of its units on one event loop."""

    def __init__(
        self, track: Track[Any, Any], data: Any, config: Any, given: Mapping[str, Given]
    ) -> None:
        self.track, self.config, self.data = track, config, data
        self.plan = track.plan(data, config)
        self.loop = asyncio.new_event_loop()

        async def open_all() -> dict[str, Given]:  # opened inside the loop they will run on
            return {role: g if isinstance(g, Model) else g.open() for role, g in given.items()}

        self.given = self.loop.run_until_complete(open_all())

    def do(
        self, stage: str, keys: list[str], kept: dict[StoredStage, dict[str, UnitRecord]]
    ) -> Batch:
        """Do `keys` of `stage` (an earlier stage's name, or `solve`: solve and score);
        `kept` holds the finished units they need (earlier-stage units, and those already
        solved, to score only)."""
        from dialogbench.runner.runner import Reachability, work_units

        batch = Batch()
        units = {k: self.plan.units[k] for k in keys} if stage == "solve" else {}
        stages = {
            s: ({k: mine[k] for k in keys} if s == stage else {})
            for s, mine in self.plan.stages.items()
        }
        here = {("solve", k) for k in units} | {(s, k) for s, ks in stages.items() for k in ks}
        plan = dataclasses.replace(  # only this batch's units, and what they need
            self.plan,
            units=units,
            stages=stages,
            needs={dep: ns for dep, ns in self.plan.needs.items() if dep in here},
            done={},
        )
        stored: dict[StoredStage, dict[str, UnitRecord]] = {s.name: {} for s in self.track.stages}
        stored |= {"solved": {}, "scored": {}}
        work = Work(
            track=self.track,
            data=self.data,
            plan=plan,
            config=self.config,
            given=self.given,
            kept=stored | {s: dict(records) for s, records in kept.items()},
            save=lambda stage, record: batch.records.append((stage, record)),
            progress=None,
            lost=batch.lost,
            watch=Reachability(),
        )
        self.loop.run_until_complete(work_units(work))
        batch.stopped = work.watch.stopped
        batch.where, batch.failed = work.watch.where, work.watch.failed
        batch.why = work.watch.why
        return batch


class RayExecutor:
    """Spread the units over a Ray cluster: `address` as `ray.init` takes it (None starts a
    local Ray instance, `auto` joins the cluster this machine is part of, `ray://host:10001`
    a remote one). Joins an already initialised Ray as it is (and leaves it running)."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self.address = address
        self.workers = workers

    def run(self, work: Work) -> tuple[int, int]:
        try:
            import ray
        except ImportError:
            raise ValueError(
                "--executor ray needs the ray package: pip install 'dialogbench[ray]'"
            ) from None
        for role, given in work.given.items():
            if isinstance(given, Model):
                raise ValueError(
                    f"the Ray executor needs how to reach each role (--{role}...), not a "
                    "Model object: give a RoleSpec"
                )
        to_solve, to_score = work.to_do()
        earlier = work.stages_to_do()
        if not (to_solve or to_score or any(earlier.values())):
            return 0, 0
        started = not ray.is_initialized()
        if started:  # a Ray Client address (ray://) takes no local-instance settings
            client = (self.address or "").startswith("ray://")
            quiet: dict[str, Any] = {}
            if not client:
                quiet = {"include_dashboard": False, "log_to_driver": False}
            ray.init(address=self.address, **quiet)
        try:
            self._spread(ray, work, earlier)
        finally:
            if started:
                ray.shutdown()
        return len(to_solve), len(to_score)

    def _spread(self, ray: Any, work: Work, earlier: dict[str, list[str]]) -> None:
        """Each earlier stage's units, stage by stage, then solve and score: each phase's
        units in batches over the workers, every batch given the finished units it needs."""
        to_solve, to_score = work.to_do()
        main = [k for k in work.plan.units if k in set(to_solve) | set(to_score)]
        phases = [(s, keys) for s, keys in earlier.items() if keys] + [("solve", main)]
        total = sum(len(keys) for _, keys in phases[:-1]) + len(to_solve) + len(to_score)
        widest = max(len(keys) for _, keys in phases)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n = max(1, min(widest, self.workers or cpus))
        actor = ray.remote(num_cpus=1)(UnitWorker)
        data = ray.put(work.data)
        workers = [actor.remote(work.track, data, work.config, work.given) for _ in range(n)]
        done = 0
        try:
            for stage, keys in phases:
                if not keys:
                    continue
                if work.progress is not None:
                    work.progress(stage if stage != "solve" or to_solve else "score", done, total)
                done, stopped = self._phase(ray, work, workers, stage, keys, done, total)
                if stopped:
                    break
        finally:
            for w in workers:
                ray.kill(w)

    def _phase(
        self,
        ray: Any,
        work: Work,
        workers: list[Any],
        stage: str,
        keys: list[str],
        done: int,
        total: int,
    ) -> tuple[int, bool]:
        n = len(workers)
        size = math.ceil(len(keys) / (n * BATCHES_PER_WORKER))
        batches = [keys[i : i + size] for i in range(0, len(keys), size)]
        pending = {}
        for i, batch in enumerate(batches):
            pending[workers[i % n].do.remote(stage, batch, self._given(work, stage, batch))] = batch
        stopped = False
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                pending.pop(ready[0])
                got: Batch = ray.get(ready[0])
                for stored, record in got.records:
                    work.kept[stored][record.unit] = record
                    work.save(stored, record)
                    done += 1
                    if work.progress is not None:
                        what = {"solved": "solve", "scored": "score"}.get(stored, stored)
                        work.progress(what, done, total)
                work.lost[0].update(got.lost[0])
                work.lost[1].update(got.lost[1])
                work.watch.where.update(got.where)
                work.watch.why.update(got.why)
                for role, count in got.failed.items():
                    work.watch.failed[role] = work.watch.failed.get(role, 0) + count
                if got.stopped is not None:
                    work.watch.stopped = got.stopped
                    stopped = True
                    break
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
        return done, stopped

    @staticmethod
    def _given(
        work: Work, stage: str, batch: list[str]
    ) -> dict[StoredStage, dict[str, UnitRecord]]:
        """The finished units a batch needs: the earlier-stage units its units need, and
        (for solve) those of its units already solved."""
        out: dict[StoredStage, dict[str, UnitRecord]] = {}
        for key in batch:
            for need_stage, need_key in work.plan.needs.get((stage, key), []):
                record = work.kept[need_stage].get(need_key)
                if record is not None:
                    out.setdefault(need_stage, {})[need_key] = record
            if stage == "solve" and key in work.kept["solved"]:
                out.setdefault("solved", {})[key] = work.kept["solved"][key]
        return out
