"""Replay traces: exported, then analyzed again as a pre-hashed trace, they give the
numbers of the stream they came from; nothing of the keys or content is in them."""

from __future__ import annotations

import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.replay import ReplayOptions, replay_lines, summary
from bench.generate import chat_requests, mooncake_requests

KEY = b"test-secret-0123456789"
SAME = ("requests", "prompt_tokens", "block_refs", "distinct_blocks", "span_s",
        "infinite_hit_ratio", "windows", "mrc", "recommendation", "reuse_histogram")  # fmt: skip


def _chat_log(path):
    rows = list(chat_requests(400, seed=12, documents=10, doc_words=(150, 400)))
    for i, row in enumerate(rows):  # whole milliseconds: what a trace can carry
        row["timestamp"] = 1_790_000_000_000 + i * 1_733
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _export(stream, path, **options):
    path.write_bytes(b"".join(replay_lines(stream, ReplayOptions(**options))))
    return path


@pytest.mark.parametrize("scope", ["global", "tenant"])
def test_a_chat_upload_round_trips_through_its_replay_trace(tmp_path, scope):
    stream = ingest([_chat_log(tmp_path / "chat.jsonl")],
                    IngestOptions(hash_key=KEY, block_tokens=64))  # fmt: skip
    trace = _export(stream, tmp_path / "replay.jsonl", labels=True)
    again = ingest([trace], IngestOptions(hash_key=KEY, format="mooncake", block_tokens=64,
                                          trace_partial_cached=False))  # fmt: skip
    params = AnalysisParams(scope=scope, windows_s=(60.0, 600.0, 3600.0), lifetime_s=900.0)
    a, b = analyze(stream, params).to_dict(), analyze(again, params).to_dict()
    for report in (a, b):  # the segment view needs the chat log's messages: not in a trace
        for window in report["windows"]:
            window.pop("segments", None), window.pop("misplaced_reuse_tokens", None)
    for name in SAME:
        assert a[name] == b[name], name
    assert 0 < a["windows"][0]["hit_ratio"] < a["infinite_hit_ratio"] < 1  # not a trivial log


def test_a_trace_upload_round_trips_with_its_partial_blocks(tmp_path):
    rows = list(mooncake_requests(600, seed=5))
    source = tmp_path / "trace.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    stream = ingest([source], IngestOptions(hash_key=KEY))
    again = ingest([_export(stream, tmp_path / "replay.jsonl")], IngestOptions(hash_key=KEY))
    a, b = analyze(stream, AnalysisParams()).to_dict(), analyze(again, AnalysisParams()).to_dict()
    for name in SAME:
        assert a[name] == b[name], name
    lines = [orjson.loads(x) for x in (tmp_path / "replay.jsonl").read_bytes().splitlines()]
    assert [x["input_length"] for x in lines] == [r["input_length"] for r in rows]
    assert [x["timestamp"] for x in lines] == [r["timestamp"] - rows[0]["timestamp"] for r in rows]


def test_ids_are_small_first_seen_integers_and_equal_prefixes_stay_equal(tmp_path):
    stream = ingest([_chat_log(tmp_path / "chat.jsonl")], IngestOptions(hash_key=KEY))
    lines = [orjson.loads(x) for x in replay_lines(stream, ReplayOptions())]
    seen: list[int] = []
    for line in lines:
        for h in line["hash_ids"]:
            assert h <= len(seen)  # a new id is always the next integer
            if h == len(seen):
                seen.append(h)
    # the same key gives the same id: requests sharing the system prompt share id 0
    assert sum(1 for x in lines if x["hash_ids"][:1] == [0]) > 1
    # ids are dense: every integer up to the largest is used (nothing else could survive)
    used = {h for x in lines for h in x["hash_ids"]}
    assert used == set(range(len(used)))
    assert all(
        set(x) == {"timestamp", "input_length", "output_length", "hash_ids"} for x in lines
    )  # fmt: skip  (no labels unless asked)


def test_time_range_tenants_and_time_scale(tmp_path):
    stream = ingest([_chat_log(tmp_path / "chat.jsonl")], IngestOptions(hash_key=KEY))
    options = ReplayOptions(start_s=100.0, end_s=400.0, tenants=["tenant-1"], time_scale=0.5,
                            labels=True)  # fmt: skip
    lines = [orjson.loads(x) for x in replay_lines(stream, options)]
    t = (stream.req_t_us - stream.req_t_us[0]) / 1e6
    tenant = [stream.tenants[c] for c in stream.req_tenant]
    expected = [i for i in range(stream.requests)
                if 100.0 <= t[i] < 400.0 and tenant[i] == "tenant-1"]  # fmt: skip
    assert len(lines) == len(expected) > 10 and {x["tenant"] for x in lines} == {"tenant-1"}
    first = stream.req_t_us[expected[0]]
    assert [x["timestamp"] for x in lines] == [
        round((stream.req_t_us[i] - first) / 1000 * 0.5) for i in expected
    ]
    seen = -1  # a subset numbers its own ids from 0, in order of first appearance
    for line in lines:
        for h in line["hash_ids"]:
            assert h <= seen + 1
            seen = max(seen, h)
    info = summary(stream, options)
    assert info.requests == len(lines) and info.span_ms == lines[-1]["timestamp"]
    assert info.distinct_ids == len({h for x in lines for h in x["hash_ids"]}) == seen + 1
    with pytest.raises(ValueError, match="time scale"):
        list(replay_lines(stream, ReplayOptions(time_scale=0)))
