"""Model specs (`provider/model`) and the providers they name.

    openai/gpt-4o                         OpenAI's API; key from OPENAI_API_KEY
    openai-compatible/Qwen2-7B-Instruct   any chat-completions server: --base-url http://host:8000/v1
    local/path/to/model.gguf              a GGUF file run in-process (cyllama)
    embedded                              SmolLM2-135M-Instruct, shipped for smoke runs
    transformers/<hub id or folder>       a local transformers model (needs torch)

API keys come from the environment (`--api-key-env` names the variable); they are never
written to a file, a cache key or a message. A key goes only where the user sent it: an
`openai-compatible` model gets the variable `--api-key-env` names, or no key at all;
`openai` (OpenAI's own API) reads OPENAI_API_KEY by default. A spec refuses what would put
a secret into a manifest or an error: a base URL with credentials or a query string, and
an `--api-key-env` value that is not a variable's name (a pasted key) - without echoing it.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from dialogbench.models.types import Provider

PROVIDERS = ("openai", "openai-compatible", "local", "embedded", "transformers")
OPENAI_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_DEADLINE_S = 300.0
DEFAULT_RETRY_AFTER_MAX_S = 60.0
IN_PROCESS = frozenset({"embedded", "local", "transformers"})
"""Providers that generate on this machine's CPU, one call at a time."""
IN_PROCESS_TIMEOUT_S = 300.0
IN_PROCESS_DEADLINE_S = 900.0
"""Their timeout and deadline where none is given: a 1,024-token verdict takes 15-40 s on
two cores, past the 30 s that suits a server."""

_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_base_url(url: str, option: str = "--base-url") -> None:
    """Refuse a base URL that would carry a secret (or never work); the error never
    repeats the URL's user part, password or query."""
    if any(c.isspace() for c in url) or any(ord(c) < 32 for c in url):
        raise ValueError(f"{option}: the URL holds spaces or control characters (not shown)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(f"{option}: not a URL (not shown); e.g. http://host:8000/v1") from None
    authority = url.split("://", 1)[-1].split("/", 1)[0]  # also without a scheme
    if parts.username is not None or parts.password is not None or "@" in authority:
        raise ValueError(
            f"{option}: the URL holds credentials (user:password@); they are not shown and "
            "would be written to the manifest. Put the key in an environment variable and "
            "pass its name with --api-key-env (e.g. export MY_KEY=...; --api-key-env MY_KEY)"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{option}: not an http(s) URL (not shown); give scheme://host[:port]/path, "
            "e.g. http://host:8000/v1"
        )
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError(
            f"{option}: the URL has a query string or fragment (not shown); a base URL is "
            f"{parts.scheme}://{parts.hostname}{f':{port}' if port else ''}{parts.path}. If it "
            "held a key, put the key in an environment variable and pass --api-key-env NAME"
        )


def public_url(url: str) -> str:
    """A server URL as a message may show it: no user, password or query."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "?"
    if not parts.scheme or not parts.netloc:
        return url.split("?")[0]
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redacted_url(url: str) -> str:
    """`url` without a user part, password, query or fragment (where a secret could hide);
    anything but an http(s) URL with one of those is returned as it is."""
    if "@" not in url and "?" not in url and "#" not in url:
        return url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "(a malformed URL, not shown)"
    if parts.scheme not in ("http", "https"):
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}{parts.path}"


def looks_like_key(text: str) -> bool:
    """A value given as a variable's name that is more likely a key: over 100 characters,
    or a run of 16 or more letters and digits (between underscores) that mixes both, as
    the random part of `hf_...`, `ghp_...`, `sk_live_...` or a hex token does."""
    if len(text) > 100:
        return True
    for part in text.split("_"):
        if len(part) >= 16 and any(c.isdigit() for c in part) and any(c.isalpha() for c in part):
            return True
    return False


def check_key_env(name: str, option: str = "--api-key-env") -> None:
    """Refuse an `--api-key-env` value that is not a plausible variable name; the error
    never repeats it (it may be the key)."""
    if not _VAR_NAME.fullmatch(name):
        raise ValueError(
            f"{option} takes the NAME of an environment variable (letters, digits and _, not "
            "starting with a digit, e.g. OPENAI_API_KEY); the value given is not one and is not "
            "shown, in case it is a key. Put the key in a variable (export MY_KEY=...) and "
            f"pass {option} MY_KEY"
        )
    if looks_like_key(name):
        raise ValueError(
            f"{option} takes the NAME of an environment variable, and the value given looks "
            "like a key (it is not shown). Put the key in a variable (export MY_KEY=...) and "
            f"pass {option} MY_KEY"
        )


def _check_seconds(value: float, option: str, *, zero_ok: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{option}: {value!r} is not a number of seconds")
    if value < 0 or (value == 0 and not zero_ok) or math.isinf(value):
        bound = "at least 0" if zero_ok else "above 0"
        raise ValueError(f"{option}: {value} s must be {bound} and finite")


@dataclass(frozen=True)
class ModelSpec:
    """Which model, where, and how to reach it."""

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Seconds one request may take."""
    deadline_s: float = DEFAULT_DEADLINE_S
    """Seconds one call may take in all, its retries and back-off included."""
    retry_after_max_s: float = DEFAULT_RETRY_AFTER_MAX_S
    """The longest a server's `Retry-After` is waited."""

    def __post_init__(self) -> None:
        if self.base_url is not None:
            check_base_url(self.base_url)
        if self.api_key_env is not None:
            check_key_env(self.api_key_env)
        _check_seconds(self.timeout_s, "--timeout")
        _check_seconds(self.deadline_s, "--deadline")
        _check_seconds(self.retry_after_max_s, "--retry-after-max", zero_ok=True)

    @classmethod
    def parse(cls, text: str, **options: Any) -> ModelSpec:
        """Read `provider/model` (or `embedded`); options fill the other fields."""
        if text == "embedded":
            return cls(provider="embedded", model="SmolLM2-135M-Instruct", **options)
        provider, sep, model = text.partition("/")
        if not sep or not model or provider not in PROVIDERS:
            raise ValueError(
                f"model spec {text!r} is not provider/model; providers: {', '.join(PROVIDERS)} "
                "(e.g. openai-compatible/Qwen2-7B-Instruct --base-url http://host:8000/v1)"
            )
        return cls(provider=provider, model=model, **options)

    @property
    def name(self) -> str:
        return "embedded" if self.provider == "embedded" else f"{self.provider}/{self.model}"

    def settings(self) -> dict[str, Any]:
        """What a run records about the model (no secrets: the base URL holds none and the
        key's variable is only named)."""
        return {
            "model": self.name,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "timeout_s": self.timeout_s,
            "deadline_s": self.deadline_s,
            "retry_after_max_s": self.retry_after_max_s,
        }

    def api_key(self) -> str | None:
        """The key this spec sends: the named variable's value (an error naming it when it is
        unset); else, for OpenAI's own API only, OPENAI_API_KEY; else none."""
        if self.api_key_env is not None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ValueError(
                    f"{self.name}: the environment variable {self.api_key_env} (named by "
                    "--api-key-env) is not set or is empty; export it with the API key"
                )
            return key
        if self.provider == "openai" or _host(self.base_url) == OPENAI_HOST:
            return os.environ.get("OPENAI_API_KEY") or None
        return None


def _host(url: str | None) -> str | None:
    return urlsplit(url).hostname if url else None


def make_provider(spec: ModelSpec) -> Provider:
    """Build the provider a spec names."""
    if spec.provider in ("openai", "openai-compatible"):
        from dialogbench.models.openai_compat import OpenAICompatible

        base_url = spec.base_url
        if base_url is None and os.environ.get("OPENAI_BASE_URL"):
            base_url = os.environ["OPENAI_BASE_URL"]
            check_base_url(base_url, "OPENAI_BASE_URL")
        if spec.provider == "openai":
            base_url = base_url or OPENAI_URL
        if not base_url:
            raise ValueError(f"{spec.name} needs --base-url (e.g. http://localhost:8000/v1)")
        key = spec.api_key()
        if spec.provider == "openai" and not key:
            raise ValueError(
                f"{spec.name} needs an API key in the environment variable "
                f"{spec.api_key_env or 'OPENAI_API_KEY'}"
            )
        return OpenAICompatible(spec.name, spec.model, base_url, key, spec.timeout_s)
    if spec.provider in ("embedded", "local"):
        from dialogbench.models.embedded import LocalGGUF, default_gguf

        path = default_gguf() if spec.provider == "embedded" else spec.model
        return LocalGGUF(path, name=spec.name)
    if spec.provider == "transformers":
        from dialogbench.models.hf import TransformersProvider

        return TransformersProvider(spec.model, name=spec.name)
    raise ValueError(f"unknown provider {spec.provider!r}")
