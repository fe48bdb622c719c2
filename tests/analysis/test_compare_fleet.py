"""Analyses that differ in their fleet (metrics.md section 8), side by side: the fleet's
parameters as rows, the differing ones named, and each router's ceiling and recommended
RAM per replica and per TP rank; an analysis without a fleet compares as before.

The stream, by hand (4-token blocks, every block 4 tokens, 32 prompt tokens in all):
    r0 "ab", r1 "ab", r2 "ac", r3 "ab"
- one cache (= pooled, whose host store sees the whole stream): r1 hits a b, r2 hits a,
  r3 hits a b: 5 blocks = 20 tokens, ceiling 20 / 32 = 0.625.
- 2 x round robin: replica 0 gets r0 r2 (r2 hits a), replica 1 r1 r3 (r3 hits a b):
  12 / 32 = 0.375.
- 2 x prefix: r0 matches nowhere (below the threshold: fewest routed, lowest index: 0);
  r1 matches "ab" on 0 (8 >= 0.5 x 8), r2 "a" on 0 (4 >= 4), r3 "ab" on 0: all on replica
  0, one cache: 0.625.
- 3 x round robin: r0 r3 on replica 0 (r3 hits a b), r1 and r2 alone: 8 / 32 = 0.25.
"""

from __future__ import annotations

import math

import pytest

from analysis import AnalysisParams, analyze
from analysis.compare import NO_FLEET, differing_parameters, headline_rows
from analysis.params import FleetParams
from tests.analysis.fleet_streams import B, stream_of

TOKENS = 32
SLOT = B * 32 * 8 * 128 * 2 * 2  # llama-3.1-8b bf16: 131,072 B per token, 4 tokens a block


@pytest.fixture(scope="module")
def stream():
    return stream_of([(0, "ab", None), (1, "ab", None), (2, "ac", None), (3, "ab", None)])


def _report(stream, fleet: FleetParams | None) -> dict:
    return analyze(stream, AnalysisParams(tp=2, fleet=fleet)).to_dict()


def _rows(reports: list[dict]) -> dict[str, dict]:
    return {row["label"]: row for row in headline_rows(reports)}


def test_routers_side_by_side_with_the_routers_named(stream):
    reports = [_report(stream, FleetParams(replicas=2, routers=(router,)))
               for router in ("round_robin", "prefix", "pooled")]  # fmt: skip
    assert differing_parameters(reports) == ["Routers"]
    rows = _rows(reports)
    assert rows["Routers"]["values"] == ["Round robin", "Prefix-aware", "Pooled store"]
    assert rows["Routers"]["differs"] and rows["Routers"]["deltas"] == [None, None, None]
    assert rows["Replicas"]["values"] == [2, 2, 2] and not rows["Replicas"]["differs"]
    # each router's rows: only the analysis that modelled it has a value
    assert rows["Round robin: fleet ceiling"]["values"] == [12 / TOKENS, None, None]
    assert rows["Prefix-aware: fleet ceiling"]["values"] == [None, 20 / TOKENS, None]
    assert rows["Pooled store: fleet ceiling"]["values"] == [None, None, 20 / TOKENS]
    # round robin at target 0.9: 0.9 x 0.375 needs r3's b (stack distance 2 on replica
    # 1): 2 slots per replica; RAM with 10 % headroom, per TP rank half of it at tp 2
    ram = math.ceil(2 * SLOT * 1.1)
    assert rows["Round robin: recommended RAM per replica"]["values"][0] == ram
    assert rows["Round robin: recommended RAM per TP rank"]["values"][0] == math.ceil(ram / 2)
    assert rows["Round robin: hit ratio at the recommendation"]["values"][0] == 12 / TOKENS


def test_replicas_named_and_the_ceiling_difference(stream):
    two, three = (_report(stream, FleetParams(replicas=n, routers=("round_robin",)))
                  for n in (2, 3))  # fmt: skip
    assert differing_parameters([two, three]) == ["Replicas"]
    row = _rows([two, three])["Round robin: fleet ceiling"]
    assert row["values"] == [12 / TOKENS, 8 / TOKENS]
    # a third replica splits r1 from r3: round robin loses 4 tokens' worth
    assert row["deltas"] == [None, pytest.approx(-4 / TOKENS)]


def test_gpu_cache_and_store_threshold_named(stream):
    plain = _report(stream, FleetParams(replicas=2, routers=("round_robin",)))
    tiered = _report(stream, FleetParams(replicas=2, routers=("round_robin",),
                                         gpu_cache_bytes=SLOT, store_threshold=2))  # fmt: skip
    assert differing_parameters([plain, tiered]) == [
        "GPU prefix cache per replica",
        "Store threshold (stored at reference k)",
    ]
    rows = _rows([plain, tiered])
    assert rows["GPU prefix cache per replica"]["values"] == [0, SLOT]
    assert rows["GPU prefix cache per replica"]["deltas"] == [None, SLOT]
    assert rows["Store threshold (stored at reference k)"]["values"] == [1, 2]
    assert rows["Prefix threshold (share of the prompt)"]["values"] == [0.5, 0.5]


def test_one_cache_beside_a_fleet_shows_none_of_its_rows(stream):
    one, fleet = _report(stream, None), _report(stream, FleetParams(replicas=2))
    assert differing_parameters([one, fleet]) == [NO_FLEET]
    rows = _rows([one, fleet])
    # replicas > 1 with no routers named: every router
    assert rows["Routers"]["values"] == [None, "Round robin, Session, Prefix-aware, Pooled store"]
    assert rows["Replicas"]["values"] == [None, 2] and rows["Replicas"]["deltas"] == [None, None]
    assert not rows["Replicas"]["differs"]  # one cache has no replicas to differ in
    assert rows["Pooled store: fleet ceiling"]["values"] == [None, 20 / TOKENS]
    # the one cache's own rows stand as before: its ceiling is the pooled one
    assert rows["Infinite-cache hit ratio"]["values"] == [20 / TOKENS, 20 / TOKENS]


def test_without_any_fleet_the_rows_are_as_before(stream):
    one, other = _report(stream, None), analyze(stream, AnalysisParams(tp=4)).to_dict()
    keys = [row["key"] for row in headline_rows([one, other])]
    assert not [k for k in keys if k.startswith(("fleet_", "router_"))]
    # no fleet row: only what the analyses were asked differs (tp 2 and 4)
    assert differing_parameters([one, other]) == ["Tensor-parallel ranks"]
    assert [k for k in keys if k.startswith("param_")] == ["param_tp"]
