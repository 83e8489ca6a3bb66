"""The replay harness's own overhead per ingest and per recall (`dialogbench.memory.replay`).

Three stateful systems are replayed over a synthetic subject of `--recalls` queries (default
1,000), each query preceded by an ingest of `--per-query` new messages (default 5):

- null:      ingest and recall do nothing; recall returns no memory;
- null-ids:  recall returns 10 valid message ids at once (the budget and id check at work);
- sleep-10:  recall waits 10 ms with `time.sleep` (`--busy`: a busy-wait loop instead, which
             holds a CPU the way a local model would; on a shared machine time.sleep
             oversleeps by the scheduler's latency, and a busy-wait is slowed by other jobs).

Each system times itself inside its own methods; the harness's overhead is the replay's wall
time less that, per recall (the ingest and its bookkeeping included) and, from the null
system's ingest calls timed from outside, per ingest. It is printed in microseconds and as a
percentage of the 10 ms system's own time (target: under 5% at 1,000 recalls), the median
and the best of `--repeats` runs.

    python benchmarks/memory_overhead.py [--recalls 1000] [--repeats 5] [--busy]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

from dialogbench.data.model import Message
from dialogbench.memory import Budget, Memory, Query, Recall, replay


class Timed:
    """A stateful memory system that adds up the time spent inside its own methods."""

    name = "null"

    def __init__(self, ids: int = 0, wait_s: float = 0.0, busy: bool = False) -> None:
        self.ids, self.wait_s, self.busy = ids, wait_s, busy
        self.inside = 0.0
        self.seen: list[str] = []

    def reset(self, subject: str) -> None:
        self.seen = []

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        t0 = time.perf_counter()
        self.seen += [m.id for m in messages]
        self.inside += time.perf_counter() - t0

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        t0 = time.perf_counter()
        if self.wait_s:
            if self.busy:
                end = t0 + self.wait_s
                while time.perf_counter() < end:
                    pass
            else:
                time.sleep(self.wait_s)
        out = (
            Recall(tuple(Memory(message_id=i) for i in self.seen[-self.ids :]))
            if self.ids
            else Recall()
        )
        self.inside += time.perf_counter() - t0
        return out


def subject(recalls: int, per_query: int) -> tuple[list[Message], list[Query]]:
    messages = [
        Message(id=f"m{i}", position=i, speaker="A" if i % 2 else "B", text=f"message {i} text")
        for i in range(recalls * per_query)
    ]
    queries = [
        Query(id=f"q{j}", subject_id="s", text="what", kind="chat", cutoff=(j + 1) * per_query)
        for j in range(recalls)
    ]
    return messages, queries


def run(system: Timed, messages: list[Message], queries: list[Query]) -> tuple[float, float]:
    """(overhead per recall in seconds, the system's own time in seconds) of one replay."""
    system.inside = 0.0
    t0 = time.perf_counter()
    rep = replay(system, "s", messages, queries, Budget(k=10))
    wall = time.perf_counter() - t0
    assert len(rep.recalled) == len(queries)
    return (wall - system.inside) / len(queries), system.inside


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--recalls", type=int, default=1000)
    ap.add_argument("--per-query", type=int, default=5, help="messages ingested before each recall")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--busy", action="store_true", help="busy-wait 10 ms instead of time.sleep")
    args = ap.parse_args()
    messages, queries = subject(args.recalls, args.per_query)
    wait = "busy-wait" if args.busy else "time.sleep"
    systems = {
        "null": Timed(),
        "null-ids": Timed(ids=10),
        f"sleep-10 ({wait})": Timed(wait_s=0.010, busy=args.busy),
    }
    print(
        f"{args.recalls} recalls, each after an ingest of {args.per_query} messages; "
        f"{args.repeats} repeats (median, best)"
    )
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in systems}
    for _ in range(args.repeats):  # interleaved, so load changes hit every system alike
        for name, system in systems.items():
            results[name].append(run(system, messages, queries))
    ten_ms = statistics.median(inside for _, inside in results[f"sleep-10 ({wait})"])
    per_recall_sys = ten_ms / args.recalls
    for name, got in results.items():
        over = [o for o, _ in got]
        med, best = statistics.median(over), min(over)
        print(
            f"  {name:24s} harness overhead per recall (ingest included): "
            f"{med * 1e6:8.1f} us median, {best * 1e6:8.1f} us best = "
            f"{100 * med / per_recall_sys:.2f}% / {100 * best / per_recall_sys:.2f}% "
            "of the 10 ms system's time per recall"
        )
    # the ingest path alone: the null system with ingests and no recall cost, timed apart
    ingest_only = []
    for _ in range(args.repeats):
        system = Timed()
        t0 = time.perf_counter()
        replay(system, "s", messages, queries, Budget(k=10))
        wall = time.perf_counter() - t0
        ingest_only.append(wall)
    print(
        f"  sleep-10 system's own time per recall: {per_recall_sys * 1e3:.3f} ms "
        f"({wait}; target overhead < 5% = {0.05 * per_recall_sys * 1e6:.0f} us)"
    )
    per_call = statistics.median(ingest_only) / (2 * args.recalls)
    print(
        f"  null replay, per call (ingest or recall, {2 * args.recalls} calls): "
        f"{per_call * 1e6:.1f} us median"
    )


if __name__ == "__main__":
    main()
