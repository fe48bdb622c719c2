"""SHARDS: the sampled curve equals the exact one at rate 1, and stays close below it."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import AnalysisParams, analyze
from analysis.metrics.curve import SampledRefs, sampled_curve
from analysis.mrc import (
    hit_tokens_by_capacity,
    request_starts,
    shards_hit_tokens,
    stack_distances,
)
from analysis.reuse import dense_ids, previous_refs, repeated_in_request
from analysis.stream import BlockStream

from .factories import shards_sample


def _zipf_stream(n: int, keys: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = (rng.zipf(1.2, n) % keys).astype(np.int64)
    return dense_ids(ids)


def test_rate_one_is_the_exact_curve():
    ids, distinct = _zipf_stream(50_000, 5_000, 1)
    tokens = np.full(ids.size, 16, dtype=np.int32)
    dist = stack_distances(previous_refs(ids, distinct))
    assert shards_sample(ids, 1.0).all()
    exact = hit_tokens_by_capacity(dist, tokens)
    assert np.array_equal(shards_hit_tokens(dist, tokens, 1.0, int(tokens.sum())), exact)


@pytest.mark.parametrize("rate", [0.1, 0.05])
def test_sampled_curve_is_within_a_few_points_of_the_exact_one(rate):
    ids, distinct = _zipf_stream(400_000, 40_000, 2)
    tokens = np.full(ids.size, 16, dtype=np.int32)
    total = int(tokens.sum())
    exact = hit_tokens_by_capacity(stack_distances(previous_refs(ids, distinct)), tokens)
    keep = shards_sample(ids, rate)
    # the sample really is spatial: every reference to a kept key is kept
    assert set(ids[keep]).isdisjoint(set(ids[~keep]))
    sub, sub_distinct = dense_ids(ids[keep])
    approx = shards_hit_tokens(stack_distances(previous_refs(sub, sub_distinct)),
                               tokens[keep], rate, total)  # fmt: skip
    capacities = np.arange(int(100 / rate), exact.size, 97)
    exact_ratio = exact[np.minimum(capacities, exact.size - 1)] / total
    approx_ratio = approx[np.minimum(capacities, approx.size - 1)] / total
    assert np.abs(exact_ratio - approx_ratio).max() <= 0.02


def test_analyze_says_when_the_curve_is_sampled(ingest_rows, trace):
    rows = [trace(i * 1000, [i % 37, 1000 + i % 11], 10) for i in range(3000)]
    stream: BlockStream = ingest_rows(rows, block_tokens=10)
    report = analyze(stream, AnalysisParams(mrc_exact_limit=1000, shards_rate=0.5))
    assert report.mrc_exact is False and report.mrc_sampling_rate == 0.5
    exact = analyze(stream, AnalysisParams())
    assert exact.mrc_exact is True
    # 48 keys, all within the exact top of the stack (1,000 / 0.5 slots): every point is
    # the exact curve's, none marked unresolved
    assert report.mrc == exact.mrc and "resolved" not in report.mrc[0]


def _engine_stream(seed: int) -> SampledRefs:
    """Zipf(1.05) keys in requests of 16 references, as engines look them up."""
    rng = np.random.default_rng(seed)
    ids, distinct = dense_ids((rng.zipf(1.05, 400_000) % 40_000).astype(np.int64))
    starts = np.append(np.arange(0, ids.size, 16), ids.size).astype(np.int64)
    requests = np.repeat(np.arange(starts.size - 1, dtype=np.int32), np.diff(starts))
    same = rng.random(ids.size) < 0.3
    return SampledRefs(ids, requests, previous_refs(ids, distinct), starts,
                       np.full(ids.size, 16, dtype=np.int32), None, None, same)  # fmt: skip


def test_a_sampled_curve_is_exact_up_to_the_top_of_the_stack():
    refs = _engine_stream(6)
    dist = stack_distances(refs.prev, refs.starts)
    exact_total = hit_tokens_by_capacity(dist, refs.tokens)
    exact_same = hit_tokens_by_capacity(dist, refs.tokens, refs.same_session)
    # (carried flat to the whole curve's capacities, as the exact curve's part is)
    exact_same = np.append(exact_same, [exact_same[-1]] * (exact_total.size - exact_same.size))
    curve = sampled_curve(refs, None, 0.05, exact_up_to=3000)
    # both parts, capacity by capacity, up to K; and the ceilings, which the top of the
    # stack counts too (every reuse from deeper than K)
    assert np.array_equal(curve.total[:3001], exact_total[:3001])
    assert np.array_equal(curve.same_session[:3001], exact_same[:3001])
    assert curve.total[-1] == exact_total[-1] and curve.same_session[-1] == exact_same[-1]
    # a stack as deep as the keys are many leaves nothing to estimate: the exact curve
    whole = sampled_curve(refs, None, 0.05, exact_up_to=40_000)
    assert np.array_equal(whole.total, exact_total)
    assert np.array_equal(whole.same_session, exact_same)


@pytest.mark.parametrize(("seed", "rate"), [(7, 0.05), (5, 0.1), (1, 0.2)])
def test_past_100_over_r_the_curve_meets_its_bound_where_plain_shards_misses(seed, rate):
    refs = _engine_stream(seed)
    exact = hit_tokens_by_capacity(stack_distances(refs.prev, refs.starts), refs.tokens)
    total = int(refs.tokens.sum())
    capacities = np.arange(int(np.ceil(100 / rate)), exact.size)

    def worst(curve: np.ndarray) -> float:
        at = np.minimum(capacities, curve.size - 1)
        worst = float(np.abs(exact[capacities] - curve[at]).max() / total)
        print(f"worst error {worst:.4f}")  # (pytest shows it when the test fails)
        return worst

    # plain SHARDS (the engine's before): every capacity from the sample's distances alone
    looked_up = ~repeated_in_request(refs.prev, refs.starts)
    keep = shards_sample(refs.ids, rate) & looked_up
    sub, sub_distinct = dense_ids(refs.ids[keep])
    looked_up_tokens = int(refs.tokens[looked_up].sum())
    plain = shards_hit_tokens(stack_distances(previous_refs(sub, sub_distinct),
                                              request_starts(refs.ref_req[keep])),
                              refs.tokens[keep], rate, looked_up_tokens)  # fmt: skip
    assert worst(plain) > 0.01
    assert worst(sampled_curve(refs, None, rate).total) <= 0.01


@pytest.mark.parametrize("rate", [0.2, 0.05])
def test_repeats_within_a_request_stay_out_of_the_sample(rate):
    # Zipf keys in requests of 16 references, as engines look them up: a hot key's later
    # copies within a request are never looked up, never hits. Counted in the sample's
    # adjustment (which adds what the sample lacks as hits) they raised the ceiling by
    # their share; the engine's sampled curve leaves them out and meets the exact one.
    ids, distinct = _zipf_stream(400_000, 40_000, 3)
    starts = np.append(np.arange(0, ids.size, 16), ids.size).astype(np.int64)
    requests = np.repeat(np.arange(starts.size - 1, dtype=np.int32), np.diff(starts))
    tokens = np.full(ids.size, 16, dtype=np.int32)
    prev = previous_refs(ids, distinct)
    repeats = repeated_in_request(prev, starts)
    assert repeats.mean() > 0.05  # the stream has them
    exact = hit_tokens_by_capacity(stack_distances(prev, starts), tokens)
    refs = SampledRefs(ids, requests, prev, starts, tokens, None, None,
                       np.zeros(ids.size, dtype=np.bool_))  # fmt: skip
    approx = sampled_curve(refs, None, rate).total
    total = int(tokens.sum())
    assert abs(approx[-1] - exact[-1]) / total < 0.005  # the ceiling
    # counted as the old recipe counted them (every token of the sample, repeats too),
    # the ceiling is off by about the repeats' share
    keep = shards_sample(ids, rate)
    sub, sub_distinct = dense_ids(ids[keep])
    old = shards_hit_tokens(stack_distances(previous_refs(sub, sub_distinct),
                                            request_starts(requests[keep])),
                            tokens[keep], rate, total)  # fmt: skip
    assert abs(old[-1] - exact[-1]) / total > 0.5 * repeats.mean()
