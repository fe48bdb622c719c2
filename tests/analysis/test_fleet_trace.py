"""Fleets on the shared Mooncake trace (metrics.md section 8): one replica without a GPU
tier or admission is the single cache, figure for figure; a pooled store reaches the
single cache's ceiling; a GPU tier that holds everything leaves host RAM nothing; more
round-robin replicas never raise the ceiling; past the exact limit the curve is sampled
and says so."""

from __future__ import annotations

import itertools

import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.params import FleetParams
from tests.golden.cases import shared_trace


@pytest.fixture(scope="module")
def stream(hash_key):
    path = shared_trace()
    assert path is not None, "the shared Mooncake trace is part of the checkout's neighbours"
    return ingest([path], IngestOptions(hash_key=hash_key))


def _router(report, name: str = "round_robin") -> dict:
    return next(r for r in report.fleet["routers"] if r["router"] == name)


@pytest.mark.parametrize(
    "params",
    [{}, {"warmup": 0.5}, {"lifetime_s": 600.0}, {"tp": 2, "headroom": 0.2, "target": 0.8}],
    ids=["defaults", "warm-up", "lifetime", "sizing"],
)
def test_one_replica_without_gpu_or_admission_is_the_single_cache(stream, params):
    report = analyze(stream, AnalysisParams(fleet=FleetParams(), **params))
    one = _router(report)
    # chained keys make every request's hits a leading run already, so contiguity changes
    # nothing and the fleet curve is the section 4 curve point for point
    single = {p["capacity_slots"]: p["hit_ratio"] for p in report.mrc}
    fleet = {p["capacity_slots"]: p["hit_ratio"] for p in one["mrc"]}
    assert fleet == single
    assert all(p["gpu_hit_ratio"] == 0.0 for p in one["mrc"])
    rec = report.recommendation
    assert one["ceiling"] == rec.ceiling
    assert (one["recommendation"]["ram_bytes"], one["recommendation"]["per_rank_bytes"]) == (
        rec.ram_bytes, rec.per_rank_bytes)  # fmt: skip
    assert one["recommendation"]["hit_ratio"] == rec.hit_ratio


@pytest.mark.parametrize("gpu_gib", [0, 4])
def test_a_pooled_store_reaches_the_single_cache_ceiling(stream, gpu_gib):
    fleet = FleetParams(replicas=4, routers=("pooled",), gpu_cache_bytes=gpu_gib << 30)
    report = analyze(stream, AnalysisParams(fleet=fleet))
    # at C = infinity the pool holds every block ever stored, whichever replica's GPU
    # prefix came first: every reuse of the whole stream hits
    assert _router(report, "pooled")["ceiling"] == report.infinite_hit_ratio


def test_a_gpu_tier_that_holds_every_block_leaves_host_ram_nothing(stream):
    slot = stream.block_tokens * AnalysisParams().profile.kv_bytes_per_token()
    fleet = FleetParams(replicas=2, routers=("round_robin", "prefix"),
                        gpu_cache_bytes=stream.block_refs * slot)  # fmt: skip
    report = analyze(stream, AnalysisParams(fleet=fleet))
    for entry in report.fleet["routers"]:
        # every reuse is within the GPU cache's reach: no host capacity adds a hit
        assert all(p["ram_hit_ratio"] == 0.0 for p in entry["mrc"])
        assert entry["gpu_hit_ratio"] == entry["ceiling"] > 0
        assert entry["recommendation"]["capacity_slots"] == 0


def test_more_round_robin_replicas_never_raise_the_ceiling(stream):
    ceilings = []
    for replicas in range(1, 9):
        fleet = FleetParams(replicas=replicas, routers=("round_robin",))
        ceilings.append(_router(analyze(stream, AnalysisParams(fleet=fleet)))["ceiling"])
    # a reuse is a hit only when its previous use was dealt to the same replica; dealing
    # among more replicas makes that rarer (for N -> kN each new replica's stream is part
    # of an old one's, so its hits are a subset; on a real trace it holds step by step)
    assert all(b <= a for a, b in itertools.pairwise(ceilings))
    assert ceilings[0] == analyze(stream, AnalysisParams()).infinite_hit_ratio
    assert ceilings[-1] < ceilings[0]


def test_past_the_exact_limit_the_fleet_curve_is_sampled_and_says_so(stream):
    exact = analyze(stream, AnalysisParams(fleet=FleetParams(replicas=2)))
    sampled = analyze(stream, AnalysisParams(fleet=FleetParams(replicas=2),
                                             mrc_exact_limit=1000, shards_rate=0.5))  # fmt: skip
    assert exact.fleet["exact"] and not sampled.fleet["exact"]
    assert sampled.fleet["sampling_rate"] == sampled.mrc_sampling_rate == 0.5
    for name in ("round_robin", "prefix", "pooled"):
        # a half sample of the keys estimates each ceiling within a few points
        assert _router(sampled, name)["ceiling"] == pytest.approx(
            _router(exact, name)["ceiling"], abs=0.05)  # fmt: skip


@pytest.mark.parametrize("rate", [0.5, 0.1])
def test_a_sampled_fleet_of_one_is_the_sampled_single_curve(stream, rate):
    # the same sample of keys, the same count adjustment (SHARDS): point for point the
    # same hit tokens, up to the rounding of the scaled counts (one token)
    report = analyze(stream, AnalysisParams(fleet=FleetParams(), shards_rate=rate))
    one = _router(report)
    tolerance = 1 / report.prompt_tokens
    single = {p["capacity_slots"]: p["hit_ratio"] for p in report.mrc}
    for point in one["mrc"]:
        assert point["hit_ratio"] == pytest.approx(single[point["capacity_slots"]], abs=tolerance)
    assert one["ceiling"] == pytest.approx(report.recommendation.ceiling, abs=tolerance)
    # and what its one replica must still prefill is what that curve misses at its size
    load = one["load"]["per_replica"][0]
    assert load["prefill_tokens"] == pytest.approx(
        load["prompt_tokens"] * (1 - one["recommendation"]["hit_ratio"]), abs=1)  # fmt: skip
