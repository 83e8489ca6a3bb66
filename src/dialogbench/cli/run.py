"""`dialogbench run TRACK`, generated from the track registry: one option per config
field (type, range, choices and help from the field), one option group per model role,
then the runner; and `dialogbench score`, which re-judges a finished run."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from contextlib import suppress
from dataclasses import MISSING, Field, dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from dialogbench import plugins
from dialogbench.cli.ui import (
    EXIT_USAGE,
    console,
    csv,
    err,
    generated,
    param,
    with_progress,
)
from dialogbench.data.demo.registry import load_demo
from dialogbench.data.registry import load_dataset
from dialogbench.models.spec import (
    DEFAULT_DEADLINE_S,
    DEFAULT_RETRY_AFTER_MAX_S,
    DEFAULT_TIMEOUT_S,
    IN_PROCESS,
    IN_PROCESS_DEADLINE_S,
    IN_PROCESS_TIMEOUT_S,
)
from dialogbench.plugins import PluginError
from dialogbench.runner.executor import make_executor
from dialogbench.runner.options import OptionError, check, describe, flag, kind_of, metavar
from dialogbench.runner.record import RunFolder
from dialogbench.runner.rescore import finished_manifest, rescore
from dialogbench.runner.roles import (
    DEFAULT_MAX_CONNECTIONS,
    Role,
    RoleSpec,
)
from dialogbench.runner.runner import Finished, models_of, run_track
from dialogbench.runner.status import EXIT_STATUS_HELP
from dialogbench.runner.track import Track, find_track, plugin_tracks

EMBEDDED_NOTE = "the embedded model is smoke quality: its scores only show the run works"


def load_data(track: Track[Any, Any], name: str, seed: int = 0) -> Any:
    """The dataset a track reads: RealCompanion-shaped, or a DEMO set."""
    if track.corpus == "demo":
        return load_demo(name, seed=seed)
    return load_dataset(name)


@dataclass(frozen=True)
class RoleOption:
    """An option every model role has, after the role's prefix (`--judge-base-url`)."""

    key: str
    kind: Any
    default: Any
    metavar: str
    help: str
    """`{role}` stands for the role's name."""
    per_judge: bool = False
    """Says how to reach one model: given once per judge on `score` (a panel)."""


ROLE_OPTIONS = (
    RoleOption(
        "base_url",
        str | None,
        None,
        "URL",
        "the {role}'s server URL, e.g. http://host:8000/v1",
        per_judge=True,
    ),
    RoleOption(
        "api_key_env",
        str | None,
        None,
        "VAR",
        "environment variable holding the {role}'s API key",
        per_judge=True,
    ),
    RoleOption(
        "max_connections",
        int,
        DEFAULT_MAX_CONNECTIONS,
        "N",
        "requests in flight to the {role} at once",
    ),
    RoleOption(
        "timeout", float, DEFAULT_TIMEOUT_S, "SECONDS", "seconds one request to the {role} may take"
    ),
    RoleOption(
        "deadline",
        float,
        DEFAULT_DEADLINE_S,
        "SECONDS",
        "seconds one call to the {role} may take in all, retries included",
    ),
    RoleOption(
        "retry_after_max",
        float,
        DEFAULT_RETRY_AFTER_MAX_S,
        "SECONDS",
        "the longest a Retry-After from the {role}'s server is waited, in seconds",
    ),
)
"""The options of a role beside its model (`--model`, `--judge-model`)."""

PER_JUDGE = " (once, or once per judge)"


def role_prefix(role: Role) -> str:
    return "" if role.name == "model" else f"{role.name}-"


def role_params(role: Role, *, panel: bool = False) -> list[inspect.Parameter]:
    """--model / --judge-model / --partner-model and the role's endpoint options; with
    `panel`, the model and how to reach it are repeatable, one per judge (`score`)."""
    p = role_prefix(role)
    u = p.replace("-", "_")
    first = "--model" if role.name == "model" else f"--{role.name}-model"
    fallback = f" (default: the {role.fallback})" if role.fallback else ""

    def one(
        key: str, kind: Any, default: Any, names: tuple[str, ...], text: str, metavar: str
    ) -> inspect.Parameter:
        info = typer.Option(*names, help=text, metavar=metavar, rich_help_panel=f"{role.name} role")
        return param(u + key, kind, default, info)

    many = list[str] | None
    params = [
        one("model", many if panel else str | None, None, (first,), role.help + fallback, "SPEC")
    ]
    for o in ROLE_OPTIONS:
        flag = o.key.replace("_", "-")
        names = (f"--{p}{flag}",) + ((f"--model-{flag}",) if not p else ())
        split = panel and o.per_judge
        text = o.help.format(role=role.name) + (PER_JUDGE if split else "")
        params.append(one(o.key, many if split else o.kind, o.default, names, text, o.metavar))
    return params


TIMING = {"timeout_s": "timeout", "deadline_s": "deadline", "retry_after_max_s": "retry-after-max"}
"""A role's timing fields and their options (after the role's prefix)."""
TIMING_DEFAULTS = {
    "timeout_s": DEFAULT_TIMEOUT_S,
    "deadline_s": DEFAULT_DEADLINE_S,
    "retry_after_max_s": DEFAULT_RETRY_AFTER_MAX_S,
}


def given_roles(track: Track[Any, Any], options: dict[str, Any]) -> dict[str, RoleSpec]:
    """RoleSpecs for the roles given on the command line (pops their options)."""
    given: dict[str, RoleSpec] = {}
    for role in track.roles:
        u = role_prefix(role).replace("-", "_")
        spec = options.pop(f"{u}model" if u else "model")
        base_url = options.pop(f"{u}base_url")
        key_env = options.pop(f"{u}api_key_env")
        conns = options.pop(f"{u}max_connections")
        timing = {f: options.pop(u + o.replace("-", "_")) for f, o in TIMING.items()}
        p = role_prefix(role)
        if conns < 1:
            raise ValueError(f"--{p}max-connections: {conns} is below the minimum 1")
        if spec is None:
            given_opts = (("base-url", base_url), ("api-key-env", key_env))
            stray = [o for o, v in given_opts if v is not None]
            stray += [o for f, o in TIMING.items() if timing[f] != TIMING_DEFAULTS[f]]
            if stray:
                name = "--model" if role.name == "model" else f"--{role.name}-model"
                raise ValueError(f"--{p}{stray[0]} given without {name}")
            continue
        if (spec if spec == "embedded" else spec.partition("/")[0]) in IN_PROCESS:
            untouched = {"timeout_s": IN_PROCESS_TIMEOUT_S, "deadline_s": IN_PROCESS_DEADLINE_S}
            for f, seconds in untouched.items():
                if timing[f] == TIMING_DEFAULTS[f]:  # not given: room for a CPU's generation
                    timing[f] = seconds
        given[role.name] = RoleSpec(spec, base_url, key_env, conns, **timing)
        try:
            given[role.name].parsed()  # a bad URL or key name is an error before any work
        except ValueError as e:
            raise ValueError(_role_options(str(e), p)) from None
    return given


_SPEC_OPTIONS = ("--base-url", "--api-key-env", "--timeout", "--deadline", "--retry-after-max")


def _role_options(message: str, prefix: str) -> str:
    """A spec's error with its options named as the role's (`--judge-timeout`)."""
    if not prefix:
        return message
    for option in _SPEC_OPTIONS:
        message = message.replace(option, f"--{prefix}{option[2:]}")
    return message


def _default_text(f: Field[Any]) -> str:
    value = f.default
    if f.default_factory is not MISSING:
        value = f.default_factory()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or '""'
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else str(value)


def field_params(config_type: type[Any]) -> list[inspect.Parameter]:
    """One option per config field; values arrive as text and are read by `read_field`."""
    params = []
    for f in fields(config_type):
        kind = kind_of(config_type, f.name)
        help_text = describe(config_type, f)
        panel = f.metadata.get("panel") or f"{f.metadata.get('stage', 'solve')} options"
        if kind.base is bool and not kind.many:
            name = flag(f.name, f)[2:]
            option = typer.Option(
                f"--{name}/--no-{name}",
                help=help_text,
                show_default=_default_text(f),
                rich_help_panel=panel,
            )
            default: Any = f.default
            annotation: Any = bool
        else:
            option = typer.Option(
                flag(f.name, f),
                help=help_text,
                show_default=_default_text(f),
                metavar=metavar(config_type, f),
                rich_help_panel=panel,
            )
            default, annotation = None, str | None
        params.append(param(f.name, annotation, default, option))
    return params


def read_field(config_type: type[Any], f: Field[Any], text: str) -> Any:
    """A field's value from its option text: numbers, lists, none; `OptionError` if not."""
    kind = kind_of(config_type, f.name)
    if kind.optional and text.strip().lower() in ("", "none"):
        return None
    parse = f.metadata.get("parse")

    def one(item: str) -> Any:
        if parse is not None:
            try:
                return parse(item)
            except ValueError as e:
                raise OptionError(f.name, str(e), f) from None
        try:
            return kind.base(item) if kind.base is not str else item
        except ValueError:
            what = {int: "an integer", float: "a number"}.get(kind.base, "a value")
            raise OptionError(f.name, f"{item!r} is not {what}", f) from None

    if kind.many:
        values = [one(v) for v in csv(text)]
        return tuple(sorted(values) if f.metadata.get("sort") else values)
    return one(text.strip())


def build_config(track: Track[Any, Any], options: dict[str, Any]) -> Any:
    """The track's config from the option values (unset options keep the field default)."""
    values: dict[str, Any] = {}
    for f in fields(track.config_type):
        got = options.pop(f.name)
        if isinstance(got, str):
            values[f.name] = read_field(track.config_type, f, got)
        elif isinstance(got, bool):
            values[f.name] = got
    config = track.config_type(**values)
    check(config)
    return config


def executor_params() -> list[inspect.Parameter]:
    """--executor and --ray-address: where the units run (`runner.executor`)."""
    where = "where the units run: local (this process) or ray (a Ray cluster)"
    ray = "the Ray cluster (auto, ray://host:10001; default: a local Ray)"
    return [
        param("executor", str, "local", typer.Option(help=where, rich_help_panel="Execution")),
        param(
            "ray_address",
            str | None,
            None,
            typer.Option(help=ray, metavar="ADDRESS", rich_help_panel="Execution"),
        ),
    ]


def run_command(track: Track[Any, Any]) -> Callable[..., None]:
    """The `dialogbench run NAME` command of one track."""
    default_data = "sample" if track.corpus == "realcompanion" else None
    data_help = "a dataset name (`dialogbench data list`) or a path" + (
        "" if default_data else " (required)"
    )
    params = [
        param(
            "dataset", str | None, default_data, typer.Option(help=data_help, metavar="NAME|PATH")
        ),
        param(
            "out",
            Path,
            Path(f"runs/{track.name}"),
            typer.Option(help="run folder (a rerun resumes it)"),
        ),
    ]
    for role in track.roles:
        params += role_params(role)
    params += field_params(track.config_type)
    params += executor_params()

    def body(options: dict[str, Any]) -> int:
        dataset, out = options.pop("dataset"), options.pop("out")
        executor = make_executor(options.pop("executor"), options.pop("ray_address"))
        given = given_roles(track, options)
        config = build_config(track, options)
        RunFolder(out)  # a file named by --out is an error before the data loads
        if dataset is None:
            raise ValueError("give --dataset (a name from `dialogbench data list`, or a path)")
        data = load_data(track, dataset, getattr(config, "seed", 0))
        finished = with_progress(
            f"{track.name} on {data.name}",
            lambda progress: run_track(
                track, data, out, config, given, progress, executor=executor, say=notice
            ),
        )
        show(track, finished, config, given, data)
        return finished.exit_code

    return generated(params, body, track.summary)


def notice(text: str) -> None:
    """Say one of the plan's notices before the run starts (on stderr, above the bar)."""
    err.print(Text.assemble(("note: ", "yellow"), text))


def show(
    track: Track[Any, Any], finished: Finished, config: Any, given: dict[str, Any], data: Any
) -> None:
    """Print a finished run: the track's tables, its own warnings (the data's repairs stay in
    warnings.json), failures, the embedded note and what it wrote."""
    console.print(f"[bold]{track.name}[/] on {data.name} (sha256 {data.sha256[:12]})")
    for thing in track.show(finished.outcome, config):
        console.print(thing)
    for role, settings in finished.manifest.roles.items():
        if "same_as" in settings:
            console.print(
                f"note: the {role} is the {settings['same_as']} (pass --{role}-model to set it "
                "apart)"
            )
    for n in finished.notices:
        console.print(Text.assemble(("note: ", "yellow"), n))
    known = set(getattr(data, "warnings", []))
    for w in finished.outcome.warnings:
        if w not in known:
            style = "bold red" if w.startswith("CONTROL FAILED") else "yellow"
            console.print(Text.assemble(("warning: ", style), w))
    if known:
        console.print(
            f"[yellow]{len(known)} data warnings[/] (listed in {finished.path}/warnings.json)"
        )
    for repair in finished.repairs:
        err.print(Text.assemble(("warning: ", "yellow"), repair))
    show_failures(finished)
    if "embedded" in models_of(given):
        console.print(EMBEDDED_NOTE)
    wrote = sorted(p.name for p in finished.path.iterdir() if p.is_file())
    console.print(f"wrote {finished.path}/: {', '.join(wrote)}")


def show_failures(finished: Finished) -> None:
    """What failed, by cause (failed calls also by kind), and how to retry it."""
    for cause, n in finished.failures.items():
        role = cause.removeprefix("failed ").removesuffix(" calls")
        kinds = finished.failed_by_kind.get(role, {}) if cause.startswith("failed ") else {}
        detail = ", ".join(f"{k} {v}" for k, v in kinds.items())
        line = f"{n} {cause}" + (f" ({detail})" if detail else "")
        err.print(Text.assemble(("failed: ", "bold red"), line))
    for key, why in list(finished.lost.items())[:SHOWN_LOST]:
        err.print(Text.assemble(("not finished: ", "bold red"), f"unit {key}: {why}"))
    if len(finished.lost) > SHOWN_LOST:
        err.print(f"... and {len(finished.lost) - SHOWN_LOST} more units (warnings.json)")
    for role, url in finished.unreachable.items():
        line = f"the {role}'s server at {url} could not be reached: every call to it failed"
        err.print(Text.assemble(("error: ", "bold red"), line))
    if finished.failures:
        err.print("rerun the same command to retry exactly what failed (the rest is kept)")


SHOWN_LOST = 3
"""Units not finished whose reason the terminal shows (all are in warnings.json)."""

ORDER = (
    "retrieval",
    "detection",
    "chat",
    "questions",
    "reconstruction",
    "coverage",
    "privacy",
    "demo-awareness",
    "demo-interaction",
)
"""The order `dialogbench run --help` lists the built-in tracks in; others follow."""


def register_commands(app: typer.Typer, tracks: dict[str, Track[Any, Any]]) -> None:
    known = [tracks[n] for n in ORDER if n in tracks]
    for track in known + [t for n, t in tracks.items() if n not in ORDER]:
        app.command(track.name, help=track.summary, epilog=EXIT_STATUS_HELP)(run_command(track))


class TrackCommands(TyperGroup):
    """The `run` group: the commands registered above, then those of the tracks installed
    packages declare (`dialogbench.tracks` entry points), each built from its config and
    roles when first named, or listed by `dialogbench run --help`. A plugin that cannot be
    used becomes a command that says why in one line (exit 2), and a plugin named like a
    built-in track is refused with a warning; neither touches the other commands.

    (Contexts and commands are typed Any: typer >= 0.22 vendors its own click.)"""

    def list_commands(self, ctx: Any) -> list[str]:
        listed = super().list_commands(ctx)
        try:
            return listed + [n for n in plugin_tracks() if n not in self.commands]
        except PluginError:
            return listed

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            with suppress(PluginError):
                find_track(cmd_name)  # a built-in: warns if a plugin asks for its name
            return self.commands[cmd_name]
        try:
            track = find_track(cmd_name)
            if track is None:
                return None
            command = _one_command(
                run_command(track), track.name, help=track.summary, epilog=EXIT_STATUS_HELP
            )
        except PluginError as e:
            command = _unusable(cmd_name, str(e))
        except Exception as e:  # the plugin's config or roles make no options
            ep = plugins.named(plugins.TRACKS, cmd_name)
            what = plugins.origin(ep) if ep else f"track {cmd_name!r}"
            command = _unusable(cmd_name, f"cannot make a command of {what}: {plugins.why(e)}")
        self.commands[cmd_name] = command
        return command


def _one_command(function: Callable[..., None], name: str, **settings: Any) -> Any:
    """`function` as a command of its own (what `app.command(name)` would register)."""
    one = typer.Typer(add_completion=False)
    one.command(name, **settings)(function)
    return typer.main.get_command(one)


def _unusable(name: str, why: str) -> Any:
    """A command standing in for a plugin that cannot be used: it says why, exit 2."""

    def fail(args: Annotated[list[str] | None, typer.Argument(hidden=True)] = None) -> None:
        err.print(Text.assemble(("error: ", "bold red"), why))
        raise typer.Exit(EXIT_USAGE)

    return _one_command(
        fail,
        name,
        help=f"(cannot be used) {why}",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


def _per_judge(values: list[str] | None, n: int, option: str) -> list[str | None]:
    if not values:
        return [None] * n
    if len(values) == 1:
        return [values[0]] * n
    if len(values) != n:
        raise ValueError(f"give {option} once, or once per --judge-model ({n})")
    return list(values)


def setting_changes(track: Track[Any, Any], settings: list[str]) -> dict[str, Any]:
    """`--set n_boot=500` pairs, for score- and aggregate-stage fields only."""
    by_name = {f.name: f for f in fields(track.config_type)}
    changes: dict[str, Any] = {}
    for item in settings:
        name, sep, text = item.partition("=")
        key = name.strip().lstrip("-").replace("-", "_")
        if not sep or key not in by_name:
            allowed = ", ".join(n for n, f in by_name.items() if f.metadata.get("stage") != "solve")
            raise ValueError(f"--set {item!r}: expected NAME=VALUE with NAME one of {allowed}")
        f = by_name[key]
        if f.metadata.get("stage", "solve") == "solve":
            raise ValueError(
                f"--set {key}: it changes what the model under test is asked; rerun the track "
                "with it instead"
            )
        changes[key] = read_field(track.config_type, f, text)
    return changes


def judges_of(options: dict[str, Any]) -> list[RoleSpec]:
    """The judges of a panel (`role_params(..., panel=True)`; pops their options), each
    checked before any work."""
    specs = options.pop("judge_model") or []
    urls = _per_judge(options.pop("judge_base_url"), len(specs), "--judge-base-url")
    keys = _per_judge(options.pop("judge_api_key_env"), len(specs), "--judge-api-key-env")
    conns = options.pop("judge_max_connections")
    timing = {f: options.pop("judge_" + o.replace("-", "_")) for f, o in TIMING.items()}
    if conns < 1:
        raise ValueError(f"--judge-max-connections: {conns} is below the minimum 1")
    judges = [RoleSpec(m, u, k, conns, **timing) for m, u, k in zip(specs, urls, keys, strict=True)]
    for j in judges:
        try:
            j.parsed()
        except ValueError as e:
            raise ValueError(_role_options(str(e), "judge-")) from None
    return judges


PANEL = "judge spec; repeat for a panel"
"""The help of a panel's `--judge-model`."""


def score_command() -> Callable[..., None]:
    """`dialogbench score RUN_DIR`: the judges (a panel), --out and --set."""
    run_dir = typer.Argument(help="a finished run folder")
    params = [
        inspect.Parameter(
            "run_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Annotated[Path, run_dir]
        ),
        *role_params(Role("judge", "score", PANEL + " (default: the run's own judge)"), panel=True),
        param(
            "out",
            Path | None,
            None,
            typer.Option(
                help="new run folder (default: RUN_DIR/judges/JUDGE/ for each judge; with no "
                "--judge-model, RUN_DIR itself)"
            ),
        ),
        param(
            "set_",
            list[str] | None,
            None,
            typer.Option(
                "--set", help="NAME=VALUE of a score or aggregate setting, e.g. n_boot=500"
            ),
        ),
    ]

    def body(options: dict[str, Any]) -> int:
        run_dir: Path = options.pop("run_dir")
        out: Path | None = options.pop("out")
        _, track = finished_manifest(run_dir)
        judges = judges_of(options)
        changes = setting_changes(track, options.pop("set_") or [])
        result = with_progress(
            f"score {run_dir}",
            lambda progress: rescore(run_dir, judges, out, load_data, progress, changes),
        )
        for name, finished in result.runs.items():
            if name:
                console.print(f"[bold]judge {name}[/] -> {finished.path}")
            for thing in track.show(finished.outcome, finished.config):
                console.print(thing)
            for repair in finished.repairs:
                err.print(Text.assemble(("warning: ", "yellow"), repair))
            show_failures(finished)
        if result.agreement is not None and result.spread is not None:
            console.print(panel_table(result.agreement, result.spread))
        return result.exit_code

    return generated(
        params,
        body,
        "Re-judge and re-aggregate a finished run from its saved outputs (the model under "
        "test is never called). Two or more --judge-model: figures per judge, their "
        "agreement (Krippendorff's alpha) and the spread of each headline figure.",
    )


def panel_table(agreement: dict[str, Any], spread: dict[str, dict[str, float]]) -> Table:
    """Each headline figure per judge with its spread, under the judges' alpha."""
    alpha = agreement["krippendorff_alpha"]
    shown = "undefined (no variation)" if alpha is None else f"{alpha:.3f}"
    table = Table(
        title=f"Judges: Krippendorff's alpha {shown} over {agreement['rows']} rows",
        title_justify="left",
    )
    judges = list(agreement["judges"])
    table.add_column("figure", style="bold")
    for j in [*judges, "spread"]:
        table.add_column(j, justify="right")
    for figure, values in spread.items():
        table.add_row(figure, *(f"{values.get(j, math.nan):.3f}" for j in [*judges, "spread"]))
    return table


__all__ = ["EXIT_USAGE", "register_commands", "run_command"]
