"""Pieces every track shares: a stratified `--limit` and digests of prompt wording."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def stratified_limit(
    items: Sequence[T],
    group: Callable[[T], K],
    limit: int | None,
    seed: int,
    groups: Sequence[K] | None = None,
) -> list[T]:
    """At most `limit` items, taken in turn from each group (each shuffled by `seed`), kept in
    their original order. `groups` fixes the turn order; by default groups are sorted."""
    if limit is None or limit >= len(items):
        return list(items)
    rng = random.Random(seed)
    keys = [group(x) for x in items]
    pools = []
    for g in groups if groups is not None else sorted(set(keys)):  # type: ignore[type-var]
        idx = [i for i, k in enumerate(keys) if k == g]
        rng.shuffle(idx)
        pools.append(idx)
    chosen: list[int] = []
    while len(chosen) < limit and any(pools):
        for pool in pools:
            if pool and len(chosen) < limit:
                chosen.append(pool.pop())
    return [items[i] for i in sorted(chosen)]


def digest(value: object) -> str:
    """sha256 of a JSON-serialisable value (prompt constants, cue tables): recorded in a
    run's manifest, so that changed wording starts the run afresh."""
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()
