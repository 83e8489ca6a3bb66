"""Progress (issue 28.5): the terminal bar shows the time left; a redirected run writes plain
lines every few seconds, with no escape codes."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.progress import TimeRemainingColumn

from dialogbench.cli import ui


def test_the_terminal_bar_shows_the_time_left() -> None:
    assert any(isinstance(c, TimeRemainingColumn) for c in ui.bar_columns())


@pytest.mark.parametrize(
    ("done", "total", "elapsed"), [(1, 4, 3.0), (3, 10, 9.0), (7, 7, 5.0), (2, 5, 0.5)]
)
def test_time_left_is_the_mean_pace_times_what_is_left(
    done: int, total: int, elapsed: float
) -> None:
    per_unit = elapsed / done
    assert ui.time_left(done, total, elapsed) == pytest.approx(per_unit * (total - done))


def test_time_left_is_unknown_before_the_first_unit() -> None:
    assert ui.time_left(0, 10, 4.0) is None
    assert ui.time_left(3, 0, 4.0) is None


def test_lines_come_at_most_every_interval_and_each_stage_paces_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    written = io.StringIO()
    monkeypatch.setattr(sys, "stderr", written)
    lines = ui.ProgressLines("chat on sample", 10.0, now=lambda: now[0])
    for t, done in [(1.0, 1), (5.0, 2), (12.0, 3), (15.0, 4), (22.0, 6)]:
        now[0] = 100.0 + t
        lines("solve", done, 8)
    now[0] = 133.0
    lines("judge", 0, 4)  # a new stage: no estimate until its first unit
    now[0] = 143.0
    lines("judge", 1, 4)
    got = written.getvalue().splitlines()
    assert got == [
        "chat on sample: solve 3/8 (38%), elapsed 0:00:12, eta 0:00:20",
        "chat on sample: solve 6/8 (75%), elapsed 0:00:22, eta 0:00:07",
        "chat on sample: judge 0/4 (0%), elapsed 0:00:33, eta unknown",
        "chat on sample: judge 1/4 (25%), elapsed 0:00:43, eta 0:00:30",
    ]


def test_a_bad_interval_is_a_usage_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DIALOGBENCH_PROGRESS_EVERY", "soon")
    with pytest.raises(ValueError, match="DIALOGBENCH_PROGRESS_EVERY='soon'"):
        ui.progress_every()
    monkeypatch.setenv("DIALOGBENCH_PROGRESS_EVERY", "0")
    assert ui.progress_every() == 0.0


def test_a_redirected_run_writes_plain_progress_lines(tmp_path: Path) -> None:
    """The real command, stderr to a file: progress lines with the time left, no ANSI."""
    exe = Path(sys.executable).parent / "dialogbench"
    env = {
        **os.environ,
        "DIALOGBENCH_PROGRESS_EVERY": "0",
        "DIALOGBENCH_CACHE": str(tmp_path / "cache.sqlite"),
    }
    log = tmp_path / "stderr.txt"
    argv = [str(exe), "run", "retrieval", "--dataset", "sample", "--n-boot", "50"]
    with log.open("w") as stderr:
        done = subprocess.run(
            [*argv, "--out", str(tmp_path / "run")],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, log.read_text()
    text = log.read_text()
    assert "\x1b" not in text
    ours = [x for x in text.splitlines() if x.startswith("retrieval on sample: ")]
    assert ours, text
    assert all(re.search(r"elapsed \d:\d\d:\d\d, eta (\d:\d\d:\d\d|unknown)$", x) for x in ours)
    assert any(re.search(r"eta \d:\d\d:\d\d$", x) for x in ours)


def test_a_long_unit_still_gets_a_line_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heartbeat (`tick`) repeats the last state when no update came for an interval."""
    now = [0.0]
    written = io.StringIO()
    monkeypatch.setattr(sys, "stderr", written)
    lines = ui.ProgressLines("reconstruction on memorybank", 10.0, now=lambda: now[0])
    now[0] = 4.0
    lines.tick()  # nothing yet: no stage has started
    lines("solve", 0, 1)
    for t in (11.0, 15.0, 21.0):
        now[0] = t
        lines.tick()
    assert written.getvalue().splitlines() == [
        "reconstruction on memorybank: solve 0/1 (0%), elapsed 0:00:11, eta unknown",
        "reconstruction on memorybank: solve 0/1 (0%), elapsed 0:00:21, eta unknown",
    ]
