"""dense_ids: the compiled factorization behind every scope and curve."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from analysis.reuse import (
    _ESTIMATE_ABOVE,
    _factorize,
    _sampled_keys,
    _table_bits,
    dense_ids,
    estimated_distinct,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=300))
def test_codes_are_equal_exactly_when_values_are(values):
    array = np.array(values, dtype=np.int64)
    codes, distinct = dense_ids(array)
    assert distinct == len(set(values))
    # first appearance order: code k is the k-th new value met
    first_seen = list(dict.fromkeys(values))
    assert [first_seen[c] for c in codes] == values


def test_the_table_grows_past_its_first_size():
    # 200,000 distinct keys (the table starts at 2**16 slots), each seen twice
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 2**64 - 1, size=200_000, dtype=np.uint64)
    stream = np.concatenate([keys, keys[::-1]])
    codes, distinct = dense_ids(stream)
    assert distinct == np.unique(keys).size
    assert np.array_equal(codes[:200_000], np.arange(200_000))
    assert np.array_equal(codes[200_000:], np.arange(200_000)[::-1])


def test_a_long_stream_sizes_its_table_from_a_sample():
    # past _ESTIMATE_ABOVE references the table starts at twice the distinct keys a 1/64
    # sample promises: the codes are those of a table that starts small and grows
    rng = np.random.default_rng(7)
    distinct_keys = rng.integers(0, 2**64 - 1, size=1_500_000, dtype=np.uint64)
    stream = distinct_keys[rng.integers(0, distinct_keys.size, size=_ESTIMATE_ABOVE + 1000)]
    seen = np.unique(stream).size
    assert abs(estimated_distinct(stream) - seen) < 0.05 * seen
    bits = _table_bits(stream)
    assert 2 * seen <= 2**bits < 4 * 1.05 * 1.05 * seen  # half load or less, one size up
    codes, distinct = dense_ids(stream)
    grown = np.empty(stream.size, dtype=np.int32)
    assert _factorize(stream, grown, 16) == distinct == seen
    assert np.array_equal(codes, grown)
    # first appearance order, checked independently of the hash table
    _, first = np.unique(stream, return_index=True)
    order = np.argsort(first)
    assert np.array_equal(codes[first[order]], np.arange(distinct))


def test_the_sample_is_a_share_of_the_distinct_keys():
    rng = np.random.default_rng(8)
    keys = rng.integers(0, 2**64 - 1, size=640_000, dtype=np.uint64)
    sample = _sampled_keys(np.concatenate([keys, keys]), 6)
    # every reference of a sampled key is kept: each sampled key twice
    values, counts = np.unique(sample, return_counts=True)
    assert (counts == 2).all()
    assert abs(values.size - keys.size / 64) < 4 * np.sqrt(keys.size / 64)
