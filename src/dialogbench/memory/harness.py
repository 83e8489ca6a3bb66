"""Replaying a subject's conversation into a memory system, with no future leakage.

`replay(system, subject, queries, budget)` is the one place any track asks a memory system
anything. Per subject it:

1. calls `reset(subject)` when the system has it (a rerun starts clean);
2. sorts the queries by `cutoff` (time order);
3. for a stateful system, ingests the messages up to each query's cutoff that it has not
   seen yet, calls `wait_until_indexed` when it has it, then recalls; a stateless one
   (`stateless = True`) is given the history up to the last query at once and must honour
   `Query.cutoff` itself (through `recall_batch` when it has it);
   with a `window` of W, only the W messages before each query are ingested (what a
   limited run may spend on ingestion: at most W per query): a stateful system is fed the
   part of each query's window it has not seen, a stateless one the union of the windows
   (so it must mask by `Message.position`, not by index, as the built-ins do);
4. keeps the memories, best first, that fit `budget` (k memories, `tokens` tokens of
   memory text) and checks every message id among them: one that is not a message before
   the query (from its future, or unknown) is dropped from the memories and counted in
   `invalid_ids`, never scored as a hit.

Timing: ingest time is the wall time of the `ingest` calls (and `wait_until_indexed`);
recall latency is the wall time of one `recall` (a batch's time divided by its queries).
What the system reports spending (`SystemCost`): returned by `ingest` (summed into
`Replay.ingest_cost`) and carried by each `Recall.cost`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dialogbench.data.model import Message
from dialogbench.memory.base import (
    BatchRecall,
    Budget,
    Indexing,
    Memory,
    MemorySystem,
    Query,
    Recall,
    Recalled,
    Resettable,
    SystemCost,
    is_stateless,
)
from dialogbench.memory.costs import TokenCount, approx_tokens, memory_text, summarise_costs
from dialogbench.retrieval.base import Probe

SizeOf = Callable[[Memory], int]


class MemorySystemError(RuntimeError):
    """A memory system failed or broke the protocol; the message names the system and call."""


@dataclass
class Replay:
    """One subject's replay: every query's recall (in the order asked) and the ingest cost."""

    subject_id: str
    recalled: list[Recalled]
    ingested: int = 0
    """Messages handed to `ingest`."""
    ingest_s: float = 0.0
    ingest_cost: SystemCost | None = None
    notes: list[str] = field(default_factory=list)
    window: int | None = None
    """The ingestion window (messages before each query), None: the whole history."""


def _call(system: MemorySystem, what: str, fn: object, *args: object) -> object:
    try:
        return fn(*args)  # type: ignore[operator]
    except MemorySystemError:
        raise
    except Exception as e:  # a plug-in's failure, named, never a bare traceback
        raise MemorySystemError(
            f"memory system {_name(system)!r} failed in {what}: {type(e).__name__}: {e}"
        ) from e


def _name(system: object) -> str:
    return str(getattr(system, "name", type(system).__name__))


def _check(
    system: MemorySystem,
    query: Query,
    recall: object,
    position: dict[str, int],
    budget: Budget,
    size: SizeOf,
) -> tuple[tuple[Memory, ...], tuple[str, ...], tuple[int, ...], tuple[int, ...], int]:
    if not isinstance(recall, Recall):
        raise MemorySystemError(
            f"memory system {_name(system)!r}: recall() for query {query.id!r} returned "
            f"{type(recall).__name__}, expected dialogbench.memory.Recall"
        )
    kept: list[Memory] = []
    invalid: list[str] = []
    ids: list[int] = []
    cited: list[int] = []
    used = 0
    within = recall.memories[: budget.k]  # past the budget is not recalled
    looked = 0
    for m in within:
        if budget.tokens is not None:
            used += size(m)
            if used > budget.tokens:
                break
        looked += 1
        bad = [i for i in m.ids if position.get(i, query.cutoff) >= query.cutoff]
        invalid += bad
        if m.message_id is not None:
            if bad:
                continue
            at = position[m.message_id]
            if at not in ids:
                ids.append(at)
        else:
            for i in m.cites:
                at = position.get(i, query.cutoff)
                if at < query.cutoff and at not in cited:
                    cited.append(at)
        kept.append(m)
    cut = len(recall.memories) - looked
    return tuple(kept), tuple(invalid), tuple(ids), tuple(cited), cut


def ingested_positions(cutoffs: Iterable[int], window: int | None) -> list[int]:
    """The positions a replay ingests for queries at `cutoffs`: every position below the
    last cutoff, or with a `window`, the union of the `window` positions before each."""
    cuts = sorted(set(cutoffs))
    if window is None:
        return list(range(cuts[-1])) if cuts else []
    out: list[int] = []
    for c in cuts:
        start = max(c - window, out[-1] + 1 if out else 0)
        out += range(start, c)
    return out


def replay(
    system: MemorySystem,
    subject_id: str,
    messages: Sequence[Message],
    queries: Sequence[Query],
    budget: Budget,
    count: TokenCount = approx_tokens,
    window: int | None = None,
) -> Replay:
    """Feed `messages` (the subject's whole conversation, in order) to `system` up to each of
    `queries` and recall there; see the module docstring for the guarantees. `count` sizes
    memories against `budget.tokens` (`costs.memory_text` says what is counted); `window`
    caps what is ingested to that many messages before each query."""
    position = {m.id: m.position for m in messages}
    by_id = {m.id: m for m in messages}

    sizes: dict[tuple[str | None, str | None], int] = {}

    def size(m: Memory) -> int:  # each message or text counted once per replay
        key = (m.message_id, m.text)
        if key not in sizes:
            sizes[key] = count(memory_text(m, by_id))
        return sizes[key]

    order = sorted(range(len(queries)), key=lambda i: (queries[i].cutoff, i))
    out: list[Recalled | None] = [None] * len(queries)
    result = Replay(subject_id, [], window=window)
    if window is not None:
        result.notes.append(f"ingested only the {window} messages before each query")
    seen = 0  # positions below this were offered to a stateful system (fed or skipped)
    if isinstance(system, Resettable):
        _call(system, f"reset (subject {subject_id!r})", system.reset, subject_id)

    indexing = system if isinstance(system, Indexing) else None  # checked once: it is slow
    fed: list[tuple[int, float]] = []  # what the next recall's ingest was: messages, seconds

    def feed(upto: int) -> None:
        nonlocal seen
        if upto <= seen:
            return
        if window is None:
            batch = list(messages[seen:upto])
        elif is_stateless(system):  # fed once: every query's window
            batch = [messages[p] for p in ingested_positions((q.cutoff for q in queries), window)]
        else:  # the part of this query's window not offered yet
            batch = list(messages[max(seen, upto - window) : upto])
        seen = upto
        where = f"ingest (subject {subject_id!r}, {len(batch)} messages)"
        t0 = time.perf_counter()
        spent = _call(system, where, system.ingest, subject_id, batch)
        if isinstance(spent, SystemCost):  # what ingesting cost the system, when it says
            result.ingest_cost = spent if result.ingest_cost is None else result.ingest_cost + spent
        if indexing is not None:
            where = f"wait_until_indexed (subject {subject_id!r})"
            _call(system, where, indexing.wait_until_indexed, subject_id)
        seconds = time.perf_counter() - t0
        result.ingest_s += seconds
        fed.append((len(batch), seconds))
        result.ingested += len(batch)

    def record(i: int, got: object, seconds: float) -> None:
        q = queries[i]
        memories, invalid, ids, cited, cut = _check(system, q, got, position, budget, size)
        assert isinstance(got, Recall)
        n, s = (sum(f[0] for f in fed), sum(f[1] for f in fed)) if fed else (0, 0.0)
        fed.clear()
        tokens = sum(size(m) for m in memories)
        out[i] = Recalled(q, memories, seconds, got.cost, invalid, ids, cited, n, s, tokens, cut)

    def asking(q: Query) -> str:
        return f"recall (subject {subject_id!r}, query {q.id!r})"

    if is_stateless(system) and queries:
        feed(max(q.cutoff for q in queries))
        if isinstance(system, BatchRecall):
            batch = [queries[i] for i in order]
            t0 = time.perf_counter()
            where = f"recall_batch (subject {subject_id!r}, {len(batch)} queries)"
            got_all = _call(system, where, system.recall_batch, subject_id, batch, budget)
            each = (time.perf_counter() - t0) / len(batch)
            if not isinstance(got_all, list) or len(got_all) != len(batch):
                raise MemorySystemError(
                    f"memory system {_name(system)!r}: recall_batch returned "
                    f"{len(got_all) if isinstance(got_all, list) else type(got_all).__name__} "
                    f"recalls for {len(batch)} queries"
                )
            for i, got in zip(order, got_all, strict=True):
                record(i, got, each)
        else:
            for i in order:
                t0 = time.perf_counter()
                got = _call(
                    system, asking(queries[i]), system.recall, subject_id, queries[i], budget
                )
                record(i, got, time.perf_counter() - t0)
    else:
        for i in order:
            feed(queries[i].cutoff)
            t0 = time.perf_counter()
            got = _call(system, asking(queries[i]), system.recall, subject_id, queries[i], budget)
            record(i, got, time.perf_counter() - t0)
    result.recalled = [r for r in out if r is not None]
    return result


def query_of(probe: Probe, asked_at: datetime | None = None) -> Query:
    """The memory query for a retrieval probe (same id, text, cutoff and speakers)."""
    return Query(
        id=probe.id,
        subject_id=probe.subject_id,
        text=probe.text,
        kind=probe.kind,
        cutoff=probe.cutoff,
        speakers=probe.speakers,
        asked_at=asked_at,
    )


def replay_costs(
    replays: Sequence[Replay],
    messages: Mapping[str, Message] | None = None,
    count: TokenCount | None = None,
) -> dict[str, Any]:
    """One system's `memory_costs.json` entry over its subjects' replays (`costs.py`).

    Context tokens are those `replay` counted for each recall, with each subject's own
    messages (message ids may repeat across subjects) and its `count`; `messages` and `count`
    are accepted for callers of the first version and not used."""
    recalled = [r for rep in replays for r in rep.recalled]
    reported = [r.cost for r in recalled if r.cost is not None]
    reported += [rep.ingest_cost for rep in replays if rep.ingest_cost is not None]
    system = None
    if reported:
        system = SystemCost()
        for c in reported:
            system = system + c
    return summarise_costs(
        ingested=sum(rep.ingested for rep in replays),
        ingest_s=sum(rep.ingest_s for rep in replays),
        latencies_s=[r.latency_s for r in recalled],
        memories=[len(r.memories) for r in recalled],
        context_tokens=[r.context_tokens for r in recalled],
        invalid_ids=sum(len(r.invalid_ids) for r in recalled),
        system=system,
        cut=[(r.cut, len(r.memories)) for r in recalled],
    )
