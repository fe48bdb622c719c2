"""Recommended RAM (metrics.md section 4): smallest capacity reaching target * ceiling,
headroom, per-rank split, block lifetime, and the host budget check."""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, HostBudget, analyze
from analysis.profiles import KVProfile

B = 10
# 5 layers * 1 KV head * head_dim 1 * 2 (K, V) * 1 byte (FP8) = 10 bytes per token
PROFILE = KVProfile("tiny", layers=5, kv_heads=1, head_dim=1, dtype="fp16")
SLOT = B * 10  # 100 bytes
TOTAL = 8 * B  # 8 one-block requests of 10 tokens


@pytest.fixture
def stream(ingest_rows, trace):
    # t (s): key     stack distance   reuse time
    #   0: A
    #   1: B
    #   2: C
    #   3: A         3 ({B, C})       3
    #   4: B         3 ({C, A})       3
    #   5: A         2 ({B})          2
    # 100: C         3 ({A, B})       98
    # 101: C         1                1
    # LRU hits (tokens): C=1: 10 (t=101); C=2: 20 (+ t=5); C>=3: 50 (+ t=3, 4, 100)
    # with lifetime 10 s the reuse at t=100 (98 s) never hits: C=1: 10, C=2: 20, C=3: 40
    keys = [(0, 1), (1, 2), (2, 3), (3, 1), (4, 2), (5, 1), (100, 3), (101, 3)]
    return ingest_rows([trace(t * 1000, [k], B) for t, k in keys], block_tokens=B)


def params(**kw):
    return AnalysisParams(windows_s=(10,), profile=PROFILE, kv_dtype="fp8", **kw)


def test_recommendation_without_lifetime(stream):
    report = analyze(stream, params(target=0.9, headroom=0.1, tp=1))
    assert report.kv_bytes_per_token == 10 and report.slot_bytes == SLOT
    rec = report.recommendation
    assert rec.ceiling == 50 / TOTAL == report.infinite_hit_ratio
    # 0.9 * 50 = 45 tokens: C=2 gives 20, C=3 gives 50 -> 3 slots
    assert rec.capacity_bytes == 3 * SLOT
    assert rec.hit_ratio == 50 / TOTAL
    assert rec.ram_bytes == 300 + 30  # capacity * (1 + 0.1)
    assert rec.per_rank_bytes == 330
    assert rec.host is None


def test_target_reached_exactly_headroom_and_tp(stream):
    report = analyze(stream, params(target=0.4, headroom=0.1, tp=2))
    rec = report.recommendation
    # 0.4 * 50 = 20 tokens, reached exactly by C=2 (20): the smallest such capacity
    assert rec.capacity_bytes == 2 * SLOT
    assert rec.hit_ratio == 20 / TOTAL
    assert rec.ram_bytes == 200 + 20  # 200 * 1.1, exactly: not rounded up to 221
    assert rec.per_rank_bytes == 220 // 2
    # the curve includes the recommended capacity, with the same hit ratio
    point = next(p for p in report.mrc if p["capacity_bytes"] == rec.capacity_bytes)
    assert point["hit_ratio"] == 20 / TOTAL


def test_lifetime_sets_the_ceiling(stream):
    with_lifetime = analyze(stream, params(target=0.5, headroom=0.25, tp=2, lifetime_s=10))
    without = analyze(stream, params(target=0.5, headroom=0.25, tp=2))
    rec = with_lifetime.recommendation
    # ceiling = hit ratio within the lifetime: the reuses of 3, 3, 2 and 1 s
    assert rec.ceiling == 40 / TOTAL == with_lifetime.windows[0].hit_ratio
    assert rec.lifetime_s == 10
    # 0.5 * 40 = 20 tokens -> C=2
    assert rec.capacity_bytes == 2 * SLOT
    assert rec.hit_ratio == 20 / TOTAL
    assert rec.ram_bytes == 200 + 50  # 200 * 1.25
    assert rec.per_rank_bytes == 250 // 2
    # the curve itself: with the lifetime C=3 gives 40 tokens, not 50
    curve = {p["capacity_slots"]: p["hit_ratio"] for p in with_lifetime.mrc}
    assert (curve[1], curve[2], curve[3]) == (10 / TOTAL, 20 / TOTAL, 40 / TOTAL)
    # without a lifetime: 0.5 * 50 = 25 tokens -> C=3 (C=2 only has 20)
    assert without.recommendation.capacity_bytes == 3 * SLOT
    assert without.recommendation.ceiling == 50 / TOTAL


def test_lifetime_and_high_target(stream):
    rec = analyze(stream, params(target=0.9, headroom=0.0, lifetime_s=10)).recommendation
    # 0.9 * 40 = 36 tokens -> C=3 (40)
    assert rec.capacity_bytes == 3 * SLOT
    assert rec.ram_bytes == 300  # no headroom
    assert rec.hit_ratio == 40 / TOTAL


@pytest.mark.parametrize(
    ("reserves", "fits", "spare"),
    [
        # 1000 - 500 - 280 = 220 bytes available == the 220 needed
        ({"os": 500, "serving_process": 280}, True, 0),
        # one byte more reserved: 219 < 220
        ({"os": 500, "serving_process": 281}, False, -1),
        (
            {"os": 100, "page_cache": 100, "tokenizers": 50, "request_buffers": 50},
            True,
            1000 - 300 - 220,
        ),
    ],
)
def test_host_budget(stream, reserves, fits, spare):
    host = HostBudget(host_ram_bytes=1000, reserves_bytes=reserves)
    rec = analyze(stream, params(target=0.4, headroom=0.1, host=host)).recommendation
    assert rec.ram_bytes == 220  # 2 slots * 100 bytes * 1.1, as above
    assert rec.host is not None
    assert rec.host.available_bytes == 1000 - sum(reserves.values())
    assert rec.host.fits is fits
    assert rec.host.spare_bytes == spare


def test_nothing_reusable_recommends_nothing(ingest_rows, trace):
    stream = ingest_rows([trace(0, [1], B), trace(1000, [2], B)], block_tokens=B)
    report = analyze(stream, params())
    rec = report.recommendation
    assert report.infinite_hit_ratio == 0.0
    assert rec.ceiling == 0.0
    assert (rec.capacity_bytes, rec.ram_bytes, rec.per_rank_bytes) == (0, 0, 0)


def test_prompts_shorter_than_a_block(ingest_rows, enc):
    # chat prompts with no full block: nothing is cacheable, every token is a tail
    row = {"messages": [{"role": "user", "content": "Hi"}]}
    stream = ingest_rows([{**row, "timestamp": 0}, {**row, "timestamp": 1}], block_tokens=256)
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    n = len(enc("user\n")) + len(enc("Hi")) + len(enc("\n"))
    assert report.prompt_tokens == 2 * n
    assert report.block_refs == 0
    assert report.windows[0].hit_ratio == 0.0
    assert report.windows[0].useful_ws_peak_bytes == 0
    assert report.windows[0].ttl_occupancy_peak_bytes == 0
    assert report.recommendation.ram_bytes == 0
