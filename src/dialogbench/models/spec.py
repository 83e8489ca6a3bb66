"""Model specs (`provider/model`) and the providers they name.

    openai/gpt-4o                         OpenAI's API; key from OPENAI_API_KEY
    openai-compatible/Qwen2-7B-Instruct   any chat-completions server: --base-url http://host:8000/v1
    local/path/to/model.gguf              a GGUF file run in-process (cyllama)
    embedded                              SmolLM2-135M-Instruct, shipped for smoke runs
    transformers/<hub id or folder>       a local transformers model (needs torch)

API keys come from the environment (`--api-key-env` names the variable); they are never
written to a file, a cache key or a message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dialogbench.models.types import Provider

PROVIDERS = ("openai", "openai-compatible", "local", "embedded", "transformers")
OPENAI_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ModelSpec:
    """Which model, where, and how to reach it."""

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0

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
        """What a run records about the model (no secrets)."""
        return {"model": self.name, "base_url": self.base_url, "api_key_env": self.api_key_env}


def make_provider(spec: ModelSpec) -> Provider:
    """Build the provider a spec names."""
    if spec.provider in ("openai", "openai-compatible"):
        from dialogbench.models.openai_compat import OpenAICompatible

        base_url = spec.base_url or os.environ.get("OPENAI_BASE_URL")
        if spec.provider == "openai":
            base_url = base_url or OPENAI_URL
        if not base_url:
            raise ValueError(f"{spec.name} needs --base-url (e.g. http://localhost:8000/v1)")
        key_env = spec.api_key_env or "OPENAI_API_KEY"
        key = os.environ.get(key_env)
        if spec.provider == "openai" and not key:
            raise ValueError(f"{spec.name} needs an API key in the environment variable {key_env}")
        return OpenAICompatible(spec.name, spec.model, base_url, key, spec.timeout_s)
    if spec.provider in ("embedded", "local"):
        from dialogbench.models.embedded import LocalGGUF, default_gguf

        path = default_gguf() if spec.provider == "embedded" else spec.model
        return LocalGGUF(path, name=spec.name)
    if spec.provider == "transformers":
        from dialogbench.models.hf import TransformersProvider

        return TransformersProvider(spec.model, name=spec.name)
    raise ValueError(f"unknown provider {spec.provider!r}")
