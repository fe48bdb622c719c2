"""kvscope's prediction of a benchmark run (#18): the replayed trace on the run's
configuration, checked by hand on a four-request trace of 4-token blocks."""

from __future__ import annotations

import orjson
import pytest

from analysis import AnalysisParams
from analysis.benchmarks.prediction import RunConfig, differs, predict_run

KEY = b"test-secret-0123456789"
B = 4
# Llama-3.1-8B: 131,072 bytes per token, so one 4-token block is 512 KiB: 1/2048 GiB
BLOCK_GIB = B * 131_072 / 2**30
# four requests of two full blocks each: A A C A (A = ids 1,2; C = ids 3,4), 8 tokens each
TRACE = [orjson.dumps({"timestamp": 1000 * i, "input_length": 8, "output_length": 4,
                       "hash_ids": ids}) + b"\n"
         for i, ids in enumerate([[1, 2], [1, 2], [3, 4], [1, 2]])]  # fmt: skip


def predict(**config) -> dict:
    prediction = predict_run(TRACE, B, RunConfig(**config), AnalysisParams(), KEY)
    return prediction.to_dict()


def test_a_cold_run_on_one_replica_hits_as_an_lru_of_its_ram_would():
    # 2 blocks: r1 hits A (8 tokens); C evicts A, so r3 misses: 8 / 32
    two = predict(ram_gib=2 * BLOCK_GIB)
    assert (two["hit_ratio"], two["ram_hit_ratio"], two["gpu_hit_ratio"]) == (0.25, 0.25, 0.0)
    assert two["ram_slots"] == 2 and two["requests"] == 4
    # 4 blocks hold both: r1 and r3 hit: 16 / 32
    assert predict(ram_gib=4 * BLOCK_GIB)["hit_ratio"] == 0.5
    # less than a block: nothing is kept
    assert predict(ram_gib=BLOCK_GIB / 2)["hit_ratio"] == 0.0


def test_the_gpu_cache_answers_first_and_ram_holds_what_it_lost():
    # GPU of 2 blocks: r1's A is a GPU hit; at r3, A's distance is 3 (C's two blocks came
    # between): a GPU miss, and a RAM hit once RAM holds 3 blocks or more
    small = predict(gpu_cache_gib=2 * BLOCK_GIB, ram_gib=2 * BLOCK_GIB)
    assert (small["gpu_hit_ratio"], small["ram_hit_ratio"]) == (0.25, 0.0)
    large = predict(gpu_cache_gib=2 * BLOCK_GIB, ram_gib=4 * BLOCK_GIB)
    assert (large["gpu_hit_ratio"], large["ram_hit_ratio"], large["hit_ratio"]) == (
        0.25, 0.25, 0.5)  # fmt: skip


def test_a_run_without_ram_is_the_gpu_cache_alone():
    # offload off: GPU of 2 blocks; r1 hits A there, r3 does not (distance 3): 8 / 32
    gpu = predict(gpu_cache_gib=2 * BLOCK_GIB)
    assert (gpu["hit_ratio"], gpu["gpu_hit_ratio"], gpu["ram_hit_ratio"]) == (0.25, 0.25, 0.0)
    assert gpu["ram_slots"] == 0
    assert predict()["hit_ratio"] == 0.0  # no cache at all


def test_compared_with_a_measurement_by_tier_and_an_unstated_gpu_cache_is_said():
    from analysis.benchmarks.prediction import compare

    measured = {
        "of_what": "prompt tokens",
        "label": "vLLM",
        "hit_ratio": 0.5,
        "tiers": [{"tier": "gpu", "ratio": 0.3}, {"tier": "connector", "ratio": 0.2}],
    }
    versus = compare(predict(ram_gib=4 * BLOCK_GIB), measured)  # predicted 0.5, all RAM
    assert versus["difference"] == 0.0 and not versus["differs"]
    assert [(t["tier"], t["predicted"], t["measured"], t["differs"]) for t in versus["tiers"]] == [
        ("gpu", 0.0, 0.3, True), ("ram", 0.5, 0.2, True)]  # fmt: skip
    assert versus["gpu_unstated"] is True
    lookups = {**measured, "of_what": "tokens looked up in LMCache", "label": "LMCache server"}
    assert compare(predict(ram_gib=1.0), lookups)["comparable"] is False


def test_replicas_behind_round_robin_split_the_trace():
    # r0, r2 to replica 0 (A, C: no reuse); r1, r3 to replica 1 (A, A: r3 hits): 8 / 32
    fleet = predict(ram_gib=4 * BLOCK_GIB, replicas=2, router="round_robin")
    assert fleet["hit_ratio"] == 0.25 and fleet["config"]["replicas"] == 2


def test_a_warm_run_is_the_second_pass_after_the_first_filled_the_cache():
    # after a first pass, 2 blocks hold A: r0 and r1 hit, C evicts A, r3 misses: 16 / 32
    assert predict(ram_gib=2 * BLOCK_GIB, warm=True)["hit_ratio"] == 0.5
    # 4 blocks hold A and C: every request of the second pass hits
    warm = predict(ram_gib=4 * BLOCK_GIB, warm=True)
    assert warm["hit_ratio"] == 1.0 and warm["requests"] == 4


def test_prompt_tails_are_never_hits_but_count_in_the_denominator():
    # 10 tokens: 2 full blocks and a 2-token tail (its own id, never reused as a prefix)
    trace = [orjson.dumps({"timestamp": 1000 * i, "input_length": 10, "output_length": 1,
                           "hash_ids": [1, 2, 100 + i]}) for i in range(2)]  # fmt: skip
    prediction = predict_run(trace, B, RunConfig(ram_gib=4 * BLOCK_GIB), AnalysisParams(), KEY)
    assert prediction.hit_ratio == 8 / 20


def test_more_than_three_points_apart_is_a_difference():
    assert not differs(0.50, 0.53) and not differs(0.53, 0.50)
    assert differs(0.50, 0.5301) and differs(0.4699, 0.50)


def test_a_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="router"):
        predict(ram_gib=1.0, router="random")
    with pytest.raises(ValueError, match="no request"):
        predict_run([], B, RunConfig(ram_gib=1.0), AnalysisParams(), KEY)
