"""Cost and speed of a memory system, defined once (`memory_costs.json` in a run folder).

Definitions:

ingest ms per message   total wall time of `ingest` (and `wait_until_indexed`) over the
                        messages handed to it, divided by their number
recall latency          wall time of one `recall`, in ms: p50, p95, p99 (numpy's linear
                        percentile) and mean over every query; for a batch recall, the
                        batch's time divided by its queries
memories per query      memories kept after the budget, mean over queries
context tokens/query    tokens of the kept memories' text (an id memory: the message's
                        "speaker: text"; a text memory: its text), counted by the run's token
                        counter (`approx_tokens` unless a track passes its model's), mean
invalid ids             ids returned that are not messages before the query (future or
                        unknown): dropped, never scored
budget cut              recalls of which the budget (k memories, tokens of memory text) left
                        out at least one memory the system returned
cut to nothing          such recalls that kept no memory at all (their item is answered or
                        scored with an empty context: flagged wherever the system is shown)
system tokens           model calls and tokens the system reports spending itself
                        (`Recall.cost`), summed; null when it reports none
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import regex  # type: ignore[import-untyped]

from dialogbench.data.model import Message
from dialogbench.memory.base import Memory, SystemCost

TokenCount = Callable[[str], int]
_TOKEN = regex.compile(r"\p{L}+|\p{N}+|[^\p{L}\p{N}\s]")
_ASCII_TOKEN = re.compile(r"[A-Za-z]+|[0-9]+|[^A-Za-z0-9\s]")
_HAN = regex.compile(r"\p{Han}")  # compiled once: regex.match(pattern, ...) per token was 90%

DEFINITIONS = {
    "ingest_ms_per_message": "wall time of ingest (+ wait_until_indexed) / messages ingested",
    "recall_ms": "wall time of one recall (a batch: its time / its queries); p50/p95/p99/mean",
    "memories_per_query": "memories kept within the budget, mean over queries",
    "context_tokens_per_query": (
        "tokens of the kept memories' text (id memory: 'speaker: text'), by the run's counter"
    ),
    "invalid_ids": "ids recalled that are not messages before the query: dropped, never scored",
    "budget_cut": "recalls of which the budget left out at least one memory returned",
    "cut_to_nothing": "recalls of which the budget left out every memory returned",
    "system_tokens": "calls and tokens the system reports spending itself (Recall.cost)",
}


def approx_tokens(text: str) -> int:
    """A model-free token estimate: runs of letters, runs of digits and single punctuation
    marks (an ideograph run counts per character, as CJK tokenizers roughly do)."""
    if text.isascii():  # the same tokens, found faster by the standard library
        return len(_ASCII_TOKEN.findall(text))
    n = 0
    for t in _TOKEN.findall(text):
        n += len(t) if _HAN.match(t) else 1
    return n


def memory_text(memory: Memory, messages: Mapping[str, Message]) -> str:
    """The text a memory puts in front of a model: its text, or its message's line."""
    if memory.text is not None:
        return memory.text
    m = messages.get(memory.message_id or "")
    return "" if m is None else f"{m.speaker}: {m.text}"


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, p99 and mean of `values` (None when there are none)."""
    if not values:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "n": 0}
    arr = np.asarray(values, dtype=float)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(arr.mean()),
        "n": len(arr),
    }


def summarise_costs(
    ingested: int,
    ingest_s: float,
    latencies_s: Sequence[float],
    memories: Sequence[int],
    context_tokens: Sequence[int],
    invalid_ids: int,
    system: SystemCost | None,
    cut: Sequence[tuple[int, int]] = (),
) -> dict[str, Any]:
    """One system's cost record, by the definitions above; `cut` is each recall's memories
    cut by the budget and memories kept."""
    return {
        "messages_ingested": ingested,
        "ingest_s": ingest_s,
        "ingest_ms_per_message": 1000 * ingest_s / ingested if ingested else None,
        "recall_ms": {
            k: (v * 1000 if isinstance(v, float) and k != "n" else v)
            for k, v in percentiles(latencies_s).items()
        },
        "memories_per_query": float(np.mean(memories)) if memories else None,
        "context_tokens_per_query": float(np.mean(context_tokens)) if context_tokens else None,
        "invalid_ids": invalid_ids,
        "budget_cut": sum(1 for n, _ in cut if n),
        "cut_to_nothing": sum(1 for n, kept in cut if n and not kept),
        "system_tokens": None
        if system is None
        else {
            "calls": system.calls,
            "prompt_tokens": system.prompt_tokens,
            "completion_tokens": system.completion_tokens,
        },
    }
