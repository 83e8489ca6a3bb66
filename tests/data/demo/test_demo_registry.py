"""`load_demo`: names under DIALOGBENCH_DATA, splits, release paths and the errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dialogbench.data.demo.registry import DEMO_DATASETS, load_demo
from dialogbench.data.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"


def test_names_resolve_under_dialogbench_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_DATA", str(FIXTURES))
    cped = load_demo("cped:test")
    assert cped.name == "cped" and len(cped.dialogues) == 1 and cped.items  # 90_001: 其他
    assert cped.licence and cped.sha256
    casino = load_demo("casino:test", seed=3)
    assert len(casino.dialogues) == 2
    assert load_demo("casino:test", seed=3).items == casino.items  # deterministic
    sotopia = load_demo("sotopia")
    assert len(sotopia.episodes) == 2 and not sotopia.items
    assert set(DEMO_DATASETS) == {"cped", "casino", "sotopia"}


def test_release_path() -> None:
    demo = load_demo(str(FIXTURES / "dialogue_agent_interaction_en.jsonl"))
    assert len(demo.episodes) == 3
    assert len(load_demo(str(FIXTURES)).items) == 8


def test_corpus_folder_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus folder by path reads the splits it holds, as the name does."""
    monkeypatch.setenv("DIALOGBENCH_DATA", str(FIXTURES))
    for name, named in (("cped", "cped:test"), ("casino", "casino:test"), ("sotopia", "sotopia")):
        by_path = load_demo(str(FIXTURES / name), seed=3)
        assert by_path == load_demo(named, seed=3), name


def test_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DIALOGBENCH_DATA", str(tmp_path))
    monkeypatch.setenv("DIALOGBENCH_HOME", str(tmp_path))
    with pytest.raises(DataError, match="DIALOGBENCH_DATA"):
        load_demo("cped")
    with pytest.raises(DataError, match="no such DEMO dataset"):
        load_demo("nope")
    with pytest.raises(DataError, match="unknown split"):
        load_demo("casino:dev")
    with pytest.raises(DataError, match="no DEMO files"):
        load_demo(str(tmp_path))


def test_real_loads_are_fast(cped_dir: Path, casino_dir: Path) -> None:
    start = time.perf_counter()
    cped = load_demo("cped")
    casino = load_demo("casino")
    elapsed = time.perf_counter() - start
    assert len(cped.dialogues) == 2793 and len(casino.dialogues) == 1030
    assert elapsed < 10, f"loading CPED and CaSiNo took {elapsed:.1f} s"
