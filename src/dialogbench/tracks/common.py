"""Pieces every track shares: a stratified `--limit`, how a prompt shows a message, the
digest of a prompt module's constants, and the `Outcome` of a typed result."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from dialogbench.data.model import Message
from dialogbench.models.model import Call, Model
from dialogbench.models.structured import Structured
from dialogbench.models.types import ChatMessage, GenerateConfig
from dialogbench.runner.record import DatasetInfo, digest
from dialogbench.runner.track import Outcome
from dialogbench.stats.bootstrap import Estimate, bootstrap_means

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
S = TypeVar("S", bound=BaseModel)


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


def render_message(
    message: Message, max_chars: int, *, with_id: bool = False, text: str | None = None
) -> str:
    """One message as a prompt shows it: `date speaker: text` (`[id] date speaker: text`
    with `with_id`), the date only when known, the text cut to `max_chars` with " [...]".
    `text` stands in for the message's own (e.g. an already shortened one)."""
    body = (message.text if text is None else text).strip()
    if len(body) > max_chars:
        body = body[:max_chars].rstrip() + " [...]"
    when = f"{message.timestamp:%Y-%m-%d} " if message.timestamp is not None else ""
    prefix = f"[{message.id}] " if with_id else ""
    return f"{prefix}{when}{message.speaker}: {body}"


def prompt_digest(namespace: Mapping[str, object], names: str, **derived: object) -> str:
    """The sha256 a prompt module records (its `PROMPT_SHA256`): the constants `names`
    (space-separated) read from `namespace` (the module's `globals()`), and `derived`
    values beside them (a rubric's repr, a reply schema), so changed wording starts a run
    afresh."""
    return digest({**{n: namespace[n] for n in names.split()}, **derived})


def masked_estimates(
    matrix: npt.NDArray[np.float64],
    columns: Sequence[tuple[str, str]],
    clusters: npt.NDArray[Any] | None,
    n_boot: int,
    seed: int,
) -> Callable[[npt.NDArray[np.bool_]], dict[str, dict[str, Estimate]]]:
    """`estimate(mask)`: the bootstrap means of the rows of `matrix` in `mask` (resampling
    their `clusters` when given), as table[name][metric] for the (name, metric) `columns`."""

    def estimate(mask: npt.NDArray[np.bool_]) -> dict[str, dict[str, Estimate]]:
        sub = None if clusters is None else clusters[mask]
        ests = bootstrap_means(matrix[mask], sub, n_boot=n_boot, seed=seed)
        table: dict[str, dict[str, Estimate]] = {}
        for (name, metric), e in zip(columns, ests, strict=True):
            table.setdefault(name, {})[metric] = e
        return table

    return estimate


def dataset_info(data: Any, subjects: int) -> DatasetInfo:
    """The manifest's record of a loaded dataset (name, source, sha256) that a plan counts
    `subjects` of (the dialogues with items, the episodes)."""
    return DatasetInfo(
        name=data.name, source=str(data.source), sha256=data.sha256, subjects=subjects
    )


async def ask_each(
    model: Model,
    prompts: Sequence[list[ChatMessage]],
    schema: type[S],
    config: GenerateConfig,
    *,
    max_fixes: int,
    tag: str,
    sample: int = 0,
) -> list[Structured[S]]:
    """Every prompt's reply of `schema`: one cache look-up for the batch, then each prompt's
    corrections of its unusable replies, up to `max_fixes` times (`Model.generate_parsed_many`)."""
    calls = [Call(list(p), config, sample) for p in prompts]
    return await model.generate_structured_many(calls, schema, max_fixes=max_fixes, tag=tag)


def judged_values(
    rows: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str], field: str
) -> dict[str, float]:
    """A track's `judgments`: `key(row)` -> the row's judged number `field`, for the rows
    that have one (an unscored row has None)."""
    return {key(r): float(r[field]) for r in rows if r.get(field) is not None}


def outcome_of(
    result: Any, files: dict[str, Any] | None = None, failures: Mapping[str, int] | None = None
) -> Outcome:
    """A track's `Outcome` from its typed result (which has `summary` and `warnings`): the
    result files beside summary.json, and the `failures` counts that are not 0."""
    return Outcome(
        summary=result.summary,
        files=files or {},
        warnings=list(result.warnings),
        result=result,
        failures={cause: n for cause, n in (failures or {}).items() if n},
    )
