"""Data model, loaders for the native release format and public corpora, and the registry."""

from dialogbench.data.errors import DataError
from dialogbench.data.locomo import load_locomo
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
    "Message",
    "PersonaEntry",
    "ProfileClaim",
    "Question",
    "Subject",
    "TraceStage",
    "load_dataset",
    "load_locomo",
    "load_release",
    "write_release",
]
