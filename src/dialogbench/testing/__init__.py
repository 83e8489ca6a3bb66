"""Test helpers: a scriptable OpenAI-compatible chat server (with an optional embeddings
route), a reply for it whose first answer to each request cannot be used
(`unusable.UnusableFirst`), and a reference memory service speaking the REST contract of
docs/memory-adapters.md (both servers on loopback, with aiohttp).

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
from dialogbench.testing.unusable import UnusableFirst

__all__ = [
    "ChatServer",
    "Fault",
    "JsonMode",
    "MemoryFault",
    "MemoryServer",
    "UnusableFirst",
    "delay",
    "drop",
    "empty",
    "malformed",
    "ok",
    "status",
]
