"""Token hit ratios (metrics.md section 3): per window and infinite, window edges, ties,
uncached tails, chained prefix keys and sharing scopes."""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, analyze
from tests.analysis.factories import chat_row

B = 100  # tokens per block in the pre-hashed traces below


def hit_ratios(report) -> dict[float, float]:
    return {w.window_s: w.hit_ratio for w in report.windows}


@pytest.mark.parametrize("reverse", [False, True])
def test_hit_ratio_per_window_and_infinite(ingest_rows, trace, reverse):
    lines = [
        trace(0, [1, 2, 3], B, last=50),  # 100+100+50 = 250 tokens
        trace(10_000, [1, 2], B),  # 200 tokens; 1, 2 reused after 10 s
        trace(100_000, [1, 2, 4], B),  # 300 tokens; 1, 2 after 90 s; 4 new
        trace(1_000_000, [1, 2, 3], B, last=50),  # 250; 1, 2 after 900 s, 3 after 1000 s
    ]
    # lines in reverse time order are sorted at ingest: same expectations
    stream = ingest_rows(lines[::-1] if reverse else lines, block_tokens=B)
    report = analyze(stream, AnalysisParams(windows_s=(9.999, 10, 90, 900, 1000)))

    total = 250 + 200 + 300 + 250  # = 1000, every prompt token
    assert report.requests == 4
    assert report.prompt_tokens == total
    assert report.block_refs == 3 + 2 + 3 + 3
    assert report.distinct_blocks == 4  # ids 1, 2, 3, 4
    assert report.block_tokens == B
    assert report.span_s == 1000.0  # first request at 0 ms, last at 1,000,000 ms

    assert hit_ratios(report) == {
        9.999: 0 / total,  # the shortest reuse is 10 s
        10.0: 200 / total,  # request 2: blocks 1, 2
        90.0: (200 + 200) / total,  # + request 3: blocks 1, 2
        900.0: (200 + 200 + 200) / total,  # + request 4: blocks 1, 2
        1000.0: (200 + 200 + 200 + 50) / total,  # + request 4: block 3 (50 tokens)
    }
    assert [w.hit_tokens for w in report.windows] == [0, 200, 400, 600, 650]
    assert report.infinite_hit_ratio == (200 + 200 + 200 + 50) / total


def test_window_edge_is_inclusive(ingest_rows, trace):
    # reuse after exactly 60 s, then after 60.001 s
    stream = ingest_rows(
        [trace(0, [7], B), trace(60_000, [7], B), trace(60_000 + 60_001, [7], B)],
        block_tokens=B,
    )
    report = analyze(stream, AnalysisParams(windows_s=(59.999, 60, 60.001)))
    total = 3 * B
    assert hit_ratios(report) == {
        59.999: 0 / total,
        60.0: B / total,  # reuse time == W hits; W + 1 ms misses
        60.001: 2 * B / total,
    }


def test_same_timestamp_is_reuse_time_zero_and_file_order_is_kept(ingest_rows, trace):
    stream = ingest_rows(
        [
            trace(9_000, [9], B),  # line 1, later than the next two: forces a sort
            trace(5_000, [1], B, last=60),  # line 2: one block of 60 tokens
            trace(5_000, [1, 2], B),  # line 3, same instant: block 1 holds 100 tokens
        ],
        block_tokens=B,
    )
    # sorted by time, ties in file order
    assert stream.req_line.tolist() == [2, 3, 1]
    assert any("out of time order" in note for note in stream.notes)

    report = analyze(stream, AnalysisParams(windows_s=(0.001,)))
    total = 60 + 200 + 100
    # line 3 reuses block 1 of line 2 after 0 s: a hit within any window, weighted by the
    # 100 tokens line 3 holds in it. (Reversed order would give 60 tokens instead.)
    assert report.windows[0].hit_ratio == 100 / total
    assert report.infinite_hit_ratio == 100 / total


def test_tail_tokens_count_in_the_denominator_only(ingest_rows, render):
    messages = [("user", "What is the capital of France?")]
    n = len(render(messages))
    block = 4
    assert n % block != 0 and n // block >= 1  # the prompt has a tail
    row = {"messages": [{"role": "user", "content": messages[0][1]}]}
    stream = ingest_rows(
        [{**row, "timestamp": 1_700_000_000}, {**row, "timestamp": 1_700_000_001}],
        block_tokens=block,
    )
    report = analyze(stream, AnalysisParams(windows_s=(10,)))

    full = n // block  # full blocks per request; the tail (n % block tokens) has no key
    assert report.prompt_tokens == 2 * n
    assert report.block_refs == 2 * full
    assert report.distinct_blocks == full
    # request 2 hits its full blocks only; both prompts' tails stay in the denominator
    assert report.windows[0].hit_ratio == full * block / (2 * n)
    assert report.infinite_hit_ratio == full * block / (2 * n)


def test_keys_chain_so_the_same_block_after_a_different_prefix_misses(ingest_rows, render):
    block = 4
    shared = "The quick brown fox jumps over the lazy dog near the quiet river bank today."
    first, second = "Alpha question", "Beta question"
    one = render([("user", first), ("user", shared)])
    two = render([("user", second), ("user", shared)])
    assert len(one) == len(two)  # the shared message sits at the same offsets
    same_blocks = [
        j
        for j in range(len(one) // block)
        if one[j * block : (j + 1) * block] == two[j * block : (j + 1) * block]
    ]
    assert same_blocks  # hashing blocks on their own would find hits...
    assert 0 not in same_blocks  # ...but the first blocks differ, so no prefix is shared
    rows = [
        chat_row(1000, ("user", first), ("user", shared)),
        chat_row(1001, ("user", second), ("user", shared)),
    ]
    stream = ingest_rows(rows, block_tokens=block)
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.infinite_hit_ratio == 0.0
    assert report.distinct_blocks == 2 * (len(one) // block)


def test_hits_form_a_prefix_in_chat_logs(ingest_rows, render):
    block = 4
    system = "You are a helpful assistant that answers in one short sentence."
    q1, q2 = "What is the capital of France?", "How tall is Mont Blanc?"
    one = render([("system", system), ("user", q1)])
    two = render([("system", system), ("user", q2)])
    # the longest common prefix, in whole blocks, is what request 2 can reuse
    common = 0
    while common < min(len(one), len(two)) and one[common] == two[common]:
        common += 1
    shared_blocks = common // block
    assert shared_blocks >= 1
    rows = [
        chat_row(0, ("system", system), ("user", q1)),
        chat_row(5, ("system", system), ("user", q2)),
    ]
    stream = ingest_rows(rows, block_tokens=block)
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.prompt_tokens == len(one) + len(two)
    assert report.infinite_hit_ratio == shared_blocks * block / (len(one) + len(two))


@pytest.mark.parametrize(
    ("scope", "hit_tokens"),
    [
        # global: r2 hits 1,2; r3 hits 1; r4 hits 1,2
        ("global", 200 + 100 + 200),
        # tenant: r2 is tenant B's first request; r3 (A) hits 1; r4 (A) hits 1,2
        ("tenant", 0 + 100 + 200),
        # user = tenant+user: only r4 (A, u1) finds r1 (A, u1). r2 has user u1 too but in
        # tenant B, so a salt of the user alone would wrongly let it hit.
        ("user", 0 + 0 + 200),
    ],
)
def test_scope_salts(ingest_rows, trace, scope, hit_tokens):
    stream = ingest_rows(
        [
            trace(0, [1, 2], B, tenant="A", user="u1"),
            trace(1_000, [1, 2], B, tenant="B", user="u1"),
            trace(2_000, [1, 3], B, metadata={"tenant": "A", "user": "u2"}),
            trace(3_000, [1, 2, 4], B, tenant="A", user="u1"),
        ],
        block_tokens=B,
    )
    report = analyze(stream, AnalysisParams(windows_s=(60,), scope=scope))
    total = 200 + 200 + 200 + 300
    assert report.windows[0].hit_ratio == hit_tokens / total
    assert report.infinite_hit_ratio == hit_tokens / total
    assert report.scope == scope
    # distinct (key, salt) pairs: global {1,2,3,4}; tenant A{1,2,3,4} B{1,2}; user
    # (A,u1){1,2,4} (B,u1){1,2} (A,u2){1,3}
    assert report.distinct_blocks == {"global": 4, "tenant": 6, "user": 7}[scope]


def test_chat_scopes_with_two_tenants_sharing_a_prefix(ingest_rows, render):
    system = "You are the support assistant of Example Corp. Answer politely and briefly."
    messages = [("system", system), ("user", "Where is my order?")]
    n = len(render(messages))
    block = 8
    full = n // block
    assert full >= 1
    body = [{"role": r, "content": t} for r, t in messages]
    stream = ingest_rows(
        [
            {"timestamp": 100, "metadata": {"tenant": "acme"}, "messages": body},
            {"timestamp": 101, "metadata": {"tenant": "globex"}, "messages": body},
            {"timestamp": 102, "metadata": {"tenant": "acme"}, "messages": body},
        ],
        block_tokens=block,
    )
    total = 3 * n
    glob = analyze(stream, AnalysisParams(windows_s=(60,), scope="global"))
    tenant = analyze(stream, AnalysisParams(windows_s=(60,), scope="tenant"))
    assert glob.infinite_hit_ratio == 2 * full * block / total  # requests 2 and 3 hit
    assert tenant.infinite_hit_ratio == 1 * full * block / total  # only acme's second
