"""`dialogbench score` as a group: a run folder as its first word (or after its options)
re-judges that run as before; `score run RUN_DIR` says the same; `score questions` is the
answers track; `--help` shows both."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app


def test_a_run_folder_is_the_default_subcommand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, run = CliRunner(), tmp_path / "questions"  # a folder named like the subcommand
    done = cli.invoke(app, ["run", "retrieval", "--dataset", "sample", "--out", str(run)])
    assert done.exit_code == 0, done.output
    monkeypatch.chdir(tmp_path)
    for argv in (
        ["score", str(run), "--set", "n_boot=50"],
        ["score", "--set", "n_boot=60", str(run)],
        ["score", "run", str(run), "--set", "n_boot=70"],
        ["score", "questions", "--set", "n_boot=80"],  # ./questions is a run: it wins
    ):
        got = cli.invoke(app, argv)
        assert got.exit_code == 0, (argv, got.output)
        assert "Recency" in got.output or "recency" in got.output
    helped = cli.invoke(app, ["score", "--help"], terminal_width=200).output
    assert "run " in helped and "questions" in helped and "Exit status" in helped
    sub = cli.invoke(app, ["score", "run", "--help"], terminal_width=200).output
    assert "RUN_DIR" in sub and "--judge-model" in sub
    nothing = cli.invoke(app, ["score", str(tmp_path / "none")])
    assert nothing.exit_code == 2 and "no finished run here" in nothing.output
