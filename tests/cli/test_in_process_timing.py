"""A model that generates on this machine's CPU gets room to do so: without --timeout or
--deadline, `run` and `build` give in-process models 300 s a request and 900 s a call; a
server keeps 30 s and 300 s, and what the user gives is kept."""

from __future__ import annotations

from typing import Any

import pytest

from dialogbench.cli.run import given_roles
from dialogbench.models.spec import (
    DEFAULT_DEADLINE_S,
    DEFAULT_RETRY_AFTER_MAX_S,
    DEFAULT_TIMEOUT_S,
    IN_PROCESS_DEADLINE_S,
    IN_PROCESS_TIMEOUT_S,
)
from dialogbench.runner import REGISTRY


def options(model: str | None, judge: str | None = None, **given: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for prefix, spec in (("", model), ("judge_", judge)):
        out |= {
            f"{prefix}model": spec,
            f"{prefix}base_url": "http://127.0.0.1:9/v1" if spec and "compatible" in spec else None,
            f"{prefix}api_key_env": None,
            f"{prefix}max_connections": 4,
            f"{prefix}timeout": DEFAULT_TIMEOUT_S,
            f"{prefix}deadline": DEFAULT_DEADLINE_S,
            f"{prefix}retry_after_max": DEFAULT_RETRY_AFTER_MAX_S,
        }
    return out | given


@pytest.mark.parametrize("model", ["embedded", "local/some/model.gguf", "transformers/x/y"])
def test_an_in_process_model_gets_room(model: str) -> None:
    roles = given_roles(REGISTRY["chat"], options(model, "openai-compatible/j"))
    assert (roles["model"].timeout_s, roles["model"].deadline_s) == (
        IN_PROCESS_TIMEOUT_S,
        IN_PROCESS_DEADLINE_S,
    )
    judge = roles["judge"]  # a server: the defaults stay
    assert (judge.timeout_s, judge.deadline_s) == (DEFAULT_TIMEOUT_S, DEFAULT_DEADLINE_S)


def test_given_timing_is_kept() -> None:
    roles = given_roles(REGISTRY["chat"], options("embedded", timeout=45.0))
    assert (roles["model"].timeout_s, roles["model"].deadline_s) == (45.0, IN_PROCESS_DEADLINE_S)
    roles = given_roles(REGISTRY["chat"], options("embedded", deadline=60.0))
    assert (roles["model"].timeout_s, roles["model"].deadline_s) == (IN_PROCESS_TIMEOUT_S, 60.0)
