"""`--memory SPEC` -> a memory system.

SPEC is one of:

    bm25 | recency | recency-user | random | dense | hybrid | full-context   built-ins
    mem0                                    mem0's open-source Memory (`memory/mem0.py`; the
                                            `mem0` extra), configured from the environment
    http://HOST:PORT/PATH  (or https://)   a service speaking the REST contract
                                            (docs/memory-adapters.md)
    NAME                                    an entry point in the group `dialogbench.memory`
                                            (`dialogbench.plugins`; one named like a
                                            built-in is refused)
    module:Class                            a class (or instance) with the protocol; a retriever
                                            (`retrieve` or `rank`) is taken as a stateless memory;
                                            imported with the current directory on the path
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from dialogbench import plugins
from dialogbench.memory.base import MemorySystem
from dialogbench.memory.builtin import FullContextMemory, RetrieverMemory
from dialogbench.retrieval.base import BatchRetriever, Retriever, as_batch
from dialogbench.retrieval.baselines import RandomRetriever, RecencyRetriever, RecencyUserRetriever
from dialogbench.retrieval.bm25 import BM25Retriever
from dialogbench.retrieval.dense import DenseRetriever, HybridRetriever
from dialogbench.retrieval.registry import load_spec

ENTRY_POINT_GROUP = plugins.MEMORY

BUILTIN_MEMORY: dict[str, Callable[[int, str], MemorySystem]] = {
    "bm25": lambda seed, analyzer: RetrieverMemory(BM25Retriever(analyzer=analyzer)),
    "recency": lambda seed, analyzer: RetrieverMemory(RecencyRetriever()),
    "recency-user": lambda seed, analyzer: RetrieverMemory(RecencyUserRetriever()),
    "random": lambda seed, analyzer: RetrieverMemory(RandomRetriever(seed)),
    # each embeds on its own: a cache shared in the process would hide the second's ingest cost
    "dense": lambda seed, analyzer: RetrieverMemory(DenseRetriever(share=False)),
    "hybrid": lambda seed, analyzer: RetrieverMemory(
        HybridRetriever(DenseRetriever(share=False), analyzer=analyzer)
    ),
    "full-context": lambda seed, analyzer: FullContextMemory(),
}
"""Built-in spec -> its maker from (seed, BM25 analyzer)."""


OPTIONAL_MEMORY: dict[str, tuple[str, str]] = {
    "mem0": ("dialogbench.memory.mem0:Mem0Memory", "pip install 'dialogbench[mem0]'"),
}
"""Adapters whose package is an optional extra: spec -> (module:Class, how to install it);
imported only when named."""


class MemorySpecError(ValueError):
    """A `--memory` value names no memory system; the message says what would."""


def resolve_memory(
    spec: str, *, seed: int = 0, allow_credentials: bool = False, analyzer: str = "auto"
) -> MemorySystem:
    """Build the memory system `spec` names (see the module docstring); `analyzer` is the
    BM25 analyzer of the built-ins that use BM25. A URL with a user or password is refused
    unless `allow_credentials` (tracks record their specs)."""
    if spec in BUILTIN_MEMORY:
        plugins.refuse(ENTRY_POINT_GROUP, spec, "memory system")
        return BUILTIN_MEMORY[spec](seed, analyzer)
    if spec.startswith(("http://", "https://")):
        from dialogbench.memory.http import HttpMemory, HttpMemoryError, public_url

        if "@" in spec.split("/", 3)[2] and not allow_credentials:
            raise MemorySpecError(
                f"--memory {public_url(spec)}: credentials in the URL would be recorded with "
                "the run (manifest, items); drop them from the URL and set "
                "DIALOGBENCH_MEMORY_API_KEY=KEY (sent as a bearer token) or "
                "DIALOGBENCH_MEMORY_BASIC_AUTH=USER:PASSWORD in the environment"
            )
        try:
            return HttpMemory(spec)
        except HttpMemoryError as e:
            raise MemorySpecError(str(e)) from None
    if spec in OPTIONAL_MEMORY:
        plugins.refuse(ENTRY_POINT_GROUP, spec, "memory system")
        target, install = OPTIONAL_MEMORY[spec]
        module, _, attr = target.partition(":")
        try:
            return as_memory(getattr(importlib.import_module(module), attr), spec)
        except ImportError as e:
            raise MemorySpecError(
                f"memory system {spec!r} needs a package that is not installed ({e}); "
                f"install it with: {install}"
            ) from None
    try:
        ep = plugins.named(ENTRY_POINT_GROUP, spec)
        if ep is not None:
            return as_memory(plugins.build(plugins.load(ep), ep), spec, plugins.origin(ep))
    except plugins.PluginError as e:
        raise MemorySpecError(str(e)) from None
    if ":" in spec:
        return as_memory(load_spec(spec, "memory system", MemorySpecError), spec)
    raise MemorySpecError(
        f"unknown memory system {spec!r}; use one of "
        f"{', '.join([*BUILTIN_MEMORY, *OPTIONAL_MEMORY])}, an "
        f"http:// URL, an entry point in '{ENTRY_POINT_GROUP}', or 'mypkg.memory:MyMemory'"
    )


def as_memory(obj: object, spec: str, origin: str | None = None) -> MemorySystem:
    """`obj` (a class, to be built with no arguments, or an instance) as a memory system;
    `origin` names the entry point it came from in errors."""
    try:
        instance = obj() if isinstance(obj, type) else obj
    except Exception as e:
        raise MemorySpecError(f"cannot build memory system {spec!r}: {e}") from None
    if isinstance(instance, MemorySystem):
        system: MemorySystem = instance
        return system
    if isinstance(instance, (Retriever, BatchRetriever)):
        return RetrieverMemory(as_batch(instance), name=getattr(instance, "name", spec))
    raise MemorySpecError(
        f"{origin or repr(spec)} is not a memory system: give it a `name`, "
        "ingest(subject, messages) and recall(subject, query, budget) (docs/memory.md)"
    )


def memory_name(spec: str, system: MemorySystem) -> str:
    """The name a run reports a system under: the spec for built-ins and URLs' systems, else
    the system's own `name`."""
    return spec if spec in BUILTIN_MEMORY else str(getattr(system, "name", spec))
