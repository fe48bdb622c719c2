"""Useful working set and TTL occupancy (metrics.md section 4) on hand-made timelines.

Traces with B = 10 tokens per block and a 4-bytes-per-token profile: a slot is
10 * 4 = 40 bytes.
"""

from __future__ import annotations

from analysis import AnalysisParams, analyze

B = 10
SLOT = B * 4  # tiny_profile: 1 layer * 1 head * head_dim 1 * 2 (K, V) * 2 bytes = 4 B/token


def timeline(trace):
    # t (s): keys
    #   0: 1 2 3 5
    #   4: 5
    #  10: 1 2
    #  30: 1
    #  60: 1 4
    #  72: 4
    # 100: 1
    return [
        trace(0, [1, 2, 3, 5], B),
        trace(4_000, [5], B),
        trace(10_000, [1, 2], B),
        trace(30_000, [1], B),
        trace(60_000, [1, 4], B),
        trace(72_000, [4], B),
        trace(100_000, [1], B),
    ]


def test_useful_working_set_peak_p95_median(ingest_rows, trace, tiny_profile):
    stream = ingest_rows(timeline(trace), block_tokens=B)
    report = analyze(stream, AnalysisParams(windows_s=(50, 15), profile=tiny_profile))
    assert report.slot_bytes == SLOT
    assert report.span_s == 100.0
    w50, w15 = report.windows

    # W = 50: every reuse pair keeps its block live on [t_prev, t):
    #   key 1: 0->10, 10->30, 30->60, 60->100 (reuse times 10, 20, 30, 40 <= 50): [0, 100)
    #   key 2: 0->10: [0, 10);  key 5: 0->4: [0, 4);  key 4: 60->72: [60, 72)
    #   key 3 is never reused.
    # live slots: [0,4): 3   [4,10): 2   [10,60): 1   [60,72): 2   [72,100): 1
    # over the span [0, 100] s: 3 for 4 s, 2 for 6+12 = 18 s, 1 for 50+28 = 78 s
    #   share <= 1: 78% (>= 50%: median 1);  share <= 2: 96% (>= 95%: p95 2)
    assert w50.useful_ws_peak_bytes == 3 * SLOT
    assert w50.useful_ws_p95_bytes == 2 * SLOT
    assert w50.useful_ws_median_bytes == 1 * SLOT

    # W = 15: key 1 only 0->10 (the later reuses take 20, 30, 40 s); keys 2, 5, 4 as above.
    # live: [0,4): 3   [4,10): 2   [10,60): 0   [60,72): 1   [72,100): 0
    #   0 for 50+28 = 78 s (78%), 1 for 12 s (90%), 2 for 6 s (96%), 3 for 4 s
    assert w15.useful_ws_peak_bytes == 3 * SLOT
    assert w15.useful_ws_p95_bytes == 2 * SLOT
    assert w15.useful_ws_median_bytes == 0


def test_ttl_occupancy_peak_counts_distinct_blocks(ingest_rows, trace, tiny_profile):
    stream = ingest_rows(timeline(trace), block_tokens=B)
    report = analyze(stream, AnalysisParams(windows_s=(50, 5), profile=tiny_profile))
    w50, w5 = report.windows
    # W = 50, tau in [10, 50): keys with a reference in (tau - 50, tau] are 1, 2, 3, 5
    # (key 4 appears at 60, when the t=0 references have expired): 4 distinct blocks,
    # although 7 references fall in that range.
    assert w50.ttl_occupancy_peak_bytes == 4 * SLOT
    # the gap to the useful peak (3 slots) is key 3, stored and never reused
    assert w50.useful_ws_peak_bytes == 3 * SLOT
    # W = 5: at tau in [4, 5): 1, 2, 3 (t=0) and 5 (t=4): 4 blocks; from 10 s on at most
    # 2 blocks share 5 s.
    assert w5.ttl_occupancy_peak_bytes == 4 * SLOT


def test_ttl_lifetime_edge(ingest_rows, trace, tiny_profile):
    # block 1 at 0 s, block 2 at 50 s: with W = 50 block 1's last reference (0) is not in
    # (50 - 50, 50], so they are never held together; with W = 50.001 they are.
    stream = ingest_rows([trace(0, [1], B), trace(50_000, [2], B)], block_tokens=B)
    report = analyze(stream, AnalysisParams(windows_s=(50, 50.001), profile=tiny_profile))
    assert [w.ttl_occupancy_peak_bytes for w in report.windows] == [1 * SLOT, 2 * SLOT]
    # nothing is reused: no useful working set at all
    assert [w.useful_ws_peak_bytes for w in report.windows] == [0, 0]
    assert [w.useful_ws_p95_bytes for w in report.windows] == [0, 0]


def test_same_instant_reuse_keeps_nothing_live(ingest_rows, trace, tiny_profile):
    # reuse time 0: the interval [t, t) is empty, so the useful working set stays 0 while
    # the hit still counts
    stream = ingest_rows(
        [trace(0, [1], B), trace(0, [1], B), trace(20_000, [2], B)], block_tokens=B
    )
    report = analyze(stream, AnalysisParams(windows_s=(60,), profile=tiny_profile))
    w = report.windows[0]
    assert w.hit_ratio == B / (3 * B)
    assert w.useful_ws_peak_bytes == 0
    # TTL at tau = 20 s: key 1's last reference (0 s) is in (20 - 60, 20], and key 2 is
    # referenced at 20 s: 2 distinct blocks
    assert w.ttl_occupancy_peak_bytes == 2 * SLOT


def test_working_set_series_covers_the_span(ingest_rows, trace, tiny_profile):
    stream = ingest_rows(timeline(trace), block_tokens=B)
    report = analyze(
        stream, AnalysisParams(windows_s=(50,), profile=tiny_profile, series_buckets=10)
    )
    series = report.windows[0].series
    # 10 buckets of 10 s over [0, 100]
    assert series["t_s"] == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
    # max live slots per bucket, from the W = 50 timeline above
    assert series["useful_ws_bytes"] == [s * SLOT for s in (3, 1, 1, 1, 1, 1, 2, 2, 1, 1)]
