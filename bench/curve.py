"""`mrc`: the exact LRU curve (and optionally SHARDS) on a synthetic Zipf reference stream
cut into requests of 16 references, in the order engines evict (as analyze computes it),
engine time only.

    python -m bench mrc --refs 10000000 --keys 1000000 [--shards-rate 0.01]
"""

from __future__ import annotations

import time

import numpy as np

from analysis.metrics.curve import SampledRefs, exact_slots, sampled_curve
from analysis.mrc import (
    hit_tokens_by_capacity,
    request_starts,
    sampled_looked_up,
    shards_hit_tokens,
    stack_distances,
)
from analysis.reuse import dense_ids, previous_refs
from bench.harness import peak_rss_mb

REFS_PER_REQUEST = 16  # a chat prompt of 16 blocks


def run(refs: int, keys: int, seed: int, shards_rate: float | None) -> None:
    rng = np.random.default_rng(seed)
    # Zipf-popular keys over ~keys distinct ids, plus a share of one-offs
    ids = rng.zipf(1.05, refs) % keys
    tokens = np.full(refs, 256, dtype=np.int64)
    starts = np.append(np.arange(0, refs, REFS_PER_REQUEST), refs)
    # numba compile, not timed
    stack_distances(np.array([-1, 0], dtype=np.int64), np.array([0, 2], dtype=np.int64))
    previous_refs(np.array([0, 0], dtype=np.int64), 1)
    start = time.perf_counter()
    dense, distinct = dense_ids(ids)
    prev = previous_refs(dense, distinct)
    dist = stack_distances(prev, starts)
    curve = hit_tokens_by_capacity(dist, tokens)
    engine = time.perf_counter() - start
    print(f"mrc: {refs:,} references, {distinct:,} distinct keys")
    print(
        f"  engine time {engine:.2f} s ({refs / engine / 1e6:.1f} M refs/s), "
        f"peak RSS {peak_rss_mb():.0f} MB, ceiling {curve[-1] / tokens.sum():.4f}"
    )
    if shards_rate:
        _compare_shards(dense, prev, starts, tokens, curve, shards_rate)


def _compare_shards(
    dense: np.ndarray, prev: np.ndarray, starts: np.ndarray, tokens: np.ndarray,
    exact: np.ndarray, rate: float,
) -> None:  # fmt: skip
    """The sampled curve at `rate` on the same references, as analyze computes it (the
    engine's own sampled_curve: exact up to 1,000 / rate slots, SHARDS beyond): its time,
    and its worst error against the exact curve from 100 / rate slots up; then plain
    SHARDS' on the same sample."""
    total = int(tokens.sum())
    start = time.perf_counter()
    requests = np.repeat(np.arange(starts.size - 1, dtype=np.int32), np.diff(starts))
    refs = SampledRefs(dense, requests, prev, starts, tokens, None, None,
                       np.zeros(dense.size, dtype=np.bool_))  # fmt: skip
    approx = sampled_curve(refs, None, rate).total
    took = time.perf_counter() - start
    sample = sampled_looked_up(dense, prev, starts, tokens, rate)
    caps = np.arange(int(np.ceil(100 / rate)), exact.size)
    error, at = _worst_error(exact, approx, caps, total)
    print(
        f"  SHARDS rate {rate}: {sample.keep.size:,} sampled references, exact up to "
        f"{exact_slots(rate):,} slots, {took:.2f} s; max |error| vs exact for capacities "
        f">= {caps[0]:,} slots: {error:.4f} (at {at:,} slots)"
    )
    # plain SHARDS, every capacity from the sample's distances (the engine's before 12-05)
    sub, sub_distinct = dense_ids(dense[sample.keep])
    plain = shards_hit_tokens(stack_distances(previous_refs(sub, sub_distinct),
                                              request_starts(requests[sample.keep])),
                              tokens[sample.keep], rate, sample.looked_up_tokens)  # fmt: skip
    error, at = _worst_error(exact, plain, caps, total)
    print(f"  plain SHARDS at the same rate: max |error| {error:.4f} (at {at:,} slots)")


def _worst_error(
    exact: np.ndarray, approx: np.ndarray, caps: np.ndarray, total: int
) -> tuple[float, int]:
    """The largest |approx - exact| hit ratio over `caps`, and the capacity it is at."""
    errors = np.abs(exact[caps] - approx[np.minimum(caps, approx.size - 1)]) / total
    worst = int(np.argmax(errors))
    return float(errors[worst]), int(caps[worst])
