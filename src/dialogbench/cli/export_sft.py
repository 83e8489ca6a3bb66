"""`dialogbench export sft`: fine-tuning data from finished DEMO runs (`dialogbench.train.sft`).

`register(export_app)` adds the command to the `export` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dialogbench.cli.ui import console, friendly_errors


def export_sft_cmd(
    runs: Annotated[
        list[Path], typer.Argument(help="finished demo-awareness / demo-interaction runs")
    ],
    out: Annotated[Path, typer.Option("--out", help="folder for train.jsonl, val.jsonl")],
    min_score: Annotated[
        float | None,
        typer.Option(
            help="keep rows the judge scored at least this, on the run's rubric's overall "
            "(DEMO: 0-10; SOTOPIA: its overall, per side); default: every judged row"
        ),
    ] = None,
    val_fraction: Annotated[
        float, typer.Option(help="share of dialogues / episodes for validation")
    ] = 0.1,
    seed: Annotated[int, typer.Option(help="seed of the train/validation split")] = 0,
    format: Annotated[str, typer.Option("--format", help="openai (messages) or sharegpt")] = (
        "openai"
    ),
    dataset: Annotated[
        str | None, typer.Option(help="the runs' dataset, when it is not where they found it")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="only runs whose model under test is this (e.g. SPEC)")
    ] = None,
) -> None:
    """Expert trajectories from finished DEMO runs as supervised fine-tuning data:
    awareness answers as single-turn chats, interaction sides as multi-turn chats (each
    side's own view only), split by dialogue into train and validation."""
    from dialogbench.train.sft import FORMATS, export_sft

    with friendly_errors():
        if format not in FORMATS:
            raise ValueError(f"--format: {format!r} is not one of {', '.join(FORMATS)}")
        summary = export_sft(
            runs,
            out,
            min_score=min_score,
            val_fraction=val_fraction,
            seed=seed,
            fmt=format,
            dataset=dataset,
            model=model,
        )
    for r in summary["runs"]:
        left = ", ".join(f"{k}: {v}" for k, v in r["left_out"].items()) or "none"
        console.print(
            f"{r['run']} ({r['track']}, {r['model']}): {r['examples']} examples "
            f"from {r['rows']} rows; left out: {left}"
        )
    console.print(
        f"{summary['train']} train and {summary['val']} validation examples "
        f"({summary['format']}) in {out}"
    )


def register(export_app: typer.Typer) -> None:
    """Add `export sft` to the `export` group."""
    export_app.command("sft")(export_sft_cmd)
