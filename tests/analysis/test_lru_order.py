"""The curve evicts as engines do (metrics.md section 7, "LRU order, as engines evict"):
each request looks the cache up as it stood before the request, then touches its blocks
last to first, so a prefix's tail leaves before its head. Checked against a hand example,
a brute-force LRU cache run request by request, and the shared Mooncake trace."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from analysis import IngestOptions, ingest
from analysis.mrc import hit_tokens_by_capacity, request_starts, stack_distances
from analysis.reuse import dense_ids, previous_refs
from tests.analysis.lru_oracle import engine_order_lru_hits
from tests.golden.cases import shared_trace


def engine_distances(requests: list[list[int]]) -> list[int]:
    keys = np.asarray([k for r in requests for k in r], dtype=np.uint64)
    ids, distinct = dense_ids(keys)
    prev = previous_refs(ids, distinct)
    starts = np.cumsum([0, *(len(r) for r in requests)])
    return stack_distances(prev, starts).tolist()


def engine_lru_hits(requests: list[list[int]], capacity: int) -> int:
    """The oracle's blocks hit, every block one token, all requests at one time."""
    return engine_order_lru_hits([(0, [(k, 1) for k in r]) for r in requests], capacity)


def test_a_shared_head_outlives_the_tails_that_follow_it():
    # three requests: system prompt s (1) then a (2), s then b (3), s then a
    requests = [[1, 2], [1, 3], [1, 2]]
    # engines touch a then s: before the second request the stack is [s, a], so s is at
    # depth 1; before the third it is [s, b, a]: s at 1, a at 3
    assert engine_distances(requests) == [0, 0, 1, 0, 1, 3]
    # the classic order touches s then a, leaving a on top: s falls to depth 2
    keys = np.asarray([1, 2, 1, 3, 1, 2], dtype=np.uint64)
    ids, distinct = dense_ids(keys)
    assert stack_distances(previous_refs(ids, distinct)).tolist() == [0, 0, 2, 0, 2, 3]
    # so one slot holds the shared prompt for both later requests: 2 hits, not 0
    assert engine_lru_hits(requests, 1) == 2


def test_request_starts_from_each_references_request():
    ref_request = np.array([0, 0, 2, 2, 2, 5])
    assert request_starts(ref_request).tolist() == [0, 2, 5, 6]
    assert request_starts(np.array([], dtype=np.int64)).tolist() == [0]


# chained keys as a prefix cache sees them: a request is a path from the root of a small
# prefix tree (a shared head, then branches), so a block's parent always precedes it
paths = st.lists(st.integers(0, 2), min_size=1, max_size=6)


def _chained(path: list[int]) -> list[int]:
    keys, node = [], 0
    for branch in path:
        node = node * 3 + branch + 1
        keys.append(node)
    return keys


@settings(max_examples=200, deadline=None)
@given(st.lists(paths, min_size=1, max_size=25))
def test_the_curve_equals_an_engine_lru_at_every_capacity(request_paths):
    requests = [_chained(p) for p in request_paths]
    dist = np.asarray(engine_distances(requests))
    cum = hit_tokens_by_capacity(dist, np.ones(dist.size, dtype=np.int64))
    distinct = len({k for r in requests for k in r})
    for capacity in range(distinct + 1):
        assert int(cum[min(capacity, cum.size - 1)]) == engine_lru_hits(requests, capacity)


def test_the_shared_trace_at_small_capacities_as_an_engine_lru():
    trace = shared_trace()
    assert trace is not None, "the shared Mooncake trace is not on this machine"
    stream = ingest([trace], IngestOptions(hash_key=b"lru-order-test-key"))
    ids, distinct = dense_ids(stream.ref_key)
    prev = previous_refs(ids, distinct)
    starts = np.asarray(stream.req_ref_start, dtype=np.int64)
    tokens = stream.ref_tokens.astype(np.int64)
    cum = hit_tokens_by_capacity(stack_distances(prev, starts), tokens)
    requests = [ids[starts[r] : starts[r + 1]].tolist() for r in range(stream.requests)]
    blocks = [tokens[starts[r] : starts[r + 1]].tolist() for r in range(stream.requests)]
    for capacity in (1, 4, 64):
        timed = [(0, list(zip(k, t, strict=True))) for k, t in zip(requests, blocks, strict=True)]
        hits = engine_order_lru_hits(timed, capacity)
        assert int(cum[min(capacity, cum.size - 1)]) == hits
    # one slot keeps each conversation's shared first block: hits the classic order misses
    assert cum[1] > 0
