"""What every command shares: the consoles, friendly errors, the progress bar, tables, and
how a command generated from configs and roles is made (`param`, `generated`)."""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
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


PROGRESS_EVERY = 10.0
"""Seconds between plain progress lines when stderr is not a terminal
(`$DIALOGBENCH_PROGRESS_EVERY`; 0: a line at every update)."""


def bar_columns() -> list[ProgressColumn]:
    """The terminal bar: stage, bar, done/total, time elapsed and time left (an estimate)."""
    return [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    ]


def time_left(done: int, total: int, elapsed: float) -> float | None:
    """Seconds left at the stage's mean pace so far (None before the first unit is done or
    when the total is unknown)."""
    if done <= 0 or total <= 0 or elapsed <= 0:
        return None
    return elapsed * max(total - done, 0) / done


def clock(seconds: float) -> str:
    """`H:MM:SS`."""
    whole = round(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def progress_every() -> float:
    """`$DIALOGBENCH_PROGRESS_EVERY` seconds (default `PROGRESS_EVERY`); a bad value is a
    usage error naming the variable."""
    raw = os.environ.get("DIALOGBENCH_PROGRESS_EVERY", "").strip()
    if not raw:
        return PROGRESS_EVERY
    try:
        every = float(raw)
    except ValueError:
        every = -1.0
    if not every >= 0:
        raise ValueError(
            f"DIALOGBENCH_PROGRESS_EVERY={raw!r} is not a number of seconds; set it to 0 "
            "(a line at every update) or more, or unset it (every 10 s)"
        )
    return every


class ProgressLines:
    """Progress as plain lines on stderr (no cursor moves, no colour), one at most every
    `every` seconds: what a CI log or a redirected run keeps."""

    def __init__(self, label: str, every: float, now: Callable[[], float] = time.monotonic):
        self.label, self.every, self.now = label, every, now
        self.started = self.last = now()
        self.stage = ""
        self.stage_started = self.started
        self.done = self.total = 0
        self.lock = threading.Lock()

    def __call__(self, what: str, done: int, total: int) -> None:
        with self.lock:
            t = self.now()
            if what != self.stage:  # each later stage paces its own estimate from its start
                if self.stage:
                    self.stage_started = t
                self.stage = what
            self.done, self.total = done, total
            if t - self.last < self.every:
                return
            self.last = t
            sys.stderr.write(self.line(what, done, total, t) + "\n")
            sys.stderr.flush()

    def tick(self) -> None:
        """The last state again when no line came for `every` seconds: a unit that takes
        minutes (a long history on a local model) still shows the run is alive."""
        if self.stage:
            self(self.stage, self.done, self.total)

    def line(self, what: str, done: int, total: int, t: float) -> str:
        """`LABEL: STAGE DONE/TOTAL (P%), elapsed H:MM:SS, eta H:MM:SS`."""
        head = f"{self.label}: {what} {done}/{total}" if total else f"{self.label}: {what} {done}"
        if total:
            head += f" ({100 * done / total:.0f}%)"
        left = time_left(done, total, t - self.stage_started)
        eta = clock(left) if left is not None else "unknown"
        return f"{head}, elapsed {clock(t - self.started)}, eta {eta}"


def with_progress(label: str, work: Callable[[TrackProgress], T]) -> T:
    """Run a track under a rich progress bar on stderr (gone when it finishes), or, when
    stderr is not a terminal, with a plain line every few seconds (`ProgressLines`)."""
    if not err.is_terminal:
        lines = ProgressLines(label, progress_every())
        if lines.every <= 0:
            return work(lines)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(lines.every):
                lines.tick()

        heart = threading.Thread(target=beat, name="progress lines", daemon=True)
        heart.start()
        try:
            return work(lines)
        finally:
            stop.set()
            heart.join(timeout=1.0)
    with Progress(*bar_columns(), console=err, transient=True) as bar:
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
