"""What the analysis page says of admission (metrics.md section 8) in words read from the
report: the LRU-vs-useful gap, the recommendation storing a block only at its k-th use,
and what that buys at equal sizes (the report's admission.at_equal_size) — the only
comparison that holds, since a lower ceiling sets a lower target.

No arithmetic: the numbers are the engine's, compared (which is larger, as shown) and
formatted here (console.format)."""

from __future__ import annotations

from console.format import gib_text, percent_text, window_name
from console.uploads.fleet_words import use_ordinal


def longest_window(report: dict) -> dict | None:
    """The report's longest reuse window (the first of equals), None without windows."""
    windows = report.get("windows") or []
    return max(reversed(windows), key=lambda w: w["window_s"]) if windows else None


def _useful_sentence(report: dict) -> str:
    """The useful working set, and the longest window's peak if the report has windows."""
    longest = longest_window(report)
    peak = ""
    if longest is not None:
        peak = (
            f": reused within {window_name(longest['window_s'])}, it peaks at "
            f"{gib_text(longest['useful_ws_peak_bytes'])}"
        )
    return (
        "The useful working set is what a cache needs if it never stores a block that will "
        f"not come back{peak}."
    )


def _lru_sentence(report: dict) -> str:
    """The usual (LRU) recommendation, said to be larger than the useful working set
    only when its capacity is (the longest window's peak)."""
    usual = report["recommendation"]
    windows = report.get("windows") or []
    peak = max((w["useful_ws_peak_bytes"] for w in windows), default=None)
    capacity = usual.get("capacity_bytes", usual["ram_bytes"])
    larger = peak is not None and capacity > peak
    return (
        f"The LRU recommendation {'is larger because it stores' if larger else 'stores'} "
        f"one-offs too: {gib_text(usual['ram_bytes'])} of RAM for a "
        f"{percent_text(usual['hit_ratio'])} hit ratio (ceiling {percent_text(usual['ceiling'])})."
    )


def _whose(point: dict, admitted: dict, usual: dict) -> str:
    """Whose recommended capacity an equal-size point is."""
    own = point["capacity_slots"] == admitted.get("capacity_slots")
    single = point["capacity_slots"] == usual.get("capacity_slots")
    if own and single:
        return "both recommended capacities"
    return "its recommended capacity" if own else "the usual cache's recommended capacity"


def _pays(point: dict) -> bool:
    """Admission hits more than storing every block, as the page shows the two."""
    higher = point["hit_ratio"] > point["store_every_block_hit_ratio"]
    return higher and percent_text(point["hit_ratio"]) != percent_text(
        point["store_every_block_hit_ratio"]
    )


def _equal_size_sentence(points: list[dict], admitted: dict, usual: dict) -> str:
    """Both curves at each capacity, e.g. "At 696.11 GiB of cache (its recommended
    capacity), it hits 44.9 % where storing every block hits 45.5 %; ..."."""
    parts = []
    for i, point in enumerate(points):
        size, whose = gib_text(point["capacity_bytes"]), _whose(point, admitted, usual)
        ours = percent_text(point["hit_ratio"])
        theirs = percent_text(point["store_every_block_hit_ratio"])
        parts.append(
            f"At {size} of cache ({whose}), it hits {ours} where storing every block hits {theirs}"
            if i == 0
            else f"at {size} ({whose}), {ours} against {theirs}"
        )
    return "; ".join(parts) + "."


def _verdict(points: list[dict], k: int) -> str:
    """Whether admission pays at these sizes, and why not when it does not."""
    sizes = "this size" if len(points) == 1 else "these sizes"
    given_up = f"{use_ordinal(k)} uses" if k == 2 else f"uses up to the {use_ordinal(k)}"
    paying = [p for p in points if _pays(p)]
    if not paying:
        return (
            f"On this traffic admission does not pay at {sizes}: the one-offs it keeps out "
            f"are fewer than the {given_up} it gives up."
        )
    if len(paying) == len(points):
        return (
            f"On this traffic admission pays at {sizes}: the one-offs it keeps out leave room "
            f"for more hits than the {given_up} it gives up."
        )
    where = " and ".join(gib_text(p["capacity_bytes"]) for p in paying)
    not_where = " and ".join(gib_text(p["capacity_bytes"]) for p in points if not _pays(p))
    return (
        f"On this traffic admission pays at {where} (the one-offs it keeps out leave room for "
        f"more hits than the {given_up} it gives up) but not at {not_where}."
    )


def admission_sentences(report: dict) -> list[str] | None:
    """The LRU-vs-useful gap, the admission's own recommendation, and both curves at equal
    sizes with whether admission pays there; None without the admission curve. A report
    without the equal-size points (older ones) compares nothing."""
    admission = report.get("admission")
    if not admission:
        return None
    usual, admitted = report["recommendation"], admission["recommendation"]
    k = admission["store_threshold"]
    own = (
        f"Storing a block only at its {use_ordinal(k)} use (vLLM's store_threshold {k}) "
        f"recommends {gib_text(admitted['ram_bytes'])} of RAM for "
        f"{percent_text(admitted['hit_ratio'])} (ceiling {percent_text(admission['ceiling'])})"
    )
    sentences = [_useful_sentence(report), _lru_sentence(report)]
    points = admission.get("at_equal_size") or []
    if not points:
        return [*sentences, own + "."]
    if "target" in usual:
        own += f"; its target is {percent_text(usual['target'], 0)} of its own ceiling, so"
    else:
        own += ";"
    own += " only equal sizes compare the two."
    verdict = _verdict(points, k)
    return [*sentences, own, _equal_size_sentence(points, admitted, usual), verdict]


__all__ = ["admission_sentences"]
