"""The exact top of the LRU stack (analysis.near_stack): every reference's distance up to
K, checked by hand and against the whole stack's distances (analysis.mrc)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from analysis.mrc import stack_distances
from analysis.near_stack import near_hits, window_slots
from analysis.reuse import dense_ids, previous_refs, repeated_in_request


def _stream(requests: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ids, distinct = dense_ids(np.array([k for r in requests for k in r], dtype=np.int64))
    starts = np.cumsum([0] + [len(r) for r in requests]).astype(np.int64)
    return ids, previous_refs(ids, distinct), starts


def test_a_key_pushed_past_k_is_far_and_one_within_it_is_near():
    # [A B] [C] [A] [B], K = 2: the first request touches B then A (A on top); C comes
    # on top, B is third (past K). A is then 2 deep (C above it); B is 3 deep: far.
    ids, prev, starts = _stream([[0, 1], [2], [0], [1]])
    tokens = np.array([10, 20, 30, 40, 50], dtype=np.int32)
    same = np.array([False, False, False, True, True])
    keep = np.array([3, 4], dtype=np.int64)  # the two reuses
    near = near_hits(ids, prev, starts, tokens, None, same, keep, limit=2)
    assert near.tokens.tolist() == [0, 0, 40]
    assert near.same_session.tolist() == [0, 0, 40]
    assert (near.far_tokens, near.far_same_session) == (50, 50)
    assert near.sampled_near.tolist() == [True, False]
    # with room for three keys B is near too, 3 deep; A only past the lifetime check
    eligible = np.array([True, True, True, False, True])
    near = near_hits(ids, prev, starts, tokens, eligible, same, keep, limit=3)
    assert near.tokens.tolist() == [0, 0, 0, 50] and near.far_tokens == 0


def test_the_window_has_room_to_renumber_in():
    assert [window_slots(k) for k in (1, 2, 3, 7, 1000)] == [4, 8, 8, 16, 2048]


@settings(max_examples=60, deadline=None)
@given(
    requests=st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=12), max_size=120),
    limit=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_near_distances_are_the_whole_stacks_up_to_k(requests, limit, seed):
    if not requests:
        requests = [[0]]
    ids, prev, starts = _stream(requests)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, 100, ids.size).astype(np.int32)
    same = rng.random(ids.size) < 0.5
    eligible = rng.random(ids.size) < 0.8
    # a sample holds looked-up references only (a key's repeats within a request are not)
    keep = np.flatnonzero((rng.random(ids.size) < 0.3) & ~repeated_in_request(prev, starts))
    dist = stack_distances(prev, starts).astype(np.int64)
    near = near_hits(ids, prev, starts, tokens, eligible, same, keep, limit)
    # no stack is deeper than the keys are many: K is the smaller of the two
    depth = min(limit, int(ids.max()) + 1)
    assert near.tokens.size == near.same_session.size == depth + 1
    hit = (dist > 0) & eligible
    expected = np.bincount(dist[hit & (dist <= limit)], weights=tokens[hit & (dist <= limit)],
                           minlength=depth + 1)  # fmt: skip
    assert near.tokens.tolist() == expected.astype(np.int64).tolist()
    on = hit & same & (dist <= limit)
    assert near.same_session.tolist() == np.bincount(
        dist[on], weights=tokens[on], minlength=depth + 1).astype(np.int64).tolist()  # fmt: skip
    assert near.far_tokens == int(tokens[hit & (dist > limit)].sum())
    assert near.far_same_session == int(tokens[hit & same & (dist > limit)].sum())
    # a sampled reference is near when it is looked up at a distance within K
    assert near.sampled_near.tolist() == ((dist[keep] > 0) & (dist[keep] <= limit)).tolist()
