"""`Model`: a provider plus the cache, the per-endpoint concurrency limit, retries and usage.

Every model-backed track calls models through this class:

    model = Model.from_spec(ModelSpec.parse("openai-compatible/qwen", base_url=...))
    out = await model.generate(messages, GenerateConfig(max_tokens=200), tag="chat")
    got = await model.generate_structured(messages, MySchema, tag="judge")

Transient failures (429, 5xx, dropped connections, timeouts, unreadable replies) are retried
with exponential back-off and full jitter, honouring Retry-After; 429 and 503 also halve
the endpoint's concurrency, which then grows back by one per window of successes.
Errors are never cached.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from pydantic import BaseModel

from dialogbench.models.cache import CallKey, ResponseCache
from dialogbench.models.spec import ModelSpec, make_provider
from dialogbench.models.structured import CALL_FAILED, CORRECTION, Structured, parse_reply
from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError, ModelOutput, Provider
from dialogbench.models.usage import UsageLedger

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")


@dataclass(frozen=True)
class Call:
    """One request of a batch for `Model.generate_many`."""

    messages: list[ChatMessage]
    config: GenerateConfig = field(default_factory=GenerateConfig)
    sample: int = 0


class AdaptiveLimiter:
    """At most `limit` calls in flight; halves on overload, creeps back on success."""

    def __init__(self, limit: int) -> None:
        self.max = max(1, limit)
        self.limit = self.max
        self.active = 0
        self._successes = 0
        self._cond = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.active < self.limit)
            self.active += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._cond:
            self.active -= 1
            self._cond.notify(1)

    def overloaded(self) -> None:
        self.limit = max(1, self.limit // 2)
        self._successes = 0

    async def succeeded(self) -> None:
        if self.limit >= self.max:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self._successes = 0
            async with self._cond:
                self.limit += 1
                self._cond.notify_all()


_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AdaptiveLimiter]] = (
    weakref.WeakKeyDictionary()
)


def endpoint_limiter(endpoint: str, limit: int) -> AdaptiveLimiter:
    """One limiter per endpoint (and event loop), shared by every `Model` that calls it."""
    per_loop = _LIMITERS.setdefault(asyncio.get_running_loop(), {})
    if endpoint not in per_loop:
        per_loop[endpoint] = AdaptiveLimiter(limit)
    return per_loop[endpoint]


class Model:
    """A provider behind a cache, a concurrency limit, retries and a usage ledger."""

    def __init__(
        self,
        provider: Provider,
        *,
        cache: ResponseCache | None = None,
        ledger: UsageLedger | None = None,
        concurrency: int = 16,
        max_retries: int = 6,
        backoff_s: float = 0.5,
        backoff_max_s: float = 60.0,
        timeout_s: float | None = 300.0,
        deadline_s: float | None = None,
        retry_after_max_s: float | None = None,
    ) -> None:
        self.provider = provider
        self.cache = cache
        self.ledger = ledger or UsageLedger()
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s  # bridge: honoured by the model-layer change of issue 12
        self.retry_after_max_s = retry_after_max_s
        self.requests = 0
        self.retries = 0
        self.role = "model"
        """The role this model plays in a run (`model`, `judge`, `partner`): usage is
        charged to it."""

    def as_role(self, role: str) -> Model:
        """The same model (provider, cache, ledger, limits) playing another role; closing
        it is left to the original."""
        twin = copy.copy(self)
        twin.role = role
        return twin

    @classmethod
    def from_spec(cls, spec: ModelSpec, **kwargs: object) -> Model:
        """The spec's provider, with its timeout, deadline and Retry-After cap unless given."""
        for name in ("timeout_s", "deadline_s", "retry_after_max_s"):
            kwargs.setdefault(name, getattr(spec, name))
        return cls(make_provider(spec), **kwargs)  # type: ignore[arg-type]

    @property
    def name(self) -> str:
        return self.provider.name

    async def generate(
        self,
        messages: list[ChatMessage],
        config: GenerateConfig | None = None,
        *,
        sample: int = 0,
        tag: str = "",
    ) -> ModelOutput:
        """One reply, from the cache when this exact call was made before."""
        config = self._seeded(config or GenerateConfig(), sample)
        key = CallKey(self.name, self.provider.endpoint, config.cache_text, messages, sample)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.ledger.record(tag, self.name, hit.usage, cached=True, role=self.role)
                return hit
        return await self._fresh(messages, config, key, tag)

    async def generate_many(
        self, calls: list[Call], *, tag: str = ""
    ) -> list[ModelOutput | ModelError]:
        """Replies to many calls, in order; a failed call gives its `ModelError` in place.

        Cached replies are fetched in a few statements before anything is sent, so a rerun of
        finished work costs microseconds per call and makes no request.
        """
        configs = [self._seeded(c.config, c.sample) for c in calls]
        keys = [
            CallKey(self.name, self.provider.endpoint, cfg.cache_text, c.messages, c.sample)
            for c, cfg in zip(calls, configs, strict=True)
        ]
        hits = self.cache.get_many(keys) if self.cache is not None else {}
        cached = [hits.get(key.digest) for key in keys]
        self.ledger.record_cached(
            tag, self.name, [h.usage for h in cached if h is not None], role=self.role
        )
        results: list[ModelOutput | ModelError | None] = list(cached)

        async def fresh(i: int) -> None:
            try:
                results[i] = await self._fresh(calls[i].messages, configs[i], keys[i], tag)
            except ModelError as e:
                results[i] = e

        await asyncio.gather(*[fresh(i) for i, r in enumerate(results) if r is None])
        return [r for r in results if r is not None]

    def _seeded(self, config: GenerateConfig, sample: int) -> GenerateConfig:
        if sample and config.seed is not None:
            return replace(config, seed=config.seed + sample)
        return config

    async def _fresh(
        self, messages: list[ChatMessage], config: GenerateConfig, key: CallKey, tag: str
    ) -> ModelOutput:
        """Call the provider (no cache lookup), then store and account the reply."""
        try:
            out = await self._call(messages, config)
        except ModelError as e:
            self.ledger.record(tag, self.name, None, role=self.role, error=e)
            raise
        if self.cache is not None:
            self.cache.put(key, out)
        self.ledger.record(tag, self.name, out.usage, role=self.role)
        return out

    async def _call(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        limiter = endpoint_limiter(self.provider.endpoint, self.concurrency)
        attempt = 0
        while True:
            async with limiter:
                self.requests += 1
                try:
                    out = await asyncio.wait_for(
                        self.provider.generate(messages, config), self.timeout_s
                    )
                except TimeoutError:
                    error = ModelError(
                        f"{self.name}: no reply in {self.timeout_s} s", retryable=True
                    )
                except ModelError as e:
                    error = e
                else:
                    await limiter.succeeded()
                    return out
            if not error.retryable or attempt >= self.max_retries:
                raise error
            if error.status in (429, 503):
                limiter.overloaded()
            cap = min(self.backoff_max_s, self.backoff_s * 2**attempt)
            delay = random.uniform(0.0, cap)
            if error.retry_after is not None:
                delay = error.retry_after + random.uniform(0.0, min(1.0, cap))
            attempt += 1
            self.retries += 1
            await asyncio.sleep(delay)

    async def generate_structured(
        self,
        messages: list[ChatMessage],
        schema: type[T],
        config: GenerateConfig | None = None,
        *,
        max_fixes: int = 2,
        sample: int = 0,
        tag: str = "",
        correction: str = CORRECTION,
    ) -> Structured[T]:
        """A validated object, or (after `max_fixes` corrections) the raw text and why not.

        `correction` is the message sent back after an unusable reply ({error}, {schema}).
        """
        json_schema = schema.model_json_schema()
        config = replace(
            config or GenerateConfig(), json_schema=json_schema, schema_name=schema.__name__
        )
        shown = json.dumps(json_schema)
        return await self.generate_parsed(
            messages,
            lambda raw: parse_reply(raw, schema),
            lambda error: {"role": "user", "content": correction.format(error=error, schema=shown)},
            config,
            max_fixes=max_fixes,
            sample=sample,
            tag=tag,
        )

    async def generate_parsed(
        self,
        messages: list[ChatMessage],
        parse: Callable[[str], V],
        correct: Callable[[str], ChatMessage],
        config: GenerateConfig | None = None,
        *,
        max_fixes: int = 2,
        sample: int = 0,
        tag: str = "",
    ) -> Structured[V]:
        """`parse(reply)`, sending an unusable reply back with `correct(why)` up to
        `max_fixes` times; then the raw text and why not (`parse` raises `ValueError`)."""
        convo = list(messages)
        raw, error = "", "no attempt"
        for attempt in range(1, max_fixes + 2):
            try:
                out = await self.generate(convo, config, sample=sample, tag=tag)
            except ModelError as e:
                return Structured(raw=raw, error=f"{CALL_FAILED}: {e}", attempts=attempt)
            raw = out.text
            try:
                return Structured(value=parse(raw), raw=raw, attempts=attempt)
            except ValueError as e:
                error = str(e)
            convo = [*convo, {"role": "assistant", "content": raw}, correct(error)]
        return Structured(raw=raw, error=error, attempts=max_fixes + 1)

    async def generate_parsed_many(
        self,
        calls: list[Call],
        parse: Callable[[str], V],
        correct: Callable[[str], ChatMessage],
        *,
        max_fixes: int = 2,
        tag: str = "",
    ) -> list[Structured[V]]:
        """`generate_parsed` for many calls at once, round by round: every first attempt as
        one batch (one cache look-up), then the corrections of the unusable replies as the
        next batch, up to `max_fixes` rounds. Each call's requests are the ones
        `generate_parsed` would send (same conversation, config and sample)."""
        results: list[Structured[V]] = [Structured(error="no attempt") for _ in calls]
        convos = {i: list(c.messages) for i, c in enumerate(calls)}
        for attempt in range(1, max_fixes + 2):
            if not convos:
                break
            batch = [replace(calls[i], messages=m) for i, m in convos.items()]
            outs = await self.generate_many(batch, tag=tag)
            again: dict[int, list[ChatMessage]] = {}
            for (i, convo), out in zip(convos.items(), outs, strict=True):
                if isinstance(out, ModelError):
                    error = f"{CALL_FAILED}: {out}"
                    results[i] = Structured(raw=results[i].raw, error=error, attempts=attempt)
                    continue
                try:
                    results[i] = Structured(value=parse(out.text), raw=out.text, attempts=attempt)
                    continue
                except ValueError as e:
                    why = str(e)
                results[i] = Structured(raw=out.text, error=why, attempts=attempt)
                again[i] = [*convo, {"role": "assistant", "content": out.text}, correct(why)]
            convos = again
        return results

    async def generate_structured_many(
        self,
        calls: list[Call],
        schema: type[T],
        *,
        max_fixes: int = 2,
        tag: str = "",
        correction: str = CORRECTION,
    ) -> list[Structured[T]]:
        """`generate_structured` for many calls (each call's config gets the schema), sent
        round by round as `generate_parsed_many` does."""
        json_schema = schema.model_json_schema()
        shown = json.dumps(json_schema)
        calls = [
            replace(
                c, config=replace(c.config, json_schema=json_schema, schema_name=schema.__name__)
            )
            for c in calls
        ]
        return await self.generate_parsed_many(
            calls,
            lambda raw: parse_reply(raw, schema),
            lambda error: {"role": "user", "content": correction.format(error=error, schema=shown)},
            max_fixes=max_fixes,
            tag=tag,
        )

    async def aclose(self) -> None:
        await self.provider.aclose()
