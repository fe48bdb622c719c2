"""The cost view (issue #16) by hand on test_at_budget's four-request trace: 96 prompt
tokens over 3 s, 16-token blocks of 4 bytes a token (64 bytes a block, 96 with headroom
0.5). By hand the curve hits 0 tokens at one slot, 16 at two and 48 (of 96) at three."""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.cost import GIB, HOURS_PER_MONTH, Prices, cost_at, cost_view

from .conftest import HASH_KEY

# 96 tokens in 3 s: 115,200 an hour, 84,096,000 in a 730-hour month
TOKENS_PER_MONTH = 96 / 3 * 3600 * 730


@pytest.fixture
def report(write_jsonl, trace, tiny_profile) -> dict:
    # a second apart (trace times are in ms)
    rows = [trace(t * 1000, ids, 16) for t, ids in enumerate(([1, 2], [3], [1, 2], [3]))]
    stream = ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, block_tokens=16))
    params = AnalysisParams(windows_s=(60,), profile=tiny_profile, headroom=0.5)
    return analyze(stream, params).to_dict()


def _by_slots(view: dict) -> dict[int, dict]:
    return {row["capacity_slots"]: row for row in view["points"]}


def test_each_size_saves_its_hits_prefill_and_costs_its_ram(report):
    view = cost_view(report, Prices(ram_per_gib_month=2, gpu_per_hour=3, prefill_tokens_per_s=1000))
    assert view["prompt_tokens_per_month"] == pytest.approx(TOKENS_PER_MONTH)
    assert view["hours_per_month"] == HOURS_PER_MONTH == 730
    three = _by_slots(view)[3]
    # half of 84,096,000 tokens not prefilled at 1,000 tokens/s: 11.68 GPU-hours, 35.04 at 3
    assert three["gpu_hours_saved_per_month"] == pytest.approx(11.68)
    assert three["saved_per_month"] == pytest.approx(35.04)
    # 3 blocks x 64 bytes x 1.5 = 288 bytes of RAM at 2 per GiB-month
    assert three["ram_bytes"] == 288
    assert three["ram_cost_per_month"] == pytest.approx(288 / GIB * 2)
    assert three["net_per_month"] == pytest.approx(35.04 - 288 / GIB * 2)
    # from 2 slots (16 tokens: 11.68 saved) to 3: 23.36 more for 96 more bytes
    assert three["saving_per_extra_gib"] == pytest.approx(23.36 / (96 / GIB))
    assert view["best"]["capacity_slots"] == 3 and view["pays"]


def test_dear_ram_moves_the_best_size_down_and_may_pay_nowhere(report):
    # at 3e8 a GiB-month: one slot (96 bytes) nets -26.82, two 11.68 - 53.64, three
    # 35.04 - 80.47: the least loss is one slot, and no size pays
    view = cost_view(report, Prices(ram_per_gib_month=3e8, gpu_per_hour=3,
                                    prefill_tokens_per_s=1000))  # fmt: skip
    rows = _by_slots(view)
    assert rows[1]["net_per_month"] == pytest.approx(-96 / GIB * 3e8)
    assert rows[2]["net_per_month"] == pytest.approx(35.04 / 3 - 192 / GIB * 3e8)
    assert view["best"]["capacity_slots"] == 1 and not view["pays"]


def test_a_size_off_the_curve_costs_the_same_way(report):
    prices = Prices(ram_per_gib_month=2, gpu_per_hour=3, prefill_tokens_per_s=1000)
    row = cost_at(report, prices, capacity_slots=10, hit_ratio=0.25)
    assert row["ram_bytes"] == 10 * 96
    assert row["saved_per_month"] == pytest.approx(35.04 / 2)


def test_no_price_no_cost():
    with pytest.raises(ValueError, match="both prices"):
        Prices(ram_per_gib_month=0, gpu_per_hour=3).validate()
    with pytest.raises(ValueError, match="prefill throughput"):
        Prices(ram_per_gib_month=1, gpu_per_hour=3, prefill_tokens_per_s=0).validate()


def test_a_fleet_router_counts_only_what_host_ram_adds_over_its_gpu_cache():
    # a hand-made report: 3,600 prompt tokens an hour (2,628,000 a month), 4 replicas of 1
    # rank at 1 byte a token, 10-token blocks, no headroom; the router's GPU prefix caches
    # hit 0.2 whatever the host RAM, 0.5 with 100 blocks per replica of it
    report = {
        "span_s": 3600, "prompt_tokens": 3600, "block_tokens": 10,
        "recommendation": {"per_rank_kv_bytes_per_token": 1, "headroom": 0.0, "tp": 1},
        "fleet": {"replicas": 4, "routers": [{"router": "prefix", "gpu_hit_ratio": 0.2, "mrc": [
            {"capacity_slots": 1, "hit_ratio": 0.2}, {"capacity_slots": 100, "hit_ratio": 0.5}]}]},
    }  # fmt: skip
    prices = Prices(ram_per_gib_month=GIB, gpu_per_hour=36, prefill_tokens_per_s=1)
    view = cost_view(report, prices, router="prefix")
    one, hundred = view["points"]
    # one block: RAM adds nothing (0.2 - 0.2), and costs 4 replicas x 10 bytes at 1 a byte
    assert one["ram_hit_ratio"] == 0 and one["saved_per_month"] == 0
    assert one["ram_bytes"] == 40 and one["ram_cost_per_month"] == pytest.approx(40)
    # 100 blocks: RAM adds 0.3 of 2,628,000 tokens, 219 GPU-hours at 1 token/s, 7,884 at 36;
    # 4 x 1,000 bytes of RAM cost 4,000
    assert hundred["gpu_hours_saved_per_month"] == pytest.approx(0.3 * 2_628_000 / 3600)
    assert hundred["saved_per_month"] == pytest.approx(7884)
    assert hundred["net_per_month"] == pytest.approx(7884 - 4000)
    assert view["best"] is hundred and view["replicas"] == 4
