"""What the logged engine reports it reused, beside kvscope's prediction (#18): measured
shares by hand from known cached-token counts; a log whose cached counts are kvscope's own
predicted hits differs by nothing, and one shifted by a known count by that shift."""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, analyze
from analysis.params import FleetParams
from bench.generate import chat_requests

GIB = 1 << 30
BLOCK = 64


def generated(n: int = 80) -> list[dict]:
    return list(chat_requests(n, seed=21, documents=6, doc_words=(200, 500)))


def with_usage(rows: list[dict], prompt: list[int], cached: list[int]) -> list[dict]:
    return [{**row, "usage": {"prompt_tokens": p, "completion_tokens": 1,
                              "prompt_tokens_details": {"cached_tokens": c}}}
            for row, p, c in zip(rows, prompt, cached, strict=True)]  # fmt: skip


def section(ingest_rows, rows, **params) -> dict:
    stream = ingest_rows(rows, block_tokens=BLOCK)
    report = analyze(stream, AnalysisParams(**params)).to_dict()
    return report["logged_cache"], stream


def test_measured_shares_by_hand_overall_per_route_and_no_prediction_unstated(ingest_rows):
    rows = generated(4)
    for row, model in zip(rows, ["a", "a", "b", "b"], strict=True):
        row["model"] = model
    rows = with_usage(rows, [1000, 1000, 2000, 3000], [0, 600, 1500, 0])
    rows.append({**generated(5)[4], "model": "a"})  # no usage: not counted
    logged, _ = section(ingest_rows, rows)
    assert logged["requests"] == 4 and logged["requests_share"] == 4 / 5
    assert logged["measured_hit_ratio"] == 2100 / 7000
    assert (logged["cached_tokens"], logged["reported_prompt_tokens"]) == (2100, 7000)
    assert [(r["route"], r["requests"], r["measured_hit_ratio"]) for r in logged["by_route"]] == [
        ("a", 2, 600 / 2000), ("b", 2, 1500 / 5000)]  # fmt: skip
    assert logged["predicted"] is False and logged["unpredicted_reason"] == "no_configuration"
    assert logged["predicted_hit_ratio"] is None and logged["difference"] is None


def test_a_log_of_kvscopes_own_predicted_hits_differs_by_nothing_and_a_shift_by_it(ingest_rows):
    rows = generated()
    params = {"logged_ram_gib": 0.25, "fleet": FleetParams(replicas=2, gpu_cache_bytes=GIB // 16)}
    first, stream = section(ingest_rows, with_usage(rows, [1] * 80, [0] * 80), **params)
    predicted = first["sample"]["predicted_tokens"]  # every request (fewer than the sample)
    assert first["sample"]["request"] == list(range(80)) and sum(predicted) > 0
    prompt = stream.req_prompt_tokens.tolist()
    # the engine "measured" exactly kvscope's prediction, on kvscope's own token counts
    same, _ = section(ingest_rows, with_usage(rows, prompt, predicted), **params)
    assert same["difference"] == 0.0
    assert same["measured_hit_ratio"] == same["predicted_hit_ratio"] == sum(predicted) / sum(prompt)
    assert all(route["difference"] == 0.0 for route in same["by_route"])
    assert same["series"]["measured"] == same["series"]["predicted"]
    # 40 more cached tokens on every request that can take them: the shift, by hand
    shifted_cached = [min(c + 40, p) for c, p in zip(predicted, prompt, strict=True)]
    shift = sum(shifted_cached) - sum(predicted)
    shifted, _ = section(ingest_rows, with_usage(rows, prompt, shifted_cached), **params)
    assert shifted["difference"] == pytest.approx(shift / sum(prompt), abs=1e-12)
    assert shifted["sample"]["measured_tokens"] == shifted_cached


def test_the_per_request_prediction_sums_to_the_fleet_curve_at_that_ram(ingest_rows):
    rows = generated()
    fleet = FleetParams(replicas=2, routers=("session",), gpu_cache_bytes=GIB // 32)
    logged, _ = section(ingest_rows, with_usage(rows, [1] * 80, [0] * 80), logged_ram_gib=0.125,
                        fleet=fleet)  # fmt: skip
    stream = ingest_rows(rows, block_tokens=BLOCK)
    # the curve's own figure: the router's hit ratio at that RAM with no headroom
    report = analyze(stream, AnalysisParams(fleet=fleet, budgets_gib=(0.125,), headroom=0.0))
    (at,) = report.fleet["routers"][0]["at_budget"]
    assert logged["predicted_hit_ratio"] == pytest.approx(at["hit_ratio"], abs=1e-9)
    assert logged["configuration"]["router"] == "session"
    assert logged["configuration"]["ram_slots"] == at["capacity_slots"]


def test_warm_up_requests_are_left_out_and_a_log_without_usage_has_no_section(ingest_rows):
    rows = with_usage(generated(10), [100] * 10, [10 * i for i in range(10)])
    logged, _ = section(ingest_rows, rows, warmup=0.5)
    assert logged["requests"] == 5
    assert logged["measured_hit_ratio"] == sum(10 * i for i in range(5, 10)) / 500
    stream = ingest_rows(generated(10), block_tokens=BLOCK)
    assert "logged_cache" not in analyze(stream, AnalysisParams()).to_dict()
