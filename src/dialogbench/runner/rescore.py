"""Re-judge and re-aggregate a finished run (`dialogbench score`), with one judge or a
panel: the saved outputs of the model under test are scored again, never regenerated.

With two or more judges every judged figure is reported per judge, with Krippendorff's
alpha between the judges over the rows they all scored and the spread (max - min) of each
headline figure: how much the numbers depend on who judges.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dialogbench.data.errors import DataError
from dialogbench.data.io import source_from_record
from dialogbench.data.safe_names import encode_name, encode_names
from dialogbench.judging.panel import rating_agreement
from dialogbench.runner.options import kind_of
from dialogbench.runner.record import Manifest, Progress, RunFolder, write_json
from dialogbench.runner.roles import Given, RoleSpec
from dialogbench.runner.runner import Finished, run_track
from dialogbench.runner.track import Track, find_track

Loader = Callable[[Track[Any, Any], str, int], Any]


@dataclass
class Rescored:
    """One re-judged run per judge, and, for a panel, how far the judges agree."""

    runs: dict[str, Finished]
    """Judge label -> its finished run."""
    agreement: dict[str, Any] | None = None
    """alpha, rows and judges (a panel only)."""
    spread: dict[str, dict[str, float]] | None = None
    """Headline figure -> {judge label: value, "spread": max - min} (a panel only)."""

    @property
    def exit_code(self) -> int:
        return max((f.exit_code for f in self.runs.values()), default=0)


def finished_manifest(run: Path) -> tuple[Manifest, Track[Any, Any]]:
    """The manifest of a finished run and the track that wrote it."""
    manifest = RunFolder(run).manifest()
    if manifest is None or not (run / "summary.json").exists():
        raise DataError(
            run, "no finished run here", fix="give the folder a `dialogbench run` wrote"
        )
    track = find_track(manifest.track)
    if track is None:
        raise DataError(
            run / "manifest.json",
            f"unknown track {manifest.track!r}",
            field="track",
            fix="install the package that provides it (entry point group dialogbench.tracks)",
        )
    if not manifest.identity:
        raise DataError(
            run / "manifest.json",
            "written by an older dialogbench without unit identities",
            fix="rerun the track with this version, then score it",
        )
    return manifest, track


def config_from(track: Track[Any, Any], recorded: Mapping[str, Any], **changes: Any) -> Any:
    """The track's config as a manifest recorded it (lists back to tuples), with `changes`."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(track.config_type):
        if f.name in recorded:
            value = recorded[f.name]
            if kind_of(track.config_type, f.name).many and isinstance(value, list):
                value = tuple(value)
            values[f.name] = value
    values.update(changes)
    return track.config_type(**values)


def solve_roles(track: Track[Any, Any], manifest: Manifest, run: Path) -> dict[str, Given]:
    """The roles that produced the saved outputs, rebuilt from the manifest, so the solve
    identity matches (nothing is asked of them: every unit is already solved)."""
    given: dict[str, Given] = {}
    for role in track.roles:
        if role.stage != "solve" or role.name not in manifest.roles:
            continue
        settings = manifest.roles[role.name]
        if "same_as" in settings:
            continue
        if "base_url" not in settings:
            raise DataError(
                run / "manifest.json",
                f"the {role.name} role was a model object given in Python, not a spec",
                field=f"roles.{role.name}",
                fix="re-judge it from Python with run_track(..., reuse=RUN_DIR)",
            )
        given[role.name] = RoleSpec(
            settings["model"],
            settings.get("base_url"),
            settings.get("api_key_env"),
            int(settings.get("max_connections", 16)),
        )
    return given


def label(spec: RoleSpec) -> str:
    """A folder-safe name for a judge (`data.safe_names.encode_name` of its model)."""
    return encode_name(spec.model)


def labels(specs: Sequence[RoleSpec]) -> list[str]:
    """Folder-safe names for a panel's judges: two models that would share a folder
    (`a/b` and `a_b`, or differing only by case) each get a short digest; a judge given
    twice is refused."""
    names = encode_names([j.model for j in specs])
    if len(set(names)) < len(names):
        raise ValueError(f"give each judge once; repeated: {sorted(set(names))}")
    return names


def rescore(
    run: Path,
    judges: Sequence[RoleSpec],
    out: Path | None,
    load: Loader,
    progress: Progress | None = None,
    changes: Mapping[str, Any] | None = None,
) -> Rescored:
    """Re-judge `run` with each of `judges`, writing each to `out` (one judge) or to
    `out/<judge>/` (a panel); by default to `run/judges/<judge>/`, so the run itself is left
    as it was. No judge: re-score and re-aggregate with `changes`, in `out` or in place."""
    manifest, track = finished_manifest(run)
    if judges and not any(r.name == "judge" for r in track.roles):
        how = "re-score it with --set" if track.judged else "re-aggregate it with --set"
        raise ValueError(f"the {track.name} track has no judge; {how} NAME=VALUE")
    config = config_from(track, manifest.config, **dict(changes or {}))
    data = load_recorded(track, manifest, run, load, getattr(config, "seed", 0))
    base = solve_roles(track, manifest, run)
    if not judges:
        kept = _score_roles(track, manifest)
        return Rescored({"": _one(track, data, run, out, config, {**base, **kept}, progress)})
    if len(judges) == 1:
        given = {**base, "judge": judges[0]}
        target = out if out is not None else run / "judges" / label(judges[0])
        return Rescored({label(judges[0]): _one(track, data, run, target, config, given, progress)})
    root = out if out is not None else run / "judges"
    runs = {
        name: _one(track, data, run, root / name, config, {**base, "judge": j}, progress)
        for name, j in zip(labels(judges), judges, strict=True)
    }
    result = Rescored(runs, *panel_figures(track, runs))
    write_json(
        root / "judges.json",
        {"run": str(run), "agreement": result.agreement, "spread": result.spread},
    )
    return result


def _score_roles(track: Track[Any, Any], manifest: Manifest) -> dict[str, Given]:
    given: dict[str, Given] = {}
    for role in track.roles:
        settings = manifest.roles.get(role.name, {})
        if role.stage == "score" and "base_url" in settings:
            given[role.name] = RoleSpec(
                settings["model"], settings.get("base_url"), settings.get("api_key_env")
            )
    return given


def _one(
    track: Track[Any, Any],
    data: Any,
    run: Path,
    out: Path | None,
    config: Any,
    given: Mapping[str, Given],
    progress: Progress | None,
) -> Finished:
    target = run if out is None else out
    same = target.resolve() == run.resolve()
    return run_track(
        track, data, target, config, given, progress, reuse=None if same else run, solve=False
    )


def load_recorded(
    track: Track[Any, Any], manifest: Manifest, run: Path, load: Loader, seed: int
) -> Any:
    """The run's dataset, loaded again by name (else by source) and checked by sha256."""
    last: Exception | None = None
    source = source_from_record(manifest.dataset.source, run)
    for where in dict.fromkeys([manifest.dataset.name, source]):
        try:
            data = load(track, where, seed)
        except (DataError, ValueError, OSError) as e:
            last = e
            continue
        if data.sha256 != manifest.dataset.sha256:
            raise DataError(
                run / "manifest.json",
                f"dataset {where!r} has changed since the run (sha256 {data.sha256[:12]} now, "
                f"{manifest.dataset.sha256[:12]} then)",
                field="dataset.sha256",
                fix="score against the data the run used",
            )
        return data
    raise DataError(
        run / "manifest.json",
        f"cannot load the run's dataset {manifest.dataset.name!r}: {last}",
        field="dataset",
        fix="make the dataset available again (DIALOGBENCH_DATA, or the same path)",
    )


def panel_figures(
    track: Track[Any, Any], runs: Mapping[str, Finished]
) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """Alpha between judges over their per-row judgments, and each headline's spread."""
    judged = {name: track.judgments(f.rows) for name, f in runs.items()}
    alpha, rows = rating_agreement(judged)
    agreement = {
        "krippendorff_alpha": None if math.isnan(alpha) else alpha,
        "level": "interval",
        "rows": rows,
        "judges": list(runs),
    }
    spread: dict[str, dict[str, float]] = {}
    for name, f in runs.items():
        for figure, value in track.headline(f.outcome).items():
            spread.setdefault(figure, {})[name] = value
    for values in spread.values():
        finite = [v for v in values.values() if not math.isnan(v)]
        values["spread"] = max(finite) - min(finite) if finite else math.nan
    return agreement, spread
