"""The bytes of a log before any JSON: blank lines, byte-order marks, the user's file
names (issue #12). Each test fails on the reader before the fix."""

from __future__ import annotations

import gzip
import random
import time
import zlib

import numpy as np
import orjson
import pytest

from analysis import IngestOptions, UnusableInput, ingest
from analysis.errors import TooManyBadLines
from analysis.ingest import Progress, ingest_in_parts
from analysis.readers import InflateLimit, LogFile, ReadLimits, read_trace

KEY = b"test-secret-0123456789"
BOM = b"\xef\xbb\xbf"


def _chat(i: int) -> dict:
    return {"id": f"r{i}", "timestamp": 1_700_000_000 + i, "messages": [
        {"role": "system", "content": "You answer questions about caches."},
        {"role": "user", "content": f"question number {i}"}]}  # fmt: skip


def _trace(i: int) -> dict:
    return {"timestamp": 1000 * i, "input_length": 600, "output_length": 5, "hash_ids": [1, 2 + i]}


def _lines(*items, prefix: bytes = b"") -> bytes:
    return b"".join(prefix + (x if isinstance(x, bytes) else orjson.dumps(x)) + b"\n"
                    for x in items)  # fmt: skip


def _newlines_gz(path, mib: int) -> None:
    """A gzip of `mib` MiB of newlines (about 1,000x smaller), written a MiB at a time."""
    block = b"\n" * (1 << 20)
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        for _ in range(mib):
            out.write(z.compress(block))
        out.write(z.flush())


# --- blank lines ---------------------------------------------------------------------------
def test_a_gzip_of_newlines_ends_in_time_proportional_to_its_bytes_with_progress(tmp_path):
    log = tmp_path / "newlines.jsonl.gz"
    _newlines_gz(log, 128)  # 134 M blank lines; the old reader spent ~27 s on them at "0/0"
    seen: list[Progress] = []
    limits = ReadLimits(max_inflate_ratio=10**6, max_blank_lines=None)
    start = time.perf_counter()
    with pytest.raises(UnusableInput) as raised:
        ingest([log], IngestOptions(hash_key=KEY, limits=limits), progress=seen.append)
    took = time.perf_counter() - start
    assert str(raised.value) == (
        f"no usable request in newlines.jsonl.gz (only blank lines: {128 << 20:,})"
    )
    assert took < 8, took  # 1-3 s here: inflating, then one regex match per 64 KiB chunk
    # progress in compressed bytes, growing, long before any request was found
    reading = [p.done for p in seen if p.stage == "reading" and p.requests == 0]
    size = log.stat().st_size
    assert len(reading) > 10 and 0 < reading[0] < reading[-1] <= size
    assert reading == sorted(reading) and all(p.total == size for p in seen)


def test_past_the_blank_line_budget_the_ingest_stops_at_once_and_says_why(tmp_path):
    log = tmp_path / "newlines.jsonl.gz"
    _newlines_gz(log, 64)
    limits = ReadLimits(max_inflate_ratio=10**6)  # the default budget: 1,000,000
    start = time.perf_counter()
    with pytest.raises(TooManyBadLines) as raised:
        ingest([log], IngestOptions(hash_key=KEY, limits=limits))
    assert time.perf_counter() - start < 2  # stopped after ~1 MB, not 64
    assert str(raised.value) == (
        "newlines.jsonl.gz: stopped at line 1,048,576: 1,048,576 blank (whitespace-only) "
        "lines against 0 with content, past the budget of 1,000,000 more blank lines than "
        "lines with content; is this a log?"
    )


def test_blank_lines_are_counted_noted_and_keep_line_numbers(tmp_path):
    log = tmp_path / "spaced.jsonl"
    # every request followed by a blank line (some tools write that), then 3 more
    body = _lines(*[x for i in range(20) for x in (_chat(i), b"  \t\r")]) + b"\n" * 3
    log.write_bytes(body + _lines(b"{oops"))
    stream = ingest([log], IngestOptions(hash_key=KEY, limits=ReadLimits(max_blank_lines=5)))
    assert stream.requests == 20 and stream.req_line.tolist() == list(range(1, 40, 2))
    assert stream.errors == [
        {"line": 44, "reason": "not valid JSON (unexpected character, expected a string key)"}
    ]
    assert "23 blank lines were ignored" in stream.notes
    # 20 lines with content, 26 blank: more than 5 beyond one per content line
    log.write_bytes(body + b"\n" * 3)
    with pytest.raises(TooManyBadLines, match=r"spaced.jsonl: stopped at line 46: 26 blank"):
        ingest([log], IngestOptions(hash_key=KEY, limits=ReadLimits(max_blank_lines=5)))


def _reference_lines(data: bytes) -> list[tuple[int, bytes]]:
    """What the reader must hand out: every line with content, BOMs and blanks removed."""
    out = []
    for number, line in enumerate(data.split(b"\n"), 1):
        text = line.replace(BOM, b"")
        if text.strip():
            out.append((number, text.strip()))
    return out


@pytest.mark.parametrize("packed", [False, True])
def test_lines_across_chunk_edges_are_read_whole(tmp_path, packed):
    """~3 MiB of lines of random lengths, blank runs, CRLF and marks: chunk edges (1 MiB
    plain, 64 KiB inflated) fall inside lines, blank runs and byte-order marks."""
    rnd = random.Random(5)
    parts = []
    for i in range(6000):
        kind = rnd.random()
        if kind < 0.2:
            parts.append(rnd.choice([b"", b" ", b"\t\r", BOM, b" " * rnd.randint(0, 3000)]))
        else:
            prefix = BOM if kind < 0.4 else b""
            parts.append(prefix + orjson.dumps({"i": i, "pad": "x" * rnd.randint(0, 2000)}))
    data = b"\n".join(parts) + b"\r\n"
    log = tmp_path / "edges.jsonl"
    log.write_bytes(gzip.compress(data, 1) if packed else data)
    got = [(n, bytes(raw).replace(BOM, b"").strip()) for n, raw in LogFile(log).lines()]
    assert got == _reference_lines(data)


# --- byte-order marks ----------------------------------------------------------------------
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("every_line", [False, True])
def test_a_byte_order_mark_loses_no_line(tmp_path, packed, every_line):
    rows = _lines(*[_chat(i) for i in range(1, 6)], prefix=BOM if every_line else b"")
    data = rows if every_line else BOM + rows
    log = tmp_path / "excel.jsonl"
    log.write_bytes(gzip.compress(data) if packed else data)
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.requests == 5 and stream.req_line.tolist() == [1, 2, 3, 4, 5]
    assert not stream.errors


@pytest.mark.parametrize("packed", [False, True])
def test_byte_order_marks_keep_the_column_wise_trace_path(tmp_path, packed):
    rows = [_trace(i) for i in range(1, 40)]
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(_lines(*rows))
    marked = tmp_path / "marked.jsonl"
    data = _lines(*rows, prefix=BOM)
    marked.write_bytes(gzip.compress(data) if packed else data)
    want, got = read_trace(clean, 512), read_trace(marked, 512)
    assert want is not None and got is not None  # None: the slow line path took over
    assert np.array_equal(got.keys, want.keys) and np.array_equal(got.t_us, want.t_us)
    assert ingest([marked], IngestOptions(hash_key=KEY)).requests == 39


def test_each_file_of_an_upload_may_start_with_a_mark(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    first.write_bytes(BOM + _lines(_chat(1), _chat(2)))
    second.write_bytes(gzip.compress(BOM + _lines(_chat(3), _chat(4))))
    stream = ingest([first, second], IngestOptions(hash_key=KEY))
    assert stream.requests == 4 and not stream.errors
    traces = tmp_path / "t1.jsonl", tmp_path / "t2.jsonl"
    for n, path in enumerate(traces):
        path.write_bytes(BOM + _lines(*[_trace(10 * n + i) for i in range(1, 4)]))
    stream = ingest(list(traces), IngestOptions(hash_key=KEY))
    assert stream.requests == 6 and not stream.errors


def test_a_split_ingest_of_marked_lines_equals_the_whole(tmp_path):
    log = tmp_path / "marked.jsonl"
    log.write_bytes(_lines(*[_chat(i) for i in range(1, 301)], prefix=BOM))
    whole = ingest([log], IngestOptions(hash_key=KEY))
    parts = ingest_in_parts(log, IngestOptions(hash_key=KEY), 3)
    assert whole.requests == parts.requests == 300
    assert np.array_equal(whole.ref_key, parts.ref_key) and not parts.errors


# --- the user's own file names ----------------------------------------------------------
def test_every_message_names_the_users_files_not_the_stored_ones(tmp_path):
    stored = [tmp_path / "9f1c2d.log", tmp_path / "77ab01.log"]
    stored[0].write_bytes(_lines(_chat(1), b"{oops"))
    stored[1].write_bytes(_lines(_chat(2), b"[1]"))
    names = ["monday.jsonl", "tuesday.jsonl"]
    stream = ingest(stored, IngestOptions(hash_key=KEY), names=names)
    assert stream.files == names
    assert [(e["file"], e["line"]) for e in stream.errors] == [("monday.jsonl", 2),
                                                               ("tuesday.jsonl", 2)]  # fmt: skip
    stored[0].write_bytes(b"{oops}\n")
    with pytest.raises(UnusableInput) as raised:
        ingest(stored[:1], IngestOptions(hash_key=KEY), names=names[:1])
    assert str(raised.value).startswith("no usable request in monday.jsonl (line 1:")
    bomb = tmp_path / "0c0c0c.log"
    with gzip.GzipFile(bomb, "wb") as fh:
        fh.write(_lines(_chat(1)) + b" " * 5_000_000)
    with pytest.raises(InflateLimit, match=r"^bomb\.jsonl\.gz: decompresses to more than"):
        ingest([bomb], IngestOptions(hash_key=KEY), names=["bomb.jsonl.gz"])


def test_an_upload_of_different_formats_says_so_naming_both_files(tmp_path):
    chat, trace = tmp_path / "5e5e.log", tmp_path / "a0a0.log"
    chat.write_bytes(_lines(_chat(1), _chat(2)))
    trace.write_bytes(_lines(_trace(1), _trace(2)))
    for paths, names, message in (
        ([chat, trace], ["gateway.jsonl", "mooncake.jsonl"],
         "the files are in different formats: gateway.jsonl is a chat log, mooncake.jsonl is "
         "a pre-hashed (Mooncake) trace; upload each kind on its own"),
        ([trace, chat], ["mooncake.jsonl", "gateway.jsonl"],
         "the files are in different formats: mooncake.jsonl is a pre-hashed (Mooncake) "
         "trace, gateway.jsonl is a chat log; upload each kind on its own"),
    ):  # fmt: skip
        with pytest.raises(UnusableInput) as raised:
            ingest(paths, IngestOptions(hash_key=KEY), names=names)
        assert str(raised.value) == message


def test_a_split_ingest_says_what_one_pass_says_about_blanks_and_the_span(tmp_path):
    rows = [_chat(i) for i in range(1, 301)]
    rows[150]["timestamp"] = 0  # a placeholder time, in the second part
    log = tmp_path / "spaced.jsonl"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" + b"\n" * (i % 3) for i, r in enumerate(rows)))
    whole = ingest([log], IngestOptions(hash_key=KEY), names=["mine.jsonl"])
    parts = ingest_in_parts(log, IngestOptions(hash_key=KEY), 3, name="mine.jsonl")
    assert whole.notes[:2] == [
        "300 blank lines were ignored",
        "the requests span 19,676 days (the earliest on line 301, the latest on line 598): "
        "timestamps this far apart usually mean a wrong unit, clock or placeholder (such as "
        "0); check them",
    ]
    assert parts.notes == whole.notes and parts.files == ["mine.jsonl"]


@pytest.mark.parametrize("packed", [False, True])
def test_a_trace_with_blank_lines_is_numbered_and_noted_as_the_line_reader_does(tmp_path, packed):
    rows = [_trace(i) for i in range(1, 7)]
    data = _lines(rows[0], rows[1]) + b"\n \n" + _lines(*rows[2:])[:-1]  # (no final newline)
    log = tmp_path / "trace.jsonl"
    log.write_bytes(gzip.compress(data) if packed else data)
    assert read_trace(log, 512) is None  # Arrow would number rows 1..6, not lines
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.req_line.tolist() == [1, 2, 5, 6, 7, 8] and not stream.errors
    assert stream.notes == ["2 blank lines were ignored"]
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(_lines(*rows)[:-1])
    assert read_trace(clean, 512) is not None  # no final newline is not a blank line


def test_long_garbage_before_the_first_request_is_named_line_by_line(tmp_path):
    """The first lines are read once, to tell a trace from a chat log, and then handed on;
    long bad lines among them are kept as their errors, never re-read."""
    garbage = b"{" + b"x" * (2 << 20)  # past the 1 MiB precheck size, not JSON
    log = tmp_path / "chat.jsonl"
    log.write_bytes(_lines(garbage, b"\n", garbage, _chat(1), _chat(2)))
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.req_line.tolist() == [5, 6]
    assert [e["line"] for e in stream.errors] == [1, 4]
    assert all(e["reason"].startswith("not valid JSON (") for e in stream.errors)
    assert stream.notes == ["2 blank lines were ignored"]  # (the b"\n" item: lines 2 and 3)
