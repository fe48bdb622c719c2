"""Benchmark evidence: vLLM result files (fixtures built from the documented keys) and the
degradation boundary on hand-made matrices."""

from __future__ import annotations

import json
import math

import pytest

from analysis.benchmarks.comparison import Run, Schedule, side_by_side
from analysis.benchmarks.files import (
    parse_aiperf_summary,
    parse_result,
    parse_vllm_result,
)
from analysis.benchmarks.results import (
    BenchResult,
    ResultFileError,
    result_from_json,
    result_to_json,
)
from analysis.benchmarks.slo import Cell, Slo, degradation_boundary
from tests.analysis.factories import aiperf_summary, vllm_result


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
    with pytest.raises(ResultFileError, match=reason):
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
    with pytest.raises(ResultFileError, match="no p99_ttft_ms"):
        parse_vllm_result(vllm_result(p99_ttft_ms=None))
    assert parse_vllm_result(vllm_result(max_concurrency=-4)).max_concurrency is None


def test_an_aiperf_summary_is_read_with_vllm_names():
    r = parse_result(aiperf_summary(errors=2.0))
    assert r.tool == "aiperf" and (r.completed, r.failed) == (20, 2)
    assert r.p99("ttft") == 812.5 and r.p99("tpot") == 40.0 and r.p99("itl") == 35.0
    assert r.latencies_ms["mean_ttft"] == pytest.approx(812.5 * 0.7)  # avg is the mean
    assert r.latencies_ms["median_ttft"] == pytest.approx(812.5 * 0.6)  # p50 is the median
    assert r.latencies_ms["p90_e2el"] == pytest.approx(8100.0)
    assert "min_ttft" not in r.latencies_ms and "count_ttft" not in r.latencies_ms
    assert r.throughputs == {"request_throughput": 1.45, "output_throughput": 290.0}
    assert r.duration_s == 13.8 and r.model == "" and r.max_concurrency is None
    assert [s for s, _ in r.stats("ttft")] == ["mean", "median", "p90", "p99"]
    assert parse_result(aiperf_summary()).failed == 0  # no error block: nothing failed


def test_aiperf_units_are_authoritative():
    r = parse_aiperf_summary(aiperf_summary(ttft_p99=0.8125, unit="s"))
    assert r.p99("ttft") == pytest.approx(812.5)
    with pytest.raises(ResultFileError, match="'tokens', not a time unit"):
        parse_aiperf_summary(aiperf_summary(unit="tokens"))


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (aiperf_summary(was_cancelled=True), "was cancelled"),
        ({"schema_version": "1.5", "request_count": {"avg": 3}}, "no time_to_first_token"),
        (aiperf_summary(request_count={"unit": "requests", "avg": 2.5}), "2.5, not a count"),
        (aiperf_summary(time_to_first_token={"unit": "ms", "avg": 3.0}), "has no p99"),
    ],
)
def test_aiperf_files_kvscope_cannot_use_say_why(obj, reason):
    with pytest.raises(ResultFileError, match=reason):
        parse_result(obj)


def test_every_vllm_percentile_is_kept_and_ram_growth_read_from_metadata():
    ram = {"host_ram_start_gib": "101.5", "host_ram_end_gib": "140.25"}  # --metadata strings
    r = parse_result(vllm_result(p90_ttft_ms=700.0, **{"p99.9_ttft_ms": 990.0}, **ram))
    assert r.tool == "vllm"
    assert [s for s, _ in r.stats("ttft")] == ["mean", "median", "p90", "p99", "p99.9"]
    assert r.ram_growth_gib == pytest.approx(38.75)
    assert parse_result(vllm_result(host_ram_growth_gib=2)).ram_growth_gib == 2.0
    assert parse_result(vllm_result(host_ram_start_gib=3)).ram_growth_gib is None  # no end
    with pytest.raises(ResultFileError, match="host_ram_end_gib is 'lots'"):
        parse_result(vllm_result(host_ram_start_gib=1, host_ram_end_gib="lots"))


def _run(label, offload, warm, ttft, completed=100, sent=100):
    result = vllm_result(ttft=ttft, completed=completed, failed=sent - completed)
    return Run(label, offload, warm, parse_vllm_result(result), name=f"{label}.json")


def test_runs_of_one_schedule_side_by_side_against_the_cold_run_without_offload():
    a, b = Schedule(8192, 16), Schedule(8192, 16, request_rate=4.0)
    runs = [
        (a, _run("CPU RAM 64 GiB", True, True, 500, completed=100)),
        (a, _run("No offload", False, False, 2000, completed=90)),
        (a, _run("CPU RAM 64 GiB", True, False, 1500, completed=96)),
        (a, _run("No offload", False, True, 1800, completed=92)),
        (a, _run("RAM, short run", True, False, 1000, completed=20, sent=20)),
        (b, _run("No offload", False, False, 900)),  # alone: nothing to compare
        (Schedule(4096, 4), _run("CPU RAM 64 GiB", True, False, 300)),
        (Schedule(4096, 4), _run("CPU RAM 64 GiB", True, True, 200)),
    ]
    small, big = side_by_side(runs)
    assert big.schedule == a and big.baseline is big.rows[0].run and not big.has_ram_growth
    assert [(r.run.label, r.run.warm) for r in big.rows] == [
        ("No offload", False), ("No offload", True), ("CPU RAM 64 GiB", False),
        ("RAM, short run", False), ("CPU RAM 64 GiB", True)]  # fmt: skip
    base, warm, on, short, on_warm = big.rows
    # 20 requests sent against 100: its TTFT compares, its completed count does not
    assert short.p99_ttft_change == pytest.approx(-0.5) and short.completed_change is None
    assert base.is_baseline and not any(r.is_baseline for r in big.rows[1:])
    assert base.p99_ttft_change is None and base.completed_change is None
    assert warm.p99_ttft_change == pytest.approx(-0.10)  # 1800 vs 2000
    assert on.p99_ttft_change == pytest.approx(-0.25) and on.completed_change == 6
    assert on_warm.p99_ttft_change == pytest.approx(-0.75) and on_warm.completed_change == 10
    assert on_warm.ttft["median"] == pytest.approx(300.0)  # 0.6 x 500
    assert big.ttft_stats == ["mean", "median", "p99"]
    # both runs with offload: no baseline, so no changes
    assert small.schedule == Schedule(4096, 4) and small.baseline is None
    assert all(r.p99_ttft_change is None for r in small.rows)


def test_stored_numbers_read_back_as_they_were_parsed():
    for r in (parse_result(vllm_result(host_ram_growth_gib=1.5, p90_itl_ms=31.0)),
              parse_result(aiperf_summary(errors=1.0))):  # fmt: skip
        stored = json.loads(json.dumps(result_to_json(r), allow_nan=False))
        assert result_from_json(stored) == r
    assert result_to_json(parse_result(vllm_result()))["request_rate"] == "inf"
    assert math.isinf(result_from_json(result_to_json(parse_result(vllm_result()))).request_rate)


def test_values_out_of_range_after_a_unit_change_are_refused_and_nulls_skipped():
    with pytest.raises(ResultFileError, match=r"time_to_first_token\.\w+ is out of range"):
        parse_aiperf_summary(aiperf_summary(ttft_p99=1e306, unit="s"))
    with pytest.raises(ResultFileError, match="out of range"):
        parse_result(vllm_result(host_ram_start_gib=-1e308, host_ram_end_gib=1e308))
    block = {**aiperf_summary()["time_to_first_token"], "p5": None}  # unset: null
    r = parse_aiperf_summary(aiperf_summary(time_to_first_token=block))
    assert "p5_ttft" not in r.latencies_ms and r.p99("ttft") == 812.5


def test_a_vllm_p50_is_not_shown_twice_beside_the_median():
    r = parse_result(vllm_result(p50_ttft_ms=300.0))
    assert [s for s, _ in r.stats("ttft")] == ["mean", "median", "p99"]
    assert r.latencies_ms["p50_ttft"] == 300.0  # kept, only not listed again
