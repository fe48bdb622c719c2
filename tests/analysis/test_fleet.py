"""Fleets (metrics.md section 8) by hand on small streams: every router's partition (ties
and the prefix threshold included), GPU prefix hits then contiguous RAM hits, admission at
the k-th reference, the pooled store, and the load each replica carries. Every block is 4
tokens (fleet_streams.B); letters are block keys."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import AnalysisParams, KVProfile, Report, analyze
from analysis.metrics.fleet.routing import route, session_route
from analysis.params import FleetParams
from analysis.reuse import dense_ids

from .fleet_streams import B, stream_of

# a shared first block a, then b or c in turn, one request a second
ALTERNATING = [(0, "ab", None), (1, "ac", None), (2, "ab", None), (3, "ac", None)]
TOKENS = 4 * 2 * B  # 32 prompt tokens


def _router(report, name: str) -> dict:
    return next(r for r in report.fleet["routers"] if r["router"] == name)


def _at(entry: dict, slots: int, key: str = "hit_ratio") -> float:
    return next(p[key] for p in entry["mrc"] if p["capacity_slots"] == slots)


def _fleet(requests, **fleet) -> Report:
    return analyze(stream_of(requests), AnalysisParams(fleet=FleetParams(**fleet)))


def test_round_robin_splits_the_alternating_stream_into_two_repeating_replicas():
    report = _fleet(ALTERNATING, replicas=2, routers=("round_robin",))
    rr = _router(report, "round_robin")
    # replica 0 serves [ab, ab], replica 1 [ac, ac]: each second request finds its two
    # blocks at depths 1 (a, touched last) and 2 per replica: 8 tokens at C = 1, 16 at 2
    assert [_at(rr, c) for c in (1, 2, 3)] == [8 / TOKENS, 16 / TOKENS, 16 / TOKENS]
    assert rr["ceiling"] == 16 / TOKENS
    # one cache of the whole stream reaches 20 of 32 (a three times, then b and c once)
    assert report.fleet["single_cache_ceiling"] == report.infinite_hit_ratio == 20 / TOKENS
    # 90 % of 16 needs 2 slots per replica, which hit every reusable token: each replica
    # still prefills 16 - 8
    assert rr["recommendation"]["capacity_slots"] == 2
    each = {"requests": 2, "prompt_tokens": 16, "prefill_tokens": 8}
    assert rr["load"]["per_replica"] == [each, each]
    assert rr["load"]["requests_max_over_mean"] == rr["load"]["prefill_tokens_max_over_mean"] == 1.0


def test_the_prefix_router_keeps_a_shared_prefix_on_one_replica():
    report = _fleet(ALTERNATING, replicas=2, routers=("prefix",))
    prefix = _router(report, "prefix")
    # ab: no match anywhere (ties: fewest requests, lowest index) -> 0; ac matches a (4
    # tokens), which is not below 0.5 x 8: it follows the match to 0, and so does the rest
    idle = {"requests": 0, "prompt_tokens": 0, "prefill_tokens": 0}
    assert prefix["load"]["per_replica"][1] == idle
    # so replica 0 sees the single cache's stream: its curve is the single curve
    assert [_at(prefix, c) for c in (1, 2, 3)] == [12 / TOKENS, 12 / TOKENS, 20 / TOKENS]
    assert prefix["ceiling"] == 20 / TOKENS
    # the price: one replica does everything (4 requests against a mean of 2), and at the
    # recommended 3 slots still prefills 32 - 20 = 12 tokens against a mean of 6
    load = prefix["load"]
    assert load["requests_max_over_mean"] == 2.0 and load["prefill_tokens_max_over_mean"] == 2.0
    assert load["per_replica"][0]["prefill_tokens"] == 12


def test_below_the_prefix_threshold_the_least_loaded_replica_serves():
    report = _fleet(ALTERNATING, replicas=2, routers=("prefix",), prefix_threshold=0.6)
    prefix = _router(report, "prefix")
    # ac's 4 matched tokens are below 0.6 x 8: it goes to the least-loaded replica 1; then
    # ab matches 8 on 0 (4 on 1) and ac 8 on 1 (4 on 0): the round robin partition
    assert [r["requests"] for r in prefix["load"]["per_replica"]] == [2, 2]
    assert [_at(prefix, c) for c in (1, 2)] == [8 / TOKENS, 16 / TOKENS]


def _prefix_replicas(requests, replicas: int, threshold: float) -> list[int]:
    stream = stream_of(requests)
    ids, distinct = dense_ids(stream.ref_key)
    return route("prefix", replicas, req_session=stream.req_session,
                 starts=stream.req_ref_start, ids=ids, distinct=distinct,
                 tokens=stream.ref_tokens, prompt_tokens=stream.req_prompt_tokens,
                 prefix_threshold=threshold).tolist()  # fmt: skip


def test_prefix_ties_go_to_the_replica_with_fewer_requests_then_the_lowest_index():
    requests = [
        (0, "ab", None),  # nothing matches: 0 (lowest index of the least loaded)
        (1, "ac", None),  # a matches on 0: 4 tokens, not below 0.5 x 8 -> 0
        (2, "ayzw", None),  # a matches on 0: 4 below 0.5 x 16 -> the least loaded, 1
        (3, "aq", None),  # a matches 4 on both; 1 has fewer requests (1 < 2) -> 1
        (4, "ar", None),  # a matches 4 on both, both have 2 requests -> the lower index 0
    ]
    assert _prefix_replicas(requests, 2, 0.5) == [0, 0, 1, 1, 0]
    # threshold 0: a match never needs to cover anything; threshold 1: all of the prompt
    assert _prefix_replicas(requests, 2, 0.0) == [0, 0, 0, 0, 0]
    assert _prefix_replicas(requests, 2, 1.0) == [0, 1, 0, 1, 0]


def test_the_session_router_deals_sessions_and_the_rest_round_robin_apart():
    sessions = np.asarray([11, 22, 0, 11, 0, 33, 22], dtype=np.uint64)
    # sessions 11, 22, 33 are the 0th, 1st, 2nd seen: replicas 0, 1, 0; the two requests
    # without one have their own counter: 0, then 1
    assert session_route(sessions, 2).tolist() == [0, 1, 0, 0, 1, 0, 1]
    report = _fleet([(0, "ab", "s"), (1, "ac", "t"), (2, "ab", "s"), (3, "ac", "t")],
                    replicas=2, routers=("session",))  # fmt: skip
    assert [r["requests"] for r in _router(report, "session")["load"]["per_replica"]] == [2, 2]


def test_a_router_that_deals_as_an_earlier_one_says_so():
    # no request names a session: the session router deals them round robin, request by
    # request the same partition, so the same figures, and the report names the router
    report = _fleet(ALTERNATING, replicas=2, routers=("round_robin", "session", "prefix"))
    rr, session = _router(report, "round_robin"), _router(report, "session")
    assert session["same_partition_as"] == "round_robin"
    assert (
        rr["same_partition_as"] is None and _router(report, "prefix")["same_partition_as"] is None
    )
    assert {k: v for k, v in session.items() if k not in ("router", "same_partition_as")} == {
        k: v for k, v in rr.items() if k not in ("router", "same_partition_as")}  # fmt: skip


def test_a_pooled_store_is_one_cache_of_every_replicas_ram():
    report = _fleet(ALTERNATING, replicas=2, routers=("pooled",))
    pooled = _router(report, "pooled")
    # 2 replicas x C slots is one store of 2C over the whole stream: the single curve at
    # 2 (12 tokens) for C = 1 and at 4 (20) for C = 2
    assert [_at(pooled, c) for c in (1, 2)] == [12 / TOKENS, 20 / TOKENS]
    assert pooled["ceiling"] == report.infinite_hit_ratio
    # dealt round robin, replica 0 gets ab, ab (hits 8 of 16 at 2 slots) and replica 1 ac,
    # ac whose first ac already finds a (hits 4 + 8 of 16)
    assert [r["prefill_tokens"] for r in pooled["load"]["per_replica"]] == [8, 4]


def test_the_gpu_prefix_hits_first_and_host_ram_serves_the_rest():
    slot = stream_of(ALTERNATING).block_tokens * AnalysisParams().profile.kv_bytes_per_token()
    report = _fleet([(0, "ab", None), (1, "ab", None)], gpu_cache_bytes=slot)
    one = _router(report, "round_robin")
    # a one-slot GPU cache holds a (depth 1): a GPU hit; b (depth 2) is looked up in host
    # RAM, where it hits from 2 slots on
    assert one["gpu_hit_ratio"] == 4 / 16
    assert [(_at(one, c, "gpu_hit_ratio"), _at(one, c, "ram_hit_ratio")) for c in (1, 2)] == [
        (4 / 16, 0.0), (4 / 16, 4 / 16)]  # fmt: skip
    # a GPU cache that holds everything leaves host RAM nothing to serve
    big = _router(_fleet([(0, "ab", None), (1, "ab", None)], gpu_cache_bytes=64 * slot),
                  "round_robin")  # fmt: skip
    assert all(p["ram_hit_ratio"] == 0.0 for p in big["mrc"])
    assert big["gpu_hit_ratio"] == big["ceiling"] == 8 / 16


def test_host_hits_are_contiguous_a_miss_ends_the_run():
    # not prefix-closed on purpose (chained keys never are like this): before the third
    # request the stack is a, d, c, b, so alone c would hit at 3 slots while b misses
    requests = [(0, "abc", None), (1, "adc", None), (2, "abc", None)]
    report = _fleet(requests)
    one = _router(report, "round_robin")
    tokens = 9 * B
    # contiguously: the second request hits a only (d misses, so c cannot); the third a at
    # 1 slot, and b and c only once b does, at 4
    assert [_at(one, c) for c in (1, 3, 4)] == [2 * B / tokens, 2 * B / tokens, 4 * B / tokens]
    # block by block (the single curve) c would count at 3 slots in both requests
    single = {p["capacity_slots"]: p["hit_ratio"] for p in report.mrc}
    assert [single[c] for c in (1, 3, 4)] == [2 * B / tokens, 4 * B / tokens, 5 * B / tokens]


def test_admission_at_the_second_reference_stores_no_one_off():
    report = _fleet(ALTERNATING, store_threshold=2)
    one = _router(report, "round_robin")
    # admitted: a from its 2nd reference, b and c at their 2nd; possible RAM hits are a's
    # 3rd and 4th only (each block's first admitted reference cannot hit): 8 of 32 tokens,
    # from one slot on
    assert [_at(one, c) for c in (1, 2, 3)] == [8 / TOKENS] * 3
    # and the single cache's admission section, on every report, says the same
    assert report.admission["store_threshold"] == 2
    assert report.admission["ceiling"] == 8 / TOKENS
    assert report.admission["recommendation"]["capacity_slots"] == 1
    # equal sizes: at its own 1 slot and at the single cache's 3 (90 % of 20 needs 20),
    # storing every block hits 12 and 20 of 32: here admission buys nothing at either
    assert [(e["capacity_slots"], e["hit_ratio"], e["store_every_block_hit_ratio"])
            for e in report.admission["at_equal_size"]] == [
        (1, 8 / TOKENS, 12 / TOKENS), (3, 8 / TOKENS, 20 / TOKENS)]  # fmt: skip


def test_a_fleet_is_checked():
    with pytest.raises(ValueError, match="replicas"):
        _fleet(ALTERNATING, replicas=0)
    with pytest.raises(ValueError, match="routers"):
        _fleet(ALTERNATING, routers=("random",))
    with pytest.raises(ValueError, match="store threshold"):
        _fleet(ALTERNATING, store_threshold=0)
    with pytest.raises(ValueError, match="prefix threshold"):
        _fleet(ALTERNATING, prefix_threshold=1.5)


def test_every_router_by_default_past_one_replica():
    assert [r["router"] for r in _fleet(ALTERNATING, replicas=3).fleet["routers"]] == [
        "round_robin", "session", "prefix", "pooled"]  # fmt: skip
    assert [r["router"] for r in _fleet(ALTERNATING).fleet["routers"]] == ["round_robin"]


def test_a_key_repeated_within_a_request_is_neither_looked_up_nor_stored_again():
    # "aab": the second a is the same block again; engines neither look it up nor store
    # it (the single curve's rule), so it breaks no run and counts towards no admission
    report = _fleet([(0, "ab", None), (1, "aab", None)])
    one = _router(report, "round_robin")
    # a (depth 1) and b (depth 2) of the second request hit: 8 of 20 tokens, as the single
    # curve's ceiling says
    assert one["ceiling"] == report.recommendation.ceiling == 8 / 20
    assert [_at(one, c) for c in (1, 2)] == [4 / 20, 8 / 20]
    # admission at the 2nd use: "aa" then "a" is a's 2nd use, its first admitted one, so
    # no hit (the copy inside "aa" was never a use of its own)
    admitted = _fleet([(0, "aa", None), (1, "a", None)], store_threshold=2)
    assert _router(admitted, "round_robin")["ceiling"] == admitted.admission["ceiling"] == 0.0


def test_a_gpu_cache_holds_blocks_at_the_replicas_bytes_across_its_tp_ranks():
    # 2 KV heads on 4 TP ranks: each rank keeps max(1, 2 // 4) = 1 head, so a replica
    # holds 4 heads' worth per token, twice the model's 2 (section 8, per TP rank)
    profile = KVProfile("two-heads", layers=1, kv_heads=2, head_dim=1, dtype="fp16")
    model_block = B * profile.kv_bytes_per_token()  # 4 tokens x 8 bytes
    stream = stream_of([(0, "ab", None), (1, "ab", None)])
    for gpu_bytes, slots in ((model_block, 0), (2 * model_block, 1), (4 * model_block, 2)):
        fleet = FleetParams(gpu_cache_bytes=gpu_bytes)
        report = analyze(stream, AnalysisParams(profile=profile, tp=4, fleet=fleet))
        assert report.fleet["gpu_cache_slots"] == slots
        # a one-slot GPU cache keeps a (depth 1) of the second request: 4 of 16 tokens
        assert _router(report, "round_robin")["gpu_hit_ratio"] == [0, 4, 8][slots] / 16
