"""`mrc`: the exact LRU curve (and optionally SHARDS) on a synthetic Zipf reference stream
cut into requests of 16 references, in the order engines evict (as analyze computes it),
engine time only.

    python -m bench mrc --refs 10000000 --keys 1000000 [--shards-rate 0.01]
"""

from __future__ import annotations

import time

import numpy as np

from analysis.metrics.curve import SampledRefs, sampled_curve
from analysis.mrc import hit_tokens_by_capacity, sampled_looked_up, stack_distances
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
    """SHARDS at `rate` on the same references, as analyze samples them (the engine's own
    sampled_curve): its time, and its worst error against the exact curve from the
    smallest capacity SHARDS can resolve (100 / rate slots) up."""
    total = int(tokens.sum())
    start = time.perf_counter()
    requests = np.repeat(np.arange(starts.size - 1, dtype=np.int32), np.diff(starts))
    refs = SampledRefs(dense, requests, prev, starts, tokens, None, None,
                       np.zeros(dense.size, dtype=np.bool_))  # fmt: skip
    approx = sampled_curve(refs, None, rate).total
    took = time.perf_counter() - start
    kept = sampled_looked_up(dense, prev, starts, tokens, rate).keep.size
    caps = np.arange(int(np.ceil(100 / rate)), exact.size)
    errors = np.abs(exact[caps] - approx[np.minimum(caps, approx.size - 1)]) / total
    worst = int(np.argmax(errors))
    error = float(errors[worst])
    print(
        f"  SHARDS rate {rate}: {kept:,} sampled references, "
        f"{took:.2f} s; max |error| vs exact for capacities >= {caps[0]:,} slots: {error:.4f} "
        f"(at {caps[worst]:,} slots)"
    )
