"""The retry path's limits against the loopback fault server: each kind of failure is
retried as often as its own limit says, whatever failed before it in the same call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dialogbench.models import Model, ModelError
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.testing import ChatServer, Fault, drop, empty, malformed, status


def _ask(srv: ChatServer, **kwargs: Any) -> Any:
    provider = OpenAICompatible("openai-compatible/test", "test", srv.base_url, None)
    kwargs.setdefault("backoff_s", 0.01)
    model = Model(provider, **kwargs)

    async def go() -> Any:
        try:
            return await model.generate([{"role": "user", "content": "hello"}])
        except ModelError as e:
            return e
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    "before",
    [[status(500), status(500)], [drop(), malformed("not_json"), status(503)]],
    ids=["two-500s", "drop-truncated-503"],
)
def test_an_empty_reply_after_other_faults_is_still_retried(before: list[Fault]) -> None:
    """An empty reply gets its own `quick_retries` (2), not what the call's earlier
    faults left of them (a 500, a 500, then an empty reply used to end the call)."""
    with ChatServer(script=[*before, empty()]) as srv:
        out = _ask(srv)
        assert srv.request_count == len(before) + 2
    assert out.text == "hello"


def test_empty_replies_alone_are_retried_at_most_twice() -> None:
    with ChatServer(script=[empty()] * 5) as srv:
        error = _ask(srv)
        assert srv.request_count == 3
    assert isinstance(error, ModelError) and error.kind == "empty"


def test_max_retries_still_bounds_a_call_of_mixed_faults() -> None:
    faults = [status(500), empty(), status(500), status(500), status(500), status(500)]
    with ChatServer(script=faults) as srv:
        error = _ask(srv, max_retries=3)
        assert srv.request_count == 4
    assert isinstance(error, ModelError) and error.kind == "server"
