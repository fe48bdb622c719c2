"""The curve kept small enough to store and read at any size (metrics.md section 9, "what
does N GiB buy?"): the capacities at which the hit ratio first reaches each multiple of
`STEP`. A reading between two of them errs by less than one step, whatever the size asked,
so a page can answer from the stored report without a re-analysis."""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from analysis.metrics.curve import hit_share

# half of the pages' precision (a tenth of a point): a stored reading rounds as the exact one
STEP = 0.0005


def curve_steps(cum: np.ndarray, total_tokens: int, step: float = STEP) -> dict:
    """{"step", "capacity_slots", "hit_ratio"} of a cumulative curve (hit tokens by
    capacity in slots, cum[0] = 0): the first capacity reaching k * step of the hit ratio
    for every k up to the ceiling, and the curve's last capacity. Read with hit_at_slots."""
    if cum.size == 0 or not total_tokens:
        return {"step": step, "capacity_slots": [0], "hit_ratio": [0.0]}
    ceiling = int(cum[-1])
    levels = int(ceiling // (step * total_tokens))
    thresholds = np.arange(1, levels + 1, dtype=np.float64) * (step * total_tokens)
    # nondecreasing: the first capacity whose hit tokens reach each threshold
    found = np.searchsorted(cum, thresholds, side="left")
    slots = np.unique(np.concatenate([[0], found, [cum.size - 1]]).astype(np.int64))
    return {
        "step": step,
        "capacity_slots": [int(s) for s in slots],
        "hit_ratio": [hit_share(int(cum[s]), total_tokens) for s in slots],
    }


def hit_at_slots(steps: dict, slots: int) -> float:
    """The hit ratio at `slots` read off stored steps: the last stored capacity at or below
    it. Between two stored capacities the curve rises by less than one step (the next one
    is where it first gains a step), so this errs low by less than `steps["step"]`."""
    at = bisect_right(steps["capacity_slots"], slots) - 1
    return float(steps["hit_ratio"][max(at, 0)])
