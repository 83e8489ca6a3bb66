"""Retriever names -> instances: built-ins, `module:Class` paths and entry points.

A package can register retrievers under the entry-point group `dialogbench.retrievers`;
`--retrievers mypkg.memory:MyRetriever` works without registering.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

from dialogbench import plugins
from dialogbench.retrieval.base import BatchRetriever, Retriever, as_batch
from dialogbench.retrieval.baselines import (
    BrokenOracle,
    OffsetOracle,
    OracleRetriever,
    RandomPositionOracle,
    RandomRetriever,
    RecencyRetriever,
    RecencyUserRetriever,
)
from dialogbench.retrieval.bm25 import BM25Retriever
from dialogbench.retrieval.dense import DenseRetriever, HybridRetriever

ENTRY_POINT_GROUP = plugins.RETRIEVERS

BUILTINS: dict[str, Callable[[int, int, str], BatchRetriever]] = {
    "random": lambda seed, offset, analyzer: RandomRetriever(seed),
    "recency": lambda seed, offset, analyzer: RecencyRetriever(),
    "recency-user": lambda seed, offset, analyzer: RecencyUserRetriever(),
    "bm25": lambda seed, offset, analyzer: BM25Retriever(analyzer=analyzer),
    "oracle": lambda seed, offset, analyzer: OracleRetriever(),
    "offset-permuted": lambda seed, offset, analyzer: OffsetOracle(offset),
    "position-randomized": lambda seed, offset, analyzer: RandomPositionOracle(seed),
    "broken-oracle": lambda seed, offset, analyzer: BrokenOracle(),
    "dense": lambda seed, offset, analyzer: DenseRetriever(),
    "hybrid": lambda seed, offset, analyzer: HybridRetriever(analyzer=analyzer),
}
"""Built-in retriever name -> its maker from (seed, offset, BM25 analyzer)."""
CONTROLS = ("offset-permuted", "position-randomized", "broken-oracle")
OPTIONAL = ("dense", "hybrid")
"""Built-ins left out of the default list: they need the `dense` extra and the MiniLM
weights, and embed every message (slow on a CPU); ask for them with `--retrievers`."""
DEFAULT_RETRIEVERS = tuple(name for name in BUILTINS if name not in OPTIONAL)


def resolve(
    name: str, *, seed: int = 0, offset: int = 50, analyzer: str = "auto"
) -> BatchRetriever:
    """Build the retriever called `name`: a built-in, an entry point, or `module:Class`;
    `analyzer` is the BM25 analyzer of the built-ins that use BM25 (`analyzers.py`)."""
    if name in BUILTINS:
        plugins.refuse(ENTRY_POINT_GROUP, name, "retriever")
        return BUILTINS[name](seed, offset, analyzer)
    ep = plugins.named(ENTRY_POINT_GROUP, name)
    if ep is not None:
        return _instantiate(plugins.build(plugins.load(ep), ep), name)
    if ":" in name:
        return _instantiate(load_spec(name, "retriever"), name)
    known = ", ".join(BUILTINS)
    raise ValueError(
        f"unknown retriever {name!r}; use one of {known}, an entry point in "
        f"'{ENTRY_POINT_GROUP}', or a class path like 'mypkg.memory:MyRetriever'"
    )


def load_spec(spec: str, what: str, error: type[ValueError] = ValueError) -> object:
    """`import_spec(spec)`; an `error` that names `what` ("retriever") when it cannot be
    imported."""
    try:
        return import_spec(spec)
    except (ImportError, AttributeError) as e:
        raise error(f"cannot load {what} {spec!r}: {e}") from None


def import_spec(spec: str) -> object:
    """The object `module:attr` names, imported as `python -m` would: with the current
    directory on the import path (so `examples.keyword_memory:KeywordMemory` works from the
    repository root under the `dialogbench` command too)."""
    module, _, attr = spec.partition(":")
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as e:
        here = os.getcwd()
        if e.name != module.split(".")[0] or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)  # after everything installed, so nothing is shadowed
        loaded = importlib.import_module(module)
    return getattr(loaded, attr)


def _instantiate(obj: object, name: str) -> BatchRetriever:
    instance = obj() if isinstance(obj, type) else obj
    if not isinstance(instance, (Retriever, BatchRetriever)):
        raise ValueError(
            f"{name!r} is not a retriever: give it a `name` and either "
            "retrieve(history, probe, k) or rank(subject, probes, depth)"
        )
    return as_batch(instance)
