"""The x axis of every hit-ratio chart (the curve, admission, the fleet's routers, the
compare page): host RAM with headroom, the figure the "Recommended RAM" card shows, so the
recommended point sits at the card's number and a budget at the RAM it names.

The report's curves are over cache capacity, the bytes of the blocks a cache holds
(metrics.md section 4); the RAM that holds them is capacity x (1 + headroom), times the
copies of a replica's KV on its TP ranks when heads are replicated or an MLA latent sits on
every rank (section 8: replica_kv_bytes_per_token over the model's kv_bytes_per_token), as
the recommendation's own ram_bytes is. Points the report gives in RAM (the recommendation,
the budgets) are drawn at the report's RAM; the curves' points are scaled by this factor,
which is a change of unit for display, like bytes to GiB: the numbers stay the engine's."""

from __future__ import annotations

from console.format import gib


def _copies(report: dict) -> float:
    rec = report.get("recommendation") or {}
    model = report.get("kv_bytes_per_token") or 0
    replica = rec.get("replica_kv_bytes_per_token") or model
    return replica / model if model else 1.0


def headroom(report: dict) -> float:
    """The report's headroom (0.1 for 10 %); none known (a partial report): 0."""
    rec = report.get("recommendation") or {}
    return rec.get("headroom", (report.get("params") or {}).get("headroom", 0.0))


def ram_factor(report: dict) -> float:
    """Bytes of RAM per byte of cache capacity."""
    return (1 + headroom(report)) * _copies(report)


def ram_gib(report: dict, capacity_bytes: float) -> float:
    """The RAM holding `capacity_bytes` of cache, in GiB (a chart's x value)."""
    return gib(capacity_bytes * ram_factor(report))


def ram_title(report: dict, what: str = "host RAM for KV blocks") -> str:
    """The axis's title, stating the headroom (and the copies) once for the chart."""
    title = f"{what}, with {headroom(report) * 100:g} % headroom"
    copies = _copies(report)
    if copies > 1:
        tp = (report.get("recommendation") or {}).get("tp")
        title += f" and ×{copies:.3g} KV on {tp} TP ranks"
    return title + " (log scale)"


__all__ = ["headroom", "ram_factor", "ram_gib", "ram_title"]
