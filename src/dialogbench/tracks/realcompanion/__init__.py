"""RealCompanion tracks: long-term memory over months of real conversation."""

from dialogbench.tracks.realcompanion.retrieval import (
    RetrievalConfig,
    RetrievalResult,
    run_retrieval,
)

__all__ = ["RetrievalConfig", "RetrievalResult", "run_retrieval"]
