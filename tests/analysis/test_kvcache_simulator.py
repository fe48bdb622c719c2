"""kvscope reproduces kvcache-simulator 0.1.3 (metrics.md section 7): on the shared
Mooncake trace with warm-up 0.5, its LRU hit ratios equal the simulator's LRU hit rates
at the simulator's own budgets, and its infinite-cache ratio equals the simulator's
ceiling.

What kvcache-simulator 0.1.3 computes (read from its source): a GiB budget is
floor(GiB x 2^30 / bytes per block) blocks, a block being 512 tokens x the model's KV bytes
per token (Llama 3.1 8B, bf16: 131,072, so 64 MiB, as kvscope's llama-3.1-8b profile);
the first floor(0.5 x requests) requests warm the cache and are not counted; a hit rate
is hit tokens over prompt tokens of the counted requests, a block weighing its tokens (the
last one input_length - 512 x (n - 1)); only the longest cached prefix of a request hits;
LRU evicts the least recently touched leaf of its prefix tree, so a request's tail goes
before its head; the ceiling is the same count with a cache that never evicts.

One case differs, by the simulator's construction: a request with more blocks than the
cache holds and fewer of them cached than that. The simulator stores its head until the
cache is all this request, evicts the block it just stored to make room for the next,
finds that one's parent gone and stops: it keeps C - 1 blocks of the request and nothing
else, where an LRU keeps C. The shared trace's longest request has 374 blocks; at 128
blocks and up the lost block is never the one a later request would hit, below that it
is (test_below_its_longest_requests_it_keeps_one_block_fewer).

The simulator is installed once in a virtualenv of its own under $KVSCOPE_PEER_VENVS
(default ~/.cache/kvscope-peers), never in the project's; its C++ core compiles on its
first run. The test skips only when that virtualenv cannot be made or the package cannot
be installed (no package index)."""

from __future__ import annotations

import json
import math
import subprocess
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from analysis import AnalysisParams, BlockStream, IngestOptions, Report, analyze, ingest
from analysis.mrc import hit_tokens_by_capacity, stack_distances
from analysis.reuse import dense_ids, previous_refs
from tests.golden.cases import shared_trace

from .peers import peer_python

PACKAGE = "kvcache-simulator==0.1.3"
MODEL = "llama-3.1-8b"  # the same model in its catalogue and in kvscope's profiles
WARMUP = 0.5
# its budgets, powers of two from 8 to 512 GiB: 128 to 8,192 blocks of 64 MiB
BUDGETS_GIB = (8, 16, 32, 64, 128, 256, 512)
# below its longest requests, where it keeps one block fewer: 16, 32 and 64 blocks
SMALL_BUDGETS_GIB = (1, 2, 4)
GIB = 1 << 30


def _run_simulator(trace: Path, budgets_gib: list[float], out: Path) -> dict:
    """kvcache-simulator's LRU sweep, in its own virtualenv (tests/analysis/peers.py)."""
    python = peer_python("kvsim-0.1.3", PACKAGE)
    budgets = ",".join(repr(b) for b in budgets_gib)
    command = [str(python), "-m", "kvcache_sim", "run", "--trace", str(trace),
               "--model", MODEL, "--block-size", "512", "--budgets-gib", budgets,
               "--policies", "lru", "--no-progress", "--format", "json",
               "--output", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr}"
    return json.loads(out.read_text())


@dataclass(frozen=True)
class Both:
    """One trace seen by both tools: kvscope's stream and report, the simulator's sweep
    (its LRU result by cache blocks)."""

    stream: BlockStream
    report: Report
    simulator: dict
    lru: dict[int, dict]


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Both:
    trace = shared_trace()
    assert trace is not None, "the shared Mooncake trace is not on this machine"
    stream = ingest([trace], IngestOptions(hash_key=b"kvcache-simulator-test-key"))
    # as `manage.py analyze --warmup 0.5 --headroom 0 --budget-gib 8 ... --budget-gib 512`
    report = analyze(stream, AnalysisParams(warmup=WARMUP, headroom=0, budgets_gib=BUDGETS_GIB))
    # also at every capacity the report's curve lists in that range, as GiB
    listed = [p["capacity_slots"] * report.slot_bytes / GIB for p in _listed(report)]
    budgets = sorted({*BUDGETS_GIB, *SMALL_BUDGETS_GIB, *listed})
    simulator = _run_simulator(trace, budgets, tmp_path_factory.mktemp("kvsim") / "out.json")
    lru = {p["cacheBlocks"]: p["results"]["lru"] for p in simulator["points"]}
    return Both(stream, report, simulator, lru)


def _listed(report: Report) -> list[dict]:
    """The report's curve points from 128 to 8,192 blocks."""
    return [p for p in report.mrc if 128 <= p["capacity_slots"] <= 8192]


def _engine_hit_tokens(stream: BlockStream) -> np.ndarray:
    """Hit tokens by capacity in blocks, as the report's curve counts them: engine-order
    stack distances, references of the warm-up requests left out."""
    ids, distinct = dense_ids(stream.ref_key)
    prev = previous_refs(ids, distinct)
    starts = np.asarray(stream.req_ref_start, dtype=np.int64)
    counted = stream.ref_request() >= math.floor(WARMUP * stream.requests)
    return hit_tokens_by_capacity(stack_distances(prev, starts), stream.ref_tokens, counted)


def _counted_tokens(stream: BlockStream) -> int:
    return int(stream.req_prompt_tokens[math.floor(WARMUP * stream.requests) :].sum())


def test_the_same_blocks_warm_up_and_tokens(both):
    meta = both.simulator["metadata"]
    assert meta["bytesPerBlock"] == both.report.slot_bytes == 512 * 131_072
    assert meta["warmupRequests"] == both.report.warmup_requests == 1996
    assert meta["uniqueBlocks"] == both.report.distinct_blocks
    assert meta["totalMeasuredTokens"] == _counted_tokens(both.stream)
    # every budget asked for is answered (none dropped as never filled)
    for gib in BUDGETS_GIB:
        assert gib * GIB // both.report.slot_bytes in both.lru


def test_hit_ratios_equal_its_lru_hit_rates_at_its_budgets(both):
    """The report's at_budget entries (metrics.md section 9, headroom 0) at its budgets."""
    assert [e["ram_bytes"] for e in both.report.at_budget] == [g * GIB for g in BUDGETS_GIB]
    for gib, entry in zip(BUDGETS_GIB, both.report.at_budget, strict=True):
        blocks = gib * GIB // both.report.slot_bytes
        assert entry["capacity_slots"] == blocks
        theirs = both.lru[blocks]["hitRate"]
        assert entry["hit_ratio"] == pytest.approx(theirs, abs=1e-6), (gib, blocks)


def test_the_reports_curve_equals_its_lru_hit_rates(both):
    listed = _listed(both.report)
    assert len(listed) >= 30  # 128 to 8,192 blocks, log-spaced
    for point in listed:
        theirs = both.lru[point["capacity_slots"]]["hitRate"]
        assert point["hit_ratio"] == pytest.approx(theirs, abs=1e-6), point


def test_infinite_cache_ratio_equals_its_ceiling(both):
    ceiling = both.simulator["hitRateCeiling"]
    assert both.report.infinite_hit_ratio == pytest.approx(ceiling, abs=1e-6)


def test_below_its_longest_requests_it_keeps_one_block_fewer(both):
    """At 16, 32 and 64 blocks the simulator is an engine-order LRU that keeps C - 1 blocks
    of a request longer than the cache (see the module's docstring), and kvscope the LRU."""
    stream = both.stream
    ids, _ = dense_ids(stream.ref_key)
    starts = stream.req_ref_start
    requests = [ids[starts[r] : starts[r + 1]].tolist() for r in range(stream.requests)]
    blocks = [stream.ref_tokens[starts[r] : starts[r + 1]].tolist() for r in range(stream.requests)]
    assert max(len(r) for r in requests) == 374
    cum = _engine_hit_tokens(stream)
    for gib in SMALL_BUDGETS_GIB:
        capacity = gib * GIB // both.report.slot_bytes
        theirs, ours = both.lru[capacity]["hitTokens"], int(cum[capacity])
        assert _lru_hits(requests, blocks, capacity, simulators_long_requests=True) == theirs
        assert _lru_hits(requests, blocks, capacity, simulators_long_requests=False) == ours
        assert ours != theirs


def _lru_hits(requests: list[list[int]], blocks: list[list[int]], capacity: int,
              simulators_long_requests: bool) -> int:  # fmt: skip
    """Brute force: counted hit tokens of an LRU cache of `capacity` blocks, each request
    hitting on its longest cached prefix, then touching its blocks last to first. With
    `simulators_long_requests`, a request longer than the cache that finds fewer than
    `capacity` of its blocks cached then loses the last block it kept."""
    cache: OrderedDict[int, None] = OrderedDict()  # least recently touched first
    warm = math.floor(WARMUP * len(requests))
    hits = 0
    for index, (keys, tokens) in enumerate(zip(requests, blocks, strict=True)):
        cached = next((i for i, key in enumerate(keys) if key not in cache), len(keys))
        if index >= warm:
            hits += sum(tokens[:cached])
        for key in reversed(keys):
            cache.pop(key, None)
            cache[key] = None  # the most recently touched
        while len(cache) > capacity:  # the least recent go: older requests', then our tail
            cache.popitem(last=False)
        if simulators_long_requests and len(keys) > capacity > cached:
            del cache[keys[capacity - 1]]  # the cache held keys[:capacity], nothing else
    return hits
