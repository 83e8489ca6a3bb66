"""Model-as-judge: rubrics, judges (single and blinded), panels and their agreement,
calibration, and the judge fields of a result row (`verdict_fields`)."""

from dialogbench.judging.calibration import (
    CalibrationProbe,
    CalibrationReport,
    PassRule,
    ProbeOutcome,
    calibrate,
)
from dialogbench.judging.judge import (
    DEFAULT_JUDGE_CONFIG,
    BlindVerdict,
    Judge,
    Verdict,
    content_seed,
)
from dialogbench.judging.panel import Panel, panel_agreement
from dialogbench.judging.rows import is_unscored, verdict_fields
from dialogbench.judging.rubric import (
    CompareTo,
    Dimension,
    Flag,
    Rubric,
    blind_labels,
    blind_schema,
    verdict_schema,
)

__all__ = [
    "DEFAULT_JUDGE_CONFIG",
    "BlindVerdict",
    "CalibrationProbe",
    "CalibrationReport",
    "CompareTo",
    "Dimension",
    "Flag",
    "Judge",
    "Panel",
    "PassRule",
    "ProbeOutcome",
    "Rubric",
    "Verdict",
    "blind_labels",
    "blind_schema",
    "calibrate",
    "content_seed",
    "is_unscored",
    "panel_agreement",
    "verdict_fields",
    "verdict_schema",
]
