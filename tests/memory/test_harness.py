"""The replay harness: no future leakage, budgets, invalid ids, reset, failures named."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from dialogbench.data.model import Message, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.memory import (
    Budget,
    Memory,
    MemorySystemError,
    Query,
    Recall,
    RetrieverMemory,
    approx_tokens,
    memory_text,
    query_of,
    replay,
    replay_costs,
    resolve_memory,
)
from dialogbench.memory.harness import ingested_positions
from dialogbench.retrieval.base import build_probes
from dialogbench.retrieval.bm25 import BM25Retriever


def conversation(n: int, subject: str = "s") -> list[Message]:
    return [
        Message(id=f"{subject}-m{i}", position=i, speaker="A" if i % 2 else "B", text=f"word{i} x")
        for i in range(n)
    ]


def query(cutoff: int, qid: str | None = None, text: str = "x") -> Query:
    return Query(id=qid or f"q{cutoff}", subject_id="s", text=text, kind="chat", cutoff=cutoff)


class Recorder:
    """A stateful memory that keeps everything it is shown and recalls it, newest first."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[Message] = []
        self.log: list[tuple[str, Any]] = []

    def reset(self, subject: str) -> None:
        self.log.append(("reset", subject))
        self.seen = []

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        self.log.append(("ingest", [m.position for m in messages]))
        self.seen += messages

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        positions = [m.position for m in self.seen]
        self.log.append(("recall", (query.id, query.cutoff, positions)))
        return Recall(tuple(Memory(message_id=m.id) for m in reversed(self.seen)))


def test_a_stateful_system_never_sees_the_future() -> None:
    messages = conversation(20)
    queries = [query(12), query(3), query(7), query(20), query(7, "q7b")]  # out of order
    system = Recorder()
    rep = replay(system, "s", messages, queries, Budget(k=None))
    recalls: list[tuple[str, int, list[int]]] = [e for k, e in system.log if k == "recall"]
    asked = [r[1] for r in recalls]
    assert asked == sorted(asked) == [3, 7, 7, 12, 20]
    for _qid, cutoff, shown in recalls:
        assert shown == list(range(cutoff))  # exactly the messages before the query
    ingests = [entry for kind, entry in system.log if kind == "ingest"]
    assert ingests == [list(range(3)), list(range(3, 7)), list(range(7, 12)), list(range(12, 20))]
    assert rep.ingested == 20
    # results come back in the order the queries were given
    assert [r.query.id for r in rep.recalled] == ["q12", "q3", "q7", "q20", "q7b"]
    assert [r.ingested for r in rep.recalled] == [5, 3, 4, 8, 0]
    for r in rep.recalled:
        assert r.positions == tuple(range(r.query.cutoff - 1, -1, -1))


def test_reset_is_called_before_the_subject_is_replayed() -> None:
    system = Recorder()
    system.seen = conversation(5, "other")  # left over from an earlier run
    replay(system, "s", conversation(4), [query(2)], Budget(k=None))
    assert system.log[0] == ("reset", "s")
    assert system.log[2][1][2] == [0, 1]


class Cheater:
    """Returns future, unknown and duplicate ids, and text memories citing all of them."""

    name = "cheater"

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        pass

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        c = query.cutoff
        return Recall(
            (
                Memory(message_id=f"s-m{c}"),  # the query's own position: future
                Memory(message_id=f"s-m{c - 1}"),
                Memory(message_id="nope"),
                Memory(message_id=f"s-m{c - 1}"),  # a duplicate
                Memory(text="a fact", cites=(f"s-m{c + 1}", f"s-m{c - 2}", f"s-m{c - 2}")),
                Memory(message_id=f"s-m{c - 3}"),
            )
        )


def test_invalid_and_future_ids_are_dropped_and_counted() -> None:
    rep = replay(Cheater(), "s", conversation(10), [query(6)], Budget(k=None))
    (r,) = rep.recalled
    assert r.invalid_ids == ("s-m6", "nope", "s-m7")
    assert r.positions == (5, 3)
    assert r.cited_positions == (4,)
    assert [m.message_id for m in r.id_memories] == ["s-m5", "s-m5", "s-m3"]
    assert [m.text for m in r.text_memories] == ["a fact"]
    costs = replay_costs([rep])
    assert costs["invalid_ids"] == 3


def test_the_k_budget_cuts_best_first() -> None:
    rep = replay(Recorder(), "s", conversation(10), [query(9)], Budget(k=3))
    assert rep.recalled[0].positions == (8, 7, 6)
    assert len(rep.recalled[0].memories) == 3


def test_the_token_budget_cuts() -> None:
    messages = conversation(10)
    by_id = {m.id: m for m in messages}
    each = approx_tokens(memory_text(Memory(message_id="s-m8"), by_id))
    assert each > 1
    rep = replay(Recorder(), "s", messages, [query(9)], Budget(k=None, tokens=3 * each + 1))
    assert rep.recalled[0].positions == (8, 7, 6)
    rep = replay(Recorder(), "s", messages, [query(9)], Budget(k=2, tokens=3 * each))
    assert rep.recalled[0].positions == (8, 7)
    rep = replay(Recorder(), "s", messages, [query(9)], Budget(k=None, tokens=each - 1))
    assert rep.recalled[0].positions == ()


class Broken:
    name = "broken"

    def __init__(self, where: str) -> None:
        self.where = where

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        if self.where == "ingest":
            raise ConnectionError("store is down")

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        if self.where == "recall":
            raise KeyError("index")
        return [Memory(message_id="s-m0")]  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("ingest", "'broken' failed in ingest (subject 's', 4 messages): ConnectionError"),
        ("recall", "'broken' failed in recall (subject 's', query 'q4'): KeyError"),
        ("type", "'broken': recall() for query 'q4' returned list, expected"),
    ],
)
def test_a_failing_plug_in_is_named(where: str, said: str) -> None:
    with pytest.raises(MemorySystemError) as e:
        replay(Broken(where), "s", conversation(5), [query(4)], Budget())
    assert said in str(e.value)


def test_bm25_as_a_memory_ranks_exactly_as_the_retriever() -> None:
    data = load_dataset("sample")
    system = RetrieverMemory(BM25Retriever())
    depth = 10
    for subject in data.subjects:
        probes = build_probes(subject)
        if not probes:
            continue
        expected = BM25Retriever().rank(subject, probes, depth).top
        rep = replay(
            system, subject.id, subject.messages, [query_of(p) for p in probes], Budget(k=depth)
        )
        for p, row, got in zip(probes, np.asarray(expected), rep.recalled, strict=True):
            assert got.query.id == p.id and got.invalid_ids == ()
            assert list(got.positions) == [int(t) for t in row if t >= 0]


def test_a_stateless_system_gets_the_history_once() -> None:
    system = RetrieverMemory(BM25Retriever())
    calls: list[int] = []
    ingest = system.ingest

    def spy(subject: str, messages: Sequence[Message]) -> None:
        calls.append(len(messages))
        ingest(subject, messages)

    system.ingest = spy  # type: ignore[method-assign]
    subject = Subject(id="s", messages=conversation(12))
    rep = replay(system, "s", subject.messages, [query(9), query(4)], Budget(k=5))
    assert calls == [9]  # up to the last query, not the whole conversation
    assert [r.ingested for r in rep.recalled] == [0, 9]  # charged to the first query asked
    assert all(max(r.positions, default=-1) < r.query.cutoff for r in rep.recalled)


def test_costs_follow_the_definitions() -> None:
    messages = conversation(10)
    rep = replay(Recorder(), "s", messages, [query(4), query(8)], Budget(k=2))
    costs = replay_costs([rep])
    assert costs["messages_ingested"] == 8
    assert costs["memories_per_query"] == 2.0
    assert costs["recall_ms"]["n"] == 2
    assert costs["recall_ms"]["p50"] <= costs["recall_ms"]["p99"]
    assert costs["ingest_ms_per_message"] == pytest.approx(1000 * rep.ingest_s / 8)
    by_id = {m.id: m for m in messages}
    want = np.mean(
        [sum(approx_tokens(memory_text(m, by_id)) for m in r.memories) for r in rep.recalled]
    )
    assert costs["context_tokens_per_query"] == pytest.approx(want)
    assert costs["system_tokens"] is None


class Indexed(Recorder):
    """Indexes in the background: the harness must wait before every recall after an ingest."""

    def wait_until_indexed(self, subject: str) -> None:
        self.log.append(("indexed", subject))


def test_wait_until_indexed_comes_between_ingest_and_recall() -> None:
    system = Indexed()
    replay(system, "s", conversation(6), [query(2), query(2, "again"), query(5)], Budget())
    kinds = [kind for kind, _ in system.log]
    assert kinds == [
        "reset",
        "ingest",
        "indexed",
        "recall",
        "recall",
        "ingest",
        "indexed",
        "recall",
    ]


# -- the ingestion window (issue 28.3: --limit bounds ingestion too) -------------------------


@pytest.mark.parametrize("window", [1, 3, 5, 40])
def test_the_ingested_positions_are_the_union_of_the_windows(window: int) -> None:
    cutoffs = [30, 10, 12, 33, 0, 10]
    union: set[int] = set()
    for c in cutoffs:
        union |= set(range(max(0, c - window), c))
    assert ingested_positions(cutoffs, window) == sorted(union)
    assert ingested_positions(cutoffs, None) == list(range(33))
    assert len(ingested_positions(cutoffs, window)) <= len(cutoffs) * window


def test_a_window_caps_what_a_stateful_system_ingests() -> None:
    system = Recorder()
    messages = conversation(50)
    rep = replay(system, "s", messages, [query(30), query(10), query(33)], Budget(k=None), window=5)
    ingests = [what for kind, what in system.log if kind == "ingest"]
    assert ingests == [[5, 6, 7, 8, 9], [25, 26, 27, 28, 29], [30, 31, 32]]
    assert rep.ingested == 13 and rep.window == 5 and rep.notes
    by_id = {r.query.id: r for r in rep.recalled}
    assert list(by_id["q10"].positions) == [9, 8, 7, 6, 5]
    assert list(by_id["q33"].positions) == [32, 31, 30, 29, 28, 27, 26, 25, 9, 8, 7, 6, 5]
    assert [by_id[q].ingested for q in ("q10", "q30", "q33")] == [5, 5, 3]


@pytest.mark.parametrize("spec", ["full-context", "recency", "bm25"])
def test_a_stateless_system_under_a_window_sees_only_the_windows_before_each_query(
    spec: str,
) -> None:
    messages = conversation(60)
    queries = [query(40, text="word3 word38 word12"), query(12, text="word3 word11")]
    kept = ingested_positions([40, 12], 6)
    system = resolve_memory(spec)
    rep = replay(system, "s", messages, queries, Budget(k=20), window=6)
    assert rep.ingested == len(kept) == 12
    for r in rep.recalled:
        visible = [p for p in kept if p < r.query.cutoff]
        assert set(r.positions) <= set(visible) and r.invalid_ids == ()
        if spec != "bm25":  # newest first: every visible message, as a brute-force list
            assert list(r.positions) == visible[::-1]
