"""docs/own-data.md: every command on the page runs, in order, and prints the lines shown
under it; a dry run's printed command is the one the page runs next."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app

ROOT = Path(__file__).parent.parent
PAGE = ROOT / "docs" / "own-data.md"
runner = CliRunner()


def steps(page: str) -> list[tuple[str, list[str]]]:
    """(command, the lines shown under it) for every `$ ` line of the page's console blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", page, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            else:
                out[-1][1].append(line.strip())
    return out


def _flat(text: str) -> str:
    """`text` with every run of white space one space (rich wraps long lines)."""
    return " ".join(text.split())


def test_the_page_walks_three_layouts_to_a_retrieval_run() -> None:
    commands = [c for c, _ in steps(PAGE.read_text(encoding="utf-8"))]
    runs = [c for c in commands if c.startswith("dialogbench run retrieval --dataset imported/")]
    assert len(runs) == 3
    assert all(c.startswith("dialogbench ") for c in commands)


def test_every_command_on_the_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    page = steps(PAGE.read_text(encoding="utf-8"))
    for i, (command, shown) in enumerate(page):
        result = runner.invoke(app, shlex.split(command)[1:])
        assert result.exit_code == 0, f"{command}\n{result.output}"
        printed = _flat(result.output)
        for line in filter(None, shown):
            assert _flat(line) in printed, f"{command}\nmissing: {line}\n{result.output}"
        if "--dry-run" in command:
            suggested = shown[shown.index("import it with:") + 1]
            assert page[i + 1][0].startswith(suggested), "the page runs what the dry run printed"
            assert not Path(shlex.split(command)[shlex.split(command).index("--out") + 1]).exists()
        if command.startswith("dialogbench run retrieval"):
            assert (tmp_path / shlex.split(command)[-1] / "summary.json").exists()
