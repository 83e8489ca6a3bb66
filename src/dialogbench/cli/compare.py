"""`dialogbench compare`: rank finished runs of one track, like for like.

`dialogbench compare TRACK RUN_DIR...` reads each run's manifest and refuses to rank runs
that differ in anything that should be held fixed while systems are compared: the dataset
(sha256), the answer model, the judge (and any other model role), the solve- and
score-stage settings (budgets, `k`, context size, limit, seed, prompts) and memory settings
other than the memory system itself. It says which field differs in which run; `--force`
ranks anyway under a loud warning. What names the system under comparison is allowed to
differ (`SYSTEM_FIELDS`: the memory system, the question track's contexts, a retriever
list, an answers file).

Otherwise each run's systems (a run of the question track answers with several contexts)
are ranked by the mean of a per-row metric (`PROFILES`: e.g. the judge score), with 95%
bootstrap intervals, and each is set against the best with a paired difference over the
units both scored (same subject and question), also with its interval.
`dialogbench compare reconstruction RUN_A RUN_B` keeps its own meaning: agreement between
two systems' reconstructions.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table
from rich.text import Text

from dialogbench.cli.ui import console, err, friendly_errors
from dialogbench.data.errors import DataError
from dialogbench.runner.track import REGISTRY, Track
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.realcompanion.reconstruction import compare_runs

compare_app = typer.Typer(help="Compare finished runs.", no_args_is_help=True)

SYSTEM_FIELDS = frozenset(
    {"memory", "systems", "retrievers", "detectors", "answers", "answers_sha256", "format"}
)
"""Config fields that name the system under comparison: free to differ between runs."""
MEMORY_NAME_KEYS = frozenset({"spec", "name", "system", "class", "kind", "url", "model"})
"""Keys of a `memory` settings object that name the system rather than set its budget."""
RESOLVED_FREE = frozenset({"answer systems", "answer models", "category map"})
"""Resolved entries compared elsewhere (the answer models) or that describe the file."""

Metric = Callable[[dict[str, Any]], float | None]


def _field(name: str) -> Metric:
    def get(row: dict[str, Any]) -> float | None:
        value = row.get(name)
        return float(value) if isinstance(value, int | float) and value is not None else None

    return get


def _reciprocal_rank(row: dict[str, Any]) -> float | None:
    """1 / the best reference rank (0 when none was retrieved), as `stats.metrics`."""
    ranks = row.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        return None
    found = [r for r in ranks if isinstance(r, int | float) and r is not None]
    return 1.0 / min(found) if found else 0.0


@dataclass(frozen=True)
class Profile:
    """How a track's rows rank: which keys name a unit, a system, a group; the metric."""

    units: tuple[str, ...]
    systems: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    """Keys that split the comparison (e.g. the rubric: lenient runs rank apart from strict)."""
    metric: str = "judge"
    metrics: Mapping[str, Metric] = field(default_factory=dict)
    """Derived metrics by name; any other name is read from the row's field."""

    def read(self, name: str) -> Metric:
        return self.metrics.get(name) or _field(name)


PROFILES: dict[str, Profile] = {
    "questions": Profile(("subject", "question"), ("system",)),
    "answers": Profile(("subject", "question"), groups=("rubric",)),
    "chat": Profile(("subject", "probe"), ("condition",), metric="content_match"),
    "retrieval": Profile(
        ("subject", "probe"), ("retriever",), metric="mrr", metrics={"mrr": _reciprocal_rank}
    ),
    "demo-awareness": Profile(("id",), metric="score"),
    "demo-interaction": Profile(("episode",), metric="average"),
}
"""Tracks `compare TRACK` ranks, and how."""


@dataclass
class Run:
    """A finished run as compare reads it."""

    path: Path
    manifest: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def label(self) -> str:
        return str(self.path)


def read_run(path: Path, track: str) -> Run:
    """A finished run of `track`: its manifest and items; a `DataError` otherwise."""
    manifest_path = path / "manifest.json"
    if not manifest_path.is_file() or not (path / "summary.json").is_file():
        raise DataError(path, "no finished run here", fix=f"run `dialogbench run {track}` first")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as e:
        raise DataError(manifest_path, f"not JSON ({e.msg})", fix="rerun the track") from None
    if manifest.get("track") != track:
        raise DataError(
            manifest_path,
            f"written by the {manifest.get('track')!r} track, not {track!r}",
            field="track",
            fix=f"compare runs of one track: dialogbench compare {manifest.get('track')} ...",
        )
    rows = []
    items = path / "items.jsonl"
    if items.is_file():
        rows = [json.loads(line) for line in items.read_text().splitlines() if line.strip()]
    return Run(path, manifest, rows)


# -- like for like ----------------------------------------------------------------------------


def _role_model(roles: Mapping[str, Any], name: str) -> Any:
    """The model that plays `name`, following `same_as`."""
    seen: set[str] = set()
    settings = roles.get(name)
    while isinstance(settings, dict) and "same_as" in settings and name not in seen:
        seen.add(name)
        name = settings["same_as"]
        settings = roles.get(name)
    return settings.get("model") if isinstance(settings, dict) else None


def _memory_settings(value: Any, prefix: str) -> dict[str, Any]:
    """A memory entry's settings other than the system's name (a bare spec has none)."""
    if not isinstance(value, dict):
        return {}
    return {f"{prefix}.{k}": v for k, v in value.items() if k not in MEMORY_NAME_KEYS}


def held_fixed(manifest: Mapping[str, Any], track: Track[Any, Any] | None) -> dict[str, Any]:
    """What must be the same across runs for their systems to be ranked: field -> value."""
    stages: dict[str, str] = {}
    if track is not None:
        stages = {
            f.name: f.metadata.get("stage", "solve") for f in dataclasses.fields(track.config_type)
        }
    out: dict[str, Any] = {"dataset sha256": manifest.get("dataset", {}).get("sha256")}
    roles = manifest.get("roles", {}) or {}
    for role in sorted(roles):
        if role == "memory":
            out.update(_memory_settings(roles[role], "memory role"))
            continue
        label = "answer model" if role == "model" else f"{role} model"
        out[label] = _role_model(roles, role)
    resolved = manifest.get("resolved", {}) or {}
    if "answer models" in resolved:
        out["answer model"] = resolved["answer models"]
    for name, value in sorted((manifest.get("config", {}) or {}).items()):
        if name == "memory":
            out.update(_memory_settings(value, "memory"))
        elif name not in SYSTEM_FIELDS and stages.get(name, "solve") != "aggregate":
            out[name] = value
    for name, value in sorted(resolved.items()):
        if name not in RESOLVED_FREE and "memory" not in name and "system" not in name:
            out[f"resolved {name}"] = value
    return out


@dataclass(frozen=True)
class Difference:
    """A held-fixed field whose value is not the same in every run."""

    field: str
    values: dict[str, Any]
    """Run -> its value ("(absent)" where the run does not record it)."""

    def line(self) -> str:
        shown = "; ".join(f"{run} = {_short(v)}" for run, v in self.values.items())
        return f"{self.field} differs: {shown}"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


ABSENT = "(absent)"


def differences(runs: Sequence[Run], track: Track[Any, Any] | None) -> list[Difference]:
    """Every held-fixed field that differs across `runs`, in a stable order."""
    fixed = {r.label: held_fixed(r.manifest, track) for r in runs}
    names = list(dict.fromkeys(n for f in fixed.values() for n in f))
    out = []
    for name in names:
        values = {run: f.get(name, ABSENT) for run, f in fixed.items()}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            out.append(Difference(name, values))
    return out


# -- ranking ----------------------------------------------------------------------------------


@dataclass
class Entry:
    """One system of one run, ranked within its group."""

    run: str
    system: str
    estimate: Estimate
    vs_best: Estimate | None = None
    """Mean paired difference best - this over the units both scored (None for the best, or
    when no unit aligns)."""
    paired: int = 0
    """Units both this and the best scored."""


@dataclass
class Comparison:
    """The ranking per group, the differences found, and whether it was forced."""

    track: str
    metric: str
    groups: dict[str, list[Entry]]
    differences: list[Difference]
    forced: bool
    left_out: dict[str, int]
    """`run system` -> rows without a usable metric (failed or unscored: never 0)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "track": self.track,
            "metric": self.metric,
            "forced": self.forced,
            "differences": [dataclasses.asdict(d) for d in self.differences],
            "left_out": self.left_out,
            "groups": {
                g: [
                    {
                        "rank": i + 1,
                        "run": e.run,
                        "system": e.system,
                        "estimate": e.estimate.model_dump(),
                        "vs_best": None if e.vs_best is None else e.vs_best.model_dump(),
                        "paired": e.paired,
                    }
                    for i, e in enumerate(entries)
                ]
                for g, entries in self.groups.items()
            },
        }


def _key(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    return "/".join(str(row.get(k)) for k in keys)


def rank(
    runs: Sequence[Run],
    profile: Profile,
    metric: str | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[dict[str, list[Entry]], dict[str, int]]:
    """Each (run, system) ranked by its mean metric per group, with paired differences to
    the group's best over the units both scored."""
    name = metric or profile.metric
    read = profile.read(name)
    scores: dict[str, dict[tuple[str, str], dict[str, float]]] = {}
    left_out: dict[str, int] = {}
    for run in runs:
        for row in run.rows:
            if any(k not in row for k in profile.units):
                continue  # not a scored unit row (e.g. a calibration probe)
            grouped = any(row.get(k) is not None for k in profile.groups)
            group = _key(row, profile.groups) if grouped else "all"
            system = _key(row, profile.systems) if profile.systems else "-"
            value = read(row)
            who = (run.label, system)
            bucket = scores.setdefault(group, {}).setdefault(who, {})
            if value is None or math.isnan(value):
                tag = f"{run.label} {system}"
                left_out[tag] = left_out.get(tag, 0) + 1
                continue
            bucket[_key(row, profile.units)] = value
    if not any(v for g in scores.values() for v in g.values()):
        numeric = sorted(
            {
                k
                for run in runs
                for row in run.rows
                for k, v in row.items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
        )
        raise ValueError(
            f"no row of these runs has a usable {name!r}; rank by another with --metric NAME "
            f"(numbers these rows hold: {', '.join(numeric) or 'none'})"
        )
    groups: dict[str, list[Entry]] = {}
    for group, by in scores.items():
        entries = []
        for (run_label, system), units in by.items():
            (est,) = bootstrap_means(
                np.array(list(units.values()), float)[:, None], n_boot=n_boot, seed=seed
            )
            entries.append(Entry(run_label, system, est))
        entries.sort(key=lambda e: -e.estimate.value if not math.isnan(e.estimate.value) else 1)
        best = by[(entries[0].run, entries[0].system)]
        for e in entries[1:]:
            mine = by[(e.run, e.system)]
            common = sorted(set(best) & set(mine))
            e.paired = len(common)
            if common:
                diff = np.array([best[u] - mine[u] for u in common], float)[:, None]
                (e.vs_best,) = bootstrap_means(diff, n_boot=n_boot, seed=seed)
        groups[group] = entries
    return groups, left_out


def compare(
    track_name: str,
    paths: Sequence[Path],
    *,
    force: bool = False,
    metric: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Check the runs are like for like (a `Refused` naming each difference unless
    `force`), then rank them."""
    if len(paths) < 2:
        raise ValueError("give two or more run folders to compare")
    if len({p.resolve() for p in paths}) < len(paths):
        raise ValueError("a run folder is named twice")
    profile = PROFILES[track_name]
    runs = [read_run(p, track_name) for p in paths]
    found = differences(runs, REGISTRY.get(track_name))
    if found and not force:
        raise Refused(found)
    groups, left_out = rank(runs, profile, metric, n_boot=n_boot, seed=seed)
    return Comparison(
        track_name, metric or profile.metric, groups, found, bool(found and force), left_out
    )


class Refused(ValueError):
    """Runs that are not like for like; the message names each field and run."""

    def __init__(self, found: Sequence[Difference]) -> None:
        self.differences = list(found)
        lines = "\n  ".join(d.line() for d in found)
        super().__init__(
            "refusing to rank runs that differ in what must be held fixed:\n  "
            f"{lines}\n(pass --force to rank them anyway)"
        )


# -- the commands ------------------------------------------------------------------------------


def _fmt(e: Estimate | None) -> str:
    if e is None or math.isnan(e.value):
        return ""
    return f"{e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}]"


def comparison_tables(c: Comparison) -> list[Table]:
    """One table per group: rank, run, system, the metric, n, the paired difference to the best."""
    tables = []
    for group, entries in c.groups.items():
        title = f"{c.track}: ranked by {c.metric} (95% bootstrap intervals)"
        if group != "all":
            title += f", {group}"
        table = Table(title=title, title_justify="left")
        for col in ("rank", "run", "system", c.metric, "n", "best - this (paired)", "pairs"):
            table.add_column(col, justify="right" if col not in ("run", "system") else "left")
        for i, e in enumerate(entries):
            table.add_row(
                str(i + 1),
                e.run,
                e.system,
                _fmt(e.estimate),
                str(e.estimate.n),
                _fmt(e.vs_best) if i else "",
                str(e.paired) if i else "",
            )
        tables.append(table)
    return tables


METRIC_HELP = "the per-row figure to rank by (default: the track's, named in the table title)"


def _ranking_command(track_name: str) -> Callable[..., None]:

    def command(
        runs: Annotated[list[Path], typer.Argument(help="finished run folders of the track")],
        force: Annotated[
            bool, typer.Option(help="rank even runs that are not like for like (loudly)")
        ] = False,
        metric: Annotated[str | None, typer.Option(help=METRIC_HELP)] = None,
        n_boot: Annotated[int, typer.Option(help="bootstrap resamples", min=1)] = 2000,
        seed: Annotated[int, typer.Option(help="seed of the bootstrap", min=0)] = 0,
        out: Annotated[Path | None, typer.Option(help="also write the ranking as JSON")] = None,
    ) -> None:
        with friendly_errors():
            c = compare(track_name, runs, force=force, metric=metric, n_boot=n_boot, seed=seed)
            if c.forced:
                err.print(
                    Text.assemble(
                        ("WARNING: RANKED ALTHOUGH NOT LIKE FOR LIKE (--force): ", "bold red"),
                        "; ".join(d.line() for d in c.differences),
                    )
                )
            for table in comparison_tables(c):
                console.print(table)
            for who, n in c.left_out.items():
                console.print(
                    Text.assemble(
                        ("note: ", "yellow"),
                        f"{who}: {n} rows without a {c.metric} (failed or unscored) left out",
                    )
                )
            if out is not None:
                out.write_text(json.dumps(c.as_json(), indent=2) + "\n")

    command.__doc__ = (
        f"Rank finished {track_name} runs, like for like: refused when their dataset, models, "
        "judge or settings differ (says which, in which run)."
    )
    return command


@compare_app.command("reconstruction")
def compare_reconstruction_cmd(
    run_a: Annotated[Path, typer.Argument(help="a reconstruction run folder")],
    run_b: Annotated[Path, typer.Argument(help="another, e.g. of a different model")],
    n_boot: Annotated[int, typer.Option(help="bootstrap resamples", min=1)] = 2000,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap", min=0)] = 0,
) -> None:
    """Agreement between two systems' reconstructions: field F1 of one against the other."""
    with friendly_errors():
        e = compare_runs(run_a, run_b, n_boot=n_boot, seed=seed)
        recorded = json.loads((run_a / "manifest.json").read_text(encoding="utf-8"))
        matcher = recorded.get("config", {}).get("matcher", "lexical")
        how = (
            "meaning matcher; the judge reads against gold only"
            if matcher == "judge"
            else (f"{matcher} matcher")
        )
        console.print(
            f"agreement (F1) {e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}] over {e.n} "
            f"subject-run pairs ({how})"
        )


for _name in PROFILES:
    compare_app.command(_name)(_ranking_command(_name))
