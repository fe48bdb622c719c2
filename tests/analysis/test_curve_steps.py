"""The stored curve steps and what a size buys read off them ("what does N GiB buy?",
metrics.md section 9): by hand on small curves, within one step of the exact curve on
random ones, and equal to at_budget's exact answer on a real report."""

from __future__ import annotations

import random

import numpy as np
import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.metrics.at_budget import buys
from analysis.metrics.curve_steps import curve_steps, hit_at_slots
from analysis.params import FleetParams, HostBudget

from .conftest import HASH_KEY
from .fleet_streams import stream_of
from .test_at_budget import GIB


def test_steps_keep_the_first_capacity_of_each_step_by_hand():
    # 100 tokens in all; hit tokens by capacity 0..5: 0, 0, 30, 30, 55, 60. Steps of 0.25
    # (25 tokens): 25 is first reached at 2 slots, 50 at 4; 75 is never: ceiling 0.6
    cum = np.array([0, 0, 30, 30, 55, 60])
    steps = curve_steps(cum, 100, step=0.25)
    assert steps == {"step": 0.25, "capacity_slots": [0, 2, 4, 5],
                     "hit_ratio": [0.0, 0.3, 0.55, 0.6]}  # fmt: skip
    # read back: the last stored capacity at or below the size asked
    got = [hit_at_slots(steps, slots) for slots in (0, 1, 2, 3, 4, 5, 99)]
    assert got == [0.0, 0.0, 0.3, 0.3, 0.55, 0.6, 0.6]


def test_an_empty_curve_reads_zero():
    steps = curve_steps(np.array([0]), 0)
    assert hit_at_slots(steps, 10) == 0.0


def test_a_reading_errs_low_by_less_than_one_step_on_random_curves():
    rng = random.Random(16)
    for _ in range(300):
        size, total = rng.randrange(1, 400), rng.randrange(1, 10_000)
        gains = np.array([rng.choice((0, 0, 0, rng.randrange(0, 200))) for _ in range(size)])
        cum = np.minimum(np.concatenate([[0], np.cumsum(gains)]), total)
        step = rng.choice((0.0005, 0.01, 0.1))
        steps = curve_steps(cum, total, step)
        for slots in range(cum.size + 3):
            exact = cum[min(slots, cum.size - 1)] / total
            read = hit_at_slots(steps, slots)
            assert exact - step < read <= exact, (slots, exact, read)


def test_what_a_size_buys_is_at_budgets_answer(write_jsonl, trace, tiny_profile):
    # test_at_budget's trace: 64-byte blocks, 96 bytes each with headroom 0.5; 287 bytes
    # hold 2 blocks (16 of 96 tokens hit), 288 hold 3 (48 of 96)
    rows = [trace(0, [1, 2], 16), trace(1, [3], 16), trace(2, [1, 2], 16), trace(3, [3], 16)]
    stream = ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, block_tokens=16))
    params = AnalysisParams(windows_s=(60,), profile=tiny_profile, headroom=0.5,
                            budgets_gib=(287 / GIB, 288 / GIB),
                            host=HostBudget(400, {"os": 112}))  # fmt: skip
    report = analyze(stream, params).to_dict()
    for ram, slots, hit, fits in ((287, 2, 16 / 96, True), (288, 3, 48 / 96, True),
                                  (289, 3, 48 / 96, False)):  # fmt: skip
        got = buys(report, ram)
        assert (got["capacity_slots"], got["capacity_bytes"]) == (slots, slots * 64)
        assert got["hit_ratio"] == pytest.approx(hit)
        assert got["host_fits"] is fits  # 288 bytes available after the reserve
        assert got["ceiling"] == report["recommendation"]["ceiling"]
    exact = [entry["hit_ratio"] for entry in report["at_budget"][:2]]
    assert [buys(report, ram)["hit_ratio"] for ram in (287, 288)] == exact


def test_a_router_reads_its_own_curve():
    # two replicas dealt round robin: requests 0, 2 on one, 1, 3 on the other. "ab" twice on
    # replica 0 and "ac" twice on replica 1: each replica's second request hits both of
    # its blocks from 2 slots per replica on: 2 x 8 of 32 tokens (4-token blocks). At one
    # slot the engine keeps a request's first block longest (it frees them in reverse),
    # so each second request still hits its "a": 2 x 4 of 32

    stream = stream_of([(0, "ab", None), (1, "ac", None), (2, "ab", None), (3, "ac", None)])
    slot = 4 * AnalysisParams().profile.kv_bytes_per_token()
    params = AnalysisParams(fleet=FleetParams(replicas=2, routers=("round_robin",)), headroom=0,
                            budgets_gib=(2 * slot / GIB, slot / GIB))  # fmt: skip
    report = analyze(stream, params).to_dict()
    assert report["slot_bytes"] == slot
    # the router's own at_budget, exact: per replica, no GPU cache here
    entries = report["fleet"]["routers"][0]["at_budget"]
    assert [(e["capacity_slots"], e["hit_ratio"], e["gpu_hit_ratio"]) for e in entries] == [
        (2, 16 / 32, 0.0), (1, 8 / 32, 0.0)]  # fmt: skip
    assert buys(report, 2 * slot, "round_robin")["hit_ratio"] == 16 / 32
    assert buys(report, 1 * slot, "round_robin")["hit_ratio"] == 8 / 32
    assert buys(report, slot - 1, "round_robin")["hit_ratio"] == 0.0
    with pytest.raises(ValueError, match="no 'prefix' router"):
        buys(report, slot, "prefix")
