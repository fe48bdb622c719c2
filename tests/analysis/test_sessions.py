"""Sessions (metrics.md section 7) by hand: where a line names its session, the share of
requests that carry one, and every hit ratio split into same-session hits (the block's
previous reference came from the same session) and cross-session hits."""

from __future__ import annotations

import itertools
from collections import OrderedDict

import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest

from .conftest import HASH_KEY
from .synthetic_bailian import bailian_lines

B = 4  # tokens per block: small enough that short prompts have several blocks
SYSTEM = {"role": "system", "content": "You answer questions about the shared handbook."}


def _turns(*texts: str) -> list[dict]:
    """A conversation's messages: the system prompt, then user / assistant turns."""
    roles = ("user", "assistant")
    return [SYSTEM, *({"role": roles[i % 2], "content": t} for i, t in enumerate(texts))]


# (time s, where the session id is, its value, the conversation so far)
ROWS = [
    (0, ("session_id",), "alpha", _turns("How do I reset it?")),
    (10, ("conversation_id",), "beta", _turns("Where is the manual?")),
    (
        20,
        ("metadata", "session_id"),
        "alpha",
        _turns("How do I reset it?", "Hold the button.", "For how long?"),
    ),
    (30, (), None, _turns("Where is the manual?")),  # no session: a session of its own
    (
        40,
        ("prompt_cache_key",),
        "beta",
        _turns("Where is the manual?", "On the shelf.", "Which shelf?"),
    ),
    (50, ("metadata", "conversation_id"), "gamma", _turns("How do I reset it?")),
    (
        60,
        ("body", "session_id"),
        "alpha",
        _turns("How do I reset it?", "Hold the button.", "For how long?", "Ten seconds.", "Thanks"),
    ),
]


def _row(t, path, session, messages) -> dict:
    row: dict = {"timestamp": 1_700_000_000 + t}
    body = {"messages": messages}
    if path and path[0] == "body":
        body["session_id"] = session
        row["body"] = body
        return row
    row.update(body)
    if len(path) == 1:
        row[path[0]] = session
    elif len(path) == 2:
        row[path[0]] = {path[1]: session}
    return row


@pytest.fixture
def stream(write_jsonl):
    rows = [_row(*r) for r in ROWS]
    return ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, block_tokens=B))


def _expected(render, capacity: int | None, window: float | None = None):
    """(hit, same-session hit, all) tokens by brute force: each request's full blocks as
    prefixes of its rendering; an LRU of `capacity` blocks (None: unbounded) looked up
    before the request, touched last to first, remembering who touched each block last."""
    cache: OrderedDict = OrderedDict()  # prefix -> (session of its last toucher, time)
    hit = same = total = 0
    for index, (t, _, session, messages) in enumerate(ROWS):
        owner = session if session is not None else f"request {index}"
        tokens = render([(m["role"], m["content"]) for m in messages])
        total += len(tokens)
        prefixes = [tuple(tokens[: (j + 1) * B]) for j in range(len(tokens) // B)]
        for prefix in prefixes:
            if prefix in cache and (window is None or t - cache[prefix][1] <= window):
                hit += B
                same += B if cache[prefix][0] == owner else 0
        for prefix in reversed(prefixes):
            cache[prefix] = (owner, t)
            cache.move_to_end(prefix)
            if capacity is not None and len(cache) > capacity:
                cache.popitem(last=False)
    return hit, same, total


def test_session_ids_are_read_from_every_place_the_contract_names(stream):
    sessions = stream.req_session.tolist()
    assert sessions[3] == 0  # the request that names none
    alpha, beta = sessions[0], sessions[1]
    assert alpha and beta and alpha != beta
    assert [sessions[i] for i in (2, 6)] == [alpha, alpha]  # metadata.session_id, body
    assert sessions[4] == beta  # prompt_cache_key
    assert sessions[5] not in (0, alpha, beta)  # metadata.conversation_id "gamma"
    # keyed: the stored value is not the id's own bytes or a plain hash of them
    assert alpha != int.from_bytes(b"alpha".ljust(8, b"\0"), "little")


def test_windows_and_infinite_split_same_and_cross(stream, render):
    report = analyze(stream, AnalysisParams(windows_s=(15, 3600)))
    assert report.session_share == 6 / 7
    for window in report.windows:
        hit, same, total = _expected(render, None, window.window_s)
        assert window.hit_ratio == hit / total
        assert window.same_session_hit_ratio == same / total
        assert window.cross_session_hit_ratio == (hit - same) / total
        if window.window_s == 3600:  # (within 15 s only shared material comes back)
            assert 0 < same < hit
    hit, same, total = _expected(render, None)
    assert report.infinite_same_session_hit_ratio == same / total
    assert report.infinite_cross_session_hit_ratio == (hit - same) / total


def test_the_curve_splits_at_every_capacity(stream, render, tiny_profile):
    report = analyze(stream, AnalysisParams(windows_s=(60,), profile=tiny_profile))
    checked = 0
    for point in report.mrc:
        hit, same, total = _expected(render, point["capacity_slots"])
        assert point["hit_ratio"] == hit / total
        assert point["same_session_hit_ratio"] == same / total
        assert point["cross_session_hit_ratio"] == pytest.approx((hit - same) / total, abs=1e-15)
        checked += 1
    assert checked >= 64
    rec = report.recommendation
    hit, same, total = _expected(render, rec.capacity_slots)
    assert (rec.same_session_hit_ratio, rec.hit_ratio) == (same / total, hit / total)


def test_warm_up_leaves_its_requests_out_of_the_split(write_jsonl, render):
    rows = [_row(*r) for r in ROWS]
    stream = ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, block_tokens=B))
    report = analyze(stream, AnalysisParams(windows_s=(3600,), warmup=0.5))
    warm = 3  # floor(0.5 * 7)
    # by hand: the unbounded cache filled by every request, counted from the fourth on
    cache: dict = {}
    same = total = 0
    for index, (_, _, session, messages) in enumerate(ROWS):
        owner = session if session is not None else f"request {index}"
        tokens = render([(m["role"], m["content"]) for m in messages])
        prefixes = [tuple(tokens[: (j + 1) * B]) for j in range(len(tokens) // B)]
        if index >= warm:
            total += len(tokens)
            same += sum(B for p in prefixes if cache.get(p) == owner)
        cache.update(dict.fromkeys(prefixes, owner))
    assert report.warmup_requests == warm
    assert report.windows[0].same_session_hit_ratio == same / total


def test_a_trace_without_sessions_is_all_cross_session(write_jsonl, trace):
    rows = [trace(0, [1, 2], 16), trace(1000, [1, 2, 3], 16), trace(2000, [1, 4], 16)]
    stream = ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, block_tokens=16))
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.session_share == 0.0
    # hits: request 2 on ids 1, 2; request 3 on id 1 (16 tokens each) of 112 prompt tokens
    assert report.windows[0].hit_ratio == 48 / 112
    assert report.windows[0].cross_session_hit_ratio == 48 / 112
    assert report.windows[0].same_session_hit_ratio == 0.0


@pytest.mark.parametrize("rate", [0.3, 0.4, 0.5, 0.6])
def test_a_sampled_curve_splits_into_two_growing_parts(write_jsonl, rate):
    """With SHARDS sampling the split is estimated past the exact top of the stack (8
    slots here), but hits at C are a subset of hits at C + 1 in each part: both parts
    grow with capacity (to a token of rounding) and add up to the curve."""
    stream = ingest([write_jsonl(bailian_lines())],
                    IngestOptions(hash_key=HASH_KEY, format="bailian"))  # fmt: skip
    report = analyze(stream, AnalysisParams(windows_s=(60,), warmup=0.5, shards_rate=rate,
                                            shards_exact_slots=8))  # fmt: skip
    assert not report.mrc_exact
    token = 1 / int(stream.req_prompt_tokens[report.warmup_requests :].sum())
    points = report.mrc
    assert len(points) > 20 and points[-1]["capacity_slots"] > 8
    for part in ("same_session_hit_ratio", "cross_session_hit_ratio"):
        values = [p[part] for p in points]
        assert all(b >= a - 1.5 * token for a, b in itertools.pairwise(values)), part
        assert values[-1] > 0
    for p in points:
        assert p["same_session_hit_ratio"] + p["cross_session_hit_ratio"] == pytest.approx(
            p["hit_ratio"], abs=1e-12)  # fmt: skip
