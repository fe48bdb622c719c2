"""StepFunction's chart maxima and time-weighted quantiles against their definitions,
computed the slow way (every bucket, every value)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from analysis.workingset import StepFunction


@st.composite
def step_functions(draw):
    gaps = draw(st.lists(st.integers(1, 50), min_size=0, max_size=40))
    times = np.cumsum(np.array(gaps, dtype=np.int64))
    values = np.array(draw(st.lists(st.integers(0, 30), min_size=times.size,
                                    max_size=times.size)), dtype=np.int64)  # fmt: skip
    start = draw(st.integers(-10, 60))
    return StepFunction(times, values), start, start + draw(st.integers(0, 1500))


def _value(f: StepFunction, t: int) -> int:
    held = [int(v) for tt, v in zip(f.times, f.values, strict=True) if tt <= t]
    return held[-1] if held else 0


@settings(max_examples=150, deadline=None)
@given(step_functions(), st.integers(1, 12))
def test_bucket_max_is_the_largest_value_held_in_each_bucket(case, buckets):
    f, start, end = case
    starts, maxima = f.bucket_max(start, end, buckets)
    if end <= start:
        assert maxima.tolist() == [_value(f, start)]
        return
    edges = np.linspace(start, end, buckets + 1).astype(np.int64)
    for b in range(buckets):
        lo, hi = int(edges[b]), int(edges[b + 1])
        # the value carried into the bucket, and every value set inside it
        inside = [int(v) for t, v in zip(f.times, f.values, strict=True) if lo <= t < hi]
        assert maxima[b] == max([_value(f, lo), *inside]), b
    assert starts.tolist() == edges[:-1].tolist()


@settings(max_examples=150, deadline=None)
@given(step_functions(), st.sampled_from([0.5, 0.95, 0.0, 1.0]))
def test_quantile_is_the_smallest_value_held_that_long(case, q):
    f, start, end = case
    (got,) = f.time_weighted_quantiles(start, end, (q,))
    if end <= start:
        assert got == _value(f, start)
        return
    held = [_value(f, t) for t in range(start, end)]  # one value per microsecond
    expected = min(v for v in held if sum(h <= v for h in held) >= q * len(held) - 1e-9)
    assert got == expected
