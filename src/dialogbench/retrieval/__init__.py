"""Retrieval: probes, the retriever protocols, built-in retrievers and controls."""

from dialogbench.retrieval.base import (
    BatchRetriever,
    Probe,
    Rankings,
    Retriever,
    as_batch,
    build_probes,
)
from dialogbench.retrieval.bm25 import BM25Index, BM25Params, BM25Retriever, tokenize
from dialogbench.retrieval.registry import BUILTINS, CONTROLS, DEFAULT_RETRIEVERS, resolve

__all__ = [
    "BUILTINS",
    "CONTROLS",
    "DEFAULT_RETRIEVERS",
    "BM25Index",
    "BM25Params",
    "BM25Retriever",
    "BatchRetriever",
    "Probe",
    "Rankings",
    "Retriever",
    "as_batch",
    "build_probes",
    "resolve",
    "tokenize",
]
