"""Printed tables of a run's figures."""

from dialogbench.report.table import fmt, summary_table

__all__ = ["fmt", "summary_table"]
