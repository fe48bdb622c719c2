"""Reading a log pauses Python's cyclic collector (analysis/collector.py). That is safe
only if the reading makes no reference cycles, whose memory only the collector frees:
the garbage it finds after a log must not grow with the log's lines, good or bad."""

from __future__ import annotations

import gc
import threading

import orjson
import pytest

from analysis import IngestOptions, UnusableInput, ingest
from analysis.collector import collector_paused

KEY = b"test-secret-0123456789"


def _good(i: int) -> dict:
    history = [{"role": "user", "content": f"turn {t} of session {i % 7}"} for t in range(i % 5)]
    return {"id": f"g{i}", "timestamp": 1_700_000_000 + i, "session_id": f"s{i % 7}",
            "tools": [{"type": "function", "function": {"name": "look", "parameters": {}}}],
            "messages": [{"role": "system", "content": "You answer questions about caches."},
                         *history, {"role": "user", "content": f"question {i}"}]}  # fmt: skip


def _bad(i: int) -> bytes:
    """A line of each kind the readers refuse, in turn."""
    kinds = [
        b'{"id": "x", "messages": []}',  # no timestamp
        b'{"timestamp": 1, "messages": [{"role": "wizard", "content": "x"}]}',
        b"{not json",
        b'{"timestamp": "never", "messages": [{"role": "user", "content": "x"}]}',
        b'{"id": "g0", "timestamp": 1700000000, "messages": [{"role": "user", "content": "x"}]}',
        b"\xff\xfe not utf-8",
        b'{"timestamp": 1, "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"timestamp": 1, "messages": "not a list"}',
    ]
    return kinds[i % len(kinds)]


def _trace(i: int) -> dict:
    return {"timestamp": 1000 * i, "input_length": 600, "output_length": 5,
            "hash_ids": [1, 2 + i]}  # fmt: skip


def _bad_trace(i: int) -> bytes:
    kinds = [
        {**_trace(i), "timestamp": 1e308},
        {**_trace(i), "hash_ids": [[1], [1, 2]]},
        {**_trace(i), "input_length": -5},
        {**_trace(i), "hash_ids": [1, 2, 3]},
    ]
    return orjson.dumps(kinds[i % len(kinds)]) if i % 5 else b"[1, 2"


def _garbage_after(tmp_path, kind: str, lines: int) -> int:
    log = tmp_path / f"{kind}-{lines}.jsonl"
    good, bad = (_good, _bad) if kind == "chat" else (_trace, _bad_trace)
    with log.open("wb") as fh:
        fh.write(b"".join(bad(i) + b"\n" for i in range(40)))  # kept by the format's sniff
        for i in range(lines):
            fh.write(orjson.dumps(good(i)) + b"\n" + bad(i) + b"\n")
    gc.collect()
    with collector_paused():
        stream = ingest([log], IngestOptions(hash_key=KEY, max_bad_lines=10 * lines))
        assert stream.requests == lines and stream.skipped_lines == lines + 40
        del stream
        return gc.collect()


@pytest.mark.parametrize("kind", ["chat", "trace"])
def test_reading_makes_no_cycles_that_grow_with_the_log(tmp_path, kind):
    few, many = _garbage_after(tmp_path, kind, 200), _garbage_after(tmp_path, kind, 2000)
    assert few <= 50 and many <= 50, (few, many)


def test_the_collector_is_restored_after_a_log_and_after_a_refused_one(tmp_path):
    good, refused = tmp_path / "good.jsonl", tmp_path / "refused.jsonl"
    good.write_bytes(orjson.dumps(_good(1)) + b"\n")
    refused.write_bytes(b"{not json\n")
    assert gc.isenabled()
    ingest([good], IngestOptions(hash_key=KEY))
    assert gc.isenabled()
    with pytest.raises(UnusableInput):
        ingest([refused], IngestOptions(hash_key=KEY))
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that had it off finds it off
        ingest([good], IngestOptions(hash_key=KEY))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_ingest_in_another_thread_leaves_the_collector_on(tmp_path):
    """The switch is process-wide: an ingest in a thread (the web server's eager mode)
    must not stop the collection of the other threads' garbage."""
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(orjson.dumps(_good(i)) + b"\n" for i in range(50)))
    seen: dict[str, set[bool]] = {"main": set(), "thread": set()}

    def read(where: str) -> None:
        options = IngestOptions(hash_key=KEY)
        ingest([log], options, progress=lambda _: seen[where].add(gc.isenabled()))

    read("main")
    thread = threading.Thread(target=read, args=("thread",))
    thread.start()
    thread.join()
    assert seen == {"main": {False}, "thread": {True}}
