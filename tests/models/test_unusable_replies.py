"""An unusable reply is a failed call: counted by kind, never cached, asked again afresh.

Against a real loopback server whose first answer to each request is unusable
(`testing.UnusableFirst`): the first asking fails after its corrections, a second asking
(a rerun, with the same cache) sends exactly one request per failed call, with the seed
moved, and every usable reply stays cached.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from dialogbench.models import Call, GenerateConfig, Model, ResponseCache
from dialogbench.models.model import RETRY_SEED_STEP
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.models.structured import Unusable, parse_reply
from dialogbench.models.types import ModelOutput
from dialogbench.models.usage import usage_scope
from dialogbench.testing import ChatServer, UnusableFirst
from dialogbench.testing.unusable import NOT_JSON, conversation


class Rating(BaseModel):
    reason: str
    score: int = Field(ge=0, le=3)


GOOD = '{"reason": "fine", "score": 2}'


def _model(srv: ChatServer, cache: ResponseCache | None) -> Model:
    provider = OpenAICompatible("openai-compatible/test", "test", srv.base_url, None)
    return Model(provider, cache=cache, backoff_s=0.01)


def _schema_config() -> GenerateConfig:
    """The config `generate_structured` sends for `Rating` (seed 0)."""
    return GenerateConfig(seed=0, json_schema=Rating.model_json_schema(), schema_name="Rating")


def _messages(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def _ask(model: Model, texts: list[str], max_fixes: int = 2, seed: int | None = 0) -> list[Any]:
    calls = [Call(_messages(t), GenerateConfig(seed=seed)) for t in texts]

    async def go() -> list[Any]:
        try:
            with usage_scope() as spent:
                got = await model.generate_structured_many(
                    calls, Rating, max_fixes=max_fixes, tag="t"
                )
            return [got, {role: t.as_dict() for role, (_, t) in spent.items()}]
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("no JSON here", "unparseable"),
        ('{"reason": "x"}', "schema"),
        ('{"reason": "x", "score": "two"}', "schema"),
        ('{"reason": "x", "score": 9}', "range"),
        ('{"score": 9}', "schema"),  # a field missing as well: not only a range
    ],
)
def test_parse_reply_says_the_kind(text: str, kind: str) -> None:
    with pytest.raises(Unusable) as info:
        parse_reply(text, Rating)
    assert info.value.kind == kind


def test_unusable_is_a_failed_call_and_a_rerun_asks_afresh(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    flaky = UnusableFirst(lambda body: GOOD)
    with ChatServer(reply=flaky) as srv:
        cache = ResponseCache(path)
        model = _model(srv, cache)
        (got,), spent = _ask(model, ["rate this"])
        assert srv.request_count == 3  # the first asking and its two corrections
        assert not got.ok and got.kind == "unparseable" and got.retry == 0
        assert got.attempts == 3 and got.raw == NOT_JSON and len(flaky.spoiled) == 3
        usage = spent["model"]
        assert usage["calls"] == 3 and usage["failed_calls"] == 1
        assert usage["failed_by_kind"] == {"unparseable": 1}
        assert usage["prompt_tokens"] > 0  # the unusable reply's tokens were spent
        totals = model.ledger.totals("t")
        assert totals.failed_by_kind == {"unparseable": 1} and totals.calls == 3
        stats = cache.stats()
        assert stats["entries"] == [] and stats["session"]["evicted_unusable"] == 3
        first = model._key(_messages("rate this"), _schema_config(), 0)
        assert "came back unusable (unparseable) 1 time(s)" in cache.explain(first)
        cache.close()

        again = _model(srv, ResponseCache(path))
        (got,), spent = _ask(again, ["rate this"])
        assert srv.request_count == 4  # exactly the failed call, asked once more
        sent = srv.requests[-1]
        assert conversation(sent) == conversation(flaky.spoiled[0])
        assert sent["seed"] == RETRY_SEED_STEP  # the retry is in the request, recorded
        assert got.ok and got.value == Rating(reason="fine", score=2) and got.retry == 1
        assert spent["model"]["failed_calls"] == 0

        third = _model(srv, ResponseCache(path))
        (got,), spent = _ask(third, ["rate this"])
        assert srv.request_count == 4 and got.ok and got.retry == 1  # kept, from the cache
        assert spent["model"]["cached_calls"] == 1


def test_good_calls_stay_cached_and_only_the_failed_are_sent(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    flaky = UnusableFirst(
        lambda body: GOOD,
        bad='{"reason": "too high", "score": 7}',
        applies=lambda body: "bad" in body["messages"][0]["content"],
    )
    texts = ["good one", "bad one", "good two", "bad two"]
    with ChatServer(reply=flaky) as srv:
        got, spent = _ask(_model(srv, ResponseCache(path)), texts, max_fixes=0)
        assert [g.ok for g in got] == [True, False, True, False]
        assert [g.kind for g in got] == [None, "range", None, "range"]
        assert spent["model"]["failed_by_kind"] == {"range": 2}
        assert srv.request_count == 4
        got, spent = _ask(_model(srv, ResponseCache(path)), texts, max_fixes=0)
        assert all(g.ok for g in got) and [g.retry for g in got] == [0, 1, 0, 1]
        rerun = srv.requests[4:]
        assert sorted(conversation(b) for b in rerun) == sorted(
            conversation(b) for b in flaky.spoiled
        )
        assert spent["model"]["cached_calls"] == 2 and spent["model"]["failed_calls"] == 0


def test_a_corrected_reply_stays_cached(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"

    def reply(body: dict[str, Any]) -> str:
        fixing = any("could not be used" in m["content"] for m in body["messages"])
        return GOOD if fixing else "let me think"

    with ChatServer(reply=reply) as srv:
        (got,), spent = _ask(_model(srv, ResponseCache(path)), ["rate"])
        assert got.ok and got.attempts == 2 and spent["model"]["failed_calls"] == 0
        (got,), _ = _ask(_model(srv, ResponseCache(path)), ["rate"])
        assert got.ok and srv.request_count == 2  # the whole conversation came from the cache


def test_an_unusable_reply_an_older_cache_kept_is_asked_afresh_at_once(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with ChatServer(reply=lambda body: GOOD) as srv:
        cache = ResponseCache(path)
        model = _model(srv, cache)
        key = model._key(_messages("old"), _schema_config(), 0)
        cache.put(key, ModelOutput(text="not JSON, cached before the rule"))
        (got,), spent = _ask(model, ["old"], max_fixes=0)
        assert got.ok and got.retry == 1 and srv.request_count == 1
        assert spent["model"]["failed_calls"] == 0  # the cache's fault, not a failed call
        assert srv.requests[0]["seed"] == RETRY_SEED_STEP


def test_without_a_seed_the_retry_is_in_the_key_only(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    flaky = UnusableFirst(lambda body: GOOD)
    with ChatServer(reply=flaky) as srv:
        _ask(_model(srv, ResponseCache(path)), ["x"], max_fixes=0, seed=None)
        (got,), _ = _ask(_model(srv, ResponseCache(path)), ["x"], max_fixes=0, seed=None)
        assert got.ok and got.retry == 1 and srv.request_count == 2
        assert "seed" not in srv.requests[1]


def test_a_parser_of_ones_own_gives_its_kind(tmp_path: Path) -> None:
    def parse(raw: str) -> int:
        value = int(json.loads(raw)["n"])
        if not 0 <= value <= 5:
            raise Unusable(f"n is {value}, not 0-5", "range")
        return value

    with ChatServer(reply=lambda body: '{"n": 9}') as srv:
        model = _model(srv, ResponseCache(tmp_path / "c.sqlite"))

        async def go() -> Any:
            try:
                return await model.generate_parsed(
                    _messages("n?"),
                    parse,
                    lambda why: {"role": "user", "content": why},
                    max_fixes=1,
                )
            finally:
                await model.aclose()

        got = asyncio.run(go())
    assert got.kind == "range" and got.error == "n is 9, not 0-5" and got.attempts == 2
    assert model.ledger.totals().failed_by_kind == {"range": 1}
