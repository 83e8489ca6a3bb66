"""`Model`: a provider plus the cache, the per-endpoint concurrency limit, retries and usage.

Every model-backed track calls models through this class:

    model = Model.from_spec(ModelSpec.parse("openai-compatible/qwen", base_url=...))
    out = await model.generate(messages, GenerateConfig(max_tokens=200), tag="chat")
    got = await model.generate_structured(messages, MySchema, tag="judge")

Transient failures (429, 5xx, dropped connections, timeouts, unreadable or empty replies)
are retried with exponential back-off and full jitter, honouring Retry-After up to
`retry_after_max_s` (a longer wait asked for is cut to it, and logged); a 429 or 503 without
a Retry-After also halves the endpoint's concurrency, which then grows back by one per window
of successes (with one, the server's wait is the back-off).
An unreachable endpoint (connection refused, host not found) and an empty reply are retried
at most twice, quickly (counted apart from the call's other failures). Each request has
`timeout_s`; a call, all its retries and waits together, has `deadline_s`. A request to a
server left unanswered well past the endpoint's usual latency is hedged: a duplicate is
sent, the first reply wins and the other is cancelled (`models/hedge.py`; bounded per call
and by a budget per endpoint, counted in `Model.hedges` and usage's `hedged_requests`), so
a hung request costs about the hedge delay, not the whole timeout. A provider that runs one
call at a time in this process (its `max_concurrency`, 1 for an embedded or GGUF model) caps
the endpoint's concurrency, so calls queue before their timeout starts; it is never hedged.
Errors, empty replies included, are never cached (nor replayed from a cache written before
they counted as errors); each failure has a `ModelError.kind`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import random
import time
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from pydantic import BaseModel

from dialogbench.models.cache import CallKey, ResponseCache
from dialogbench.models.hedge import Hedger, endpoint_hedger
from dialogbench.models.spec import ModelSpec, make_provider
from dialogbench.models.structured import (
    CALL_FAILED,
    CORRECTION,
    Structured,
    Unusable,
    parse_reply,
    unusable_kind,
)
from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError, ModelOutput, Provider
from dialogbench.models.usage import UsageLedger

logger = logging.getLogger("dialogbench.models")

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

RETRY_SEED_STEP = 1_000_000
"""How far the seed of each new asking of a call that came back unusable moves (retry n
sends seed + n x this), so that a seeded backend answers afresh; the step keeps retries
apart from the sample indices, which move the seed by 1."""


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


HEDGE_ENV = "DIALOGBENCH_HEDGE"
"""`DIALOGBENCH_HEDGE=0` turns hedged requests off for every model built from a spec: a
server then sees exactly one request per try, as the test suite's request counts assume."""


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
        timeout_s: float | None = 30.0,
        deadline_s: float | None = 300.0,
        retry_after_max_s: float = 60.0,
        quick_retries: int = 2,
        hedge: bool = True,
        hedge_min_s: float = 1.0,
        max_hedges: int = 2,
    ) -> None:
        self.provider = provider
        self.cache = cache
        self.ledger = ledger or UsageLedger()
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.timeout_s = timeout_s
        """Seconds one request may take (None: no limit)."""
        self.deadline_s = deadline_s
        """Seconds one call may take, all its requests and back-off waits together (None: no
        limit); waiting for a free connection slot does not count."""
        self.retry_after_max_s = retry_after_max_s
        """The longest Retry-After honoured; a longer one is cut to this, and logged."""
        self.quick_retries = quick_retries
        """Retries (at most) of an unreachable endpoint or an empty reply, after short waits;
        counted apart from the call's other failures (which `max_retries` bounds with
        them)."""
        self.hedge = hedge
        """Send a duplicate of a request left unanswered well past the endpoint's usual
        latency, first reply winning (`models/hedge.py`); only to a provider marked
        `hedgeable` (a server, not a model on this machine)."""
        self.hedge_min_s = hedge_min_s
        """No request is hedged before it has waited this long."""
        self.max_hedges = max_hedges
        """Hedges (at most) per call: a call sends at most max_retries + 1 + max_hedges
        requests."""
        self.requests = 0
        """Requests sent, retries and hedges included."""
        self.retries = 0
        self.hedges = 0
        """Hedged duplicates sent (each also counted in `requests`)."""
        self.failures: Counter[str] = Counter()
        """Failed requests by `ModelError.kind`, retried ones included."""
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
        """The model a spec names; its `timeout_s`, `deadline_s` and `retry_after_max_s`
        (where the spec has them) unless given here."""
        options: dict[str, object] = {
            "timeout_s": getattr(spec, "timeout_s", 30.0),
            "deadline_s": getattr(spec, "deadline_s", 300.0),
            "retry_after_max_s": getattr(spec, "retry_after_max_s", 60.0),
        }
        if os.environ.get(HEDGE_ENV, "1") == "0":  # exact request counts (the test suite)
            options["hedge"] = False
        return cls(make_provider(spec), **{**options, **kwargs})  # type: ignore[arg-type]

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
        key = self._key(messages, config, sample)
        out = await self._fetch(messages, config, key, tag)
        self._account(tag, out)
        return out

    async def generate_many(
        self, calls: list[Call], *, tag: str = ""
    ) -> list[ModelOutput | ModelError]:
        """Replies to many calls, in order; a failed call gives its `ModelError` in place.

        Cached replies are fetched in a few statements before anything is sent, so a rerun of
        finished work costs microseconds per call and makes no request.
        """
        configs = [self._seeded(c.config, c.sample) for c in calls]
        keys = [self._key(c.messages, cfg, c.sample) for c, cfg in zip(calls, configs, strict=True)]
        outs = await self._fetch_many(
            [(c.messages, cfg, key) for c, cfg, key in zip(calls, configs, keys, strict=True)], tag
        )
        for out in outs:
            if isinstance(out, ModelOutput):
                self._account(tag, out)
        return outs

    def _key(
        self, messages: list[ChatMessage], config: GenerateConfig, sample: int, retry: int = 0
    ) -> CallKey:
        return CallKey(
            self.name, self.provider.endpoint, config.cache_text, messages, sample, retry
        )

    def _account(self, tag: str, out: ModelOutput, error: BaseException | None = None) -> None:
        """Charge one answered call to the ledger and the role (`error`: it was unusable)."""
        self.ledger.record(
            tag,
            self.name,
            out.usage,
            cached=out.cached,
            role=self.role,
            error=error,
            hedged=0 if out.cached else out.hedged,
        )

    async def _fetch(
        self, messages: list[ChatMessage], config: GenerateConfig, key: CallKey, tag: str
    ) -> ModelOutput:
        """The cached reply to `key`, else a fresh one (stored); a failed call is accounted
        and raised, an answered one is left to the caller to account."""
        if self.cache is not None:
            hit = _usable(self.cache.get(key))
            if hit is not None:
                return hit
        return await self._fresh(messages, config, key, tag)

    async def _fetch_many(
        self,
        asks: list[tuple[list[ChatMessage], GenerateConfig, CallKey]],
        tag: str,
        *,
        store: bool = True,
    ) -> list[ModelOutput | ModelError]:
        """`_fetch` for many calls: one cache look-up, then the misses concurrently; a failed
        call gives its (accounted) `ModelError` in place. With `store` False, fresh replies
        are left for the caller to store (once it knows they are usable)."""
        results: list[ModelOutput | ModelError | None]
        results = list(self._look_up([k for _, _, k in asks]))

        async def fresh(i: int) -> None:
            messages, config, key = asks[i]
            try:
                results[i] = await self._fresh(messages, config, key, tag, store=store)
            except ModelError as e:
                results[i] = e

        misses = [i for i, r in enumerate(results) if r is None]
        if len(misses) == 1:  # no task of its own: a lone call keeps its place in line
            await fresh(misses[0])
        else:
            await asyncio.gather(*[fresh(i) for i in misses])
        return [r for r in results if r is not None]

    def _look_up(self, keys: list[CallKey]) -> list[ModelOutput | None]:
        """The usable cached reply to each of `keys`, or None: one look-up for one key, a
        few statements for many."""
        if self.cache is None:
            return [None] * len(keys)
        if len(keys) == 1:
            return [_usable(self.cache.get(keys[0]))]
        hits = self.cache.get_many(keys)
        return [_usable(hits.get(k.digest)) for k in keys]

    def _seeded(self, config: GenerateConfig, sample: int) -> GenerateConfig:
        if sample and config.seed is not None:
            return replace(config, seed=config.seed + sample)
        return config

    def _retried(self, config: GenerateConfig, retry: int) -> GenerateConfig:
        """The config of asking number `retry` of a call: its seed moved by
        `RETRY_SEED_STEP` x `retry` (a config without a seed is left as it is)."""
        if retry and config.seed is not None:
            return replace(config, seed=config.seed + RETRY_SEED_STEP * retry)
        return config

    async def _fresh(
        self,
        messages: list[ChatMessage],
        config: GenerateConfig,
        key: CallKey,
        tag: str,
        *,
        store: bool = True,
    ) -> ModelOutput:
        """Call the provider (no cache lookup) and store the reply; a failed call is
        accounted here, an answered one by the caller (with the hedges it sent)."""
        tally = _Tally()
        try:
            out = await self._call(messages, config, tally)
        except ModelError as e:
            self.ledger.record(tag, self.name, None, role=self.role, error=e, hedged=tally.hedges)
            raise
        if store and self.cache is not None:
            self.cache.put(key, out)
        if tally.hedges:
            out = out.model_copy(update={"hedged": tally.hedges})
        return out

    async def _call(
        self, messages: list[ChatMessage], config: GenerateConfig, tally: _Tally
    ) -> ModelOutput:
        """The provider's reply: requests, retries, back-off waits and hedges.

        Every request runs as its own task with its own timeout. One is `current`: the
        retry logic follows it. A current request unanswered past the hedge delay becomes
        a straggler, still running, and a hedge (the same request) becomes current; a
        straggler's reply is taken whenever it comes, back-off waits included, and every
        request still in flight is cancelled when the call ends.
        """
        cap = getattr(self.provider, "max_concurrency", None)  # an in-process model: 1
        limit = self.concurrency if cap is None else min(self.concurrency, int(cap))
        limiter = endpoint_limiter(self.provider.endpoint, limit)
        hedger = self._hedger()
        attempt = 0
        quick_failures = 0  # of them, unreachable or empty: those have their own limit
        began = time.monotonic()
        queued = 0.0  # waiting for a connection slot: not part of the deadline
        flying: dict[asyncio.Task[ModelOutput], tuple[float, float | None]] = {}
        """Requests in flight: task -> (sent at, its time limit)."""
        holding = False

        def spent() -> float:
            return time.monotonic() - began - queued

        def send(hedge: bool) -> asyncio.Task[ModelOutput]:
            left = None if self.deadline_s is None else self.deadline_s - spent()
            budget = _least(self.timeout_s, left)
            self.requests += 1
            if hedge:
                self.hedges += 1
                tally.hedges += 1
            elif hedger is not None:
                hedger.earn()
            task = asyncio.ensure_future(self._request(messages, config, budget))
            task.add_done_callback(_retrieved)
            flying[task] = (time.monotonic(), budget)
            return task

        async def settle(
            timeout: float | None, current: asyncio.Task[ModelOutput] | None
        ) -> ModelOutput | ModelError | None:
            """Wait up to `timeout` for a request to end: a reply (the first wins), the
            current request's error, or None (the time passed; stragglers' errors are
            only counted)."""
            end = None if timeout is None else time.monotonic() + timeout
            while flying:
                if end is None and len(flying) == 1:  # the common case: one request, no hedge
                    (only,) = flying
                    with contextlib.suppress(Exception):  # its error is read below
                        await only
                    done = {only}
                else:
                    wait = None if end is None else max(0.0, end - time.monotonic())
                    done, _ = await asyncio.wait(
                        flying, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                    )
                if not done:
                    return None
                got: ModelOutput | ModelError | None = None
                for task in done:
                    sent_at, _ = flying.pop(task)
                    exc = task.exception()
                    if exc is None:
                        if not isinstance(got, ModelOutput):
                            got = task.result()
                            if hedger is not None:
                                hedger.observe(time.monotonic() - sent_at)
                        continue
                    if not isinstance(exc, ModelError):
                        raise exc
                    self.failures[exc.kind] += 1
                    if exc.status in (429, 503) and exc.retry_after is None:
                        limiter.overloaded()  # with a Retry-After, its wait is the back-off
                    if task is current and got is None:
                        got = exc
                if got is not None:
                    return got
            if end is not None and current is None:
                await asyncio.sleep(max(0.0, end - time.monotonic()))
            return None

        try:
            while True:
                if not holding:
                    waited = time.monotonic()
                    await limiter.__aenter__()
                    queued += time.monotonic() - waited
                    holding = True
                current = send(hedge=False)
                look = self._look_at(hedger, tally, flying[current], flying[current][0])
                while True:
                    wake = None if look is None else max(0.0, look - time.monotonic())
                    got = await settle(wake, current)
                    if isinstance(got, ModelOutput):
                        await limiter.succeeded()
                        return got
                    if got is not None:
                        error = got
                        break
                    if self._may_hedge(hedger, tally, limiter, flying[current], spent()):
                        current = send(hedge=True)
                        look = self._look_at(hedger, tally, flying[current], flying[current][0])
                    else:  # not now (no budget, overload, too few latencies): look again later
                        look = self._look_at(hedger, tally, flying[current], time.monotonic())
                quick = error.kind in ("unreachable", "empty")
                quick_failures += quick
                if (
                    not error.retryable
                    or attempt >= self.max_retries
                    or (quick and quick_failures > self.quick_retries)
                ):
                    raise self._gave_up(error, attempt + 1, spent())
                delay = self._backoff(error, attempt, quick)
                if self.deadline_s is not None and spent() + delay >= self.deadline_s:
                    raise self._gave_up(error, attempt + 1, spent(), deadline=True)
                attempt += 1
                self.retries += 1
                if not flying:  # nothing of this call in flight: free the slot meanwhile
                    holding = False
                    await limiter.__aexit__()
                    await asyncio.sleep(delay)
                    continue
                late = await settle(delay, None)  # a straggler may answer meanwhile
                if isinstance(late, ModelOutput):
                    await limiter.succeeded()
                    return late
        finally:
            losers = list(flying)
            for task in losers:
                task.cancel()
            if holding:
                await limiter.__aexit__()
            if losers:  # let them close their connections (or stop generating)
                await asyncio.gather(*losers, return_exceptions=True)

    async def _request(
        self, messages: list[ChatMessage], config: GenerateConfig, budget: float | None
    ) -> ModelOutput:
        """One request within `budget` seconds; a timeout or an empty reply is an error."""
        try:
            async with asyncio.timeout(budget):
                out = await self.provider.generate(messages, config)
        except TimeoutError:
            within = "" if budget is None else f" in {budget:g} s"
            raise ModelError(
                f"{self.name}: no reply from {self.provider.endpoint}{within}",
                retryable=True,
                kind="timeout",
            ) from None
        if not out.text.strip():
            raise ModelError(
                f"{self.name}: empty reply (finish_reason {out.finish_reason})",
                retryable=True,
                kind="empty",
            )
        return out

    def _backoff(self, error: ModelError, attempt: int, quick: bool) -> float:
        """Seconds to wait before retrying after `error` (full jitter; Retry-After, capped)."""
        cap = min(self.backoff_max_s, self.backoff_s * 2**attempt)
        if quick:
            cap = min(cap, 1.0)
        delay = random.uniform(0.0, cap)
        if error.retry_after is not None:
            asked = error.retry_after
            if asked > self.retry_after_max_s:
                logger.warning(
                    "%s: the server asked to wait %g s before retrying (Retry-After); "
                    "waiting %g s (retry_after_max_s)",
                    self.name,
                    asked,
                    self.retry_after_max_s,
                )
                asked = self.retry_after_max_s
            delay = asked + random.uniform(0.0, min(1.0, cap))
        return delay

    def _hedger(self) -> Hedger | None:
        """This endpoint's hedger, where hedges are allowed: a provider that says it may be
        sent duplicates (a server, not a model on this machine) and `hedge` on."""
        if not self.hedge or not getattr(self.provider, "hedgeable", False):
            return None
        return endpoint_hedger(self.provider.endpoint, self.name)

    def _look_at(
        self,
        hedger: Hedger | None,
        tally: _Tally,
        request: tuple[float, float | None],
        since: float,
    ) -> float | None:
        """When (monotonic) to look at the current request for a hedge, at least
        `hedge_min_s` after `since`; None: never (no hedging, the call's hedges spent, or
        the request times out first and is retried)."""
        if hedger is None or tally.hedges >= self.max_hedges:
            return None
        sent_at, budget = request
        at = since + self.hedge_min_s
        after = hedger.delay(self.hedge_min_s)
        if after is not None:
            at = max(at, sent_at + after)
        if budget is not None and at >= sent_at + budget:
            return None
        return at

    def _may_hedge(
        self,
        hedger: Hedger | None,
        tally: _Tally,
        limiter: AdaptiveLimiter,
        request: tuple[float, float | None],
        spent: float,
    ) -> bool:
        """Whether to hedge the current request now (spending one hedge of the budget):
        it has waited the hedge delay, the endpoint is not cut for overload, and the
        call's deadline leaves time for another request."""
        if hedger is None or tally.hedges >= self.max_hedges or limiter.limit < limiter.max:
            return False
        after = hedger.delay(self.hedge_min_s)
        sent_at, budget = request
        if after is None or time.monotonic() - sent_at < after:
            return False
        if budget is not None and after >= budget:
            return False
        if self.deadline_s is not None and self.deadline_s - spent < self.hedge_min_s:
            return False
        return hedger.take()

    def _gave_up(
        self, error: ModelError, attempts: int, spent: float, *, deadline: bool = False
    ) -> ModelError:
        """The last error, saying how many requests were made (when more than one)."""
        if deadline:
            why = f"deadline of {self.deadline_s:g} s per call reached"
            return error.with_message(f"{error} ({why} after {attempts} requests in {spent:.1f} s)")
        if attempts == 1:
            return error
        return error.with_message(f"{error} (gave up after {attempts} requests in {spent:.1f} s)")

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
        `max_fixes` times (`parse` raises `ValueError`, best an `Unusable` with its kind).

        What is still unusable after that is a failed call: charged to the role as one of
        kind `unparseable`, `schema` or `range` (its tokens counted), its replies never
        stored in the cache (those an older cache kept are deleted), and returned with the
        raw text, the error and the kind. The cache
        counts the failure, so the next asking of the same call (a rerun) is retry number
        n + 1: another cache key, and the request's seed moved by `RETRY_SEED_STEP` x n, so
        that a backend with a fixed seed answers afresh; replies that were usable stay
        cached. A reply replayed unusable from a cache written before this rule is
        forgotten and asked afresh at once."""
        (got,) = await self.generate_parsed_many(
            [Call(messages, config or GenerateConfig(), sample)],
            parse,
            correct,
            max_fixes=max_fixes,
            tag=tag,
        )
        return got

    async def generate_parsed_many(
        self,
        calls: list[Call],
        parse: Callable[[str], V],
        correct: Callable[[str], ChatMessage],
        *,
        max_fixes: int = 2,
        tag: str = "",
    ) -> list[Structured[V]]:
        """`generate_parsed` for many calls at once: every first attempt looked up in one
        batch (one cache look-up), then each call on its own, up to `max_fixes` corrections,
        its replies stored as soon as it ends usable. Each call's requests are the ones
        `generate_parsed` would send (same conversation, config, sample and retry)."""
        configs = [self._seeded(c.config, c.sample) for c in calls]
        firsts = [
            self._key(c.messages, cfg, c.sample) for c, cfg in zip(calls, configs, strict=True)
        ]
        known = self.cache.retries(firsts) if self.cache is not None else {}
        retries = [known.get(k.digest, 0) for k in firsts]
        results: list[Structured[V]] = [Structured(error="no attempt") for _ in calls]
        todo = list(range(len(calls)))
        for replayed_ok in (True, False):  # the second pass: what a stale cache replayed
            stale = await self._parsed_rounds(
                todo,
                calls,
                configs,
                firsts,
                retries,
                results,
                parse,
                correct,
                max_fixes,
                tag,
                stale_ok=replayed_ok,
            )
            todo = stale
            if not todo:
                break
        return results

    async def _parsed_rounds(
        self,
        todo: list[int],
        calls: list[Call],
        configs: list[GenerateConfig],
        firsts: list[CallKey],
        retries: list[int],
        results: list[Structured[V]],
        parse: Callable[[str], V],
        correct: Callable[[str], ChatMessage],
        max_fixes: int,
        tag: str,
        *,
        stale_ok: bool,
    ) -> list[int]:
        """Ask the calls `todo` (each at its retry number) into `results`: their first
        requests looked up in the cache together, then each call on its own, its correction
        sent as soon as its reply is found unusable.

        A call's replies are stored in the cache as soon as its last one is usable (the
        corrected ones with it, so a replay costs nothing), never before: an identical call
        of another unit running meanwhile asks for itself, and never replays a reply that
        is about to be found unusable. Nothing waits for the rest of the batch, so a batch
        cut short (Ctrl-C, a stopped run) keeps every call that had finished.

        A call whose last reply is still unusable is recorded in the cache (its replies
        deleted, its retry number moved on in `retries`) and charged as a failed call;
        except, with `stale_ok`, when that reply was replayed from the cache (kept by an
        older cache): such calls are returned, to be asked afresh."""
        cfgs = {i: self._retried(configs[i], retries[i]) for i in todo}
        keys = {i: self._key(calls[i].messages, cfgs[i], calls[i].sample, retries[i]) for i in todo}
        hits = dict(zip(todo, self._look_up([keys[i] for i in todo]), strict=True))
        stale: list[int] = []

        async def ask(i: int) -> None:
            convo, config, key, hit = list(calls[i].messages), cfgs[i], keys[i], hits[i]
            retry = retries[i]
            chain: list[CallKey] = []
            unstored: list[tuple[CallKey, ModelOutput]] = []
            for attempt in range(1, max_fixes + 2):
                if attempt > 1:
                    key = self._key(convo, config, calls[i].sample, retry)
                    (hit,) = self._look_up([key])
                try:
                    if hit is None:
                        got = await self._fresh(convo, config, key, tag, store=False)
                    else:
                        got = hit
                except ModelError as e:  # accounted by _fresh
                    results[i] = Structured(
                        raw=results[i].raw,
                        error=f"{CALL_FAILED}: {e}",
                        attempts=attempt,
                        kind=e.kind,
                        retry=retry,
                    )
                    return
                chain.append(key)
                if not got.cached:
                    unstored.append((key, got))
                try:
                    value = parse(got.text)
                except ValueError as e:
                    why, kind = str(e), unusable_kind(e)
                else:
                    if self.cache is not None:  # the chain that ended usable, and only it
                        for done, out in unstored:
                            self.cache.put(done, out)
                    self._account(tag, got)
                    results[i] = Structured(
                        value=value, raw=got.text, attempts=attempt, retry=retry
                    )
                    return
                results[i] = Structured(
                    raw=got.text, error=why, attempts=attempt, kind=kind, retry=retry
                )
                if attempt <= max_fixes:
                    self._account(tag, got)
                    convo = [*convo, {"role": "assistant", "content": got.text}, correct(why)]
                    continue
                replayed = stale_ok and got.cached and self.cache is not None
                if self.cache is not None:
                    retries[i] = self.cache.mark_unusable(firsts[i], chain, retry, kind, why)
                if replayed:
                    stale.append(i)  # not a failure of this call: the cache kept a bad reply
                    self._account(tag, got)
                else:
                    self._account(tag, got, error=Unusable(why, kind))

        if len(todo) == 1:  # no task of its own: a lone call keeps its place in line
            await ask(todo[0])
        else:
            await asyncio.gather(*[ask(i) for i in todo])
        return sorted(stale)

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
        as `generate_parsed_many` sends them."""
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


def _usable(hit: ModelOutput | None) -> ModelOutput | None:
    """A cached reply, unless it is empty (cached before empty replies counted as errors)."""
    return hit if hit is not None and hit.text.strip() else None


def _least(a: float | None, b: float | None) -> float | None:
    """The smaller of two limits (None: no limit); never below zero."""
    if a is None:
        return None if b is None else max(0.0, b)
    return max(0.0, a if b is None else min(a, b))


@dataclass
class _Tally:
    """What one call sent beyond its requests and retries: its hedges."""

    hedges: int = 0


def _retrieved(task: asyncio.Task[ModelOutput]) -> None:
    """Mark a finished request's error as seen (a cancelled straggler's is not wanted)."""
    if not task.cancelled():
        task.exception()
