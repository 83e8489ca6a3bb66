"""What every command shares: the consoles, friendly errors, the progress bar, tables, and
how a command generated from configs and roles is made (`param`, `generated`)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from dialogbench.data.download import DownloadError
from dialogbench.data.errors import DataError
from dialogbench.report.table import summary_table
from dialogbench.runner.record import Progress as TrackProgress
from dialogbench.runner.status import ExitCode, Interrupted, RunError
from dialogbench.stats.bootstrap import Estimate

_WIDE = None if os.isatty(1) else 160  # tables stay readable when piped or logged
console = Console(width=_WIDE)
err = Console(stderr=True, soft_wrap=True)
T = TypeVar("T")
EXIT_USAGE = ExitCode.USAGE


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Bad input, failed downloads, an unwritable or busy run folder, an unreachable server
    and Ctrl-C end the command with a one-line message and its exit status
    (`runner.status.ExitCode`), not a traceback."""
    try:
        yield
    except RunError as e:
        err.print(Text.assemble(("error: ", "bold red"), str(e)))
        raise typer.Exit(e.exit_code) from None
    except (DataError, DownloadError, ValueError) as e:
        err.print(Text.assemble(("error: ", "bold red"), str(e)))
        raise typer.Exit(EXIT_USAGE) from None
    except KeyboardInterrupt as e:
        err.print(str(e) if isinstance(e, Interrupted) else "interrupted")
        raise typer.Exit(ExitCode.INTERRUPTED) from None


def csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def with_progress(label: str, work: Callable[[TrackProgress], T]) -> T:
    """Run a track under a rich progress bar on stderr (gone when it finishes)."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)

        def progress(what: str, done: int, total: int) -> None:
            bar.update(task, description=f"{label}: {what}", completed=done, total=total)

        return work(progress)


def table_of(title: str, table: Mapping[str, Mapping[str, Estimate]], row_label: str) -> Table:
    """A summary table with every column its rows have, in first-seen order."""
    columns = list(dict.fromkeys(col for row in table.values() for col in row))
    return summary_table(title, table, columns, row_label=row_label)


def warn(text: str) -> None:
    console.print(Text.assemble(("warning: ", "yellow"), text))


def param(name: str, annotation: Any, default: Any, info: Any) -> inspect.Parameter:
    """One option of a generated command: its name, type, default and `typer.Option(...)`
    (or `typer.Argument(...)`)."""
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, info],
    )


def generated(
    params: Sequence[inspect.Parameter], body: Callable[[dict[str, Any]], int], doc: str
) -> Callable[..., None]:
    """A command whose options are `params` (typer reads the signature): `body` gets their
    values by name and returns the exit status; its errors are `friendly_errors`."""

    def command(**options: Any) -> None:
        with friendly_errors():
            code = body(options)
        raise typer.Exit(code)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = doc
    return command
