"""The exact LRU hit-ratio curve (the report's `mrc`: hit ratio against cache capacity;
one minus it is the classic miss-ratio curve) by Mattson's one-pass stack algorithm, in
the order engines evict (each request looked up before it is touched, its blocks touched
last to first).

A reference's stack distance is the number of distinct keys referenced since the previous
reference to the same key, plus one. Marking the latest position of each key in a Fenwick
tree, the distance is (distinct keys seen so far) - (marks up to the previous position)
+ 1: one prefix query and two updates per reference, O(N log N) in all. An LRU cache of C
slots hits a reference exactly when its distance is <= C, so one pass gives every capacity.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.fenwick import fenwick_add, fenwick_prefix


@numba.njit(cache=True, nogil=True)
def _engine_stack_distances(prev: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Stack distances in engine order: every block of a request measured against the
    stack as it stood before the request, then the request's blocks touched last to
    first (metrics.md section 7, "LRU order, as engines evict"). In the stack a request's
    reference i stands at position s + (e - 1 - i): its first block nearest the top.

    A key repeated within one request (chained keys never are) counts once: its later
    copies are neither looked up nor touched, so never a hit; the key stands where its
    first copy put it (`anchor`)."""
    n = prev.size
    anchor = np.empty(n, dtype=prev.dtype)  # where each reference's key stands afterwards
    tree = np.zeros(n + 1, dtype=np.int32)
    dist = np.zeros(n, dtype=np.int32)  # 0: a first reference or a repeat (never a hit)
    seen = 0
    for r in range(starts.size - 1):
        s, e = starts[r], starts[r + 1]
        for i in range(s, e):  # look-ups: the cache before the request
            p = prev[i]
            if p >= s:  # a repeat within the request
                anchor[i] = anchor[p]
                continue
            anchor[i] = s + (e - 1 - i)
            if p >= 0:
                dist[i] = seen - fenwick_prefix(tree, anchor[p]) + 1
        for i in range(s, e):  # then the touches, each at its engine-order position
            p = prev[i]
            if p >= s:
                continue
            if p < 0:
                seen += 1
            else:
                fenwick_add(tree, anchor[p], -1)
            fenwick_add(tree, anchor[i], 1)
    return dist


def stack_distances(prev: np.ndarray, request_starts: np.ndarray | None = None) -> np.ndarray:
    """Stack distance of each reference (0 for a first reference, i.e. infinite), in the
    order engines evict: a request's blocks (`request_starts`: each request's first
    reference, then the total) are all looked up before any is touched, then touched
    last to first, so a prefix's tail leaves the cache before its head. Without
    `request_starts` every reference is a request of its own: the classic algorithm."""
    if request_starts is None:
        request_starts = np.arange(prev.size + 1, dtype=np.int64)
    return _engine_stack_distances(prev, np.asarray(request_starts, dtype=np.int64))


def request_starts(ref_request: np.ndarray) -> np.ndarray:
    """Each request's first reference and then the number of references, from the
    request index of every reference (in stream order); requests without a reference
    (all of a request's blocks left out of a sample) have none."""
    if ref_request.size == 0:
        return np.zeros(1, dtype=np.int64)
    changes = np.flatnonzero(ref_request[1:] != ref_request[:-1]) + 1
    return np.concatenate(([0], changes, [ref_request.size])).astype(np.int64)


def hit_tokens_by_capacity(
    dist: np.ndarray, tokens: np.ndarray, eligible: np.ndarray | None = None
) -> np.ndarray:
    """cum[C] = tokens of references an LRU cache of C slots hits (C = 0..max distance).

    `eligible` restricts hits further (a block lifetime: reuse time <= L).
    """
    if eligible is None:
        eligible = np.ones(0, dtype=np.bool_)  # empty: every reference is eligible
    hist = _distance_histogram(dist, tokens, eligible)
    return np.cumsum(hist)


@numba.njit(cache=True, nogil=True)
def _distance_histogram(dist, tokens, eligible):  # pragma: no cover (compiled)
    """Tokens per stack distance, in one pass (no masked copies of N-long columns)."""
    top = 0
    for i in range(dist.size):
        if dist[i] > top:
            top = dist[i]
    hist = np.zeros(top + 1, dtype=np.int64)
    check = eligible.size > 0
    for i in range(dist.size):
        d = dist[i]
        if d > 0 and (not check or eligible[i]):
            hist[d] += tokens[i]
    # trailing distances that were never eligible add nothing: trim them
    end = hist.size
    while end > 1 and hist[end - 1] == 0:
        end -= 1
    return hist[:end]


def curve_capacities(
    max_capacity: int, points: int = 96, extra: tuple[int, ...] = ()
) -> np.ndarray:
    """Log-spaced slot counts from 1 to max(max_capacity, 64), plus `extra` ones."""
    upper = max(max_capacity, 64)
    caps = np.unique(np.rint(np.geomspace(1, upper, points)).astype(np.int64))
    if caps.size < 64:
        caps = np.arange(1, upper + 1, dtype=np.int64)
    return np.unique(np.concatenate([caps, np.asarray(extra, dtype=np.int64)]))


# --- SHARDS: spatially sampled curve for very long streams --------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SPACE = 1 << 24


class ShardsSample(NamedTuple):
    """SHARDS' sample of a stream's references, drawn once for every curve read from it."""

    keep: np.ndarray  # the sampled references' indices, ascending
    looked_up_tokens: int  # the tokens of all the references an engine looks up


def sampled_looked_up(
    ids: np.ndarray, prev: np.ndarray, starts: np.ndarray, tokens: np.ndarray, rate: float
) -> ShardsSample:
    """SHARDS' spatial sample of the references an engine looks up, and the tokens of all
    those it looks up. A key is in the sample when hash(key) mod P < rate * P, so every
    reference to a sampled key is kept (reuse distances stay meaningful). A key's later
    copies within a request (`prev` in the request that `starts` says) are never looked
    up, so never hit: known without sampling, they stay out of both. The sample is its
    references' indices, counted first and then written: no N-long column (100 M
    references sampled at 0.04: 16 MiB instead of a 95 MiB mask held through the analysis)."""
    if starts[-1] != ids.size:
        raise ValueError("starts must end at the number of references")
    starts = np.asarray(starts, dtype=np.int64)
    threshold = _threshold(rate)
    sampled, looked_up_tokens = _count_sampled(ids, prev, starts, tokens, threshold)
    keep = np.empty(sampled, dtype=np.int32 if ids.size < 2**31 - 1 else np.int64)
    _write_sampled(ids, prev, starts, threshold, keep)
    return ShardsSample(keep, int(looked_up_tokens))


def _threshold(rate: float) -> np.uint64:
    return np.uint64(round(rate * _SPACE))


@numba.njit(cache=True, nogil=True, inline="always")
def _in_sample(key_id, threshold):  # pragma: no cover (compiled)
    return (np.uint64(key_id) * _GOLDEN) >> np.uint64(40) < threshold  # top 24 bits


@numba.njit(cache=True, nogil=True)
def _count_sampled(ids, prev, starts, tokens, threshold):  # pragma: no cover (compiled)
    sampled = 0
    looked_up_tokens = 0
    for r in range(starts.size - 1):
        first = starts[r]
        for i in range(first, starts[r + 1]):
            if prev[i] < first:  # looked up: not a repeat within its request
                looked_up_tokens += tokens[i]
                sampled += _in_sample(ids[i], threshold)
    return sampled, looked_up_tokens


@numba.njit(cache=True, nogil=True)
def _write_sampled(ids, prev, starts, threshold, keep):  # pragma: no cover (compiled)
    at = 0
    for r in range(starts.size - 1):
        first = starts[r]
        for i in range(first, starts[r + 1]):
            if prev[i] < first and _in_sample(ids[i], threshold):
                keep[at] = i
                at += 1


def shards_hit_tokens(dist: np.ndarray, tokens: np.ndarray, rate: float, total_tokens: int,
                      eligible: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """cum[C] estimated from a sample's stack distances (SHARDS with its count adjustment).

    A sampled distance d stands for d / rate in the full stream, and each sampled token for
    1 / rate tokens. The adjustment adds the difference between the expected and the
    actual sampled tokens to the smallest distance, which removes the bias of a sample
    that happens to catch more or fewer references than its rate.
    """
    mask = dist > 0
    if eligible is not None:
        mask &= eligible
    if not mask.any():
        return np.zeros(1, dtype=np.int64)
    scaled = np.ceil(dist[mask] / rate).astype(np.int64)
    hist = np.bincount(scaled, weights=tokens[mask].astype(np.float64) / rate)
    expected, actual = rate * total_tokens, float(tokens.sum())
    first = int(scaled.min())
    # may go below zero: the whole curve shifts, and only its small-capacity end (which
    # the report marks unresolved) is clipped at zero
    hist[first] += (expected - actual) / rate
    # in place: one array by capacity (100 M references: 50 MiB) instead of four
    np.cumsum(hist, out=hist)
    np.rint(hist, out=hist)
    np.maximum(hist, 0, out=hist)
    return hist.astype(np.int64)
