"""`dialogbench export ...`: a finished run's outputs in other formats.

    dialogbench export ratings RUN_DIR [RUN_DIR/judges/* ...] --out ratings.csv [--humans a,b]
    dialogbench export conflicts BUILD_DIR --out conflicts.csv [--humans a,b]

`export ratings` writes the judge's scores of a run as a long-format ratings file (item,
rater, dimension, score, kind) with a blank row per human rater beside each, for people to
fill in and `dialogbench agreement` to compare (`judging.ratings`). `export conflicts` does
the same for a `build demo` folder's conflict verdicts (`build.demo_conflicts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dialogbench.build.demo_conflicts import conflict_ratings, write_shown
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


@export_app.command("conflicts")
def export_conflicts_cmd(
    build: Annotated[Path, typer.Argument(help="a `dialogbench build demo` output folder")],
    out: Annotated[Path, typer.Option(help="the ratings CSV to write")],
    humans: Annotated[
        str, typer.Option(help="people to leave a blank row for, comma-separated")
    ] = "human1,human2",
) -> None:
    """The build's conflict verdicts (1 reasonable, 0 not) as a ratings file with blank rows
    for people, and beside it (OUT with .jsonl) the question each combination asked."""
    with friendly_errors():
        ratings, shown, left_out = conflict_ratings(build, csv(humans))
        if not ratings:
            raise ValueError(f"{build}: no conflict verdict to export ({dict(left_out)})")
        n = write_ratings(out, ratings)
        questions = out.with_suffix(".jsonl")
        write_shown(questions, shown)
        skipped = f"; left out (no verdict): {dict(left_out)}" if left_out else ""
        console.print(
            f"wrote {n} lines to {out}: {len(shown)} verdicts and blank rows for {humans}; "
            f"the questions in {questions}{skipped}. Fill in 1 (reasonable) or 0, then run "
            f"`dialogbench agreement {out}`"
        )
