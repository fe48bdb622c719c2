"""Recommended RAM (metrics.md section 4): smallest capacity reaching target * ceiling,
headroom, per-rank split, block lifetime, and the host budget check."""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, HostBudget, analyze, preset
from analysis.budgets import ServingShape
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
    # PROFILE has one KV head: at tp=2 both ranks keep it whole (metrics.md section 8), so
    # each rank holds 200 * 1.1 = 220 bytes (exactly: not rounded up to 221) and the
    # replica twice that
    assert rec.per_rank_bytes == 200 + 20
    assert rec.ram_bytes == 2 * 220
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
    # one KV head replicated on both ranks: 200 * 1.25 per rank, twice that per replica
    assert rec.per_rank_bytes == 200 + 50
    assert rec.ram_bytes == 2 * 250
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


# --- per tensor-parallel rank (metrics.md section 8) ------------------------------------
# The fixture's recommendation at target 0.9 is 3 slots of B = 10 tokens = 30 token slots;
# headroom 0.1. Per rank per token: layers * max(1, kv_heads // tp) * head_dim * 2 * 2
# (BF16), MLA: layers * latent * 2; the replica holds tp times that.


def _at_tp(stream, model: str, tp: int, **kw):
    return analyze(
        stream, AnalysisParams(windows_s=(10,), profile=preset(model), tp=tp, **kw)
    ).recommendation


def test_gqa_with_enough_heads_splits_them_evenly(stream):
    # Llama-3.1-70B: 80 layers, 8 KV heads, head_dim 128; tp 4 -> 2 heads per rank
    rec = _at_tp(stream, "llama-3.1-70b", 4)
    assert rec.per_rank_kv_bytes_per_token == 80 * 2 * 128 * 2 * 2 == 81_920
    assert rec.replica_kv_bytes_per_token == 4 * 81_920 == 80 * 8 * 128 * 2 * 2
    assert rec.capacity_bytes == 30 * 327_680 == 9_830_400
    assert rec.per_rank_bytes == 30 * 81_920 * 11 // 10 == 2_703_360
    assert rec.ram_bytes == 4 * 2_703_360 == 10_813_440  # = capacity * 1.1: the model's bytes


def test_fewer_kv_heads_than_ranks_replicates_heads(stream):
    # Llama-3.1-8B: 32 layers, 8 KV heads; tp 16 -> max(1, 8 // 16) = 1 head on every rank,
    # so the replica holds 16 heads' worth: twice the model's 131,072 bytes per token
    rec = _at_tp(stream, "llama-3.1-8b", 16)
    assert rec.per_rank_kv_bytes_per_token == 32 * 1 * 128 * 2 * 2 == 16_384
    assert rec.replica_kv_bytes_per_token == 16 * 16_384 == 2 * 131_072
    assert rec.capacity_bytes == 30 * 131_072 == 3_932_160  # the curve's, in model bytes
    assert rec.per_rank_bytes == 30 * 16_384 * 11 // 10 == 540_672
    assert rec.ram_bytes == 16 * 540_672 == 8_650_752
    # the old rule, total / tp, would have given 3,932,160 * 1.1 / 16 = 270,336 per rank
    assert rec.per_rank_bytes != 3_932_160 * 11 // 10 // 16


def test_mla_keeps_the_whole_latent_on_every_rank(stream):
    # DeepSeek-V3: 61 layers, latent 512 + 64; tp 8 -> 70,272 bytes per token on each rank
    rec = _at_tp(stream, "deepseek-v3", 8)
    assert rec.per_rank_kv_bytes_per_token == 61 * 576 * 2 == 70_272
    assert rec.replica_kv_bytes_per_token == 8 * 70_272 == 562_176
    assert rec.capacity_bytes == 30 * 70_272 == 2_108_160
    assert rec.per_rank_bytes == 2_108_160 * 11 // 10 == 2_318_976
    assert rec.ram_bytes == 8 * 2_318_976 == 18_551_808


def test_the_host_budget_and_gpu_budget_use_the_replica_total(stream):
    # the host holds every rank's copy: 18,551,808 bytes for DeepSeek-V3 at tp 8
    host = HostBudget(host_ram_bytes=10_000_000, reserves_bytes={"os": 1_000_000})
    serving = ServingShape(gpu_memory_bytes=80 * 2**30, gpus=8, concurrent_sequences=2,
                           context_tokens=100, params=1e9)  # fmt: skip
    report = analyze(
        stream,
        AnalysisParams(
            windows_s=(10,), profile=preset("deepseek-v3"), tp=8, host=host, serving=serving
        ),
    )
    rec = report.recommendation
    assert rec.host is not None and rec.host.fits is False
    assert rec.host.spare_bytes == 9_000_000 - 18_551_808
    # active KV on the GPUs: 2 sequences * 100 tokens * 562,176 bytes (8 ranks * 70,272)
    assert report.budgets is not None
    assert report.budgets["active_kv_bytes"] == 2 * 100 * 562_176
    assert report.budgets["host_reusable_bytes"] == 18_551_808


def test_working_set_and_curve_stay_in_the_models_bytes(stream):
    # metrics.md sections 4-5: slots are B * kv_bytes_per_token whatever the TP layout
    one = analyze(stream, AnalysisParams(windows_s=(10,), profile=preset("llama-3.1-8b")))
    many = analyze(stream, AnalysisParams(windows_s=(10,), profile=preset("llama-3.1-8b"), tp=16))
    assert many.slot_bytes == one.slot_bytes == 10 * 131_072
    assert many.mrc == one.mrc
    assert many.windows[0].useful_ws_peak_bytes == one.windows[0].useful_ws_peak_bytes


@pytest.mark.parametrize("tp", [3, 5, 12])
def test_a_tp_that_splits_heads_unevenly_is_refused(stream, tp):
    # 8 KV heads: tp must divide 8 or be a multiple of it (vLLM refuses the rest)
    with pytest.raises(ValueError, match="cannot share 8 KV heads"):
        _at_tp(stream, "llama-3.1-8b", tp)
