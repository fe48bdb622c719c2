"""The top of the LRU stack, exactly: every reference's stack distance when it is at most
K, in the order engines evict, for every reference of a stream however long. It is the
exact part of the sampled curve (analysis.metrics.curve): SHARDS estimates a capacity's
hits from the sampled keys whose reuse distances straddle it, about R x C of them at C
slots, so near C = 100 / R the estimate rests on ~100 keys and misses by up to 3 points
of hit ratio. Below K the curve needs no estimate at all.

Only the K most recently used keys are kept, each at the time of its last touch, with a
Fenwick tree over those times counting the keys touched since: a reference's distance is
one prefix query, a touch two updates, the least recently used key leaves when a K+1-th
comes in. Times run on in a window of 2K or more slots; when it is full, the keys still
kept are renumbered to its start (O(window) once per K touches or more). Memory is the
window and one place per distinct key, not per reference.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.fenwick import fenwick_add, fenwick_prefix


class NearHits(NamedTuple):
    """What the K-deep stack saw of the references an engine looks up (a key's later
    copies within one request are never looked up) that may hit (`eligible`)."""

    tokens: np.ndarray  # hit tokens by exact stack distance 1..K ([0] is 0); K: the
    # depth asked for, or the number of keys when they are fewer
    same_session: np.ndarray  # of them, those whose previous reference was of their session
    far_tokens: int  # tokens reused at a distance past K (a miss below K slots)
    far_same_session: int
    sampled_near: np.ndarray  # per reference of `keep`: its distance is at most K


def near_hits(
    ids: np.ndarray,
    prev: np.ndarray,
    starts: np.ndarray,
    tokens: np.ndarray,
    eligible: np.ndarray | None,
    same_session: np.ndarray,
    keep: np.ndarray,
    limit: int,
) -> NearHits:
    """The exact hits at distances up to `limit` of the stream of dense key `ids` (`prev`:
    each reference's previous one to its key, -1 for none; `starts`: each request's first
    reference, then the total), and whether each reference of `keep` (ascending) was one."""
    if limit < 1:
        raise ValueError("the near stack holds at least one key")
    keys = int(ids.max()) + 1 if ids.size else 0
    limit = min(limit, max(keys, 1))  # no stack is deeper than the keys are many
    check = np.ones(0, dtype=np.bool_) if eligible is None else eligible
    out = _near_pass(ids, prev, np.asarray(starts, dtype=np.int64), tokens, check,
                     same_session, keep, limit, keys, window_slots(limit))  # fmt: skip
    return NearHits(out[0], out[1], int(out[2]), int(out[3]), out[4])


def window_slots(limit: int) -> int:
    """The times the window holds: a power of two, at least 2 * limit + 2."""
    size = 1
    while size < 2 * limit + 2:
        size *= 2
    return size


@numba.njit(cache=True, nogil=True)
def _renumber(tree, slot_key, place):  # pragma: no cover (compiled)
    """Moves the kept keys to times 0, 1, ... in their order; returns how many there are."""
    kept = 0
    for t in range(slot_key.size):
        key = slot_key[t]
        if key >= 0:
            slot_key[t] = -1
            slot_key[kept] = key
            place[key] = kept
            kept += 1
    tree[:] = 0
    for j in range(1, tree.size):  # a Fenwick tree of `kept` ones, built in one pass
        if j <= kept:
            tree[j] += 1
        parent = j + (j & -j)
        if parent < tree.size:
            tree[parent] += tree[j]
    return kept


@numba.njit(cache=True, nogil=True)
def _near_pass(ids, prev, starts, tokens, eligible, same, keep, limit, keys,
               size):  # pragma: no cover (compiled)  # fmt: skip
    tree = np.zeros(size + 1, dtype=np.int32)
    slot_key = np.full(size, -1, dtype=np.int64)  # the key kept at each time (-1: none)
    place = np.full(keys, -1, dtype=np.int32)  # each key's time, while it is kept
    hits = np.zeros(limit + 1, dtype=np.int64)
    hits_same = np.zeros(limit + 1, dtype=np.int64)
    far = 0
    far_same = 0
    sampled_near = np.zeros(keep.size, dtype=np.bool_)
    check = eligible.size > 0
    kept = 0  # keys in the stack
    now = 0  # the next time to hand out
    oldest = 0  # no key is kept at a time before it
    k = 0  # the next reference of `keep`
    for r in range(starts.size - 1):
        s, e = starts[r], starts[r + 1]
        for i in range(s, e):  # look-ups: the stack before the request
            p = prev[i]
            if p >= s:  # a repeat within the request: never looked up (nor sampled)
                continue
            at = place[ids[i]] if p >= 0 else -1
            if p >= 0 and (not check or eligible[i]):
                if at >= 0:
                    d = kept - fenwick_prefix(tree, at) + 1
                    hits[d] += tokens[i]
                    if same[i]:
                        hits_same[d] += tokens[i]
                else:
                    far += tokens[i]
                    if same[i]:
                        far_same += tokens[i]
            if k < keep.size and keep[k] == i:
                sampled_near[k] = at >= 0
                k += 1
        for i in range(e - 1, s - 1, -1):  # touches, last to first: the first ends on top
            if prev[i] >= s:
                continue
            key = ids[i]
            at = place[key]
            if at >= 0:
                slot_key[at] = -1
                fenwick_add(tree, at, -1)
                kept -= 1
            if now == size:
                now = _renumber(tree, slot_key, place)
                oldest = 0
            slot_key[now] = key
            place[key] = now
            fenwick_add(tree, now, 1)
            kept += 1
            now += 1
            if kept > limit:  # the least recently used key leaves the top K
                while slot_key[oldest] < 0:
                    oldest += 1
                place[slot_key[oldest]] = -1
                slot_key[oldest] = -1
                fenwick_add(tree, oldest, -1)
                kept -= 1
    return hits, hits_same, far, far_same, sampled_near
