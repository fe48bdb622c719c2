"""The per-reference links every measure reads, against their definitions in plain
Python: the previous reference to the same key, a key's repeat within its request,
SHARDS' sample of the keys, and reuse times read off the previous reference's request."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from analysis.mrc import sampled_looked_up
from analysis.reuse import ReuseTimes, dense_ids, previous_refs, repeated_in_request

from .factories import shards_sample

requests_of_keys = st.lists(st.lists(st.integers(0, 6), max_size=6), max_size=25)


def _flatten(requests: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.array([k for r in requests for k in r], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum([len(r) for r in requests]))).astype(np.int64)
    return keys, starts


@settings(max_examples=120, deadline=None)
@given(requests_of_keys)
def test_previous_refs_and_repeats_within_a_request(requests):
    keys, starts = _flatten(requests)
    ids, distinct = dense_ids(keys)
    prev = previous_refs(ids, distinct)
    expected_prev = [max((j for j in range(i) if keys[j] == keys[i]), default=-1)
                     for i in range(keys.size)]  # fmt: skip
    assert prev.tolist() == expected_prev
    request_of = np.repeat(np.arange(len(requests)), np.diff(starts))
    repeats = repeated_in_request(prev, starts)
    assert repeats.tolist() == [bool(p >= 0 and request_of[p] == request_of[i])
                                for i, p in enumerate(expected_prev)]  # fmt: skip
    # SHARDS' sample of what is looked up: sampled keys, none of their in-request repeats
    tokens = np.arange(keys.size, dtype=np.int32) + 10
    keep, looked_up_tokens = sampled_looked_up(ids, prev, starts, tokens, 0.5)
    assert keep.tolist() == np.flatnonzero(shards_sample(ids, 0.5) & ~repeats).tolist()
    assert looked_up_tokens == sum(int(t) for t, r in zip(tokens, repeats, strict=True) if not r)


def test_the_sample_keeps_the_ids_whose_hash_falls_under_the_rate():
    # requests of one reference each: nothing repeats, so the sample is the hash's alone
    rng = np.random.default_rng(3)
    for dtype in (np.int32, np.int64):
        ids = rng.integers(0, 2**31 - 1, 20_000).astype(dtype)
        starts = np.arange(ids.size + 1, dtype=np.int64)
        prev = np.full(ids.size, -1, dtype=np.int64)
        tokens = np.ones(ids.size, dtype=np.int32)
        for rate in (0.01, 0.04, 0.3):
            top = [(int(i) * 0x9E3779B97F4A7C15 % 2**64) >> 40 for i in ids]  # Python ints
            expected = [t < round(rate * 2**24) for t in top]
            keep, looked_up_tokens = sampled_looked_up(ids, prev, starts, tokens, rate)
            assert expected == shards_sample(ids, rate).tolist()
            assert keep.tolist() == np.flatnonzero(expected).tolist()
            assert looked_up_tokens == ids.size
            assert abs(np.mean(expected) - rate) < 0.01


@settings(max_examples=120, deadline=None)
@given(requests_of_keys, st.lists(st.integers(0, 5_000), min_size=25, max_size=25),
       st.integers(0, 6_000))  # fmt: skip
def test_reuse_times_read_off_the_previous_reference_s_request(requests, gaps, window_us):
    keys, starts = _flatten(requests)
    ids, distinct = dense_ids(keys)
    prev = previous_refs(ids, distinct)
    req_t_us = np.cumsum(gaps[: len(requests)], dtype=np.int64)  # in time order, ties too
    ref_req = np.repeat(np.arange(len(requests), dtype=np.int32), np.diff(starts))
    reuse = ReuseTimes.of(req_t_us, ref_req, prev)
    expected = [int(req_t_us[ref_req[i]] - req_t_us[ref_req[p]]) if p >= 0 else -1
                for i, p in enumerate(prev.tolist())]  # fmt: skip
    assert reuse.prev_req.tolist() == [int(ref_req[p]) if p >= 0 else -1 for p in prev.tolist()]
    assert reuse.times_us().tolist() == expected
    assert reuse.within(window_us).tolist() == [0 <= r <= window_us for r in expected]
    assert reuse.within(None).tolist() == [r >= 0 for r in expected]
    odd = np.arange(1, keys.size, 2)
    assert reuse.take(odd).times_us().tolist() == expected[1::2]
    # the window's hit tokens past a warm-up, and of them the same-session ones
    tokens = np.arange(keys.size, dtype=np.int32) * 7 + 3
    same_session = np.arange(keys.size) % 3 == 0
    for first_counted in (0, len(requests) // 2):
        hit = [0 <= r <= window_us and ref_req[i] >= first_counted
               for i, r in enumerate(expected)]  # fmt: skip
        assert reuse.tokens_within(window_us, tokens, first_counted, same_session) == (
            sum(int(t) for t, h in zip(tokens, hit, strict=True) if h),
            sum(int(t) for t, h, s in zip(tokens, hit, same_session, strict=True) if h and s),
        )
