"""Hedged requests (`models/hedge.py`) against the loopback fault server.

A request left unanswered well past the endpoint's usual latency gets a duplicate and the
first good reply wins, so a hung request costs about the hedge delay, not the per-request
timeout. The duplicates are bounded (per call, and by a budget per endpoint), counted
(`Model.hedges`, usage's `hedged_requests`) and never sent before latencies are known, nor
by a model with `hedge=False`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dialogbench.models import Model, ModelError
from dialogbench.models.hedge import RATE, START, Hedger
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.models.usage import usage_scope
from dialogbench.testing import ChatServer, Fault, delay, status

ROOT = Path(__file__).resolve().parents[2]
WARM = 24
"""Requests answered at once before the faults start (more than the hedger needs)."""
TIMEOUT = 30.0
"""The default per-request timeout: a hang must not cost it."""
CALLS = 150


def _model(srv: ChatServer, **kwargs: Any) -> Model:
    provider = OpenAICompatible("openai-compatible/test", "test", srv.base_url, None)
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("timeout_s", TIMEOUT)
    kwargs.setdefault("hedge_min_s", 0.3)
    return Model(provider, **kwargs)


def _after_warm_up(*faults: Fault) -> Any:
    """Rules: the first WARM requests answered, then `faults` in order, then answers."""

    def rule(number: int, body: Any) -> Fault | None:
        i = number - WARM - 1
        return faults[i] if 0 <= i < len(faults) else None

    return rule


async def _warm(model: Model) -> None:
    for i in range(WARM):
        await model.generate([{"role": "user", "content": f"warm {i}"}])


def _one_after_warm_up(model: Model) -> tuple[Any, float]:
    """Warm up, then one call: (its reply or error, its seconds)."""

    async def go() -> tuple[Any, float]:
        try:
            await _warm(model)
            started = time.monotonic()
            try:
                out: Any = await model.generate([{"role": "user", "content": "the one"}])
            except ModelError as e:
                out = e
            return out, time.monotonic() - started
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_a_hang_costs_the_hedge_delay_not_the_timeout() -> None:
    with ChatServer(rules=_after_warm_up(delay(60.0))) as srv:
        model = _model(srv)

        async def go() -> tuple[str, float, Any]:
            try:
                await _warm(model)
                with usage_scope() as scope:
                    started = time.monotonic()
                    out = await model.generate([{"role": "user", "content": "the one"}])
                    took = time.monotonic() - started
                return out.text, took, scope["model"][1]
            finally:
                await model.aclose()

        model.role = "model"
        text, took, spent = asyncio.run(go())
        assert srv.request_count == WARM + 2  # the hung request and its hedge
    assert text == "the one"
    assert took < 5.0  # the hedge delay (0.3 s here), far from the 30 s timeout
    assert model.hedges == 1 and model.requests == WARM + 2 and model.retries == 0
    assert spent.calls == 1 and spent.hedged_requests == 1 and spent.completion_tokens > 0
    totals = model.ledger.totals()
    assert totals.calls == WARM + 1 and totals.hedged_requests == 1
    assert model.failures == {}  # the cancelled request is no failure


def test_a_slow_request_that_answers_first_wins() -> None:
    """The first request is not cut off by its hedge: slow but answering, it wins."""
    with ChatServer(rules=_after_warm_up(delay(0.8), delay(60.0))) as srv:
        model = _model(srv, hedge_min_s=0.5)  # hedged at 0.5 s; a second hedge would be at 1 s
        out, took = _one_after_warm_up(model)
        assert srv.request_count == WARM + 2
    assert out.text == "the one" and 0.8 <= took < 5.0 and model.hedges == 1


def test_a_straggler_answers_during_the_back_off() -> None:
    """The hedge fails (429, wait 20 s); the first request answers meanwhile and wins."""
    faults = (delay(1.0), status(429, retry_after=20.0))
    with ChatServer(rules=_after_warm_up(*faults)) as srv:
        model = _model(srv)
        out, took = _one_after_warm_up(model)
        assert srv.request_count == WARM + 2
    assert out.text == "the one" and took < 5.0
    assert model.hedges == 1 and model.retries == 1 and model.failures == {"rate_limited": 1}


def test_requests_per_call_are_bounded() -> None:
    """Every request hangs: max_retries + 1 requests and max_hedges hedges, then it fails."""
    hang = delay(60.0)
    with ChatServer(rules=_after_warm_up(*[hang] * 20)) as srv:
        model = _model(srv, timeout_s=1.2, max_retries=1, hedge_min_s=0.2)
        error, took = _one_after_warm_up(model)
        assert srv.request_count - WARM == (1 + 1) + 2
    assert isinstance(error, ModelError) and error.kind == "timeout"
    assert model.hedges == 2 and model.retries == 1 and took < 10.0
    assert model.failures == {"timeout": 4}
    assert model.ledger.totals().hedged_requests == 2


def test_the_budget_bounds_hedges_across_calls() -> None:
    """Many calls hanging at once: hedges stay within START + RATE x the other requests."""
    calls = 30
    with ChatServer(rules=_after_warm_up(*[delay(60.0)] * (calls * 4))) as srv:
        model = _model(srv, timeout_s=1.0, max_retries=0, hedge_min_s=0.1, concurrency=64)

        async def go() -> list[Any]:
            try:
                await _warm(model)
                return await asyncio.gather(
                    *[model.generate([{"role": "user", "content": f"c{i}"}]) for i in range(calls)],
                    return_exceptions=True,
                )
            finally:
                await model.aclose()

        got = asyncio.run(go())
        sent = srv.request_count
    assert all(isinstance(g, ModelError) and g.kind == "timeout" for g in got)
    firsts = WARM + calls
    assert 0 < model.hedges <= START + RATE * firsts
    assert sent == firsts + model.hedges


def test_no_hedge_before_latencies_are_known() -> None:
    with ChatServer(script=[delay(60.0)]) as srv:
        model = _model(srv, timeout_s=0.6)
        out = asyncio.run(_first(model))
        assert srv.request_count == 2  # timed out, then retried
    assert out == "hello" and model.hedges == 0 and model.failures == {"timeout": 1}


def test_hedge_off_waits_for_the_timeout() -> None:
    with ChatServer(rules=_after_warm_up(delay(60.0))) as srv:
        model = _model(srv, timeout_s=0.8, hedge=False)
        out, took = _one_after_warm_up(model)
        assert srv.request_count == WARM + 2  # timed out, then retried
    assert out.text == "the one" and took >= 0.8 and model.hedges == 0


def test_benchmark_hangs_cost_no_timeout() -> None:
    """The fault benchmark's hangs (`reliability_faults.FaultPlan`, 3 s past a 30 s
    timeout) on 8% of 150 concurrent calls' requests (the benchmark's 20% of faults holds
    2.5% of hangs; the budget allows 10%): the batch ends long before one timeout, and
    every duplicate is counted."""
    pytest.importorskip("aiohttp")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.reliability_faults import FaultPlan

    plan = FaultPlan(0.08, ("hang",), hang_s=TIMEOUT + 3, seed=1, active=True)
    with ChatServer(rules=plan, latency=0.02) as srv:
        model = _model(srv, hedge_min_s=1.0)  # the default floor

        async def go() -> list[Any]:
            try:
                return await asyncio.gather(
                    *[model.generate([{"role": "user", "content": f"q{i}"}]) for i in range(CALLS)]
                )
            finally:
                await model.aclose()

        started = time.monotonic()
        outs = asyncio.run(go())
        took = time.monotonic() - started
    hangs = plan.injected["hang"]
    assert [o.text for o in outs] == [f"q{i}" for i in range(CALLS)]
    assert hangs >= 10 and took < TIMEOUT / 2
    assert hangs - 2 <= model.hedges <= 2 * hangs  # a hang or two before latencies are known
    assert plan.requests == CALLS + model.hedges + model.retries
    assert model.ledger.totals().hedged_requests == model.hedges


async def _first(model: Model) -> str:
    try:
        return (await model.generate([{"role": "user", "content": "hello"}])).text
    finally:
        await model.aclose()


def test_hedger_percentile_and_budget() -> None:
    h = Hedger(min_samples=4, rate=0.5, start=2.0, cap=2.5)
    assert h.delay(1.0) is None  # nothing known yet
    for s in (0.1, 0.2, 0.3, 0.4):
        h.observe(s)
    assert h.percentile() == 0.4 and h.delay(0.5) == pytest.approx(1.2)
    assert h.delay(2.0) == 2.0  # never below the floor
    assert h.take() and h.take() and not h.take()  # the start, then nothing
    h.earn()
    assert not h.take()
    h.earn()
    assert h.take() and h.sent == 3
    for _ in range(10):
        h.earn()
    assert h.tokens == 2.5  # saved up to the cap
