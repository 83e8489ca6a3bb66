"""Shared fixtures: the public corpora under $DIALOGBENCH_DATA, skipped when absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Hedged requests send a duplicate of a straggler, so on a loaded machine a server would see
# more requests than the tests count; the hedging tests build their models with hedge=True.
os.environ.setdefault("DIALOGBENCH_HEDGE", "0")


def shared_data(name: str) -> Path:
    """The folder of a public corpus, or skip the test saying how to provide it."""
    root = os.environ.get("DIALOGBENCH_DATA")
    if not root:
        pytest.skip("DIALOGBENCH_DATA is not set; point it at the public corpora to run this test")
    folder = Path(root) / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing; DIALOGBENCH_DATA should hold {name}/")
    return folder


@pytest.fixture
def locomo_dir() -> Path:
    return shared_data("locomo")


@pytest.fixture
def memorybank_dir() -> Path:
    return shared_data("memorybank")


# module-scoped, so that a module's module-scoped fixtures (a loaded corpus) can use them
@pytest.fixture(scope="module")
def cped_dir() -> Path:
    return shared_data("cped")


@pytest.fixture(scope="module")
def casino_dir() -> Path:
    return shared_data("casino")


@pytest.fixture(scope="module")
def sotopia_dir() -> Path:
    return shared_data("sotopia")


COLLECTED_FILES: set[Path] = set()
"""Every test module pytest collected in this session, skipped ones included
(`tests/test_collection.py` checks none is missed)."""


def pytest_collectreport(report: pytest.CollectReport) -> None:
    path = report.nodeid.split("::")[0]
    if path.endswith(".py") and "::" not in report.nodeid:
        COLLECTED_FILES.add(Path(str(report.fspath)))
