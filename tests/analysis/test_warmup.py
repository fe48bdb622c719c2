"""Warm-up (metrics.md section 7): the first floor(warmup x requests) requests fill every
cache but are left out of every hit ratio, numerator and denominator; working sets are
never trimmed. By hand on four requests of two 4-token blocks each."""

from __future__ import annotations

import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest

# a shared first block (1), then alternating second blocks, one request a second:
#   t=0 [1, 2]   t=1 [1, 3]   t=2 [1, 2]   t=3 [1, 3]
REQUESTS = [(0, [1, 2]), (1000, [1, 3]), (2000, [1, 2]), (3000, [1, 3])]


@pytest.fixture
def stream(tmp_path):
    path = tmp_path / "trace.jsonl"
    lines = [orjson.dumps({"timestamp": t, "input_length": 8, "hash_ids": ids})
             for t, ids in REQUESTS]  # fmt: skip
    path.write_bytes(b"\n".join(lines) + b"\n")
    return ingest([path], IngestOptions(hash_key=b"warm-up-test-key-0123", block_tokens=4))


def _at(report, slots: int) -> float:
    return next(p["hit_ratio"] for p in report.mrc if p["capacity_slots"] == slots)


def test_half_the_requests_warm_the_cache_and_only_the_rest_count(stream):
    whole = analyze(stream, AnalysisParams(windows_s=(1.5,)))
    warm = analyze(stream, AnalysisParams(windows_s=(1.5,), warmup=0.5))
    assert (whole.warmup_requests, warm.warmup_requests) == (0, 2)
    assert whole.prompt_tokens == warm.prompt_tokens == 32  # every request is still there
    # infinite cache: of 32 tokens, 20 seen before (4 + 8 + 8); of the last two's 16, all
    assert whole.infinite_hit_ratio == 20 / 32 and warm.infinite_hit_ratio == 1.0
    # a 1.5 s window: block 1 comes back each second, the second blocks after two seconds
    assert whole.windows[0].hit_ratio == 12 / 32 and warm.windows[0].hit_ratio == 8 / 16
    # the curve (engine order): before the third request the stack is [1, 3, 2], before
    # the fourth [1, 2, 3]; the counted requests hit block 1 at depth 1 and their second
    # block at depth 3
    assert [_at(warm, c) for c in (1, 2, 3)] == [8 / 16, 8 / 16, 16 / 16]
    # without warm-up the second request's block 1 (depth 1) counts too, out of 32
    assert [_at(whole, c) for c in (1, 2, 3)] == [12 / 32, 12 / 32, 20 / 32]
    assert warm.recommendation.ceiling == 1.0 and warm.params["warmup"] == 0.5
    # working sets and occupancy are never trimmed
    assert warm.windows[0].useful_ws_peak_bytes == whole.windows[0].useful_ws_peak_bytes
    assert warm.windows[0].ttl_occupancy_peak_bytes == whole.windows[0].ttl_occupancy_peak_bytes


def test_a_warm_up_that_is_not_a_share_is_refused(stream):
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="warm-up"):
            analyze(stream, AnalysisParams(warmup=bad))
