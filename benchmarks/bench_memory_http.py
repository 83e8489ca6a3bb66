"""What the HTTP memory adapter costs: `HttpMemory` against the reference memory service
(`dialogbench.testing.memoryserver`) on loopback, through `memory.replay`.

A seeded synthetic conversation of --messages messages (12 words each from a 10-word
vocabulary, so BM25 has work to do) and one query after each message: the replay ingests
one message, polls `indexed`, and recalls, for every query; the store grows to the whole
conversation. Reported by the cost definitions of `dialogbench/memory/costs.py` (ingest ms
per message includes the `indexed` poll; recall latency p50/p95/p99), plus the floor: a
recall on an empty store (one HTTP round trip, nothing to rank), --floor times.

    .venv/bin/python benchmarks/bench_memory_http.py [--messages 1000] [--floor 500]
"""

from __future__ import annotations

import argparse
import statistics
import time

from dialogbench.data.model import Message
from dialogbench.memory import Budget, Query, replay, replay_costs
from dialogbench.memory.http import HttpMemory
from dialogbench.testing import MemoryServer

WORDS = [
    "cat",
    "cello",
    "lisbon",
    "sister",
    "marathon",
    "coffee",
    "trip",
    "teacher",
    "nurse",
    "spring",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--floor", type=int, default=500)
    args = parser.parse_args()
    n = args.messages
    messages = [
        Message(
            id=f"m{i}",
            position=i,
            speaker="A" if i % 2 else "B",
            text=" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12)),
        )
        for i in range(n)
    ]
    queries = [
        Query(f"q{i}", "s", f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]}", "question", i + 1)
        for i in range(n)
    ]
    with MemoryServer() as srv:
        memory = HttpMemory(srv.base_url)
        t0 = time.perf_counter()
        rep = replay(memory, "s", messages, queries, Budget(k=10))
        wall = time.perf_counter() - t0
        costs = replay_costs([rep], {m.id: m for m in messages})
        floor: list[float] = []
        empty = Query("x", "empty", "cat", "question", 0)
        for _ in range(args.floor):
            t = time.perf_counter()
            memory.recall("empty", empty, Budget(k=10))
            floor.append(1000 * (time.perf_counter() - t))
    recall = costs["recall_ms"]
    print(f"{n} ingests + {n} recalls (store growing to {n} messages): {wall:.1f} s wall")
    print(f"ingest ms per message (with the indexed poll): {costs['ingest_ms_per_message']:.2f}")
    print(
        f"recall ms: p50 {recall['p50']:.2f}  p95 {recall['p95']:.2f}  "
        f"p99 {recall['p99']:.2f}  mean {recall['mean']:.2f}"
    )
    floor.sort()
    print(
        f"empty-store recall (the HTTP round trip) ms: p50 {statistics.median(floor):.2f}  "
        f"p95 {floor[int(0.95 * (len(floor) - 1))]:.2f}  (n={len(floor)})"
    )


if __name__ == "__main__":
    main()
