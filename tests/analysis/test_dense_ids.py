"""dense_ids: the compiled factorization behind every scope and curve."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from analysis.reuse import dense_ids


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
