"""`.ci/run` runs the README's test command as written there, after the heavy extra."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None, "README.md starts with a ```bash block of set-up commands"
    return block.group(1).strip().splitlines()


def test_the_readme_starts_with_two_set_up_commands() -> None:
    run, test = _readme_commands()
    assert run.endswith("dialogbench quickstart")
    assert test.startswith("python3 -m venv .venv && ") and test.endswith("python -m pytest")
    assert "'.[test]'" in test and "heavy" not in test  # the light loop


def test_ci_extracts_exactly_the_readme_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    line = next(x for x in script.splitlines() if x.startswith("test_command="))
    got = subprocess.run(
        ["bash", "-c", f'{line}; printf "%s" "$test_command"'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert got.stdout.strip() == _readme_commands()[1]
    assert "pip install -q -e '.[heavy]'" in script  # CI skips no optional stack's tests
    assert 'bash -c "$test_command"' in script
