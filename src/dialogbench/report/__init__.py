"""Run folders and printed tables."""

from dialogbench.report.run import Manifest, Progress, RunDir, dataset_info, to_json

__all__ = ["Manifest", "Progress", "RunDir", "dataset_info", "to_json"]
