"""Every number of metrics.md from a block stream: analyze() orchestrates, recommend.py
sizes the cache from the curve (curve.py), tables.py holds the report's tables."""

from typing import TYPE_CHECKING

from analysis.lazy import lazy_exports

if TYPE_CHECKING:
    from analysis.metrics.orchestrate import analyze as analyze

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "analysis.metrics.orchestrate": ("analyze",),
    },
)
