"""The loopback chat server, exercised through the real `openai` SDK."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from dialogbench.testing import (
    ChatServer,
    JsonMode,
    delay,
    drop,
    empty,
    malformed,
    ok,
    status,
)

T = TypeVar("T")
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "how are you today"}]


def run(srv: ChatServer, fn: Callable[[openai.AsyncOpenAI], Awaitable[T]]) -> T:
    """Run `fn(client)` on a fresh event loop with an SDK client for `srv` (no SDK retries)."""

    async def main() -> T:
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=30)
        try:
            return await fn(client)
        finally:
            await client.close()

    return asyncio.run(main())


def chat(**kw: Any) -> Callable[[openai.AsyncOpenAI], Awaitable[Any]]:
    async def call(client: openai.AsyncOpenAI) -> Any:
        args: dict[str, Any] = {"model": "m", "messages": USER, **kw}
        return await client.chat.completions.create(**args)

    return call


def test_normal_completion_and_recording() -> None:
    with ChatServer() as srv:
        assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
        resp = run(srv, chat(temperature=0.0, max_tokens=64, seed=7))
        assert resp.object == "chat.completion" and resp.model == "m" and resp.id
        choice = resp.choices[0]
        assert (choice.index, choice.finish_reason) == (0, "stop")
        assert (choice.message.role, choice.message.content) == ("assistant", "how are you today")
        assert resp.usage is not None
        assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (4, 4)
        assert resp.usage.total_tokens == 8
        assert srv.request_count == 1
        assert srv.requests[0]["seed"] == 7 and srv.requests[0]["messages"] == USER

        models = run(srv, lambda c: c.models.list())
        assert [m.id for m in models.data] == ["dialogbench-test"]
        assert srv.request_count == 1  # only chat completions are counted
        srv.reset()
        assert srv.request_count == 0 and srv.requests == []


def test_reply_callable_and_async_context_manager() -> None:
    async def main() -> str | None:
        async with ChatServer(reply=lambda body: f"{len(body['messages'])} msgs") as srv:
            client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            resp = await client.chat.completions.create(model="m", messages=USER * 3)
            await client.close()
            return resp.choices[0].message.content

    assert asyncio.run(main()) == "3 msgs"


SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "score": {"$ref": "#/$defs/Score"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "$defs": {"Score": {"enum": [1, 2, 3]}},
}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}


def test_json_mode_honoured() -> None:
    with ChatServer() as srv:
        resp = run(srv, chat(response_format=JSON_SCHEMA))
        assert json.loads(resp.choices[0].message.content) == {"answer": "", "score": 1, "tags": []}
        resp = run(srv, chat(response_format={"type": "json_object"}))
        assert json.loads(resp.choices[0].message.content) == {"reply": "how are you today"}


@pytest.mark.parametrize(
    ("mode", "fmt", "rejected"),
    [
        (False, JSON_SCHEMA, True),
        (False, {"type": "json_object"}, True),
        ("json_object", JSON_SCHEMA, True),
        ("json_object", {"type": "json_object"}, False),
        (False, {"type": "text"}, False),
    ],
)
def test_json_mode_refused(mode: JsonMode, fmt: dict[str, Any], rejected: bool) -> None:
    with ChatServer(json_mode=mode) as srv:
        if not rejected:
            assert run(srv, chat(response_format=fmt)).choices
            return
        with pytest.raises(openai.BadRequestError) as err:
            run(srv, chat(response_format=fmt))
        assert "response_format" in err.value.response.text
        assert srv.request_count == 1
        assert run(srv, chat()).choices  # the same request without response_format is fine


def test_status_429_with_retry_after_then_default() -> None:
    with ChatServer(script=[status(429, retry_after=3), status(500), status(503, 1.5)]) as srv:
        with pytest.raises(openai.RateLimitError) as rate:
            run(srv, chat())
        assert rate.value.status_code == 429
        assert rate.value.response.headers["retry-after"] == "3"
        assert rate.value.response.json()["error"]["type"] == "rate_limit_error"
        with pytest.raises(openai.InternalServerError) as err:
            run(srv, chat())
        assert err.value.status_code == 500 and "retry-after" not in err.value.response.headers
        with pytest.raises(openai.APIStatusError) as unavailable:
            run(srv, chat())
        assert unavailable.value.status_code == 503
        assert unavailable.value.response.headers["retry-after"] == "1.5"
        assert run(srv, chat()).choices[0].message.content == "how are you today"
        assert srv.request_count == 4


def test_drop_is_a_connection_error() -> None:
    with ChatServer(script=[drop()]) as srv:
        with pytest.raises(openai.APIConnectionError):
            run(srv, chat())
        assert run(srv, chat()).choices  # the server carries on
        assert srv.request_count == 2


def test_malformed_bodies() -> None:
    with ChatServer(script=[malformed(), malformed("no_choices")]) as srv:
        with pytest.raises((openai.APIResponseValidationError, ValueError)):
            run(srv, chat())
        resp = run(srv, chat())  # the SDK does not validate: the result simply lacks choices
        assert not getattr(resp, "choices", None)


def test_empty_and_fixed_content() -> None:
    with ChatServer(script=[empty(), ok("scripted")]) as srv:
        first, second = run(srv, chat()), run(srv, chat())
        assert first.choices[0].message.content == ""
        assert first.usage is not None and first.usage.completion_tokens == 0
        assert second.choices[0].message.content == "scripted"


def test_delay_and_latency_are_measured() -> None:
    with ChatServer(latency=0.1, script=[delay(0.3)]) as srv:
        started = time.perf_counter()
        run(srv, chat())
        assert time.perf_counter() - started >= 0.4
        started = time.perf_counter()
        run(srv, chat())
        assert 0.1 <= time.perf_counter() - started < 0.4


def test_rules_by_request_number_take_precedence() -> None:
    srv = ChatServer(rules={2: status(500)}, script=[ok("a"), ok("b")])
    with srv:
        assert run(srv, chat()).choices[0].message.content == "a"
        with pytest.raises(openai.InternalServerError):
            run(srv, chat())
        assert run(srv, chat()).choices[0].message.content == "b"
        srv.enqueue(ok("c"))
        assert run(srv, chat()).choices[0].message.content == "c"
    every_other = ChatServer(rules=lambda n, body: status(503) if n % 2 else None)
    with every_other:
        with pytest.raises(openai.APIStatusError):
            run(every_other, chat())
        assert run(every_other, chat()).choices


def test_concurrency_is_real() -> None:
    n, latency = 200, 0.2
    with ChatServer(latency=latency) as srv:

        async def many(client: openai.AsyncOpenAI) -> list[Any]:
            sem = asyncio.Semaphore(128)

            async def one(i: int) -> Any:
                async with sem:
                    msgs: list[ChatCompletionMessageParam] = [{"role": "user", "content": f"q{i}"}]
                    return await client.chat.completions.create(model="m", messages=msgs)

            return await asyncio.gather(*(one(i) for i in range(n)))

        started = time.perf_counter()
        out = run(srv, many)
        elapsed = time.perf_counter() - started
        assert [r.choices[0].message.content for r in out] == [f"q{i}" for i in range(n)]
        assert srv.request_count == n
        assert elapsed < n * latency / 4, f"{n} requests took {elapsed:.1f}s: serialised?"


def test_stop_with_requests_in_flight() -> None:
    srv = ChatServer(script=[delay(30)], shutdown_timeout=0.2)
    srv.start()

    async def hang(client: openai.AsyncOpenAI) -> None:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="m", messages=USER, timeout=0.3)

    run(srv, hang)  # the handler is still sleeping on the server
    started = time.perf_counter()
    srv.stop()
    assert time.perf_counter() - started < 5
    assert srv._thread is not None and not srv._thread.is_alive()


def test_bad_requests_are_400_and_still_recorded() -> None:
    with ChatServer() as srv:
        with pytest.raises(openai.BadRequestError) as err:
            run(srv, chat(messages=[]))
        assert err.value.response.json()["error"]["param"] == "messages"
        assert srv.request_count == 1


def test_embeddings_route_answers_openai_style() -> None:
    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(len(t)), 1.0] for t in texts]

    async def go(client: openai.AsyncOpenAI) -> tuple[list[list[float]], int]:
        got = await client.embeddings.create(model="m", input=["ab", "abcd"])
        one = await client.embeddings.create(model="m", input="xyz")
        return [d.embedding for d in [*got.data, *one.data]], got.usage.prompt_tokens

    with ChatServer(embed=embed) as srv:
        vectors, tokens = run(srv, go)
        assert vectors == [[2.0, 1.0], [4.0, 1.0], [3.0, 1.0]]
        assert tokens == 2
        assert [b["input"] for b in srv.embedding_requests] == [["ab", "abcd"], "xyz"]
        assert srv.request_count == 0  # chat requests are counted apart
    # without `embed` there is no such route
    with ChatServer() as srv, pytest.raises(openai.NotFoundError):
        run(srv, go)
