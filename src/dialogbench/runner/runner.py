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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dialogbench import __version__
from dialogbench.models.model import Model
from dialogbench.models.types import ModelError
from dialogbench.models.usage import Scope, UsageTotals, usage_scope
from dialogbench.runner.options import by_stage, check
from dialogbench.runner.record import (
    Manifest,
    Progress,
    RunFolder,
    StoredStage,
    UnitRecord,
    digest,
    to_json,
)
from dialogbench.runner.roles import Given, answering, opened, recorded, resolve
from dialogbench.runner.track import Outcome, Plan, Rows, Track, describe

EXIT_OK, EXIT_FAILURES = 0, 3
UNIT_CONCURRENCY = 256
"""Units in flight at once; each model's own limit bounds its requests."""


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
        """0: every row scored; 3: some rows failed (counted in `failures`)."""
        return EXIT_FAILURES if any(self.failures.values()) else EXIT_OK


def identities(
    track: Track[Any, Any],
    sha256: str,
    config: Any,
    roles: Mapping[str, dict[str, Any]],
    resolved: Mapping[str, Any],
) -> dict[str, str]:
    """The sha256 of what produced the solved units, and of what produced the scored."""
    stages = by_stage(config)
    role_stage = {r.name: r.stage for r in track.roles}
    roles = {k: answering(v) for k, v in roles.items()}  # not timeouts or connections
    solve = digest(
        {
            "track": track.name,
            "version": track.version,
            "dataset": sha256,
            "config": stages["solve"],
            "roles": {k: v for k, v in roles.items() if role_stage[k] == "solve"},
            "resolved": dict(resolved),
            "package_version": __version__,
        }
    )
    score = digest(
        {
            "solve": solve,
            "config": stages["score"],
            "roles": {k: v for k, v in roles.items() if role_stage[k] == "score"},
        }
    )
    return {"solve": solve, "score": score}


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
) -> Finished:
    """Run `track` on loaded `data` into the folder `out` and return what it found.

    `roles` gives each model role a `RoleSpec` or a `Model`. A rerun into the same folder
    keeps what still matches; `reuse` names another finished run whose solved units are
    taken as they are (how `dialogbench score` re-judges without the model under test);
    `solve=False` refuses to call the solving roles at all.
    """
    config = track.config_type() if config is None else config
    given = dict(roles or {})
    recorded_roles = recorded(track.roles, given)
    config = track.configure(config, frozenset(resolve(track.roles, given)))
    check(config)
    folder = RunFolder(out)
    plan = track.plan(data, config)
    info = plan.dataset or describe(data)
    manifest = Manifest(
        track=track.name,
        dataset=info,
        config=json_config(config),
        seed=getattr(config, "seed", 0),
        roles=recorded_roles,
        resolved=plan.resolved,
        warnings=list(plan.warnings),
    )
    if reuse is not None:
        manifest.roles = {**_solve_roles(track, reuse), **_score_roles(track, recorded_roles)}
    manifest.identity = identities(track, info.sha256, config, manifest.roles, plan.resolved)
    kept = folder.begin(manifest)
    retried = _drop_failed(kept)
    if reuse is not None:
        kept["solved"] = RunFolder(reuse).read("solved")
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
    counts = asyncio.run(_work(track, plan, config, given, folder, kept, progress, lost))
    stage: StoredStage = "scored" if track.judged else "solved"
    done = [key for key in plan.units if key in kept[stage]]
    if not done:
        first = next(iter(lost.values()), "no unit finished")
        raise ValueError(f"no unit of the run finished: {first}")
    rows = [row for key in done for row in kept[stage][key].rows]
    outcome = track.aggregate(plan, rows, config)
    usage = usage_report(track, kept, plan)
    warnings = list(plan.warnings) + list(outcome.warnings)
    warnings += [f"unit {key} not finished (rerun to retry): {why}" for key, why in lost.items()]
    folder.write_items(rows)
    folder.write("summary.json", to_json(outcome.summary))
    for name, content in outcome.files.items():
        folder.write(name, to_json(content))
    folder.write("usage.json", usage)
    folder.write("warnings.json", {"warnings": warnings, **outcome.notes})
    failed = {f"failed {role} calls": t["failed_calls"] for role, t in usage["roles"].items()}
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
        failures={
            **{k: v for k, v in failed.items() if v},
            **({"units not finished (a call failed)": len(lost)} if lost else {}),
            **{k: v for k, v in outcome.failures.items() if v},
        },
    )


def _failed(record: UnitRecord) -> bool:
    return any(int(u.get("failed_calls", 0)) for u in record.usage.values())


def _drop_failed(kept: dict[StoredStage, dict[str, UnitRecord]]) -> int:
    """Forget kept units with a failed call, so they are done again: a unit with a failed
    call is not finished. Returns how many."""
    solved = [k for k, r in kept["solved"].items() if _failed(r)]
    for key in solved:
        del kept["solved"][key]
        kept["scored"].pop(key, None)
    scored = [k for k, r in kept["scored"].items() if _failed(r)]
    for key in scored:
        del kept["scored"][key]
    return len(set(solved) | set(scored))


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
    solving = {r.name for r in track.roles if r.stage == "solve"}
    return {k: v for k, v in old.roles.items() if k in solving}


def _score_roles(
    track: Track[Any, Any], roles: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    scoring = {r.name for r in track.roles if r.stage == "score"}
    return {k: v for k, v in roles.items() if k in scoring}


async def _work(
    track: Track[Any, Any],
    plan: Plan[Any],
    config: Any,
    given: Mapping[str, Given],
    folder: RunFolder,
    kept: dict[StoredStage, dict[str, UnitRecord]],
    progress: Progress | None,
    lost: dict[str, str],
) -> tuple[int, int]:
    """Solve and score every unit not kept, each unit flowing on as soon as it is ready."""
    to_solve = [k for k in plan.units if k not in kept["solved"]]
    to_score = [k for k in plan.units if track.judged and k not in kept["scored"]]
    if not to_solve and not to_score:
        return 0, 0
    wanted = {r.name for r in track.roles if r.stage == "score"}
    if to_solve:
        wanted |= {r.name for r in track.roles if r.stage == "solve"}
    total = len(to_solve) + len(to_score)
    done = 0
    gate = asyncio.Semaphore(UNIT_CONCURRENCY)

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(what, done, total)

    async with opened(track.roles, given, sorted(wanted)) as models:

        async def one(key: str) -> None:
            unit = plan.units[key]
            async with gate:
                try:
                    if key not in kept["solved"]:
                        with usage_scope() as spent:
                            rows = await track.solve(unit, models, config, plan)
                        kept["solved"][key] = UnitRecord(key, rows, _usage(spent))
                        folder.save("solved", kept["solved"][key])
                        tick("solve")
                    if track.judged and key not in kept["scored"]:
                        with usage_scope() as spent:
                            rows = await track.score(
                                unit, kept["solved"][key].rows, models, config, plan
                            )
                        kept["scored"][key] = UnitRecord(key, rows, _usage(spent))
                        folder.save("scored", kept["scored"][key])
                        tick("score")
                except ModelError as e:  # a track that lets a failed call through
                    lost[key] = str(e)

        if progress is not None:
            progress("solve" if to_solve else "score", 0, total)
        await asyncio.gather(*(one(k) for k in plan.units if k in to_solve or k in to_score))
    return len(to_solve), len(to_score)


def _usage(spent: Scope) -> dict[str, dict[str, Any]]:
    return {role: {"model": name, **t.as_dict()} for role, (name, t) in spent.items()}


def usage_report(
    track: Track[Any, Any], kept: dict[StoredStage, dict[str, UnitRecord]], plan: Plan[Any]
) -> dict[str, Any]:
    """usage.json, one schema for every track: calls and tokens per role, per stage and in
    all, summed over every unit of the run (those kept from earlier runs included)."""
    stages: dict[str, dict[str, tuple[list[str], UsageTotals]]] = {}
    pairs: tuple[tuple[StoredStage, str], ...] = (("solved", "solve"), ("scored", "score"))
    for stage, name in pairs:
        for key in plan.units:
            record = kept[stage].get(key)
            for role, spent in (record.usage if record else {}).items():
                names, totals = stages.setdefault(name, {}).setdefault(role, ([], UsageTotals()))
                for m in str(spent.get("model", "")).split(", "):
                    if m and m not in names:
                        names.append(m)
                for f in dataclasses.fields(UsageTotals):
                    setattr(totals, f.name, getattr(totals, f.name) + int(spent.get(f.name, 0)))
    roles: dict[str, tuple[list[str], UsageTotals]] = {}
    total = UsageTotals()
    for by_role in stages.values():
        for role, (names, t) in by_role.items():
            have_names, have = roles.setdefault(role, ([], UsageTotals()))
            have_names.extend(n for n in names if n not in have_names)
            for f in dataclasses.fields(UsageTotals):
                setattr(have, f.name, getattr(have, f.name) + getattr(t, f.name))
                setattr(total, f.name, getattr(total, f.name) + getattr(t, f.name))

    def entry(names: list[str], t: UsageTotals) -> dict[str, Any]:
        return {"model": ", ".join(names), **t.as_dict()}

    return {
        "roles": {r: entry(*v) for r, v in roles.items()},
        "stages": {s: {r: entry(*v) for r, v in by.items()} for s, by in stages.items()},
        "total": total.as_dict(),
        "definitions": USAGE_DEFINITIONS,
    }


USAGE_DEFINITIONS = {
    "calls": "model calls made, cached and failed ones included",
    "cached_calls": "calls answered from the response cache (no new tokens)",
    "failed_calls": "calls that failed after their retries",
    "prompt_tokens": "prompt tokens of fresh calls, as the server reported them",
    "completion_tokens": "completion tokens of fresh calls",
    "tokens_processed": "prompt_tokens + completion_tokens",
}


def models_of(given: Mapping[str, Given]) -> list[str]:
    """The model names a run was given (for the 'embedded is smoke quality' note)."""
    return [g.name if isinstance(g, Model) else g.model for g in given.values()]
