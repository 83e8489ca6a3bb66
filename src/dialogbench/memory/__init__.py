"""Memory systems: the protocol, the harness that replays a conversation into one with no
future leakage, the built-ins, adapters, and their costs (see docs/memory.md)."""

from dialogbench.memory.base import (
    Budget,
    Memory,
    MemorySystem,
    Query,
    Recall,
    Recalled,
    SystemCost,
    is_stateless,
)
from dialogbench.memory.builtin import FullContextMemory, RetrieverMemory
from dialogbench.memory.costs import DEFINITIONS, approx_tokens, memory_text, summarise_costs
from dialogbench.memory.harness import (
    MemorySystemError,
    Replay,
    query_of,
    replay,
    replay_costs,
)
from dialogbench.memory.registry import BUILTIN_MEMORY, MemorySpecError, resolve_memory

__all__ = [
    "BUILTIN_MEMORY",
    "DEFINITIONS",
    "Budget",
    "FullContextMemory",
    "Memory",
    "MemorySpecError",
    "MemorySystem",
    "MemorySystemError",
    "Query",
    "Recall",
    "Recalled",
    "Replay",
    "RetrieverMemory",
    "SystemCost",
    "approx_tokens",
    "is_stateless",
    "memory_text",
    "query_of",
    "replay",
    "replay_costs",
    "resolve_memory",
    "summarise_costs",
]
