"""What goes into a model call and what comes back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel


def canonical_json(obj: Any) -> str:
    """Key-sorted compact JSON: equal values give equal text (cache keys are built on it)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class ChatMessage(TypedDict):
    """One chat-completions message."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class GenerateConfig:
    """Sampling and output settings of one call. Temperature 0 and seed 0 by default."""

    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float | None = None
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    """Ask for JSON matching this schema (JSON-schema mode, grammar, or prompt-only)."""
    schema_name: str = "output"
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific request fields, passed through (and part of the cache key)."""

    @cached_property
    def cache_text(self) -> str:
        """`cache_fields` as canonical JSON, computed once per config."""
        return canonical_json(self.cache_fields())

    def cache_fields(self) -> dict[str, Any]:
        """Everything that changes the reply, for the cache key."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
            "stop": list(self.stop),
            "json_schema": self.json_schema,
            "extra": self.extra,
        }


class Usage(BaseModel):
    """Tokens a call processed."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ModelOutput(BaseModel):
    """A model's reply."""

    text: str
    usage: Usage = Usage()
    model: str = ""
    finish_reason: str | None = None
    latency_s: float = 0.0
    cached: bool = False


class ModelError(RuntimeError):
    """A failed call. `retryable` errors are retried with back-off; errors are never cached."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


@runtime_checkable
class Provider(Protocol):
    """Something that answers chat-completions calls (one endpoint, one model)."""

    name: str
    """`provider/model`, as given on the command line."""
    endpoint: str
    """Where calls go (a base URL, or `embedded:<file>`): concurrency is limited per endpoint."""

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        """One completion; raise `ModelError` on failure."""
        ...

    async def aclose(self) -> None:
        """Release connections or model memory."""
        ...
