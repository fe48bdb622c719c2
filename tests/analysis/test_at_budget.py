"""What a budget buys (metrics.md section 9) by hand on a four-request trace: the curve at
budget / (1 + headroom), for each budget asked for and for the host's available RAM."""

from __future__ import annotations

import math
import random
from fractions import Fraction

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.metrics.at_budget import budget_slots
from analysis.params import HostBudget
from analysis.profiles import KVProfile

from .conftest import HASH_KEY

GIB = 1 << 30


def test_budgets_buy_the_curve_at_their_capacity(write_jsonl, trace, tiny_profile):
    # 16-token blocks of 4 bytes a token: 64 bytes a block. By hand, LRU in engine order:
    # at 2 blocks request 3 finds block 1 (2 was evicted by 3): 16 of 96 tokens; at 3
    # blocks everything stays: request 3 hits 1 and 2, request 4 hits 3: 48 of 96.
    rows = [trace(0, [1, 2], 16), trace(1, [3], 16), trace(2, [1, 2], 16), trace(3, [3], 16)]
    stream = ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, block_tokens=16))
    # with headroom 0.5 a block takes 96 bytes of RAM: 287 bytes hold 2, 288 hold 3
    params = AnalysisParams(windows_s=(60,), profile=tiny_profile, headroom=0.5,
                            budgets_gib=(287 / GIB, 288 / GIB, 50 / GIB),
                            host=HostBudget(400, {"os": 112}))  # fmt: skip
    report = analyze(stream, params)
    got = [(e["source"], e["ram_bytes"], e["capacity_slots"], e["capacity_bytes"],
            e["hit_ratio"]) for e in report.at_budget]  # fmt: skip
    assert got == [
        ("budget", 287, 2, 128, 16 / 96),
        ("budget", 288, 3, 192, 48 / 96),
        ("budget", 50, 0, 0, 0.0),  # less than one block: nothing cached
        ("host", 288, 3, 192, 48 / 96),  # 400 bytes less 112 reserved
    ]
    assert all(e["cross_session_hit_ratio"] == e["hit_ratio"] for e in report.at_budget)
    assert report.params["budgets_gib"] == [287 / GIB, 288 / GIB, 50 / GIB]


def test_tensor_parallel_ranks_hold_a_replicas_budget_together(write_jsonl, trace):
    """Per replica, across its ranks: with a model whose heads split over TP, a budget
    holds as many blocks at tp 2 as at tp 1; with replicated heads (kv_heads < tp) each
    rank keeps every head, so it holds half."""
    one_head = KVProfile("one-head", layers=1, kv_heads=1, head_dim=1, dtype="fp16")
    rows = [trace(0, [1, 2], 16), trace(1, [1, 2], 16)]
    stream = ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, block_tokens=16))
    slots = {}
    for tp in (1, 2):
        params = AnalysisParams(windows_s=(60,), profile=one_head, headroom=0, tp=tp,
                                budgets_gib=(256 / GIB,))  # fmt: skip
        slots[tp] = analyze(stream, params).at_budget[0]["capacity_slots"]
    # 4 bytes a token, 64 a block: 256 bytes hold 4 blocks; at tp 2 the one head is on
    # both ranks, 128 bytes a block across the replica: 2 blocks
    assert slots == {1: 4, 2: 2}


def test_a_budget_holds_exactly_the_slots_whose_recommended_ram_fits():
    """budget_slots inverts the recommendation's rule (per-rank bytes, ceiling, * tp): the
    RAM recommended for its answer fits the budget, the RAM for one slot more does not."""
    rng = random.Random(5)
    for _ in range(5000):
        block, rank = rng.choice((16, 256, 512)), rng.choice((4, 4096, 131072))
        tp = rng.choice((1, 2, 4, 8))
        headroom = rng.choice((0.0, 0.1, 0.25))
        ram = rng.randrange(1, 1 << 40)
        slots = budget_slots(ram, block, rank, tp, headroom)
        # analysis/metrics/recommend.py's rule, written out: per rank rounded up, * tp
        per_slot = block * rank * (1 + Fraction(str(headroom)))
        fits, one_more = (math.ceil(s * per_slot) * tp for s in (slots, slots + 1))
        assert fits <= ram < one_more, (block, rank, tp, ram)
