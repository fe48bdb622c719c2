"""Where the curve flattens (metrics.md section 9): past the knee, doubling the cache buys
less than `knee_gain` of hit ratio.

Section 9 names the smallest of the curve's points whose doubling gains less than
knee_gain. Read literally, a curve that is flat at its smallest sizes (one slot and two
hold the same few system-prompt blocks) has its knee at one slot, before all of its rise:
the shared Mooncake trace's would be 1 slot at 0 %. So the knee is read as its sentence
says it ("past it, more RAM buys little"): the smallest point from which on no point's
doubling gains knee_gain."""

from __future__ import annotations

from analysis.metrics.curve import HitCurve, hit_share


def knee(curve: HitCurve, points: list[dict], total_tokens: int, knee_gain: float) -> dict | None:
    """The knee among `points` (the report's mrc, ascending), each doubling read off the
    whole curve; None for a curve without points."""
    cum = curve.total

    def hit(slots: int) -> float:
        return hit_share(int(cum[min(slots, cum.size - 1)]), total_tokens)

    found = None
    for point in reversed(points):
        slots = point["capacity_slots"]
        if hit(2 * slots) - hit(slots) >= knee_gain:
            break
        found = point
    if found is None:
        return None
    return {key: found[key] for key in ("capacity_bytes", "capacity_slots", "hit_ratio")}
