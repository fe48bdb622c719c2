"""How a report's hit-ratio curve was computed, in words for its page and its chart."""

from __future__ import annotations

from analysis.metrics.curve import exact_slots
from console.format import percent


def sampling_words(report: dict) -> str:
    """'exact LRU', or for a long stream where the exact top of the stack ends and SHARDS
    takes over. A report from before that top was exact marks its points `resolved`:
    sampled throughout."""
    if report.get("mrc_exact", True):
        return "exact LRU"
    rate = report["mrc_sampling_rate"]
    points = report.get("mrc") or [{}]
    if "resolved" in points[0]:
        return f"sampled at {percent(rate):g}%"
    return f"exact up to {exact_slots(rate):,} slots, sampled at {percent(rate):g}% beyond"
