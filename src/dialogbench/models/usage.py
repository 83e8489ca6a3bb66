"""Token accounting: per call, per track (a tag) and per run."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields
from typing import Any

from dialogbench.models.types import Usage


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

    @property
    def tokens_processed(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def since(self, before: UsageTotals) -> UsageTotals:
        """What was added after `before` (totals read earlier from the same ledger)."""
        return UsageTotals(
            **{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)}
        )

    def as_dict(self) -> dict[str, int]:
        """The counts and `tokens_processed`, as result files hold them."""
        return {**asdict(self), "tokens_processed": self.tokens_processed}


class UsageLedger:
    """Thread-safe running totals, reported like the paper's tokens-processed figures."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[tuple[str, str], UsageTotals] = defaultdict(UsageTotals)

    def record(
        self, tag: str, model: str, usage: Usage | None, *, cached: bool = False, role: str = ""
    ) -> None:
        with self._lock:
            _add(self._totals[(tag, model)], usage, cached)
        charge(role, model, usage, cached)

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
                    for f in fields(UsageTotals):
                        setattr(out, f.name, getattr(out, f.name) + getattr(v, f.name))
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


def _add(t: UsageTotals, usage: Usage | None, cached: bool) -> None:
    t.calls += 1
    if usage is None:
        t.failed_calls += 1
    elif cached:
        t.cached_calls += 1
        t.cached_prompt_tokens += usage.prompt_tokens
        t.cached_completion_tokens += usage.completion_tokens
    else:
        t.prompt_tokens += usage.prompt_tokens
        t.completion_tokens += usage.completion_tokens


Scope = dict[str, tuple[str, UsageTotals]]
"""role -> (model name, totals): what one unit of work spent, per model role."""

_SCOPE: ContextVar[Scope | None] = ContextVar("dialogbench_usage_scope", default=None)


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


def charge(role: str, model: str, usage: Usage | None, cached: bool) -> None:
    """Add one call to the current `usage_scope`, if any, under `role`."""
    scope = _SCOPE.get()
    if scope is None or not role:
        return
    name, totals = scope.setdefault(role, (model, UsageTotals()))
    if model not in name.split(", "):
        scope[role] = (f"{name}, {model}", totals)
    _add(totals, usage, cached)
