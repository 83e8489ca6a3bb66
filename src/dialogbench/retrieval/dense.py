"""Dense retrieval with the offline MiniLM embedder, and BM25 + dense hybrid by reciprocal-rank
fusion.

dense    cosine similarity between the probe's and each earlier message's embedding
         (all-MiniLM-L6-v2, `models/embedding.py`); every earlier message is a candidate
hybrid   RRF: score(d) = 1 / (RRF_K + rank_bm25(d)) + 1 / (RRF_K + rank_dense(d)), ranks
         1-based among the probe's candidates, RRF_K = 60 (Cormack et al., 2009); a message
         BM25 does not retrieve (score 0) adds nothing from BM25

Both are `ScoreRetriever`s: the harness masks each probe's future, so a message after the
probe never scores. Message embeddings are computed once per subject and kept for the run
(with the packaged MiniLM, shared by every dense and hybrid retriever of the process).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence

import numpy as np

from dialogbench.data.model import Subject
from dialogbench.models.embedding import (
    INSTALL_RUNTIME,
    Embedder,
    EmbedderUnavailable,
    load_embedder,
    minilm_dir,
)
from dialogbench.retrieval.analyzers import analyzer_for, checked
from dialogbench.retrieval.base import FloatArray, Probe
from dialogbench.retrieval.baselines import ScoreRetriever
from dialogbench.retrieval.bm25 import BM25Index

RRF_K = 60
_SHARED: dict[str, np.ndarray] = {}
"""Message embeddings by subject, for the packaged MiniLM (every instance shares them)."""


def check_minilm() -> None:
    """Raise `EmbedderUnavailable` (saying what to install) unless MiniLM can be loaded:
    checked when a retriever is built, before any work, without loading the weights."""
    minilm_dir()
    missing = [m for m in ("tokenizers", "safetensors") if importlib.util.find_spec(m) is None]
    if missing:
        raise EmbedderUnavailable(
            f"the MiniLM embedder needs {' and '.join(missing)}; install with: {INSTALL_RUNTIME}"
        )


class DenseRetriever(ScoreRetriever):
    """Cosine similarity of sentence embeddings (the `dense` extra and the MiniLM weights)."""

    name = "dense"

    def __init__(
        self, embedder: Embedder | None = None, batch_size: int = 64, share: bool = True
    ) -> None:
        """`share`: with the packaged MiniLM, reuse the message embeddings every other
        sharing instance of the process made (False: embed on its own, as a memory system
        whose ingest cost is measured must)."""
        if embedder is None:
            check_minilm()
        self._embedder = embedder
        self.batch_size = batch_size
        self._cache: dict[str, np.ndarray] = _SHARED if embedder is None and share else {}

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder("minilm")
        return self._embedder

    def message_vectors(self, subject: Subject) -> np.ndarray:
        """The subject's message embeddings (one row per message), computed once."""
        key = hashlib.sha256(
            "\x00".join([subject.id, *(m.text for m in subject.messages)]).encode()
        ).hexdigest()
        if key not in self._cache:
            texts = [m.text for m in subject.messages]
            self._cache[key] = self.embedder.encode(texts, batch_size=self.batch_size)
        vectors: np.ndarray = self._cache[key]
        return vectors

    def prepare(self, subject: Subject) -> None:
        """Embed the subject's messages ahead of any probe (a memory system's ingest)."""
        self.message_vectors(subject)

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        docs = self.message_vectors(subject)
        if not probes or not len(docs):
            return np.zeros((len(probes), len(docs)))
        queries = self.embedder.encode([p.text for p in probes], batch_size=self.batch_size)
        sims: FloatArray = (queries @ docs.T).astype(np.float64)
        return sims


def masked_ranks(scores: FloatArray, cutoffs: np.ndarray, present: np.ndarray) -> FloatArray:
    """1-based rank of every message in each row among that row's candidates (positions below
    its cutoff where `present`), ties to the later message; `inf` elsewhere."""
    n = scores.shape[1]
    cols = np.arange(n)
    live = (cols[None, :] < cutoffs[:, None]) & present
    s = np.where(live, scores, -np.inf)
    order = np.argsort(-s[:, ::-1], axis=1, kind="stable")
    order = n - 1 - order
    ranks = np.empty_like(s)
    np.put_along_axis(ranks, order, np.arange(1, n + 1, dtype=np.float64)[None, :], axis=1)
    return np.where(live, ranks, np.inf)


class HybridRetriever(ScoreRetriever):
    """BM25 and dense fused by reciprocal rank (see the module docstring)."""

    name = "hybrid"

    def __init__(
        self, dense: DenseRetriever | None = None, rrf_k: int = RRF_K, analyzer: str = "auto"
    ) -> None:
        self.dense = dense or DenseRetriever()
        self.rrf_k = rrf_k
        self.analyzer = checked(analyzer)

    def prepare(self, subject: Subject) -> None:
        """Embed the subject's messages ahead of any probe (a memory system's ingest)."""
        self.dense.prepare(subject)

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        n = len(subject.messages)
        cutoffs = np.array([p.cutoff for p in probes], dtype=np.int64)
        texts = [m.text for m in subject.messages]
        index = BM25Index.from_texts(texts, analyzer=analyzer_for(self.analyzer, texts))
        bm25 = index.score(index.text_queries([p.text for p in probes]), cutoffs).toarray()[:, :n]
        if bm25.shape[1] < n:
            bm25 = np.pad(bm25, ((0, 0), (0, n - bm25.shape[1])))
        dense = self.dense.scores(subject, probes)
        r_bm25 = masked_ranks(bm25, cutoffs, bm25 > 0)
        r_dense = masked_ranks(dense, cutoffs, np.ones_like(dense, dtype=bool))
        return 1.0 / (self.rrf_k + r_bm25) + 1.0 / (self.rrf_k + r_dense)
