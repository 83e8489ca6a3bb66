"""Fixtures for the judging tests: a harness of loopback servers and judges, and a rubric."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dialogbench.judging import Rubric
from judging.judging_support import QA, Harness


@pytest.fixture
def rubric() -> Rubric:
    return QA


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.stop()
