"""Fixtures for the DEMO loaders: the fixture folder and the shared corpora (skipped when absent).

The corpus fixtures follow `tests/conftest.py`'s `shared_data` rule (skip with the reason
when DIALOGBENCH_DATA or the corpus folder is missing); they are module-scoped so each test
module loads a corpus once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _corpus(name: str) -> Path:
    root = os.environ.get("DIALOGBENCH_DATA")
    if not root:
        pytest.skip("DIALOGBENCH_DATA is not set; point it at the public corpora to run this test")
    folder = Path(root) / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing; DIALOGBENCH_DATA should hold {name}/")
    return folder


@pytest.fixture(scope="module")
def cped_dir() -> Path:
    return _corpus("cped")


@pytest.fixture(scope="module")
def casino_dir() -> Path:
    return _corpus("casino")


@pytest.fixture(scope="module")
def sotopia_dir() -> Path:
    return _corpus("sotopia")
