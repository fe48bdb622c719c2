"""Benchmark evidence: vLLM result files (fixtures built from the documented keys) and the
degradation boundary on hand-made matrices."""

from __future__ import annotations

import math

import pytest

from analysis.evidence import (
    LATENCIES,
    STATS,
    BenchResult,
    Cell,
    EvidenceError,
    Slo,
    degradation_boundary,
    parse_vllm_result,
)


def vllm_result(ttft=500.0, tpot=40.0, itl=35.0, completed=100, failed=0, **extra) -> dict:
    """A `vllm bench serve --save-result` file's shape (values chosen by hand)."""
    base = {"ttft": ttft, "tpot": tpot, "itl": itl, "e2el": ttft + 200 * tpot}
    obj = {
        "date": "20261129-101500", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
        "tokenizer_id": "meta-llama/Llama-3.1-8B", "num_prompts": 200, "request_rate": "inf",
        "max_concurrency": 16, "duration": 61.5, "completed": completed, "failed": failed,
        "total_input_tokens": 400000, "total_output_tokens": 40000,
        "request_throughput": 3.25, "output_throughput": 650.4, "total_token_throughput": 7154.5,
        "input_lens": [2000] * 3, "ttfts": [0.5, 0.6, 0.4], "errors": ["", "", ""],
    }  # fmt: skip
    for stat in STATS:
        for metric in LATENCIES:
            scale = {"mean": 0.7, "median": 0.6, "std": 0.2, "p99": 1.0}[stat]
            obj[f"{stat}_{metric}_ms"] = base[metric] * scale
    return {**obj, **extra}


def test_a_vllm_result_file_is_read():
    r = parse_vllm_result(vllm_result(ttft=812.5, failed=3))
    assert r.p99("ttft") == 812.5 and r.p99("tpot") == 40.0 and r.p99("itl") == 35.0
    assert r.latencies_ms["median_ttft"] == pytest.approx(487.5)
    assert r.latencies_ms["p99_e2el"] == pytest.approx(812.5 + 8000)
    assert len(r.latencies_ms) == 16  # 4 statistics x 4 latencies
    assert (r.completed, r.failed) == (100, 3)
    assert r.throughputs == {"request_throughput": 3.25, "output_throughput": 650.4,
                             "total_token_throughput": 7154.5}  # fmt: skip
    assert r.model == "meta-llama/Llama-3.1-8B" and r.max_concurrency == 16
    assert math.isinf(r.request_rate) and r.duration_s == 61.5


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ([1, 2], "not a JSON object"),
        ({"completed": 3}, "no p99_ttft_ms"),
        (vllm_result(completed=-1), "completed is -1, not a count"),
        (vllm_result(extra_ignored=1, p99_itl_ms="fast"), "p99_itl_ms is 'fast'"),
    ],
)
def test_files_that_are_not_results_say_why(obj, reason):
    with pytest.raises(EvidenceError, match=reason):
        parse_vllm_result(obj)


def _cell(tier, context, concurrency, ttft, itl=30.0, failed=0):
    result = parse_vllm_result(vllm_result(ttft=ttft, itl=itl, failed=failed))
    return Cell(tier, context, concurrency, result)


def test_the_boundary_of_hand_made_matrices():
    slo = Slo(p99_ttft_ms=2000, p99_itl_ms=100)
    cells = [
        # no offload: 4k holds to 16 users, 16k to 4, 32k not even at 1
        _cell("none", 4096, 1, 300), _cell("none", 4096, 4, 700), _cell("none", 4096, 16, 1900),
        _cell("none", 4096, 64, 2600),
        _cell("none", 16384, 1, 900), _cell("none", 16384, 4, 1800),
        _cell("none", 16384, 16, 2100),
        _cell("none", 32768, 1, 2400),
        # RAM offload: better, but 16k at 16 users breaks ITL, and a lucky pass at 64 after
        # a miss does not extend the boundary
        _cell("ram-64", 4096, 16, 800), _cell("ram-64", 4096, 64, 1500),
        _cell("ram-64", 16384, 4, 900), _cell("ram-64", 16384, 16, 1200, itl=140),
        _cell("ram-64", 16384, 64, 1900),
        _cell("ram-64", 32768, 1, 1500), _cell("ram-64", 32768, 4, 2500),
        # failed requests are outside the SLO
        _cell("disk", 4096, 1, 200, failed=2), _cell("disk", 16384, 1, 300),
    ]  # fmt: skip
    none, ram, disk = degradation_boundary(cells, slo)
    assert (none.tier, none.max_concurrency_by_context, none.max_context) == (
        "none", {4096: 16, 16384: 4}, 16384)  # fmt: skip
    assert ram.max_concurrency_by_context == {4096: 64, 16384: 4, 32768: 1}
    assert ram.max_context == 32768
    # the lightest 4k run failed requests: nothing counts, not even the longer context
    assert disk.max_concurrency_by_context == {} and disk.max_context is None


def test_an_slo_names_what_a_run_breaks():
    r = BenchResult(completed=10, failed=1, latencies_ms={"p99_ttft": 2500.0, "p99_itl": 50.0},
                    throughputs={})  # fmt: skip
    assert Slo(p99_ttft_ms=2000, p99_itl_ms=100).misses(r) == ["p99 TTFT", "failed requests"]
    assert Slo(p99_tpot_ms=10).misses(r) == ["p99 TPOT", "failed requests"]  # not measured
    assert Slo(allow_failed=True).misses(r) == []


def test_a_null_p99_or_a_negative_concurrency_is_not_taken():
    with pytest.raises(EvidenceError, match="no p99_ttft_ms"):
        parse_vllm_result(vllm_result(p99_ttft_ms=None))
    assert parse_vllm_result(vllm_result(max_concurrency=-4)).max_concurrency is None
