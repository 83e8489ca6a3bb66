"""Models: providers for OpenAI-compatible servers and local GGUF files, behind one `Model`."""

from dialogbench.models.cache import CallKey, ResponseCache, default_cache_path
from dialogbench.models.model import Call, Model
from dialogbench.models.spec import ModelSpec, make_provider
from dialogbench.models.structured import Structured, extract_json, parse_reply
from dialogbench.models.types import (
    ChatMessage,
    GenerateConfig,
    ModelError,
    ModelOutput,
    Provider,
    Usage,
)
from dialogbench.models.usage import UsageLedger, UsageTotals

__all__ = [
    "Call",
    "CallKey",
    "ChatMessage",
    "GenerateConfig",
    "Model",
    "ModelError",
    "ModelOutput",
    "ModelSpec",
    "Provider",
    "ResponseCache",
    "Structured",
    "Usage",
    "UsageLedger",
    "UsageTotals",
    "default_cache_path",
    "extract_json",
    "make_provider",
    "parse_reply",
]
