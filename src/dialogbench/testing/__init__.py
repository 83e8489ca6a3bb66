"""Test helpers: a scriptable OpenAI-compatible chat server (needs the `test` extra: aiohttp).

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

__all__ = ["ChatServer", "Fault", "JsonMode", "delay", "drop", "empty", "malformed", "ok", "status"]
