"""The summary table: its n column counts the cells it shows."""

from __future__ import annotations

from rich.console import Console

from dialogbench.report.table import summary_table
from dialogbench.stats.bootstrap import Estimate


def test_n_is_that_of_the_figures_shown() -> None:
    row = {
        "rate": Estimate(value=0.2, ci_low=0.1, ci_high=0.3, n=40),
        "median": Estimate(value=14.0, ci_low=1.0, ci_high=26.0, n=45),
    }
    table = summary_table("t", {"recorded": row}, ["rate"], "reading")
    console = Console(width=120, record=True)
    console.print(table)
    text = console.export_text()
    assert "40" in text and "45" not in text
