"""`dialogbench agreement RATINGS.csv`: how far raters (people, judges) agree.

    dialogbench agreement ratings.csv [--reference JUDGE] [--out agreement.json]

Reads a long-format ratings file (`judging.ratings`; `dialogbench export ratings` writes
one from a run) and prints, per dimension, every pair of raters (Cohen's kappa, Pearson
and Spearman with p-values, 95% bootstrap intervals), every rater together (Fleiss' kappa,
Krippendorff's alpha), and the paper's two tables against the reference rater (the only
judge by default): Table 2 (Cohen's kappa per dimension and pooled) and Table 6
(Pearson's r and its p-value per dimension), and Figure 3's human - judge score differences
(mean, SD, share within 1.5 SD, histogram) for every person and judge pair.
`stats.interrater` has the definitions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dialogbench.cli.ui import console, friendly_errors
from dialogbench.judging.ratings import read_ratings
from dialogbench.report.table import fmt
from dialogbench.stats.bootstrap import Estimate
from dialogbench.stats.interrater import (
    ALL,
    AgreementReport,
    agreement_report,
    default_reference,
    paper_tables,
)


def _p(p: float) -> str:
    if math.isnan(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _table(title: str, columns: Sequence[str], left: int) -> Table:
    """A table with these columns: the first `left` of them (names) left-aligned, the
    figures right-aligned."""
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i < left else "right")
    return table


FIGURE_NAMES = {
    "cohen_kappa": "Cohen's kappa",
    "pearson": "Pearson r",
    "pearson_p": "Pearson p",
    "spearman": "Spearman rho",
    "spearman_p": "Spearman p",
}


def pairs_table(report: AgreementReport, dimension: str) -> Table:
    """Every pair of raters on one dimension; an undefined figure reads "undefined", and
    the caption says why."""
    title = f"Agreement on {dimension}" + (" (every dimension pooled)" if dimension == ALL else "")
    columns = ("raters", "comparison", "n", "Cohen's kappa", "Pearson r", "p", "Spearman rho", "p")
    table = _table(title, columns, left=2)
    reasons: list[str] = []
    for p in report.pairs:
        if p.dimension != dimension:
            continue
        cells = {
            "cohen_kappa": fmt(p.cohen_kappa),
            "pearson": fmt(p.pearson),
            "pearson_p": _p(p.pearson_p),
            "spearman": fmt(p.spearman),
            "spearman_p": _p(p.spearman_p),
        }
        by_reason: dict[str, list[str]] = {}
        for figure, why in p.undefined.items():
            if figure in cells:
                cells[figure] = "undefined"
                by_reason.setdefault(why, []).append(FIGURE_NAMES[figure])
        for why, figures in by_reason.items():
            reasons.append(f"{p.a} ~ {p.b}, {', '.join(figures)} undefined: {why}")
        table.add_row(f"{p.a} ~ {p.b}", p.between, str(p.n), *cells.values())
    if reasons:
        table.caption = "\n".join(reasons)
        table.caption_justify = "left"
    return table


def groups_table(report: AgreementReport) -> Table:
    """Every rater of each dimension together."""
    columns = (
        "dimension",
        "raters",
        "Fleiss' kappa",
        "n (all rated)",
        "alpha (interval)",
        "alpha (nominal)",
        "n (2+ rated)",
    )
    table = _table("All raters together", columns, left=2)
    for g in report.groups:
        table.add_row(
            g.dimension,
            str(len(g.raters)),
            fmt(g.fleiss_kappa),
            str(g.fleiss_kappa.n),
            fmt(g.alpha_interval),
            fmt(g.alpha_nominal),
            str(g.alpha_interval.n),
        )
    return table


def table2(kappas: dict[str, dict[str, Estimate]], dims: list[str], reference: str) -> Table:
    """The paper's Table 2 shape: rater x dimension, Cohen's kappa against the reference."""
    title = f"the paper's Table 2: Cohen's kappa against {reference}"
    table = Table(title=title, title_justify="left", min_width=len(title) + 2)
    columns = [*dims, ALL] if len(dims) > 1 else dims
    table.add_column("rater", style="bold")
    for d in columns:
        table.add_column("all (pooled)" if d == ALL else d, justify="right")
    for rater, row in kappas.items():
        table.add_row(
            rater,
            *(
                f"{row[d].value:.2f}" if d in row and not math.isnan(row[d].value) else "-"
                for d in columns
            ),
        )
    return table


def table6(
    pearsons: dict[str, dict[str, tuple[Estimate, float]]], dims: list[str], reference: str
) -> Table:
    """The paper's Table 6 shape: rater x dimension, Pearson's r (p) against the reference."""
    title = f"the paper's Table 6: Pearson's r (p) against {reference}"
    table = Table(title=title, title_justify="left", min_width=len(title) + 2)
    table.add_column("rater", style="bold")
    for d in dims:
        table.add_column(d, justify="right")
    for rater, row in pearsons.items():
        cells = []
        for d in dims:
            if d not in row or math.isnan(row[d][0].value):
                cells.append("-")
            else:
                cells.append(f"{row[d][0].value:.2f} ({_p(row[d][1])})")
        table.add_row(rater, *cells)
    return table


def figure3(report: AgreementReport) -> Table:
    """The paper's Figure 3 in figures: human - judge score differences per dimension."""
    columns = ("person", "judge", "dimension", "n", "mean", "SD", "within 1.5 SD", "histogram")
    table = _table("the paper's Figure 3: human - judge score differences", columns, left=3)
    for d in report.differences:
        shown = " ".join(f"{k}:{v}" for k, v in d.histogram.items())
        table.add_row(
            d.human,
            d.judge,
            d.dimension,
            str(d.n),
            fmt(d.mean),
            fmt(d.sd),
            fmt(d.within_1_5_sd),
            shown,
        )
    return table


def agreement_cmd(
    ratings: Annotated[
        Path, typer.Argument(help="a ratings CSV: item,rater,dimension,score[,kind]")
    ],
    reference: Annotated[
        str | None,
        typer.Option(help="the rater the paper's tables compare against (default: the only judge)"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="also write every figure to this JSON file")
    ] = None,
    n_boot: Annotated[int, typer.Option(help="bootstrap resamples", min=1, max=1_000_000)] = 2000,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap", min=0)] = 0,
) -> None:
    """Agreement between the raters of a ratings file: pairwise, all together, and the
    paper's Tables 2 and 6 against a reference rater."""
    with friendly_errors():
        report = agreement_report(read_ratings(ratings), n_boot=n_boot, seed=seed)
        kinds = ", ".join(f"{r} ({k})" for r, k in report.raters.items())
        console.print(f"{ratings}: raters {kinds}; {report.blank} blank scores left out")
        dims = report.dimensions
        for d in [*dims, ALL] if len(dims) > 1 else dims:
            console.print(pairs_table(report, d))
        console.print(groups_table(report))
        if report.differences:
            console.print(figure3(report))
        ref = reference or default_reference(report.raters)
        if ref is not None:
            kappas, pearsons = paper_tables(report, ref)
            console.print(table2(kappas, dims, ref))
            console.print(table6(pearsons, dims, ref))
        else:
            console.print(
                "no reference rater: give --reference RATER (or mark one judge with kind=judge) "
                "for the paper's Tables 2 and 6"
            )
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(report.model_dump_json(indent=2) + "\n")
            console.print(f"wrote {out}")
