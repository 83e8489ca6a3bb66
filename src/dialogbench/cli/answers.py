"""`dialogbench score`: re-judge a finished run (`dialogbench score RUN_DIR`, also spelled
`dialogbench score run RUN_DIR`), or judge answers produced elsewhere
(`dialogbench score questions --answers FILE --format FORMAT --dataset D --judge-model SPEC`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dialogbench.cli.run import _per_judge, field_params, panel_table, score, show, show_failures
from dialogbench.cli.run import build_config as build_track_config
from dialogbench.cli.ui import console, friendly_errors, with_progress
from dialogbench.data.registry import load_dataset
from dialogbench.models.spec import DEFAULT_DEADLINE_S, DEFAULT_TIMEOUT_S
from dialogbench.runner.record import Progress, RunFolder, write_json
from dialogbench.runner.rescore import label, panel_figures
from dialogbench.runner.roles import DEFAULT_MAX_CONNECTIONS, RoleSpec
from dialogbench.runner.runner import Finished, run_track
from dialogbench.runner.status import EXIT_STATUS_HELP
from dialogbench.tracks.realcompanion.answers import ANSWERS

RUN = "run"
"""The subcommand that re-judges a run folder; `dialogbench score RUN_DIR` means it."""


class ScoreGroup(TyperGroup):
    """A group whose first word may be a run folder instead of a subcommand."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in ("--help", "-h"):
            first = args[0]
            is_run = (Path(first) / "manifest.json").exists()
            if first not in self.commands or (is_run and first != RUN):
                args = [RUN, *args]
        return super().parse_args(ctx, args)


score_app = typer.Typer(
    cls=ScoreGroup,
    no_args_is_help=True,
    epilog=EXIT_STATUS_HELP,
    help=(
        "Score saved outputs again, never asking the model under test. `dialogbench score "
        "RUN_DIR [--judge-model SPEC ...]` re-judges a finished run (see `dialogbench score "
        "run --help`); `dialogbench score questions --answers FILE --format FORMAT --dataset "
        "D --judge-model SPEC` judges answers produced elsewhere (docs/answers.md)."
    ),
)
score_app.command(
    RUN,
    epilog=EXIT_STATUS_HELP,
    help=(
        "Re-judge and re-aggregate a finished run folder from its saved outputs (also "
        "spelled `dialogbench score RUN_DIR`). Two or more --judge-model: figures per judge, "
        "their agreement (Krippendorff's alpha) and the spread of each headline figure."
    ),
)(score)

JUDGE_PARAMS: list[tuple[str, Any, Any, str, str]] = [
    ("judge_model", list[str] | None, None, "SPEC", "judge spec; repeat for a panel (required)"),
    (
        "judge_base_url",
        list[str] | None,
        None,
        "URL",
        "the judge's server URL (once, or per judge)",
    ),
    (
        "judge_api_key_env",
        list[str] | None,
        None,
        "VAR",
        "variable holding the judge's API key (once, or per judge)",
    ),
    (
        "judge_max_connections",
        int,
        DEFAULT_MAX_CONNECTIONS,
        "N",
        "requests in flight to each judge",
    ),
    ("judge_timeout", float, DEFAULT_TIMEOUT_S, "SECONDS", "seconds one judge request may take"),
    (
        "judge_deadline",
        float,
        DEFAULT_DEADLINE_S,
        "SECONDS",
        "seconds one judge call may take in all",
    ),
]


def _param(
    name: str, kind: Any, default: Any, metavar: str, text: str, panel: str
) -> inspect.Parameter:
    option = typer.Option(help=text, metavar=metavar, rich_help_panel=panel)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
    )


def judges_of(options: dict[str, Any]) -> list[RoleSpec]:
    """The judges given (pops their options); each checked before any work."""
    specs = options.pop("judge_model") or []
    urls = _per_judge(options.pop("judge_base_url"), len(specs), "--judge-base-url")
    keys = _per_judge(options.pop("judge_api_key_env"), len(specs), "--judge-api-key-env")
    conns = options.pop("judge_max_connections")
    timeout, deadline = options.pop("judge_timeout"), options.pop("judge_deadline")
    if conns < 1:
        raise ValueError(f"--judge-max-connections: {conns} is below the minimum 1")
    judges = [
        RoleSpec(m, u, k, conns, timeout, deadline)
        for m, u, k in zip(specs, urls, keys, strict=True)
    ]
    for j in judges:
        j.parsed()
    return judges


def questions_command() -> Callable[..., None]:
    """`dialogbench score questions`: the answers track's options, a dataset and judges."""
    params = [
        _param(
            "dataset", str | None, None, "NAME|PATH", "the dataset answered (required)", "input"
        ),
        _param(
            "out", Path, Path("runs/answers"), "DIR", "run folder (a rerun resumes it)", "input"
        ),
    ]
    params += [_param(n, k, d, m, t, "judge role") for n, k, d, m, t in JUDGE_PARAMS]
    params += field_params(ANSWERS.config_type)

    def command(**options: Any) -> None:
        with friendly_errors():
            dataset, out = options.pop("dataset"), options.pop("out")
            judges = judges_of(options)
            config = build_track_config(ANSWERS, options)
            if config.answers is None:
                raise ValueError("give --answers FILE (the answers to judge)")
            if not judges:
                raise ValueError(
                    "give --judge-model SPEC (e.g. `embedded`, or openai-compatible/NAME with "
                    "--judge-base-url); repeat it for a panel"
                )
            if dataset is None:
                raise ValueError("give --dataset (a name from `dialogbench data list`, or a path)")
            RunFolder(out)
            data = load_dataset(dataset)
            if len(judges) == 1:
                given = {"judge": judges[0]}
                finished = with_progress(
                    f"answers on {data.name}",
                    lambda progress: run_track(ANSWERS, data, out, config, given, progress),
                )
                show(ANSWERS, finished, config, given, data)
                code = finished.exit_code
            else:
                code = _panel(data, out, config, judges)
        raise typer.Exit(code)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = (
        "Judge a file of answers to a dataset's questions (our JSONL, or mem0's result files): "
        "a lenient and a strict rubric side by side, LoCoMo's official F1, the judge's "
        "false-accept rate on known-wrong answers; per category, with 95% intervals. Unmatched "
        "and ambiguous answers are listed in matching.json."
    )
    return command


def _panel(data: Any, out: Path, config: Any, judges: list[RoleSpec]) -> int:
    """One run per judge in OUT/JUDGE/, then the judges' agreement and spread."""
    labels = [label(j) for j in judges]
    if len(set(labels)) < len(labels):
        raise ValueError(f"give each judge once; repeated: {sorted(set(labels))}")
    runs: dict[str, Finished] = {}
    for name, j in zip(labels, judges, strict=True):

        def work(progress: Progress, j: RoleSpec = j, name: str = name) -> Finished:
            return run_track(ANSWERS, data, out / name, config, {"judge": j}, progress)

        runs[name] = with_progress(f"answers, judge {name}", work)
        console.print(f"[bold]judge {name}[/] -> {runs[name].path}")
        for thing in ANSWERS.show(runs[name].outcome, config):
            console.print(thing)
        show_failures(runs[name])
    agreement, spread = panel_figures(ANSWERS, runs)
    write_json(out / "judges.json", {"agreement": agreement, "spread": spread})
    console.print(panel_table(agreement, spread))
    return max(f.exit_code for f in runs.values())


score_app.command("questions", epilog=EXIT_STATUS_HELP)(questions_command())
