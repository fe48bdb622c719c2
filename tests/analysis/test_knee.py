"""The knee (metrics.md section 9) by hand: the smallest of the curve's points from which
on doubling the cache gains less than knee_gain of hit ratio."""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, analyze

from .fleet_streams import stream_of

# a shared first block a, then b or c in turn: the single curve (engine order) hits 12 of
# 32 tokens at 1 and 2 slots, and all 20 reusable ones from 3 slots on
ALTERNATING = [(0, "ab", None), (1, "ac", None), (2, "ab", None), (3, "ac", None)]


def _knee(knee_gain: float) -> dict | None:
    return analyze(stream_of(ALTERNATING), AnalysisParams(knee_gain=knee_gain)).knee


def test_past_the_knee_doubling_buys_less_than_the_gain():
    # from 3 slots on every doubling gains 0; at 2 slots doubling to 4 gains 20/32 - 12/32
    # = 0.25: the knee is 3 slots at 20/32. (One slot's doubling gains 0 too, but the rise
    # comes after it: "past it, more RAM buys little" would be wrong there.)
    knee = _knee(0.01)
    assert knee is not None
    assert (knee["capacity_slots"], knee["hit_ratio"]) == (3, 20 / 32)
    slot_bytes = 4 * AnalysisParams().profile.kv_bytes_per_token()
    assert knee["capacity_bytes"] == 3 * slot_bytes
    # its host RAM as the recommendation's: the slots' bytes with the 10 % headroom,
    # rounded up to a whole byte (1,730,150.4)
    assert knee["ram_bytes"] == -(-3 * slot_bytes * 11 // 10) == 1_730_151


def test_a_larger_gain_moves_the_knee_down():
    # a gain of 0.3: the 0.25 doubling at 2 slots no longer counts, nor 1 slot's 0
    knee = _knee(0.3)
    assert knee is not None and (knee["capacity_slots"], knee["hit_ratio"]) == (1, 12 / 32)


def test_a_gain_that_is_not_a_share_is_refused():
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="knee gain"):
            _knee(bad)
