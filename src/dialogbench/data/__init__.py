"""Data model, loaders for the native release format and public corpora, and the registry."""

from dialogbench.data.errors import DataError
from dialogbench.data.generic import ImportConfig, import_chat_export
from dialogbench.data.locomo import load_locomo
from dialogbench.data.longmemeval import load_longmemeval
from dialogbench.data.memorybank import load_memorybank
from dialogbench.data.model import (
    ChatItem,
    Dataset,
    Message,
    PersonaEntry,
    ProfileClaim,
    Question,
    Subject,
    TraceStage,
)
from dialogbench.data.registry import REGISTRY, load_dataset
from dialogbench.data.release import load_release, write_release

__all__ = [
    "REGISTRY",
    "ChatItem",
    "DataError",
    "Dataset",
    "ImportConfig",
    "Message",
    "PersonaEntry",
    "ProfileClaim",
    "Question",
    "Subject",
    "TraceStage",
    "import_chat_export",
    "load_dataset",
    "load_locomo",
    "load_longmemeval",
    "load_memorybank",
    "load_release",
    "write_release",
]
