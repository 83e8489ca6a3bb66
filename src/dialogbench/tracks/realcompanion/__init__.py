"""RealCompanion tracks: long-term memory over months of real conversation."""

from dialogbench.tracks.realcompanion.answers import AnswersConfig, AnswersResult, run_answers
from dialogbench.tracks.realcompanion.chat import ChatConfig, ChatResult, run_chat
from dialogbench.tracks.realcompanion.coverage import CoverageConfig, CoverageResult, run_coverage
from dialogbench.tracks.realcompanion.demand import DemandConfig, DemandResult, run_demand
from dialogbench.tracks.realcompanion.detection import (
    DetectionConfig,
    DetectionResult,
    default_detectors,
    run_detection,
)
from dialogbench.tracks.realcompanion.privacy import PrivacyConfig, PrivacyResult, run_privacy
from dialogbench.tracks.realcompanion.questions import (
    QuestionsConfig,
    QuestionsResult,
    run_questions,
)
from dialogbench.tracks.realcompanion.reconstruction import (
    ReconstructionConfig,
    ReconstructionResult,
    compare_runs,
    run_reconstruction,
)
from dialogbench.tracks.realcompanion.retrieval import (
    RetrievalConfig,
    RetrievalResult,
    run_retrieval,
)

__all__ = [
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
    "run_answers",
    "run_chat",
    "run_coverage",
    "run_demand",
    "run_detection",
    "run_privacy",
    "run_questions",
    "run_reconstruction",
    "run_retrieval",
]
