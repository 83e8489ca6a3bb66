"""Hedged requests: a request still unanswered well past its endpoint's usual latency gets a
duplicate, and the first good reply wins (the other request is cancelled).

A hung request (a server that accepted the connection and never answers) otherwise costs
the whole per-request timeout, 30 s by default, before its retry is even sent, and the unit
waiting on it holds up the end of the run. The timeout cannot simply be cut: a slow server
may need all of it. A hedge cuts nothing: the first request keeps running, with its own
timeout, beside the duplicate.

When to hedge is learnt per endpoint and model from the latencies of its answered requests
(the last `WINDOW`): a request is hedged once it has waited `FACTOR` times their 95th
percentile, and never before `Model.hedge_min_s` (1 s by default); with fewer than
`MIN_SAMPLES` latencies known it is not hedged at all, since nothing yet tells a hung
request from a slow server. A slow server's latencies raise the bar with them.

Hedges are bounded three ways: at most `Model.max_hedges` (2) per call; a budget per
endpoint and model, which starts at `START` (5) hedges and earns `RATE` (0.1) for every
request that is not one, saving up at most `CAP` (30), so a run sends at most
5 + 0.1 x its other requests and never more than 30 at once, however slow the server gets;
and none while the endpoint's concurrency is cut for overload (a 429 or 503 without
Retry-After).
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections import deque

FACTOR = 3.0
"""A request is hedged after this many times the 95th percentile of answered latencies."""
QUANTILE = 0.95
MIN_SAMPLES = 20
"""Latencies needed before any request is hedged."""
WINDOW = 256
"""The latest latencies kept (per endpoint and model)."""
RATE = 0.1
"""Hedges earned by each request that is not a hedge."""
START = 5.0
"""The budget at the start."""
CAP = 30.0
"""The most hedges that can be saved up (about `RATE` x `WINDOW` + `START`): hangs that come
together, as in a batch sent at once, can each be hedged."""
_RESORT = 16
"""The percentile is recomputed after this many new latencies."""


class Hedger:
    """The answered latencies of one endpoint's model and its budget of hedges."""

    def __init__(
        self,
        *,
        factor: float = FACTOR,
        quantile: float = QUANTILE,
        min_samples: int = MIN_SAMPLES,
        window: int = WINDOW,
        rate: float = RATE,
        start: float = START,
        cap: float = CAP,
    ) -> None:
        self.factor = factor
        self.quantile = quantile
        self.min_samples = max(1, min_samples)
        self.rate = rate
        self.cap = max(cap, start)
        self.tokens = start
        """Hedges that may be sent now (spent one by one, earned `rate` a request)."""
        self.sent = 0
        """Hedges sent in all."""
        self._latencies: deque[float] = deque(maxlen=max(self.min_samples, window))
        self._percentile: float | None = None
        self._new = 0

    def observe(self, seconds: float) -> None:
        """One answered request's latency (from its sending to its reply)."""
        self._latencies.append(seconds)
        self._new += 1

    def percentile(self) -> float | None:
        """The `quantile` of the latencies kept (nearest rank); None with too few."""
        n = len(self._latencies)
        if n < self.min_samples:
            return None
        if self._percentile is None or self._new >= _RESORT:
            ordered = sorted(self._latencies)
            self._percentile = ordered[min(n - 1, max(0, math.ceil(self.quantile * n) - 1))]
            self._new = 0
        return self._percentile

    def delay(self, floor: float) -> float | None:
        """Seconds after which an unanswered request is hedged (at least `floor`), or None
        while too few latencies are known."""
        p = self.percentile()
        return None if p is None else max(floor, self.factor * p)

    def earn(self) -> None:
        """A request that is not a hedge was sent."""
        self.tokens = min(self.cap, self.tokens + self.rate)

    def take(self) -> bool:
        """Spend one hedge from the budget; False when there is none to spend."""
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        self.sent += 1
        return True


_HEDGERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Hedger]] = (
    weakref.WeakKeyDictionary()
)


def endpoint_hedger(endpoint: str, model: str) -> Hedger:
    """One `Hedger` per endpoint and model (and event loop), shared by every `Model` that
    calls them."""
    per_loop = _HEDGERS.setdefault(asyncio.get_running_loop(), {})
    key = (endpoint, model)
    if key not in per_loop:
        per_loop[key] = Hedger()
    return per_loop[key]
