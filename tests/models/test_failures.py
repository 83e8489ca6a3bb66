"""How `Model` fails: by cause (`ModelError.kind`), in bounded time, saying what was tried.

Against the real loopback `ChatServer` (its scripted faults) and a closed port; timeouts in
these tests are a fraction of a second, and the time bounds asserted are generous
functional ones (a deadline that holds), not speed claims.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from dialogbench.models import Call, CallKey, GenerateConfig, Model, ModelError, ResponseCache
from dialogbench.models.check import check_model
from dialogbench.models.openai_compat import Masker, OpenAICompatible
from dialogbench.models.spec import ModelSpec
from dialogbench.models.types import ERROR_KINDS, ModelOutput
from dialogbench.testing import ChatServer, delay, drop, empty, malformed, ok, status

SECRET = "sk-test/DO+NOT=LEAK/0123456789"
MESSAGES: list[Any] = [{"role": "user", "content": "hello there"}]


def _model(base_url: str, *, key: str | None = None, **kwargs: Any) -> Model:
    provider = OpenAICompatible("openai-compatible/test", "test", base_url, key)
    kwargs.setdefault("backoff_s", 0.01)
    return Model(provider, **kwargs)


def _ask(model: Model) -> ModelOutput:
    async def go() -> ModelOutput:
        try:
            return await model.generate(MESSAGES)
        finally:
            await model.aclose()

    return asyncio.run(go())


def _fail(model: Model) -> ModelError:
    with pytest.raises(ModelError) as info:
        _ask(model)
    return info.value


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("status_code", "retryable", "kind"),
    [
        (429, True, "rate_limited"),
        (503, True, "server"),
        (500, True, "server"),
        (408, True, "timeout"),
        (401, False, "rejected"),
        (404, False, "unreachable"),
        (None, True, "server"),
        (None, False, "rejected"),
    ],
)
def test_kind_defaults_from_status(status_code: int | None, retryable: bool, kind: str) -> None:
    error = ModelError("x", retryable=retryable, status=status_code)
    assert error.kind == kind and error.kind in ERROR_KINDS
    assert ModelError("x", retryable=True, kind="empty").kind == "empty"


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (status(500), "server"),
        (status(429), "rate_limited"),
        (status(401, message="bad key"), "rejected"),
        (drop(), "server"),
        (malformed("not_json"), "unreadable"),
        (malformed("no_choices"), "empty"),
        (empty(), "empty"),
        (delay(30.0), "timeout"),
    ],
    ids=["500", "429", "401", "drop", "not-json", "no-choices", "empty", "hung"],
)
def test_each_fault_has_its_kind(fault: Any, kind: str) -> None:
    with ChatServer(rules=lambda n, body: fault) as srv:
        model = _model(srv.base_url, max_retries=0, timeout_s=0.3)
        error = _fail(model)
    assert error.kind == kind, error
    assert model.failures == {kind: 1}


def test_empty_reply_is_retried_never_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    with ChatServer(script=[empty(), malformed("no_choices")]) as srv:
        model = _model(srv.base_url, cache=cache)
        assert _ask(model).text == "hello there"
        assert srv.request_count == 3 and model.failures == {"empty": 2}

    with ChatServer(rules=lambda n, body: empty()) as srv:
        model = _model(srv.base_url, cache=cache)
        error = _fail(_model(srv.base_url, cache=cache))
        assert error.kind == "empty" and error.retryable
        assert "empty reply" in str(error) and "3 requests" in str(error)
        assert srv.request_count == 3  # retried twice, quickly: a server that answers ""
        _fail(_model(srv.base_url, cache=cache))
        assert srv.request_count == 6  # asked again: the empty reply was not cached


def test_empty_reply_cached_earlier_is_not_replayed(tmp_path: Path) -> None:
    """A cache written before empty replies counted as errors holds them: they are asked
    again, and the good reply replaces them."""
    path = tmp_path / "c.sqlite"
    with ChatServer() as srv:
        model = _model(srv.base_url, cache=ResponseCache(path))
        config = GenerateConfig()
        key = CallKey(model.name, model.provider.endpoint, config.cache_text, MESSAGES, 0)
        assert model.cache is not None
        model.cache.put(key, ModelOutput(text=""))
        assert _ask(model).text == "hello there" and srv.request_count == 1

        async def many() -> list[Any]:
            again = _model(srv.base_url, cache=ResponseCache(path))
            again.cache.put(key, ModelOutput(text="  "))  # type: ignore[union-attr]
            try:
                return await again.generate_many([Call(MESSAGES)])
            finally:
                await again.aclose()

        outs = asyncio.run(many())
        assert srv.request_count == 2 and outs[0].text == "hello there"
        assert _ask(_model(srv.base_url, cache=ResponseCache(path))).cached
        assert srv.request_count == 2


def test_null_content_is_empty() -> None:
    provider = OpenAICompatible("openai-compatible/test", "test", "http://127.0.0.1:1/v1", None)
    for choices in ([{"message": {"content": None}}], [{"message": {"content": ""}}], []):
        with pytest.raises(ModelError) as info:
            provider._output(json.dumps({"choices": choices}), 0.0)
        assert info.value.kind == "empty" and info.value.retryable


def test_connection_refused_fails_in_seconds_naming_the_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = _model(url, backoff_s=0.5)  # the default back-off: quick retries stay quick
    started = time.monotonic()
    error = _fail(model)
    assert time.monotonic() - started < 10
    assert error.kind == "unreachable"
    assert f"{url}/chat/completions" in str(error) and "connection refused" in str(error)
    assert model.requests == 3  # tried, then retried at most twice

    async def batch_and_check() -> tuple[list[Any], ModelError]:
        m = _model(url)
        try:
            outs = await m.generate_many(
                [Call([{"role": "user", "content": str(i)}]) for i in range(20)]
            )
            with pytest.raises(ModelError) as info:
                await check_model(m)
            return outs, info.value
        finally:
            await m.aclose()

    outs, checked = asyncio.run(batch_and_check())
    assert all(isinstance(o, ModelError) and o.kind == "unreachable" for o in outs)
    assert checked.kind == "unreachable" and url in str(checked)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("notaurl", "not an http(s) URL"),
        ("localhost:8000/v1", "not an http(s) URL"),
        ("ftp://example.org/v1", "not an http(s) URL"),
        ("http://127.0.0.1:99999/v1", "not a valid URL"),
        ("http://user:hunter2secret@127.0.0.1:8000/v1", "user name or password"),
    ],
)
def test_invalid_url_fails_at_once(url: str, says: str) -> None:
    model = _model(url)
    error = _fail(model)
    assert error.kind == "unreachable" and not error.retryable
    assert says in str(error) and model.requests == 1
    assert repr(url if "@" not in url else "http://***@127.0.0.1:8000/v1") in str(error)
    assert "hunter2secret" not in str(error) and "hunter2secret" not in model.provider.endpoint


def test_url_without_v1_says_so() -> None:
    with ChatServer() as srv:
        root = srv.base_url.removesuffix("/v1")
        model = _model(root)
        error = _fail(model)
        assert srv.request_count == 0  # nothing reached the chat-completions route
    assert error.status == 404 and error.kind == "unreachable" and model.requests == 1
    assert "lacks /v1" in str(error) and f"try {root}/v1" in str(error)


def test_unknown_model_404_is_rejected() -> None:
    gone = status(404, message="The model `test` does not exist.")
    with ChatServer(script=[gone]) as srv:
        error = _fail(_model(srv.base_url))
    assert error.kind == "rejected" and "does not exist" in str(error)


def test_long_retry_after_is_capped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with ChatServer(script=[status(429, retry_after=86400)]) as srv:
        with caplog.at_level(logging.WARNING, logger="dialogbench.models"):
            out = _ask(_model(srv.base_url, retry_after_max_s=0.1))
        assert srv.request_count == 2
    assert out.text == "hello there"
    lines = [r.getMessage() for r in caplog.records if r.name == "dialogbench.models"]
    assert len(lines) == 1
    assert "openai-compatible/test" in lines[0] and "86400" in lines[0] and "0.1" in lines[0]


def test_retry_after_beyond_the_deadline_gives_up() -> None:
    with ChatServer(script=[status(429, retry_after=30)]) as srv:
        started = time.monotonic()
        error = _fail(_model(srv.base_url, deadline_s=1.0))
        assert time.monotonic() - started < 10 and srv.request_count == 1
    assert error.kind == "rate_limited" and "deadline" in str(error)


def test_a_server_that_never_answers_fails_within_the_deadline() -> None:
    """timeout x (retries + 1) bounds a call; `deadline_s` bounds it with any retries."""
    timeout, retries, slack = 0.3, 2, 5.0
    with ChatServer(rules=lambda n, body: delay(60.0)) as srv:
        model = _model(srv.base_url, timeout_s=timeout, max_retries=retries)
        started = time.monotonic()
        error = _fail(model)
        took = time.monotonic() - started
        assert took < timeout * (retries + 1) + slack
        assert error.kind == "timeout" and srv.request_count == retries + 1

        model = _model(srv.base_url, timeout_s=timeout, max_retries=100, deadline_s=1.0)
        started = time.monotonic()
        error = _fail(model)
        assert time.monotonic() - started < 1.0 + slack
        assert error.kind == "timeout" and "deadline of 1 s" in str(error)


def test_from_spec_takes_the_limits() -> None:
    spec = ModelSpec.parse("openai-compatible/test", base_url="http://127.0.0.1:1/v1")
    model = Model.from_spec(spec)
    assert model.timeout_s == spec.timeout_s
    assert model.deadline_s == getattr(spec, "deadline_s", 300.0)
    assert model.retry_after_max_s == getattr(spec, "retry_after_max_s", 60.0)
    assert Model.from_spec(spec, deadline_s=5.0, timeout_s=1.0).deadline_s == 5.0
    assert Model(model.provider).timeout_s == 30.0  # well under the old 120 s


def _forms(secret: str) -> list[str]:
    escaped = json.dumps(secret)[1:-1]
    return [
        secret,
        escaped.replace("/", "\\/"),  # PHP's json_encode and others
        escaped.replace("/", "\\\\/"),  # that, escaped again
        urllib.parse.quote(secret, safe=""),
        re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), urllib.parse.quote(secret, safe="")),
        urllib.parse.quote_plus(secret),
    ]


def test_masker_hides_every_form() -> None:
    mask = Masker([SECRET, ""])
    for form in _forms(SECRET):
        masked = mask(f"key <{form}> refused")
        assert masked == "key <***> refused", form
    assert Masker([""])("nothing to hide") == "nothing to hide"


@pytest.mark.parametrize("form", range(len(_forms(SECRET))))
def test_echoed_key_never_leaks(tmp_path: Path, form: int) -> None:
    """A server that echoes the key, in any form, in an error or in a reply."""
    echoed = _forms(SECRET)[form]
    path = tmp_path / "c.sqlite"
    cut = "x" * (500 - len('{"error": {"message": "') - 8)  # the key straddles the cut at 500
    script = [
        status(403, message=f"{cut}{echoed}"),
        status(401, message=f"key {echoed} is not allowed"),
        ok(f"your key is {echoed}, thanks"),
    ]
    with ChatServer(script=script) as srv:
        errors = [_fail(_model(srv.base_url, key=SECRET)) for _ in range(2)]
        model = _model(srv.base_url, key=SECRET, cache=ResponseCache(path))
        out = _ask(model)
    texts = [str(e) for e in errors] + [out.text, out.model, json.dumps(model.ledger.report())]
    for text in texts:
        for piece in (SECRET, echoed, SECRET[:8], echoed[:8]):
            assert piece not in text
    assert "***" in errors[1].args[0] and out.text == "your key is ***, thanks"
    assert model.cache is not None
    model.cache.close()
    assert SECRET[:8].encode() not in path.read_bytes()
