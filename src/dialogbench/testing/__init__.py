"""Test helpers: a scriptable OpenAI-compatible chat server (needs the `test` extra: aiohttp)."""

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
