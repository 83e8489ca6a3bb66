"""Run folders and printed tables."""

from dialogbench.report.run import Manifest, RunDir, dataset_info

__all__ = ["Manifest", "RunDir", "dataset_info"]
