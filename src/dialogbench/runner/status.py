"""How a run ends: the exit status of `dialogbench run` and `dialogbench score`, in one place,
and the errors that end a run early with one of them.

    0    every row was scored
    2    bad input or usage; the run folder cannot be written, or another run holds it
    3    some rows failed or were left unscored (counted by cause, printed and written to
         warnings.json's `failures`); a rerun of the same command retries exactly those
    4    a model role's backend could not be reached: every call of that role failed
         unreachable, or the run's first calls did (the run stops early)
    130  interrupted (Ctrl-C); the units finished so far are kept
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit status of a run command (see the module docstring)."""

    OK = 0
    USAGE = 2
    FAILURES = 3
    UNREACHABLE = 4
    INTERRUPTED = 130


EXIT_STATUS_HELP = (
    "Exit status: 0 every row scored; 2 bad input or usage (or the run folder cannot be "
    "written, or another run holds it); 3 some rows failed or unscored (counts by cause are "
    "printed and kept in warnings.json; rerun the same command to retry them); 4 a model's "
    "server could not be reached; 130 interrupted (rerun the same command to resume)."
)
"""The one-paragraph version, shown under `dialogbench run TRACK --help` and `score --help`."""


class RunError(Exception):
    """A run that cannot go on: a one-line message and the exit status it ends with."""

    exit_code: ExitCode = ExitCode.USAGE


class FolderError(RunError):
    """The run folder cannot be read or written (full disk, read-only, no permission)."""


class FolderLocked(RunError):
    """Another process is running into the same folder."""


class NothingFinished(RunError):
    """No unit of the run finished (every one had a failed call)."""

    exit_code = ExitCode.FAILURES


class Unreachable(RunError):
    """A model role's server could not be reached; the run stopped."""

    exit_code = ExitCode.UNREACHABLE


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run, with a one-line message saying what was kept and how to resume."""

    exit_code = ExitCode.INTERRUPTED
