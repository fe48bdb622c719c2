"""The LRU miss-ratio curve (metrics.md section 4): Mattson stack distances against a hand
example and, by property, against a brute-force LRU cache at every capacity."""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import orjson
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.mrc import hit_tokens_by_capacity, stack_distances
from analysis.reuse import dense_ids, hits_within, previous_refs, reuse_times
from tests.analysis.lru_oracle import engine_order_lru_hits

HASH_KEY = b"test-secret-0123456789"  # as in conftest (not imported: module name clashes)


def engine_hits_by_capacity(keys, tokens, times=None, lifetime=None) -> list[int]:
    """Token hits of the engine's one-pass curve at capacities 0..len(set(keys))."""
    ids, distinct = dense_ids(np.asarray(keys, dtype=np.uint64))
    prev = previous_refs(ids, distinct)
    dist = stack_distances(prev)
    eligible = None
    if lifetime is not None:
        reuse = reuse_times(np.asarray(times, dtype=np.int64), prev)
        eligible = hits_within(reuse, lifetime)
    cum = hit_tokens_by_capacity(dist, np.asarray(tokens, dtype=np.int64), eligible)
    return [int(cum[min(c, cum.size - 1)]) for c in range(distinct + 1)]


def lru_hits(keys, tokens, capacity, times=None, lifetime=None) -> int:
    """Brute force: an OrderedDict LRU cache of `capacity` slots whose entries, when a
    lifetime is given, also expire `lifetime` after their last use."""
    cache: OrderedDict = OrderedDict()  # key -> time of last use, least recent first
    hits = 0
    for i, key in enumerate(keys):
        t = times[i] if times is not None else 0
        if lifetime is not None:
            for old in [k for k, last in cache.items() if t - last > lifetime]:
                del cache[old]
        if key in cache:
            hits += tokens[i]
            cache.move_to_end(key)
        elif capacity:
            cache[key] = t
            if len(cache) > capacity:
                cache.popitem(last=False)
        if key in cache:
            cache[key] = t
    return hits


def test_stack_distances_hand_example():
    # a b c a b b d a
    #       a: since the last a, {b, c} -> 2 + 1 = 3
    #         b: {c, a} -> 3
    #           b: {} -> 1
    #               a: {b, d} -> 3   (b counted once although referenced twice)
    keys = np.array([1, 2, 3, 1, 2, 2, 4, 1], dtype=np.uint64)
    ids, distinct = dense_ids(keys)
    prev = previous_refs(ids, distinct)
    assert prev.tolist() == [-1, -1, -1, 0, 1, 4, -1, 3]
    assert stack_distances(prev).tolist() == [0, 0, 0, 3, 3, 1, 0, 3]  # 0 = infinite


def test_hand_curve_token_weighted():
    keys = [1, 2, 3, 1, 2, 2, 4, 1]
    tokens = [5, 6, 7, 5, 6, 6, 8, 9]
    # distances [inf, inf, inf, 3, 3, 1, inf, 3] with tokens [.., 5, 6, 6, .., 9]
    # C=1: the distance-1 ref (6) -> 6; C=2: still 6; C=3: + 5 + 6 + 9 = 26; C=4: 26
    assert engine_hits_by_capacity(keys, tokens) == [0, 6, 6, 26, 26]


keys_strategy = st.lists(st.integers(0, 7), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(keys=keys_strategy, data=st.data())
def test_curve_matches_brute_force_lru(keys, data):
    tokens = data.draw(st.lists(st.integers(1, 9), min_size=len(keys), max_size=len(keys)))
    engine = engine_hits_by_capacity(keys, tokens)
    for capacity in range(1, len(set(keys)) + 1):
        assert engine[capacity] == lru_hits(keys, tokens, capacity), capacity
    # at full capacity every non-first reference hits: the infinite-cache ceiling
    seen: set = set()
    ceiling = 0
    for key, tok in zip(keys, tokens, strict=True):
        ceiling += tok if key in seen else 0
        seen.add(key)
    assert engine[len(set(keys))] == ceiling


@settings(max_examples=300, deadline=None)
@given(keys=keys_strategy, data=st.data())
def test_curve_with_lifetime_matches_expiring_lru(keys, data):
    n = len(keys)
    tokens = data.draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
    gaps = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    times = np.cumsum(gaps).tolist()
    lifetime = data.draw(st.integers(0, 12))
    engine = engine_hits_by_capacity(keys, tokens, times, lifetime)
    for capacity in range(1, len(set(keys)) + 1):
        assert engine[capacity] == lru_hits(keys, tokens, capacity, times, lifetime), capacity


BLOCK = 4

request_strategy = st.tuples(
    st.integers(0, 3000),  # ms after the previous request
    st.lists(st.integers(0, 9), min_size=0, max_size=5),  # hash ids
    st.integers(1, BLOCK),  # tokens in the last block
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(request_strategy, min_size=1, max_size=25),
    lifetime=st.sampled_from([None, 1.0, 2.5]),
)
def test_report_curve_matches_brute_force_lru(requests, lifetime):
    lines, timed = [], []
    t = 0
    for gap, ids, last in requests:
        t += gap
        length = BLOCK * (len(ids) - 1) + last if ids else 0
        lines.append(orjson.dumps({"timestamp": t, "input_length": length, "hash_ids": ids}))
        blocks = [(key, last if j == len(ids) - 1 else BLOCK) for j, key in enumerate(ids)]
        timed.append((t, blocks))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        stream = ingest([path], IngestOptions(hash_key=HASH_KEY, block_tokens=BLOCK))
    report = analyze(stream, AnalysisParams(windows_s=(1,), lifetime_s=lifetime))
    total = sum(BLOCK * (len(ids) - 1) + last if ids else 0 for _, ids, last in requests)
    assert report.prompt_tokens == total
    life_ms = lifetime * 1000 if lifetime is not None else None
    caps = [p["capacity_slots"] for p in report.mrc]
    assert caps == sorted(set(caps)) and len(caps) >= 64
    # from one slot; a 0-slot point only when 0 is the recommendation (nothing reusable)
    assert 1 in caps and report.recommendation.capacity_slots in caps
    assert caps[0] == 1 or report.recommendation.capacity_slots == 0
    for point in report.mrc:
        c = point["capacity_slots"]
        assert point["capacity_bytes"] == c * report.slot_bytes
        expected = engine_order_lru_hits(timed, c, life_ms) / total if total else 0.0
        assert point["hit_ratio"] == expected, c
    # the ceiling: every capacity, so the number of distinct keys
    distinct = len({key for _, blocks in timed for key, _ in blocks})
    ceiling = engine_order_lru_hits(timed, distinct or 1, life_ms)
    assert report.recommendation.ceiling == (ceiling / total if total else 0.0)
