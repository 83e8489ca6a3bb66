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
    hedged: int = 0
    """Duplicate requests sent beside this reply's (0 when it came from the cache)."""


ErrorKind = Literal[
    "unreachable", "timeout", "rate_limited", "server", "rejected", "empty", "unreadable", "other"
]
"""Why a call failed, for counting failures by cause:

- `unreachable`: no connection (refused, host not found, TLS, not an http(s) URL) or no
  chat-completions endpoint at the URL (HTTP 404: a base URL without `/v1`); the backend
  is not there, so a run stops early on it.
- `timeout`: connected, but no reply within the per-request timeout (or HTTP 408).
- `rate_limited`: HTTP 429.
- `server`: HTTP 5xx (and 409, 425), or the connection dropped mid-reply.
- `rejected`: the server refused the request (other 4xx: bad key, unknown model, bad
  request), or a local provider could not run it; never retried.
- `empty`: an answer with no text (content `""` or `null`, no choices); retried, never cached.
- `unreadable`: a reply that is not chat-completions JSON.
- `other`: none of these (e.g. a memory system plug-in that raised).
"""
ERROR_KINDS: tuple[ErrorKind, ...] = (
    "unreachable",
    "timeout",
    "rate_limited",
    "server",
    "rejected",
    "empty",
    "unreadable",
    "other",
)


def _kind_of(status: int | None, retryable: bool) -> ErrorKind:
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status == 404:
        return "unreachable"
    if status is not None and (status >= 500 or status in (409, 425)):
        return "server"
    if status is not None:
        return "rejected"
    return "server" if retryable else "rejected"


class ModelError(RuntimeError):
    """A failed call. `retryable` errors are retried with back-off; errors are never cached.

    `kind` says why (one of `ERROR_KINDS`; by default read from `status` and `retryable`),
    so a runner can count failures by cause and tell an absent backend (`unreachable`)
    from a bad reply.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        kind: ErrorKind | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.kind: ErrorKind = kind or _kind_of(status, retryable)
        self.hint = hint
        """What to change, when the client can tell (a base URL that lacks /v1, say)."""

    def with_message(self, message: str) -> ModelError:
        """The same error (kind, status, retry_after) with another message."""
        return ModelError(
            message,
            retryable=self.retryable,
            status=self.status,
            retry_after=self.retry_after,
            kind=self.kind,
            hint=self.hint,
        )


def unreachable_reason(error: BaseException | None) -> str:
    """Why a server serves no calls, as a phrase after "the server at URL": the one
    diagnosis `run` and `models check` both print. A server that answered HTTP 404 was
    reached (its URL names no chat-completions route); any other failure was not."""
    if isinstance(error, ModelError) and error.status == 404:
        return f"answered HTTP 404: {error.hint or 'no chat-completions route at that URL'}"
    return "could not be reached"


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
