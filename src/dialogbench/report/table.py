"""Rich tables of a run's headline figures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rich.table import Table

from dialogbench.stats.bootstrap import Estimate

FLAG = "⚑"
"""Marks a system whose context was cut or fell back (`Outcome.flags`), in tables and the report."""


def fmt(e: Estimate) -> str:
    """`0.456 [0.434, 0.478]`, or a dash where there is nothing to estimate."""
    if math.isnan(e.value):
        return "-"
    return f"{e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}]"


def summary_table(
    title: str,
    summary: Mapping[str, Mapping[str, Estimate]],
    metrics: Sequence[str],
    row_label: str = "retriever",
    flags: Mapping[str, str] | None = None,
) -> Table:
    """One row per system, one column per metric, each cell a value with its interval; a
    system in `flags` (`Outcome.flags`) is marked FLAG and its flag said under the table."""
    flags = {k: v for k, v in (flags or {}).items() if k in summary}
    caption = "\n".join(f"{FLAG} {name}: {what}" for name, what in flags.items()) or None
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column(row_label, style="bold")
    for m in metrics:
        table.add_column(m, justify="right")
    table.add_column("n", justify="right")
    for name, row in summary.items():
        cells = [fmt(row[m]) if m in row else "" for m in metrics]
        n = max((row[m].n for m in metrics if m in row), default=0)  # of the cells shown
        table.add_row(f"{name} {FLAG}" if name in flags else name, *cells, str(n))
    return table
