"""`dialogbench score`: re-judge a finished run (`dialogbench score RUN_DIR`, also spelled
`dialogbench score run RUN_DIR`), or judge answers produced elsewhere
(`dialogbench score questions --answers FILE --format FORMAT --dataset D [--judge-model SPEC]`;
without a judge no model is called: LoCoMo's official F1 and exact match alone).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from dialogbench.cli.run import (
    PANEL,
    field_params,
    judges_of,
    panel_table,
    role_params,
    score_command,
    show,
    show_failures,
)
from dialogbench.cli.run import build_config as build_track_config
from dialogbench.cli.ui import console, generated, param, with_progress
from dialogbench.data.registry import load_dataset
from dialogbench.runner.record import Progress, RunFolder, write_json
from dialogbench.runner.rescore import labels, panel_figures
from dialogbench.runner.roles import Role, RoleSpec
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
        "D [--judge-model SPEC]` judges answers produced elsewhere, or, without a judge, "
        "scores them by LoCoMo's official F1 and exact match alone (docs/answers.md)."
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
)(score_command())


def questions_command() -> Callable[..., None]:
    """`dialogbench score questions`: the answers track's options, a dataset and judges."""
    params = [
        param(
            "dataset",
            str | None,
            None,
            typer.Option(
                help="the dataset answered (required)", metavar="NAME|PATH", rich_help_panel="input"
            ),
        ),
        param(
            "out",
            Path,
            Path("runs/answers"),
            typer.Option(
                help="run folder (a rerun resumes it)", metavar="DIR", rich_help_panel="input"
            ),
        ),
        *role_params(
            Role(
                "judge",
                "score",
                PANEL + " (none: no model is called; LoCoMo's official F1 and exact match alone)",
            ),
            panel=True,
        ),
        *field_params(ANSWERS.config_type),
    ]

    def body(options: dict[str, Any]) -> int:
        dataset, out = options.pop("dataset"), options.pop("out")
        judges = judges_of(options)
        config = build_track_config(ANSWERS, options)
        if config.answers is None:
            raise ValueError("give --answers FILE (the answers to judge)")
        if dataset is None:
            raise ValueError("give --dataset (a name from `dialogbench data list`, or a path)")
        RunFolder(out)
        data = load_dataset(dataset)
        if len(judges) > 1:
            return _panel(data, out, config, judges)
        given = {"judge": judges[0]} if judges else {}
        finished = with_progress(
            f"answers on {data.name}",
            lambda progress: run_track(ANSWERS, data, out, config, given, progress),
        )
        show(ANSWERS, finished, config, given, data)
        return finished.exit_code

    return generated(
        params,
        body,
        "Judge a file of answers to a dataset's questions (our JSONL, or mem0's result files): "
        "a lenient and a strict rubric side by side, LoCoMo's official F1, the judge's "
        "false-accept rate on known-wrong answers; per category, with 95% intervals. Without "
        "--judge-model (or with --no-judge) no model is called: LoCoMo's official F1 and exact "
        "match alone, per category, with 95% intervals. Unmatched and ambiguous answers are "
        "listed in matching.json.",
    )


def _panel(data: Any, out: Path, config: Any, judges: list[RoleSpec]) -> int:
    """One run per judge in OUT/JUDGE/, then the judges' agreement and spread."""
    runs: dict[str, Finished] = {}
    for name, j in zip(labels(judges), judges, strict=True):

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
