"""The `runs` fixture: finished DEMO runs for the export and LoRA tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from train.sft_support import finished_runs


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[Any]]:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    return finished_runs(tmp_path)
