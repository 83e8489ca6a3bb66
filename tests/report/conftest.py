"""Run folders for the report tests, made once per session by the golden cases' commands
(retrieval and detection on the sample, chat against the loopback ChatServer, a DEMO run on
CaSiNo when $DIALOGBENCH_DATA has it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from golden.cases import CASES, missing, run_case

MakeRun = Callable[[str], Path]


@pytest.fixture(scope="session")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> MakeRun:
    """name of a golden case -> its finished run folder (made on first use, then kept)."""
    root = tmp_path_factory.mktemp("report-runs")
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            case = next(c for c in CASES if c.name == name)
            why = missing(case)
            if why is not None:
                pytest.skip(why)
            out = root / name
            code, output = run_case(case, out, root / f"{name}.sqlite")
            assert code == 0, output
            made[name] = out
        return made[name]

    return make


HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
"""A reply no page may run: the report must show it as text."""


@pytest.fixture(scope="session")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A chat run whose model under test answers every probe with `HOSTILE`."""
    from typing import Any

    from typer.testing import CliRunner

    from dialogbench.cli import app
    from dialogbench.testing import ChatServer
    from golden.cases import MODEL, environment, golden_reply

    def reply(body: dict[str, Any]) -> str:
        return HOSTILE if body.get("model") == MODEL else golden_reply(body)

    root = tmp_path_factory.mktemp("hostile")
    case = next(c for c in CASES if c.name == "chat-sample")
    args = [a if a != "4" else "2" for a in case.args]  # --limit 2
    with environment(root / "cache.sqlite"), ChatServer(reply=reply) as srv:
        argv = [a.replace("{out}", str(root / "run")).replace("{url}", srv.base_url) for a in args]
        result = CliRunner().invoke(app, ["run", *argv])
    assert result.exit_code == 0, result.output
    return root / "run"
