"""`dialogbench export ...`: a finished run's outputs in other formats.

    dialogbench export ratings RUN_DIR [RUN_DIR/judges/* ...] --out ratings.csv [--humans a,b]

`export ratings` writes the judge's scores of a run as a long-format ratings file (item,
rater, dimension, score, kind) with a blank row per human rater beside each, for people to
fill in and `dialogbench agreement` to compare (`judging.ratings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dialogbench.cli.ui import console, csv, friendly_errors
from dialogbench.judging.ratings import merge_ratings, ratings_from_run, write_ratings

export_app = typer.Typer(help="Export a finished run's outputs.", no_args_is_help=True)


@export_app.command("ratings")
def export_ratings_cmd(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="finished run folders of a judged track: one run, or the same run judged "
            "by several judges (RUN and RUN/judges/*, from `dialogbench score`)"
        ),
    ],
    out: Annotated[Path, typer.Option(help="the ratings CSV to write")],
    humans: Annotated[
        str, typer.Option(help="human raters to leave a blank row for, comma-separated")
    ] = "human1,human2",
) -> None:
    """The runs' judged items as one ratings file, with blank rows for human raters to fill."""
    with friendly_errors():
        ratings = merge_ratings([ratings_from_run(run, csv(humans)) for run in runs], runs)
        if not ratings:
            raise ValueError(f"{runs[0]}: no judged item to export (was the run judged?)")
        n = write_ratings(out, ratings)
        judged = sum(1 for r in ratings if r.kind == "judge")
        console.print(
            f"wrote {n} lines to {out}: {judged} judge scores and {n - judged} blank rows for "
            f"{humans}; fill in the score column, then run `dialogbench agreement {out}`"
        )
