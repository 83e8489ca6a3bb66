"""`dialogbench report demo RUN_DIR...`: the paper's Table 3 across runs, one row per model.

Each RUN_DIR is a finished demo-awareness or demo-interaction run; a model's two halves are
matched by the model under test in their manifests. Rows: per model, English, Chinese and
both pooled; columns: the four awareness tasks and their average, the four interaction
dimensions and their average, and DEMO's Overall (`tracks.demo.report`). Interaction runs
judged with `--rubric sotopia` are shown in the paper's Table 4 shape instead. Runs of
different judges (a run and its `RUN/judges/<judge>/` re-judgings) get one table per judge:
the paper's Table 8 is Table 3's shape judged by DeepSeek-V3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table
from rich.text import Text

from dialogbench.cli.ui import console
from dialogbench.data.demo.model import TASKS
from dialogbench.judging.rubric_files import load_rubric_file
from dialogbench.stats.bootstrap import Estimate
from dialogbench.tracks.demo.interaction_prompts import DIMENSIONS
from dialogbench.tracks.demo.report import (
    RunInfo,
    by_judge,
    paper_rows,
    played_sides,
    read_run,
    sotopia_rows,
)

SHORT = {"goal": "Goa", "persona": "Per", "scene": "Sce", "utterance": "Utt"}
SHORT_INT = {"goal": "Goa", "believability": "Bel", "skillfulness": "Ski", "realism": "Rea"}


def _cell(e: Estimate | None) -> str:
    return "-" if e is None or math.isnan(e.value) else f"{e.value:.3f}"


def table3(runs: Sequence[Path], n_boot: int, seed: int) -> list[Table | Text]:
    """What `report demo RUN_DIR...` prints: per judge, Table 3's shape (and Table 4's)."""
    groups = by_judge([read_run(r) for r in runs])
    shown: list[Table | Text] = []
    for judge, infos in groups.items():
        shown += _tables(infos, judge if len(groups) > 1 else None, n_boot, seed)
    if len(groups) > 1:
        shown.append(
            Text(
                f"{len(groups)} judges, one table each (the paper's Tables 3 and 8 are this "
                "shape, judged by GPT-4o and DeepSeek-V3)"
            )
        )
    return shown


def _tables(
    infos: Sequence[RunInfo], judge: str | None, n_boot: int, seed: int
) -> list[Table | Text]:
    """The tables of the runs one judge judged (`judge` named when there are several)."""
    by = f", judged by {judge}" if judge else ""
    shown: list[Table | Text] = []
    rows = paper_rows(infos, n_boot=n_boot, seed=seed)
    if rows:
        table = Table(
            title=f"DEMO{by}, the paper's Table 3 shape (judge 0-10, point estimates "
            "recomputed from items.jsonl)",
            title_justify="left",
        )
        table.add_column("model", style="bold")
        table.add_column("lang")
        for t in TASKS:
            table.add_column(f"aw {SHORT[t]}", justify="right")
        table.add_column("aw Avg", justify="right")
        for d in DIMENSIONS:
            table.add_column(f"int {SHORT_INT[d]}", justify="right")
        table.add_column("int Avg", justify="right")
        table.add_column("Overall", justify="right")
        notes: list[str] = []
        for model, by_lang in rows.items():
            for lang, row in by_lang.items():
                table.add_row(
                    model,
                    lang,
                    *(_cell(row.awareness.get(t)) for t in TASKS),
                    _cell(row.awareness_average),
                    *(_cell(row.interaction.get(d)) for d in DIMENSIONS),
                    _cell(row.interaction_average),
                    _cell(row.overall),
                )
                notes += [f"{model} ({lang}): {n}" for n in row.notes]
        shown.append(table)
        shown.append(
            Text(
                "Overall = (2 x awareness average + interaction average) / 3, as the paper's "
                "Table 3 computes it; pooled = both languages' items together, as DEMO's script"
            )
        )
        shown += [Text.assemble(("note: ", "yellow"), n) for n in notes]
    sotopia = sotopia_rows(infos)
    if sotopia:
        columns = list(dict.fromkeys(c for figures in sotopia.values() for c in figures))
        table = Table(title=f"SOTOPIA{by}, the paper's Table 4 shape", title_justify="left")
        table.add_column("model", style="bold")
        short = {d.name: d.short or d.name for d in load_rubric_file("sotopia").dimensions}
        table.add_column("plays")
        for c in columns:
            table.add_column(short.get(c, c), justify="right")
        sides = played_sides(infos)
        for model, figures in sotopia.items():
            plays = sides.get(model.split(" (")[0], "-")
            table.add_row(model, plays, *(_cell(figures.get(c)) for c in columns))
        shown.append(table)
    return shown


def print_table3(runs: Sequence[Path], n_boot: int, seed: int) -> None:
    for part in table3(runs, n_boot, seed):
        console.print(part)
