"""Token accounting: per call, per track (a tag) and per run."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any

from dialogbench.models.types import Usage


def failure_kind(error: BaseException | None) -> str:
    """The cause of a failed call: its `ModelError.kind` where it has one, else read from
    its status and message (errors raised before `kind` existed, or by other providers)."""
    kind = getattr(error, "kind", None)
    if isinstance(kind, str) and kind:
        return kind
    status = getattr(error, "status", None)
    text = str(error)
    if isinstance(status, int):
        if status == 429:
            return "rate_limited"
        if status == 408:
            return "timeout"
        return "server" if status >= 500 else "rejected"
    if "APIConnectionError" in text or "ConnectError" in text or "Cannot connect" in text:
        return "unreachable"
    if "Timeout" in text or "no reply in" in text:
        return "timeout"
    if "unreadable" in text or "no choices" in text:
        return "unreadable"
    return "other"


@dataclass
class UsageTotals:
    """Calls and tokens of one (tag, model) pair. Cached calls process no new tokens."""

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    hedged_requests: int = 0
    """Duplicate requests sent for these calls (hedges of a request left unanswered too
    long, `models/hedge.py`): each call is still one call, with the tokens of the reply
    that won; a cancelled duplicate's tokens are unknown and not counted."""
    failed_by_kind: dict[str, int] = field(default_factory=dict)
    """`failed_calls` by cause (`failure_kind`): {"unreachable": 3, "rejected": 1}."""
    latency_ms: list[float] = field(default_factory=list)
    """Wall times of the timed calls (a memory system's), in milliseconds."""

    @property
    def tokens_processed(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def since(self, before: UsageTotals) -> UsageTotals:
        """What was added after `before` (totals read earlier from the same ledger)."""
        out = UsageTotals(
            **{f.name: getattr(self, f.name) - getattr(before, f.name) for f in _COUNTS}
        )
        for kind, n in self.failed_by_kind.items():
            if n - before.failed_by_kind.get(kind, 0):
                out.failed_by_kind[kind] = n - before.failed_by_kind.get(kind, 0)
        return out

    def add(self, other: UsageTotals | dict[str, Any]) -> None:
        """Add another total to this one: a `UsageTotals`, or one as `as_dict` wrote it."""
        got = other.as_dict() if isinstance(other, UsageTotals) else other
        for f in _COUNTS:
            setattr(self, f.name, getattr(self, f.name) + int(got.get(f.name, 0) or 0))
        for kind, n in (got.get("failed_by_kind") or {}).items():
            self.failed_by_kind[kind] = self.failed_by_kind.get(kind, 0) + int(n)
        timed = got.get("latency_ms")
        if isinstance(timed, list):
            self.latency_ms.extend(float(x) for x in timed)

    def as_dict(self) -> dict[str, Any]:
        """The counts, `tokens_processed` and `failed_by_kind`, as result files hold them."""
        counts = {f.name: getattr(self, f.name) for f in _COUNTS}
        out: dict[str, Any] = {
            **counts,
            "tokens_processed": self.tokens_processed,
            "failed_by_kind": dict(sorted(self.failed_by_kind.items())),
        }
        if self.latency_ms:
            out["latency_ms"] = [round(x, 3) for x in self.latency_ms]
        return out


_COUNTS = tuple(f for f in fields(UsageTotals) if f.name not in ("failed_by_kind", "latency_ms"))


class UsageLedger:
    """Thread-safe running totals, reported like the paper's tokens-processed figures."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[tuple[str, str], UsageTotals] = defaultdict(UsageTotals)

    def record(
        self,
        tag: str,
        model: str,
        usage: Usage | None,
        *,
        cached: bool = False,
        role: str = "",
        error: BaseException | None = None,
        hedged: int = 0,
    ) -> None:
        """One call: its usage, or None for a failed call (`error` says why), and the
        hedged duplicates it sent. A call with both failed although a reply came (it could
        not be used): its tokens count."""
        kind = failure_kind(error) if usage is None or error is not None else None
        with self._lock:
            _add(self._totals[(tag, model)], usage, cached, kind, hedged)
        charge(role, model, usage, cached, kind, hedged=hedged, error=error)

    def record_cached(self, tag: str, model: str, usages: list[Usage], *, role: str = "") -> None:
        """Account many cached calls at once."""
        for usage in usages:
            self.record(tag, model, usage, cached=True, role=role)

    def totals(self, tag: str | None = None) -> UsageTotals:
        """Sum over models (and over tags unless one is given)."""
        out = UsageTotals()
        with self._lock:
            for (t, _), v in self._totals.items():
                if tag is None or t == tag:
                    out.add(v)
        return out

    def report(self) -> dict[str, Any]:
        """`{tag: {model: totals}}` plus the run total, for result files."""
        with self._lock:
            rows = dict(self._totals)
        out: dict[str, Any] = {}
        for (tag, model), v in sorted(rows.items()):
            out.setdefault(tag, {})[model] = v.as_dict()
        out["total"] = self.totals().as_dict()
        return out


def _add(
    t: UsageTotals, usage: Usage | None, cached: bool, kind: str | None = None, hedged: int = 0
) -> None:
    """One call: failed when it has a `kind` or no usage; its tokens whenever it has usage."""
    t.calls += 1
    t.hedged_requests += hedged
    if usage is None or kind is not None:
        t.failed_calls += 1
        t.failed_by_kind[kind or "other"] = t.failed_by_kind.get(kind or "other", 0) + 1
    if usage is None:
        return
    if cached:
        t.cached_calls += 1
        t.cached_prompt_tokens += usage.prompt_tokens
        t.cached_completion_tokens += usage.completion_tokens
    else:
        t.prompt_tokens += usage.prompt_tokens
        t.completion_tokens += usage.completion_tokens


Scope = dict[str, tuple[str, UsageTotals]]
"""role -> (model name, totals): what one unit of work spent, per model role."""

_SCOPE: ContextVar[Scope | None] = ContextVar("dialogbench_usage_scope", default=None)

CallWatcher = Callable[[str, Usage | None, bool, str | None, BaseException | None], None]
"""Told of every call charged to a role: (role, usage or None, cached, failure kind, the
failure itself where known)."""

_WATCH: ContextVar[CallWatcher | None] = ContextVar("dialogbench_call_watch", default=None)


@contextmanager
def usage_scope() -> Iterator[Scope]:
    """Collect, per role, every call made inside the block (and the tasks it starts): the
    runner wraps each unit's solve and score steps in one, so usage is known per unit even
    when many units run at once."""
    scope: Scope = {}
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


@contextmanager
def watch_calls(watcher: CallWatcher) -> Iterator[None]:
    """Tell `watcher` of every call made inside the block (and the tasks it starts): how
    the runner notices a backend that cannot be reached while the units are running."""
    token = _WATCH.set(watcher)
    try:
        yield
    finally:
        _WATCH.reset(token)


def charge(
    role: str,
    model: str,
    usage: Usage | None,
    cached: bool,
    kind: str | None = None,
    latency_s: float | None = None,
    *,
    hedged: int = 0,
    error: BaseException | None = None,
) -> None:
    """Add one call to the current `usage_scope`, if any, under `role` (with its wall time
    when the caller timed it, the hedged duplicates it sent and, for a failed call, its
    error where known)."""
    if not role:
        return
    watcher = _WATCH.get()
    if watcher is not None:
        watcher(role, usage, cached, kind, error)
    scope = _SCOPE.get()
    if scope is None:
        return
    name, totals = scope.setdefault(role, (model, UsageTotals()))
    if model not in name.split(", "):
        scope[role] = (f"{name}, {model}", totals)
    _add(totals, usage, cached, kind, hedged)
    if latency_s is not None:
        totals.latency_ms.append(1000 * latency_s)
