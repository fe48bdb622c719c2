"""The block stream saved with BlockStream.save() and loaded back gives the same report."""

from __future__ import annotations

import dataclasses

import numpy as np
import orjson
import pytest

from analysis import AnalysisParams, BlockStream, HostBudget, IngestOptions, analyze, ingest

TERSE = {"role": "system", "content": "You are terse."}
# a user message holding one document (a content part of type "document")
CONTRACT = {
    "role": "user",
    "content": [{"type": "document", "text": "Clause 1. " * 40, "title": "contract.txt"}],
}
# one tenant's short request, sent twice
BOB_SAYS_HI = {
    "tenant": "globex",
    "user": "bob",
    "model": "small",
    "messages": [TERSE, {"role": "user", "content": "Hi there"}],
}
CHAT = [
    {
        "timestamp": 50,
        "metadata": {"tenant": "acme", "user": "ann"},  # out of order: sorted
        "messages": [
            TERSE,
            CONTRACT,
            {"role": "user", "content": "Summarise it."},
        ],
        "usage": {"completion_tokens": 9},
    },
    {"timestamp": 10, **BOB_SAYS_HI},
    "garbage line",
    {
        "timestamp": 70,
        "metadata": {"tenant": "acme", "user": "cid"},
        "messages": [
            TERSE,
            CONTRACT,
            {"role": "user", "content": "List the parties."},
        ],
    },
    {"timestamp": 75, **BOB_SAYS_HI},
]


def same_stream(a: BlockStream, b: BlockStream) -> None:
    for f in dataclasses.fields(BlockStream):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f.name
            assert np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("previews", [False, True])
def test_chat_stream_round_trip(write_jsonl, tmp_path, previews):
    path = write_jsonl(CHAT)
    stream = ingest(
        [path], IngestOptions(hash_key=b"test-secret-0123456789", block_tokens=8, previews=previews)
    )
    assert stream.requests == 4 and stream.skipped_lines == 1
    assert stream.req_line.tolist() == [2, 1, 4, 5]  # sorted by time
    assert (stream.seg_preview is not None) is previews

    folder = stream.save(tmp_path / "streams" / "one")
    loaded = BlockStream.load(folder)
    same_stream(stream, loaded)
    host = HostBudget(host_ram_bytes=2**30, reserves_bytes={"os": 2**28})
    for scope in ("global", "tenant", "user"):
        params = AnalysisParams(
            windows_s=(10, 60), scope=scope, lifetime_s=30, tp=2, doc_min_tokens=16, host=host
        )
        assert analyze(stream, params).to_json() == analyze(loaded, params).to_json()


def test_trace_stream_round_trip_and_overwrite(write_jsonl, tmp_path, trace):
    path = write_jsonl(
        [
            trace(0, [1, 2], 512, last=100, tenant="a"),
            trace(2_000, [1, 3], 512, tenant="b"),
            trace(1_000, [1, 2, 2**63 + 5], 512, last=7),
        ]
    )
    stream = ingest([path], IngestOptions(hash_key=b"test-secret-0123456789"))
    folder = tmp_path / "s"
    stream.save(folder)
    (folder / "stale.txt").write_text("left from an earlier save")
    stream.save(folder)  # replaces the folder as a whole
    assert not (folder / "stale.txt").exists()
    loaded = BlockStream.load(folder)
    same_stream(stream, loaded)
    # ids are kept as given, even past 2**63
    assert loaded.ref_key.tolist() == [1, 2, 1, 2, 2**63 + 5, 1, 3]
    params = AnalysisParams(windows_s=(1, 5))
    assert analyze(stream, params).to_dict() == analyze(loaded, params).to_dict()
    # hand check on the loaded copy: refs 1,2 | 1,2,X | 1,3 at 0, 1, 2 s
    # within 1 s: request 2 hits 1, 2 (1024 tokens); request 3 hits 1 (512)
    total = (512 + 100) + (512 + 512 + 7) + (512 + 512)
    assert analyze(loaded, params).windows[0].hit_ratio == (512 + 512 + 512) / total


def test_wrong_format_version_is_refused(write_jsonl, tmp_path, trace):
    stream = ingest(
        [write_jsonl([trace(0, [1], 512)])], IngestOptions(hash_key=b"test-secret-0123456789")
    )
    folder = stream.save(tmp_path / "s")
    meta = orjson.loads((folder / "meta.json").read_bytes())
    meta["format_version"] = 999
    (folder / "meta.json").write_bytes(orjson.dumps(meta))
    with pytest.raises(ValueError, match="format"):
        BlockStream.load(folder)
