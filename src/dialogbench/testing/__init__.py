"""Test helpers: a scriptable OpenAI-compatible chat server (with an optional embeddings route)
and a reference memory service speaking the REST contract of docs/memory-adapters.md (both on
loopback, with aiohttp).

`dialogbench.testing.fuzz` (mutated inputs for every loader) is imported on its own: it
needs hypothesis, from the `test` extra.
"""

from dialogbench.testing.chatserver import (
    ChatServer,
    Fault,
    JsonMode,
    delay,
    drop,
    empty,
    malformed,
    ok,
    status,
)
from dialogbench.testing.memoryserver import MemoryFault, MemoryServer

__all__ = [
    "ChatServer",
    "Fault",
    "JsonMode",
    "MemoryFault",
    "MemoryServer",
    "delay",
    "drop",
    "empty",
    "malformed",
    "ok",
    "status",
]
