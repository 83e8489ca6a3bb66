"""`Model` over the OpenAI-compatible provider, against a real chat server on loopback.

Each fault the server can script (429 with Retry-After, 500, dropped connections,
malformed bodies, delays) must be survived by retries; errors are never cached; a rerun of
finished work makes no request; structured replies are corrected or recorded unscored.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dialogbench.models import Call, GenerateConfig, Model, ModelError, ResponseCache
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.testing import ChatServer, delay, drop, malformed, status

SECRET = "sk-test-DO-NOT-LEAK-0123456789"


def _model(
    srv: ChatServer, *, cache: ResponseCache | None = None, key: str | None = None, **kwargs: Any
) -> Model:
    provider = OpenAICompatible("openai-compatible/test", "test", srv.base_url, key)
    kwargs.setdefault("backoff_s", 0.01)
    return Model(provider, cache=cache, **kwargs)


def _ask(model: Model, text: str = "hello there", **kwargs: Any) -> Any:
    async def go() -> Any:
        try:
            return await model.generate([{"role": "user", "content": text}], **kwargs)
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_plain_completion_with_usage() -> None:
    with ChatServer() as srv:
        out = _ask(_model(srv), "say this back")
    assert out.text == "say this back"
    assert out.usage.prompt_tokens > 0 and out.usage.completion_tokens == 3
    assert not out.cached


def test_retry_after_is_honoured() -> None:
    with ChatServer(script=[status(429, retry_after=0.5)]) as srv:
        started = time.perf_counter()
        out = _ask(_model(srv))
        waited = time.perf_counter() - started
        assert srv.request_count == 2
    assert out.text == "hello there" and waited >= 0.5


@pytest.mark.parametrize(
    "fault",
    [status(500), status(503), drop(), malformed("not_json"), malformed("no_choices")],
    ids=["500", "503", "drop", "not-json", "no-choices"],
)
def test_transient_faults_are_retried(fault: Any) -> None:
    with ChatServer(script=[fault, fault]) as srv:
        model = _model(srv)
        out = _ask(model)
        assert srv.request_count == 3
    assert out.text == "hello there" and model.retries == 2


def test_timeout_is_retried() -> None:
    with ChatServer(script=[delay(2.0)]) as srv:
        out = _ask(_model(srv, timeout_s=0.3))
        assert srv.request_count == 2
    assert out.text == "hello there"


def test_client_error_is_not_retried_and_not_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    with ChatServer(script=[status(401, message="bad key")]) as srv:
        with pytest.raises(ModelError, match="HTTP 401"):
            _ask(_model(srv, cache=cache))
        assert srv.request_count == 1
        assert _ask(_model(srv, cache=cache)).text == "hello there"  # asked again, not cached
        assert srv.request_count == 2


def test_retries_give_up_after_the_limit() -> None:
    with ChatServer(script=[status(500)] * 5) as srv:
        with pytest.raises(ModelError, match="HTTP 500"):
            _ask(_model(srv, max_retries=2))
        assert srv.request_count == 3


def test_rerun_is_free(tmp_path: Path) -> None:
    """A second run of the same work is answered from the cache: zero requests."""
    path = tmp_path / "c.sqlite"
    prompts = [f"message {i}" for i in range(40)]

    async def run(model: Model) -> list[str]:
        try:
            outs = await asyncio.gather(
                *[
                    model.generate(
                        [{"role": "user", "content": p}], GenerateConfig(max_tokens=20), tag="chat"
                    )
                    for p in prompts
                ]
            )
        finally:
            await model.aclose()
        return [o.text for o in outs]

    with ChatServer(latency=0.01) as srv:
        first = asyncio.run(run(_model(srv, cache=ResponseCache(path))))
        assert srv.request_count == 40
        again = _model(srv, cache=ResponseCache(path))
        second = asyncio.run(run(again))
        assert srv.request_count == 40
    assert first == second
    totals = again.ledger.totals("chat")
    assert totals.cached_calls == 40 and totals.prompt_tokens == 0
    assert again.cache is not None and again.cache.hits == 40


def test_concurrency_limit_is_respected() -> None:
    async def run(model: Model) -> None:
        try:
            await asyncio.gather(
                *[model.generate([{"role": "user", "content": str(i)}]) for i in range(12)]
            )
        finally:
            await model.aclose()

    with ChatServer(latency=0.2) as srv:
        started = time.perf_counter()
        asyncio.run(run(_model(srv, concurrency=4)))
        elapsed = time.perf_counter() - started
    assert 0.6 <= elapsed < 1.5  # three waves of four


class Person(BaseModel):
    name: str
    age: int


def _structured(model: Model, max_fixes: int = 2) -> Any:
    async def go() -> Any:
        try:
            return await model.generate_structured(
                [{"role": "user", "content": "Maya is 31."}], Person, max_fixes=max_fixes
            )
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("mode", "expected"), [(True, "json_schema"), ("json_object", "json_object"), (False, "none")]
)
def test_json_mode_steps_down(mode: Any, expected: str) -> None:
    def reply(body: dict[str, Any]) -> str:
        return 'Here you go: {"name": "Maya", "age": 31}'

    with ChatServer(json_mode=mode, reply=reply) as srv:
        model = _model(srv)
        got = _structured(model)
    assert got.ok and got.value == Person(name="Maya", age=31)
    assert model.provider.json_mode == expected  # type: ignore[attr-defined]


def test_invalid_reply_is_corrected() -> None:
    def reply(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        if "could not be used" in last:
            return '{"name": "Maya", "age": 31}'
        return '{"name": "Maya", "age": "thirty-one"}'

    with ChatServer(reply=reply) as srv:
        got = _structured(_model(srv))
        corrective = srv.requests[-1]["messages"][-1]["content"]
    assert got.ok and got.attempts == 2
    assert "age" in corrective and "JSON schema" in corrective


def test_hopeless_reply_is_unscored_with_raw_text() -> None:
    with ChatServer(reply=lambda body: "I would rather not say.") as srv:
        got = _structured(_model(srv), max_fixes=1)
        assert srv.request_count == 2
    assert not got.ok and got.value is None
    assert got.raw == "I would rather not say." and "no JSON object" in (got.error or "")


def test_failed_call_is_unscored_not_raised() -> None:
    with ChatServer(script=[status(400, message="nope")]) as srv:
        got = _structured(_model(srv))
    assert not got.ok and (got.error or "").startswith("call failed")


def test_api_key_never_leaks(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    with ChatServer(script=[status(403, message=f"key {SECRET} is not allowed")]) as srv:
        model = _model(srv, cache=cache, key=SECRET)
        with pytest.raises(ModelError) as info:
            _ask(model)
        assert SECRET not in str(info.value) and "***" in str(info.value)
        assert SECRET not in repr(model.provider)
        _ask(_model(srv, cache=cache, key=SECRET))
    cache.close()
    assert SECRET.encode() not in path.read_bytes()
    assert SECRET not in json.dumps(model.ledger.report())


def test_generate_many_keeps_order_and_errors_in_place(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    calls = [Call([{"role": "user", "content": f"item {i}"}]) for i in range(10)]

    async def run(model: Model) -> list[Any]:
        try:
            return await model.generate_many(calls, tag="batch")
        finally:
            await model.aclose()

    def rule(number: int, body: dict[str, Any]) -> Any:
        return status(400, message="no") if body["messages"][0]["content"] == "item 3" else None

    with ChatServer(rules=rule) as srv:
        first = asyncio.run(run(_model(srv, cache=ResponseCache(path))))
        assert srv.request_count == 10
        assert [getattr(r, "text", None) for r in first] == [
            None if i == 3 else f"item {i}" for i in range(10)
        ]
        assert isinstance(first[3], ModelError)
        again = _model(srv, cache=ResponseCache(path))
        second = asyncio.run(run(again))
        assert srv.request_count == 11  # only the failed call is asked again
    assert all(r.cached for i, r in enumerate(second) if i != 3)
    assert again.ledger.totals("batch").cached_calls == 9


def test_structured_many_matches_one_by_one_round_by_round() -> None:
    """The batched service sends the requests `generate_structured` sends, one round at a
    time, and gives the same results (value, raw, error, attempts)."""

    def reply(body: dict[str, Any]) -> str:
        first = body["messages"][0]["content"]
        corrections = sum("could not be used" in m["content"] for m in body["messages"])
        if first == "fine":
            return '{"name": "Maya", "age": 31}'
        if first == "once" and corrections:
            return '{"name": "Ada", "age": 36}'
        return "no idea"

    texts = ["fine", "once", "never"]
    calls = [Call([{"role": "user", "content": t}], GenerateConfig(seed=1)) for t in texts]

    async def many(model: Model) -> list[Any]:
        try:
            return await model.generate_structured_many(calls, Person, max_fixes=2)
        finally:
            await model.aclose()

    async def one_by_one(model: Model) -> list[Any]:
        try:
            return [
                await model.generate_structured(c.messages, Person, c.config, max_fixes=2)
                for c in calls
            ]
        finally:
            await model.aclose()

    with ChatServer(reply=reply) as srv:
        got = asyncio.run(many(_model(srv)))
        batched = [json.dumps(r, sort_keys=True) for r in srv.requests]
        rounds = [len(r["messages"]) for r in srv.requests]
    with ChatServer(reply=reply) as srv:
        want = asyncio.run(one_by_one(_model(srv)))
        single = [json.dumps(r, sort_keys=True) for r in srv.requests]
    assert got == want
    assert [g.attempts for g in got] == [1, 2, 3]
    assert got[2].raw == "no idea" and not got[2].ok
    assert sorted(batched) == sorted(single)
    assert rounds == [1, 1, 1, 3, 3, 5]  # first attempts, then corrections, batch by batch
