"""Every test file under tests/ is collected by a plain `pytest` (pytest skips some folder
names by default, `build` among them: tests/build/ once ran only when named)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def test_every_test_file_is_collected(request: pytest.FixtureRequest) -> None:
    args = [Path(a.split("::")[0]).resolve() for a in request.config.args]
    if not any(a == TESTS or a == TESTS.parent for a in args):
        pytest.skip("only checked when the whole suite runs (`pytest` from the repo root)")
    root_conftest = next(
        m
        for m in request.config.pluginmanager.get_plugins()
        if getattr(m, "__file__", None) == str(TESTS / "conftest.py")
    )
    collected = {p.resolve() for p in root_conftest.COLLECTED_FILES}  # skipped modules too
    on_disk = {p.resolve() for p in TESTS.rglob("test_*.py") if ".venv" not in p.parts}
    missed = sorted(str(p.relative_to(TESTS)) for p in on_disk - collected)
    assert not missed, f"test files pytest does not collect: {missed}"
    assert TESTS / "build" / "test_sample_build.py" in collected
