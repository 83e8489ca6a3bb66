"""RealCompanion tracks: long-term memory over months of real conversation. Run one with
`dialogbench.runner.run_track(TRACK, dataset, out, config, roles).result()`."""

from dialogbench.tracks.realcompanion.answers import ANSWERS, AnswersConfig, AnswersResult
from dialogbench.tracks.realcompanion.chat import CHAT, ChatConfig, ChatResult
from dialogbench.tracks.realcompanion.coverage import COVERAGE, CoverageConfig, CoverageResult
from dialogbench.tracks.realcompanion.demand import DEMAND, DemandConfig, DemandResult
from dialogbench.tracks.realcompanion.detection import (
    DETECTION,
    DetectionConfig,
    DetectionResult,
    default_detectors,
)
from dialogbench.tracks.realcompanion.privacy import PRIVACY, PrivacyConfig, PrivacyResult
from dialogbench.tracks.realcompanion.questions import QUESTIONS, QuestionsConfig, QuestionsResult
from dialogbench.tracks.realcompanion.reconstruction import (
    RECONSTRUCTION,
    ReconstructionConfig,
    ReconstructionResult,
    compare_runs,
)
from dialogbench.tracks.realcompanion.retrieval import RETRIEVAL, RetrievalConfig, RetrievalResult

__all__ = [
    "ANSWERS",
    "CHAT",
    "COVERAGE",
    "DEMAND",
    "DETECTION",
    "PRIVACY",
    "QUESTIONS",
    "RECONSTRUCTION",
    "RETRIEVAL",
    "AnswersConfig",
    "AnswersResult",
    "ChatConfig",
    "ChatResult",
    "CoverageConfig",
    "CoverageResult",
    "DemandConfig",
    "DemandResult",
    "DetectionConfig",
    "DetectionResult",
    "PrivacyConfig",
    "PrivacyResult",
    "QuestionsConfig",
    "QuestionsResult",
    "ReconstructionConfig",
    "ReconstructionResult",
    "RetrievalConfig",
    "RetrievalResult",
    "compare_runs",
    "default_detectors",
]
