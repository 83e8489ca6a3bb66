"""One runner for every track: the run folder, the manifest, resume, progress, usage,
warnings and the exit status, around a `Track`'s plan, solve, score and aggregate.

Resume keys on two identities. A unit's *solve* identity covers only what produced its
outputs (track, dataset sha256, solve-stage config fields, the solving roles, prompt
digests, package version); its *score* identity adds the score-stage fields and the
judge. So a changed `n_boot` re-aggregates saved units, and a changed judge re-judges
saved outputs, without calling the model under test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dialogbench import __version__
from dialogbench.data.io import recorded_command, recorded_source
from dialogbench.models.model import Model
from dialogbench.models.spec import public_url
from dialogbench.models.types import ModelError, Usage, unreachable_reason
from dialogbench.models.usage import Scope, UsageTotals, failure_kind, usage_scope, watch_calls
from dialogbench.runner.executor import Executor, LocalExecutor, Work
from dialogbench.runner.options import by_stage, check
from dialogbench.runner.record import (
    MAIN_STAGES,
    Manifest,
    Progress,
    RunFolder,
    RunLock,
    StoredStage,
    UnitRecord,
    digest,
    to_json,
)
from dialogbench.runner.roles import Given, answering, opened, recorded, resolve
from dialogbench.runner.status import (
    ExitCode,
    Interrupted,
    NothingFinished,
    Unreachable,
)
from dialogbench.runner.track import Need, Outcome, Plan, Rows, Track, describe

EXIT_OK, EXIT_FAILURES = ExitCode.OK, ExitCode.FAILURES
UNIT_CONCURRENCY = 256
"""Units in flight at once; each model's own limit bounds its requests."""
UNREACHABLE_AFTER = 3
"""A role whose first this many fresh calls all fail unreachable, with none succeeding,
stops the run (exit 4) instead of failing every unit the same way."""


@dataclass
class Finished:
    """A finished run: the track's outcome plus what the runner adds."""

    outcome: Outcome
    path: Path
    usage: dict[str, Any]
    warnings: list[str]
    rows: Rows
    manifest: Manifest
    config: Any = None
    solved_now: int = 0
    scored_now: int = 0
    retried: int = 0
    """Units kept from an earlier run with failed calls, done again (their good calls come
    from the response cache, so only the failed ones are sent)."""
    failures: dict[str, int] = field(default_factory=dict)
    """What failed, by cause (`failed model calls`, `unscored ratings`, ...): written to
    warnings.json's `failures` and printed; any nonzero count makes the exit status 3."""
    failed_by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    """Role -> failed calls by kind (`unreachable`, `timeout`, `rejected`, ...)."""
    unreachable: dict[str, str] = field(default_factory=dict)
    """Role -> its server URL, for each role whose every fresh call failed unreachable."""
    repairs: list[str] = field(default_factory=list)
    """Damage found in the run folder and set right (also in `warnings`)."""
    lost: dict[str, str] = field(default_factory=dict)
    """Units not finished (a call failed) -> why (also in `warnings`)."""
    notices: list[str] = field(default_factory=list)
    """What the plan said before the run started (`Plan.notices`; also in `warnings`)."""

    def result(self) -> Any:
        """The track's typed result, holding the run's warnings (and usage, where it has a
        field for it): what a track's `run_*` function returns."""
        typed = self.outcome.result
        typed.warnings = self.warnings
        if hasattr(typed, "usage"):
            typed.usage = self.usage
        return typed

    @property
    def exit_code(self) -> int:
        """0: every row scored; 3: some rows failed (counted in `failures`); 4: a role's
        server could not be reached (see `runner.status`)."""
        if self.unreachable:
            return ExitCode.UNREACHABLE
        return ExitCode.FAILURES if any(self.failures.values()) else ExitCode.OK


def identities(
    track: Track[Any, Any],
    sha256: str,
    config: Any,
    roles: Mapping[str, dict[str, Any]],
    resolved: Mapping[str, Any],
    stage_resolved: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """The sha256 of what produced each earlier stage's units (by stage name), the solved
    units and the scored. Each stage's identity covers the track, the dataset, what the
    plan resolved for that stage (memory systems and budget), the model roles first called
    at that stage (`Role.stage` naming it) and the stage before it; the solve identity
    covers the last earlier stage's, so a changed model re-solves saved recalls' units
    without replaying the memory systems. The score identity covers the solve identity, the
    score-stage fields and roles, and `stage_resolved["score"]` when the plan has it (what
    decides the verdicts beyond them: a score-stage prompt's digest)."""
    stages = by_stage(config)
    role_stage = {r.name: r.stage for r in track.roles}
    roles = {k: answering(v) for k, v in roles.items()}  # not timeouts or connections
    out: dict[str, str] = {}
    before: str | None = None
    for stage in track.stages:
        material: dict[str, Any] = {
            "track": track.name,
            "version": track.version,
            "dataset": sha256,
            "stage": stage.name,
            "resolved": dict((stage_resolved or {}).get(stage.name, {})),
            "before": before,
            "package_version": __version__,
        }
        calling = {k: v for k, v in roles.items() if role_stage[k] == stage.name}
        if calling:  # model roles first called at this stage (none for recall)
            material["roles"] = calling
        before = digest(material)
        out[stage.name] = before
    solve_material: dict[str, Any] = {
        "track": track.name,
        "version": track.version,
        "dataset": sha256,
        "config": stages["solve"],
        "roles": {k: v for k, v in roles.items() if role_stage[k] == "solve"},
        "resolved": dict(resolved),
        "package_version": __version__,
    }
    if before is not None:
        solve_material["stages"] = before
    solve = digest(solve_material)
    score_material: dict[str, Any] = {
        "solve": solve,
        "config": stages["score"],
        "roles": {k: v for k, v in roles.items() if role_stage[k] == "score"},
    }
    if (stage_resolved or {}).get("score"):  # a judge prompt's digest, say
        score_material["resolved"] = dict((stage_resolved or {})["score"])
    score = digest(score_material)
    return {**out, "solve": solve, "score": score}


def run_track(
    track: Track[Any, Any],
    data: Any,
    out: Path,
    config: Any = None,
    roles: Mapping[str, Given] | None = None,
    progress: Progress | None = None,
    *,
    reuse: Path | None = None,
    solve: bool = True,
    executor: Executor | None = None,
    say: Callable[[str], None] | None = None,
) -> Finished:
    """Run `track` on loaded `data` into the folder `out` and return what it found.

    `roles` gives each model role a `RoleSpec` or a `Model`. A rerun into the same folder
    keeps what still matches; `reuse` names another finished run whose solved units are
    taken as they are (how `dialogbench score` re-judges without the model under test);
    `solve=False` refuses to call the solving roles at all. `executor` does the units
    (`runner.executor`: in this process by default, or over a Ray cluster). `say` is given
    each of the plan's notices (`Plan.notices`) before any unit runs.
    """
    config = track.config_type() if config is None else config
    given = dict(roles or {})
    recorded_roles = recorded(track.roles, given)
    config = track.configure(config, frozenset(resolve(track.roles, given)))
    check(config)
    folder = RunFolder(out)
    with RunLock(folder.path):
        return _locked(
            track,
            data,
            folder,
            config,
            given,
            recorded_roles,
            progress,
            reuse,
            solve,
            executor,
            say,
        )


def _locked(
    track: Track[Any, Any],
    data: Any,
    folder: RunFolder,
    config: Any,
    given: dict[str, Given],
    recorded_roles: dict[str, dict[str, Any]],
    progress: Progress | None,
    reuse: Path | None,
    solve: bool,
    executor: Executor | None,
    say: Callable[[str], None] | None,
) -> Finished:
    plan = track.plan(data, config)
    if say is not None:
        for notice in plan.notices:
            say(notice)
    info = plan.dataset or describe(data)
    info = info.model_copy(update={"source": recorded_source(info.source, folder.path)})
    manifest = Manifest(
        track=track.name,
        command=recorded_command(sys.argv, folder.path),
        dataset=info,
        config=json_config(config),
        seed=getattr(config, "seed", 0),
        roles=recorded_roles,
        resolved=plan.resolved,
        warnings=list(plan.warnings),
    )
    if reuse is not None:
        manifest.roles = {**_solve_roles(track, reuse), **_score_roles(track, recorded_roles)}
    manifest.identity = identities(
        track, info.sha256, config, manifest.roles, plan.resolved, plan.stage_resolved
    )
    if plan.stage_resolved:
        manifest.stages = {k: dict(v) for k, v in plan.stage_resolved.items()}
    kept = folder.begin(manifest, tuple(s.name for s in track.stages))
    retried = _drop_failed(kept, lambda key, rows: track.unfinished(plan, key, rows), plan.needs)
    if reuse is not None:
        source = RunFolder(reuse)
        kept["solved"] = source.read("solved")
        theirs = source.manifest()
        for st in track.stages:  # what the solved units were given (memory_costs.json)
            if theirs is not None and theirs.identity.get(st.name) == manifest.identity[st.name]:
                kept[st.name] = source.read(st.name)
                for record in kept[st.name].values():
                    folder.save(st.name, record)
        folder.repairs += source.repairs
        missing = [k for k in plan.units if k not in kept["solved"]]
        if missing:
            raise ValueError(
                f"{reuse} has no saved output for {len(missing)} unit(s) (e.g. {missing[0]!r}): "
                "finish that run first (rerun its command), then score it"
            )
        for record in kept["solved"].values():
            folder.save("solved", record)
    if not solve and (missing := [k for k in plan.units if k not in kept["solved"]]):
        raise ValueError(
            f"{len(missing)} unit(s) have no saved output (e.g. {missing[0]!r}): "
            "finish the run first (rerun its command), then score it"
        )
    lost: dict[str, str] = {}
    lost_usage: dict[str, dict[str, dict[str, Any]]] = {}
    stage: StoredStage = "scored" if track.judged else "solved"
    watch = Reachability()

    def saved() -> str:
        n = sum(key in kept[stage] for key in plan.units)
        solved = sum(k in kept["solved"] and k not in kept["scored"] for k in plan.units)
        more = f" (and {solved} more solved, not yet judged)" if track.judged and solved else ""
        return f"{n} of {len(plan.units)} units{more} saved in {folder.path}"

    work = Work(
        track, data, plan, config, given, kept, folder.save, progress, (lost, lost_usage), watch
    )
    try:
        counts = (executor or LocalExecutor()).run(work)
    except KeyboardInterrupt:
        replies = work.replies_stored()
        kept_calls = f" ({replies} model replies in the response cache)" if replies else ""
        raise Interrupted(
            f"interrupted: {saved()}{kept_calls}; rerun the same command to resume"
        ) from None
    if watch.stopped is not None:
        role = watch.stopped
        raise Unreachable(
            f"the {role}'s server at {watch.where.get(role, '?')} {watch.reason(role)} "
            f"({watch.failed[role]} calls failed, none succeeded): {watch.advice(role)}; "
            f"{saved()}, rerun the same command to resume"
        )
    done = [key for key in plan.units if key in kept[stage]]
    for st in track.stages:  # every finished earlier-stage unit, for aggregate
        plan.done[st.name] = {
            k: kept[st.name][k].rows for k in plan.stages.get(st.name, {}) if k in kept[st.name]
        }
    usage = usage_report(track, kept, plan, lost_usage)
    spent = _spent(usage)
    unreachable = {
        role: watch.where.get(role, "?")
        for role, t in spent.items()
        if t.calls > t.cached_calls
        and t.failed_by_kind.get("unreachable", 0) == t.calls - t.cached_calls
    }
    if not done:
        first = next(iter(lost.values()), "no unit finished")
        if unreachable:
            role, url = next(iter(unreachable.items()))
            raise Unreachable(
                f"the {role}'s server at {url} {watch.reason(role)}: {first}; "
                f"{watch.advice(role)}, then rerun the same command"
            )
        raise NothingFinished(
            f"no unit of the run finished: {first}; rerun the same command to retry"
        )
    rows = [row for key in done for row in kept[stage][key].rows]
    outcome = track.aggregate(plan, rows, config)
    warnings = list(plan.warnings) + plan.notices + list(outcome.warnings) + folder.repairs
    warnings += [f"flagged {name}: {what}" for name, what in outcome.flags.items()]
    warnings += [f"unit {key} not finished (rerun to retry): {why}" for key, why in lost.items()]
    by_kind = {role: dict(t.failed_by_kind) for role, t in spent.items() if t.failed_calls}
    failures = {
        **{f"failed {role} calls": t.failed_calls for role, t in spent.items()},
        **({"units not finished (a call failed)": len(lost)} if lost else {}),
        **outcome.failures,
    }
    failures = {k: v for k, v in failures.items() if v}
    notes = {**outcome.notes}
    if outcome.flags:
        notes["flagged"] = dict(outcome.flags)
    if failures:
        notes["failures"] = failures
        if by_kind:
            notes["failed_calls_by_kind"] = by_kind
    folder.write_items(rows)
    folder.write("summary.json", to_json(outcome.summary))
    for name, content in outcome.files.items():
        folder.write(name, to_json(content))
    folder.write("usage.json", usage)
    folder.write("warnings.json", {"warnings": warnings, **notes})
    return Finished(
        outcome=outcome,
        path=folder.path,
        usage=usage,
        warnings=warnings,
        rows=rows,
        manifest=manifest,
        config=config,
        retried=retried,
        solved_now=counts[0],
        scored_now=counts[1],
        failures=failures,
        failed_by_kind=by_kind,
        unreachable=unreachable,
        repairs=list(folder.repairs),
        notices=list(plan.notices),
        lost=dict(lost),
    )


class Reachability:
    """Watches every call of a run, per role: a role whose first `UNREACHABLE_AFTER` fresh
    calls all fail unreachable, before any succeeds, stops the run (`stopped`)."""

    def __init__(self, after: int = UNREACHABLE_AFTER) -> None:
        self.after = after
        self.failed: dict[str, int] = {}
        self.reached: set[str] = set()
        self.where: dict[str, str] = {}
        """Role -> its server URL, without credentials (filled in by the runner)."""
        self.stopped: str | None = None
        self.why: dict[str, str] = {}
        """Role -> what its last unreachable call says (`unreachable_reason`)."""
        self.stop = asyncio.Event()

    def reason(self, role: str) -> str:
        """What stopped `role`, as `models check` says it."""
        return self.why.get(role, unreachable_reason(None))

    def advice(self, role: str) -> str:
        """What to check: the URL's path after a 404, else the server and the URL."""
        if self.reason(role) == unreachable_reason(None):
            return "check that it is running and the role's --base-url"
        return "fix the role's --base-url"

    def __call__(
        self,
        role: str,
        usage: Usage | None,
        cached: bool,
        kind: str | None,
        error: BaseException | None = None,
    ) -> None:
        if cached or role in self.reached:
            return
        if usage is not None or kind != "unreachable":
            self.reached.add(role)  # it answered (even an error means it is there)
            return
        self.why[role] = unreachable_reason(error)
        self.failed[role] = self.failed.get(role, 0) + 1
        if self.failed[role] >= self.after and self.stopped is None:
            self.stopped = role
            self.stop.set()


def _failed(record: UnitRecord) -> bool:
    return any(int(u.get("failed_calls", 0)) for u in record.usage.values())


def _drop_failed(
    kept: dict[StoredStage, dict[str, UnitRecord]],
    unfinished: Callable[[str, Rows], bool],
    needs: Mapping[Need, list[Need]] | None = None,
) -> int:
    """Forget kept units with a failed call, or solved ones the track calls `unfinished`,
    so they are done again: such a unit is not finished. A kept unit that needs a unit
    done again (`Plan.needs`, through any number of stages) is done again too, since it
    was made from an output about to be replaced. Returns how many."""
    dropped: set[Need] = set()  # ("solve", key) for a solved or scored unit
    for key in [k for k, r in kept["solved"].items() if _failed(r) or unfinished(k, r.rows)]:
        del kept["solved"][key]
        kept["scored"].pop(key, None)
        dropped.add(("solve", key))
    for key in [k for k, r in kept["scored"].items() if _failed(r)]:
        del kept["scored"][key]
        dropped.add(("solve", key))
    redo: set[Need] = set()
    for stage, records in kept.items():
        if stage not in ("solved", "scored"):
            for key in [k for k, r in records.items() if _failed(r)]:
                del records[key]
                redo.add((stage, key))
    dropped |= redo
    while needs and redo:
        now: set[Need] = set()
        for (stage, key), wanted in needs.items():
            held = kept["solved" if stage == "solve" else stage]
            if key in held and any(n in redo for n in wanted):
                del held[key]
                if stage == "solve":
                    kept["scored"].pop(key, None)
                now.add((stage, key))
        dropped |= now
        redo = now
    return len(dropped)


def json_config(config: Any) -> dict[str, Any]:
    """The config as the manifest records it (tuples as lists)."""
    out: dict[str, Any] = {}
    for stage in by_stage(config).values():
        out.update(stage)
    return {f.name: out[f.name] for f in dataclasses.fields(config)}


def _solve_roles(track: Track[Any, Any], run: Path) -> dict[str, dict[str, Any]]:
    old = RunFolder(run).manifest()
    if old is None:
        raise ValueError(f"{run} holds no readable manifest.json: not a finished run")
    solving = {r.name for r in track.roles if r.stage != "score"}  # and earlier stages
    return {k: v for k, v in old.roles.items() if k in solving}


def _score_roles(
    track: Track[Any, Any], roles: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    scoring = {r.name for r in track.roles if r.stage == "score"}
    return {k: v for k, v in roles.items() if k in scoring}


async def work_units(work: Work) -> tuple[int, int]:
    """Run every earlier stage's units still needed (stage by stage), then solve and
    score every unit not kept, each unit flowing on as soon as it is ready (the local
    executor; a Ray worker runs it on its batch); stop early when `watch` finds a role's
    server unreachable. A unit whose failed call comes through is `lost`: why, and what it
    spent; so is a unit whose earlier-stage unit was lost."""
    track, plan, config, given = work.track, work.plan, work.config, work.given
    kept, progress, lost, watch = work.kept, work.progress, work.lost, work.watch
    for st in track.stages:
        plan.done[st.name] = {k: r.rows for k, r in kept.get(st.name, {}).items()}
    earlier = work.stages_to_do()
    to_solve, to_score = work.to_do()
    total = sum(map(len, earlier.values())) + len(to_solve) + len(to_score)
    if not total:
        return 0, 0
    wanted = {r.name for r in track.roles if r.stage == "score"}
    if to_solve:
        wanted |= {r.name for r in track.roles if r.stage == "solve"}
    if any(earlier.values()):  # the model roles of earlier stages
        names = {st.name for st in track.stages}
        wanted |= {r.name for r in track.roles if r.stage in names}
    done = 0
    gate = asyncio.Semaphore(UNIT_CONCURRENCY)

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(what, done, total)

    def missing(key: str, stage: str) -> str | None:
        """Why unit `key` of `stage` cannot run: an earlier unit it needs did not finish."""
        for need in plan.needs.get((stage, key), []):
            if need[1] not in plan.done.get(need[0], {}):
                return f"its {need[0]} unit {need[1]!r} did not finish"
        return None

    async with opened(track.roles, given, sorted(wanted)) as models:
        watch.where = {role: public_url(m.provider.endpoint) for role, m in models.items()}
        work.caches.update((id(m.cache), m.cache) for m in models.values() if m.cache)

        async def earlier_one(stage: str, key: str) -> None:
            spent: Scope = {}
            where = f"{stage} {key}"
            if (why := missing(key, stage)) is not None:
                lost[0][where] = why
                return
            async with gate:
                try:
                    with usage_scope() as spent:
                        rows = await track.run_stage(
                            stage, plan.stages[stage][key], models, config, plan
                        )
                except ModelError as e:
                    lost[0][where] = f"{e} ({failure_kind(e)})"
                    lost[1][where] = _usage(spent)
                    return
                kept[stage][key] = UnitRecord(key, rows, _usage(spent))
                plan.done[stage][key] = rows
                work.save(stage, kept[stage][key])
                tick(stage)

        async def one(key: str) -> None:
            unit = plan.units[key]
            spent: Scope = {}
            if key not in kept["solved"] and (why := missing(key, "solve")) is not None:
                lost[0][key] = why
                return
            async with gate:
                try:
                    if key not in kept["solved"]:
                        with usage_scope() as spent:
                            rows = await track.solve(unit, models, config, plan)
                        kept["solved"][key] = UnitRecord(key, rows, _usage(spent))
                        work.save("solved", kept["solved"][key])
                        tick("solve")
                    if track.judged and key not in kept["scored"]:
                        with usage_scope() as spent:
                            rows = await track.score(
                                unit, kept["solved"][key].rows, models, config, plan
                            )
                        kept["scored"][key] = UnitRecord(key, rows, _usage(spent))
                        work.save("scored", kept["scored"][key])
                        tick("score")
                except ModelError as e:  # a track that lets a failed call through
                    lost[0][key] = f"{e} ({failure_kind(e)})"
                    lost[1][key] = _usage(spent)

        keys = [k for k in plan.units if k in to_solve or k in to_score]
        phases: list[tuple[str, list[Callable[[], Any]]]] = [
            (stage, [functools.partial(earlier_one, stage, k) for k in ks])
            for stage, ks in earlier.items()
            if ks
        ]
        if keys:
            main: list[Callable[[], Any]] = [functools.partial(one, k) for k in keys]
            phases.append(("solve" if to_solve else "score", main))
        for what, starts in phases:
            if progress is not None:
                progress(what, done, total)
            if not await _all(starts, watch):
                break
    return len(to_solve), len(to_score)


async def _all(starts: list[Callable[[], Any]], watch: Reachability) -> bool:
    """Run every coroutine `starts` makes at once; False when `watch` stopped the run
    first (the rest are cancelled). A unit's own error (a full disk, a bug) goes on up."""
    with watch_calls(watch):
        tasks = [asyncio.ensure_future(start()) for start in starts]
    stopper = asyncio.ensure_future(watch.stop.wait())
    everything = asyncio.gather(*tasks)
    try:
        either: list[asyncio.Future[Any]] = [everything, stopper]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if everything.done():
            everything.result()
            return True
        return False
    finally:
        stopper.cancel()
        everything.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(everything, *tasks, return_exceptions=True)


def _spent(usage: dict[str, Any]) -> dict[str, UsageTotals]:
    """Role -> calls of the run (usage.json's roles)."""
    out: dict[str, UsageTotals] = {}
    for role, t in usage["roles"].items():
        out.setdefault(role, UsageTotals()).add(t)
    return out


def _usage(spent: Scope) -> dict[str, dict[str, Any]]:
    return {role: {"model": name, **t.as_dict()} for role, (name, t) in spent.items()}


def usage_report(
    track: Track[Any, Any],
    kept: dict[StoredStage, dict[str, UnitRecord]],
    plan: Plan[Any],
    lost: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """usage.json, one schema for every track: calls and tokens per role, per stage and in
    all, summed over every unit of the run (those kept from earlier runs included), and
    over the units of this run that did not finish (`lost`: their calls were made)."""
    stages: dict[str, dict[str, tuple[list[str], UsageTotals]]] = {}
    pairs = tuple((st.name, st.name) for st in track.stages) + MAIN_STAGES
    lost = lost or {}
    for stage, name in pairs:
        main = stage in ("solved", "scored")
        records = [
            kept[stage].get(key) for key in (plan.units if main else plan.stages.get(stage, {}))
        ]
        usages: list[Mapping[str, Mapping[str, Any]]] = [r.usage for r in records if r]
        if stage == "solved":  # a lost unit's calls count under solve
            usages += [u for k, u in lost.items() if k in plan.units]
        elif not main:
            usages += [u for k, u in lost.items() if k.startswith(f"{stage} ")]
        for usage in usages:
            for role, spent in usage.items():
                names, totals = stages.setdefault(name, {}).setdefault(role, ([], UsageTotals()))
                for m in str(spent.get("model", "")).split(", "):
                    if m and m not in names:
                        names.append(m)
                totals.add(dict(spent))
    roles: dict[str, tuple[list[str], UsageTotals]] = {}
    total = UsageTotals()
    for by_role in stages.values():
        for role, (names, t) in by_role.items():
            have_names, have = roles.setdefault(role, ([], UsageTotals()))
            have_names.extend(n for n in names if n not in have_names)
            have.add(t)
            total.add(t)

    def entry(names: list[str], t: UsageTotals) -> dict[str, Any]:
        out = {"model": ", ".join(names), **t.as_dict()}
        if t.latency_ms:
            out["latency_ms"] = latency_summary(t.latency_ms)
        return out

    return {
        "roles": {r: entry(*v) for r, v in roles.items()},
        "stages": {s: {r: entry(*v) for r, v in by.items()} for s, by in stages.items()},
        "total": total.as_dict(),
        "definitions": USAGE_DEFINITIONS,
    }


def latency_summary(ms: list[float]) -> dict[str, float | int]:
    """The median and 95th percentile of call latencies (ms; numpy's linear interpolation)."""
    got = np.asarray(ms, dtype=float)
    return {
        "p50": round(float(np.percentile(got, 50)), 3),
        "p95": round(float(np.percentile(got, 95)), 3),
        "timed_calls": int(got.size),
    }


USAGE_DEFINITIONS = {
    "calls": "model calls made, cached and failed ones included",
    "cached_calls": "calls answered from the response cache (no new tokens)",
    "failed_calls": "calls that failed after their retries, and replies still unusable "
    "after their corrections (a rerun asks both again)",
    "hedged_requests": "duplicate requests sent beside a request left unanswered too long "
    "(the first reply wins; each call still counts once, with the winner's tokens)",
    "failed_by_kind": "failed_calls by cause: unreachable, timeout, rate_limited, server, "
    "rejected, empty, unreadable; a reply that came but could not be used: unparseable, "
    "schema, range (other: none of these)",
    "prompt_tokens": "prompt tokens of fresh calls, as the server reported them",
    "completion_tokens": "completion tokens of fresh calls",
    "tokens_processed": "prompt_tokens + completion_tokens",
    "latency_ms": "wall time of the role's calls that were timed (a memory system's ingest "
    "and recall calls): p50 and p95 in milliseconds",
    "memory": "the memory role: each ingest and recall call of every memory system; tokens "
    "are those the system reported spending itself (an LLM-backed memory layer)",
}


def models_of(given: Mapping[str, Given]) -> list[str]:
    """The model names a run was given (for the 'embedded is smoke quality' note)."""
    return [g.name if isinstance(g, Model) else g.model for g in given.values()]
