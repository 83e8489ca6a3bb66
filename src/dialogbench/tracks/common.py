"""Pieces every track shares: a stratified `--limit`, prompt digests, opening models, and
the calls and tokens a run spent (stored next to its parts, summed into usage.json)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from dialogbench.data.model import Message
from dialogbench.models.cache import ResponseCache
from dialogbench.models.model import Model
from dialogbench.models.spec import ModelSpec
from dialogbench.models.usage import UsageTotals
from dialogbench.report.run import RunDir

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


def digest(value: object) -> str:
    """sha256 of a JSON-serialisable value (prompt constants, cue tables): recorded in a
    run's manifest, so that changed wording starts the run afresh."""
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()


def model_settings(
    spec: str | None, base_url: str | None, key_env: str | None, model: Model | None = None
) -> dict[str, Any]:
    """What a manifest records about a model (never a key): the `Model` given, else the spec."""
    if model is not None:
        return {"model": model.name, "endpoint": model.provider.endpoint}
    if spec is None:
        return {}
    return ModelSpec.parse(spec, base_url=base_url, api_key_env=key_env).settings()


def open_model(spec: str, base_url: str | None, key_env: str | None) -> Model:
    """A `Model` for a spec, behind the shared response cache."""
    parsed = ModelSpec.parse(spec, base_url=base_url, api_key_env=key_env)
    return Model.from_spec(parsed, cache=ResponseCache())


@dataclass(frozen=True)
class ModelSettings:
    """Which model answers and which judges, with their endpoints; never a key, only the name
    of the environment variable that holds it. A track config holds one of these."""

    model: str | None = None
    """Model under test (`embedded`, `openai-compatible/NAME`, a GGUF path, ...)."""
    base_url: str | None = None
    api_key_env: str | None = None
    judge_model: str | None = None
    """The judge's model spec; None: the model under test judges."""
    judge_base_url: str | None = None
    judge_api_key_env: str | None = None

    def recorded(
        self, model: Model | None = None, judge: Model | None = None
    ) -> dict[str, dict[str, Any]]:
        """What a manifest records: `model_settings` and `judge_settings` (given models win)."""
        reply = model_settings(self.model, self.base_url, self.api_key_env, model)
        if judge is not None or self.judge_model is not None:
            judged = model_settings(
                self.judge_model, self.judge_base_url, self.judge_api_key_env, judge
            )
        else:
            judged = {"same_as": "model under test", **reply}
        return {"model_settings": reply, "judge_settings": judged}

    def open(self) -> Model:
        """The model under test, behind the response cache."""
        if self.model is None:
            raise ValueError("no model set: pass --model (e.g. `embedded`) or model=")
        return open_model(self.model, self.base_url, self.api_key_env)

    def open_judge(self) -> Model | None:
        """The judge model when one is set apart from the model under test, else None."""
        if self.judge_model is None:
            return None
        return open_model(self.judge_model, self.judge_base_url, self.judge_api_key_env)

    @asynccontextmanager
    async def opened(
        self, model: Model | None = None, judge: Model | None = None
    ) -> AsyncIterator[tuple[Model, Model]]:
        """The model under test and the judge for a track's work: those given, else opened
        here (and closed on leaving); the judge is the model under test unless one is set
        apart."""
        async with AsyncExitStack() as stack:
            if model is None:
                model = await stack.enter_async_context(aclosing(self.open()))
            if judge is None and (apart := self.open_judge()) is not None:
                judge = await stack.enter_async_context(aclosing(apart))
            yield model, judge or model


# -- usage: calls and tokens ----------------------------------------------------------------


def spent(model: Model, tag: str, before: UsageTotals | None = None) -> dict[str, Any]:
    """What `model` spent under `tag` (since `before`, when given): its name, the call and
    token counts, and `tokens_processed`."""
    totals = model.ledger.totals(tag)
    if before is not None:
        totals = totals.since(before)
    return {"model": model.name, **totals.as_dict()}


def write_usage(run: RunDir, part: str, usage: Mapping[str, Any]) -> None:
    """Store what a part spent next to it (`parts/<part>.usage.json`), so a resumed run still
    reports the calls made before it stopped."""
    (run.parts / f"{part}.usage.json").write_text(json.dumps(usage, indent=2) + "\n")


def read_usage(run: RunDir, part: str) -> dict[str, Any]:
    """What `write_usage` stored for a part, or a note saying nothing was."""
    path = run.parts / f"{part}.usage.json"
    if not path.exists():
        return {"note": "not recorded for this part"}
    stored: dict[str, Any] = json.loads(path.read_text())
    return stored


def usage_by_part(run: RunDir, parts: Sequence[str]) -> dict[str, Any]:
    """Each part's stored usage (`{role: spent}`) and `tokens_processed`, summed over all."""
    usage: dict[str, Any] = {part: read_usage(run, part) for part in parts}
    usage["tokens_processed"] = sum(
        int(record.get("tokens_processed", 0))
        for by_role in usage.values()
        for record in by_role.values()
        if isinstance(record, dict)
    )
    return usage


def usage_total(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of `spent` records: every count added up, under the model name(s) that spent
    them. Notes (parts with nothing recorded) are skipped."""
    names: list[str] = []
    total: dict[str, Any] = {}
    for record in records:
        if "model" not in record:
            continue
        if record["model"] not in names:
            names.append(record["model"])
        for key, value in record.items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
    return {"model": ", ".join(names), **total} if names else {}
