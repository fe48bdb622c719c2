"""Every number of metrics.md from a block stream: analyze() orchestrates, recommend.py
sizes the cache from the curve (curve.py), tables.py holds the report's tables."""

from analysis.metrics.orchestrate import analyze

__all__ = ["analyze"]
