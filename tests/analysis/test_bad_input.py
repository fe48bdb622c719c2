"""Bad input: every kind of broken log gives a message naming the line and the reason,
keeps the valid lines, and never raises anything but UnusableInput (with its reason)."""

from __future__ import annotations

import gzip
import os
import random

import orjson
import pytest

from analysis import IngestOptions, UnusableInput, ingest
from analysis.errors import TooManyBadLines
from analysis.readers import InflateLimit, ReadLimits

KEY = b"test-secret-0123456789"


def _chat(i: int, **extra) -> dict:
    return {"id": f"r{i}", "timestamp": 1_700_000_000 + i, "messages": [
        {"role": "system", "content": "You answer questions about caches."},
        {"role": "user", "content": f"question number {i}"}], **extra}  # fmt: skip


def _trace(i: int, **extra) -> dict:
    return {"timestamp": 1000 * i, "input_length": 600, "output_length": 5,
            "hash_ids": [1, 2 + i], **extra}  # fmt: skip


def _lines(*items) -> bytes:
    return b"".join((x if isinstance(x, bytes) else orjson.dumps(x)) + b"\n" for x in items)


def _ingest(path, **options):
    return ingest([path], IngestOptions(hash_key=KEY, **options))


def _reasons(stream) -> dict[int, str]:
    return {e["line"]: e["reason"] for e in stream.errors}


def test_duplicate_request_ids_keep_the_first_line(tmp_path):
    log = tmp_path / "chat.jsonl"
    log.write_bytes(_lines(_chat(1), _chat(2), _chat(3, id="r1"), _chat(4)))
    stream = _ingest(log)
    assert stream.requests == 3 and stream.req_line.tolist() == [1, 2, 4]
    assert _reasons(stream) == {3: "request id 'r1' was already used by an earlier line "
                                   "(logged twice?); the first was kept"}  # fmt: skip


def test_a_refused_line_does_not_claim_its_id(tmp_path):
    log = tmp_path / "chat.jsonl"
    log.write_bytes(_lines(_chat(1, timestamp="never"), _chat(2, id="r1")))
    stream = _ingest(log)
    assert stream.req_line.tolist() == [2] and list(_reasons(stream)) == [1]


def test_unknown_roles_skip_the_line_and_name_the_role(tmp_path):
    bad = _chat(2)
    bad["messages"][1]["role"] = "narrator"
    log = tmp_path / "chat.jsonl"
    log.write_bytes(_lines(_chat(1), bad))
    stream = _ingest(log)
    assert stream.requests == 1
    assert _reasons(stream)[2].startswith(
        "OpenAI chat body: message 1 has the unknown role 'narrator' (known:"
    )


def test_unknown_content_parts_are_ignored_and_said_once(tmp_path):
    def with_parts(i, parts):
        row = _chat(i)
        row["messages"][1]["content"] = parts
        return row

    log = tmp_path / "chat.jsonl"
    log.write_bytes(_lines(
        with_parts(1, [{"type": "text", "text": "hello"}, {"type": "hologram", "x": 1}]),
        with_parts(2, [{"type": "hologram"}, {"type": ["not", "hashable"]}, {"type": "image_url"}]),
        with_parts(3, [{"type": "text", "text": "hello"}]),
    ))  # fmt: skip
    stream = _ingest(log)
    assert stream.requests == 3 and not stream.errors
    assert stream.notes == [
        "content parts of unknown type 'hologram' were ignored (first on line 1)",
        "content parts of unknown type \"['not', 'hashable']\" were ignored (first on line 2)",
    ]
    # the ignored parts add no text: lines 1 and 3 render the same prompt
    assert stream.req_prompt_tokens[0] == stream.req_prompt_tokens[2]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (_trace(2, timestamp=1e308), "timestamp 1e+308 is out of range (after the year 9999)"),
        (_trace(2, hash_ids=[[1], [1, 2]]), "hash_ids is not a list of 64-bit integers"),
        (
            orjson.dumps(_trace(2)).replace(b"[1,4]", b"[1,-9223372036854775809]"),
            "hash_ids is not a list of 64-bit integers",
        ),
        (_trace(2, input_length=-5), "input_length -5 is negative"),
        (
            _trace(2, hash_ids=[1, 2, 3]),
            "3 hash_ids contradict input_length 600 at 512 tokens per block",
        ),
    ],
)
def test_bad_trace_lines_are_named_not_fatal(tmp_path, bad, reason):
    log = tmp_path / "trace.jsonl"
    log.write_bytes(_lines(_trace(1), bad, _trace(3)))
    stream = _ingest(log)
    assert stream.req_line.tolist() == [1, 3]
    assert _reasons(stream) == {2: reason}


def test_a_line_over_the_limit_is_skipped_without_holding_it(tmp_path):
    huge = _chat(2)
    huge["messages"][1]["content"] = "x" * 5000
    log = tmp_path / "chat.jsonl"
    log.write_bytes(_lines(_chat(1), huge, _chat(3)))
    length = len(orjson.dumps(huge)) + 1
    stream = _ingest(log, limits=ReadLimits(max_line_bytes=1000))
    assert stream.req_line.tolist() == [1, 3]
    assert _reasons(stream) == {2: f"the line is {length:,} bytes, over the limit of 1,000"}


def test_wrong_encoding_is_a_line_error_and_binary_files_hit_the_budget(tmp_path):
    log = tmp_path / "chat.jsonl"
    latin1 = orjson.dumps(_chat(2)).replace(b"question", "quéstion".encode("latin-1"))
    log.write_bytes(_lines(_chat(1), latin1, _chat(3)))
    stream = _ingest(log)
    assert stream.req_line.tolist() == [1, 3]
    assert _reasons(stream)[2].startswith("not valid JSON (str is not valid UTF-8")
    binary = tmp_path / "photo.jpg"
    binary.write_bytes(random.Random(1).randbytes(200_000))
    with pytest.raises(TooManyBadLines, match=r"stopped after 21 bad lines, past the budget"):
        _ingest(binary, max_bad_lines=20)
    with pytest.raises(UnusableInput, match=r"no usable request in photo\.jpg"):
        _ingest(binary, max_bad_lines=None)


def test_an_empty_file_is_unusable(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(
        UnusableInput, match=r"no usable request in empty.jsonl \(the file is empty\)"
    ):
        _ingest(tmp_path / "empty.jsonl")


def test_error_budget_stops_the_ingest_and_says_so(tmp_path):
    log = tmp_path / "chat.jsonl"
    log.write_bytes(
        _lines(*[_chat(i) for i in range(5)], *[b"{oops"] * 4, *[_chat(i) for i in range(5, 9)])
    )
    assert _ingest(log, max_bad_lines=4).requests == 9  # at the budget: still a report
    with pytest.raises(TooManyBadLines) as raised:
        _ingest(log, max_bad_lines=3)
    assert str(raised.value).startswith("stopped after 4 bad lines, past the budget of 3 (the "
                                        "last: line 9: not valid JSON")  # fmt: skip
    assert raised.value.skipped_lines == 4 and len(raised.value.errors) == 4


def test_a_truncated_gzip_keeps_the_lines_before_the_cut(tmp_path):
    whole = gzip.compress(_lines(*[_chat(i) for i in range(1, 2001)]), mtime=0)
    log = tmp_path / "cut.jsonl.gz"
    log.write_bytes(whole[: len(whole) // 2])
    stream = _ingest(log)
    kept = stream.requests
    assert 0 < kept < 2000 and stream.req_line.tolist() == list(range(1, kept + 1))
    assert stream.skipped_lines == 1
    (error,) = stream.errors
    assert error["line"] in (kept + 1, kept + 2)  # the cut may fall inside the next line
    assert "the gzip stream is cut or corrupt" in error["reason"]


@pytest.mark.parametrize("kind", ["chat", "trace"])
def test_a_zip_bomb_is_stopped_early(tmp_path, kind):
    row = _chat(1) if kind == "chat" else _trace(1)
    line = orjson.dumps(row) + b"\n" + b" " * 100_000 + b"\n"  # blank lines compress ~1000x
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.GzipFile(bomb, "wb", mtime=0) as fh:
        for _ in range(300):  # 30 MB inflated from a few tens of kB
            fh.write(line)
    ratio = 30_000_000 / os.path.getsize(bomb)
    assert ratio > 200
    with pytest.raises(InflateLimit, match=r"bomb.jsonl.gz: decompresses to more than"):
        _ingest(bomb)  # the default ratio limit, 200x
    with pytest.raises(InflateLimit, match="reading stopped there"):
        _ingest(bomb, limits=ReadLimits(max_inflated_bytes=1 << 20, max_inflate_ratio=10**6))
    # under both limits the same file is read whole
    stream = _ingest(bomb, limits=ReadLimits(max_inflate_ratio=10**6))
    # (each chat copy repeats request id r1: the first is kept, the rest said)
    expected = (300, 0) if kind == "trace" else (1, 299)
    assert (stream.requests, stream.skipped_lines) == expected


def test_a_corrupt_gzip_trace_keeps_the_lines_before_the_damage(tmp_path):
    lines = _lines(*[_trace(i) for i in range(1, 3001)])
    packed = bytearray(gzip.compress(lines, mtime=0))
    middle = len(packed) // 2
    packed[middle : middle + 8] = b"\xff" * 8  # damage, not a cut: Arrow's path fails too
    log = tmp_path / "trace.jsonl.gz"
    log.write_bytes(bytes(packed))
    stream = _ingest(log)
    assert 0 < stream.requests < 3000 and stream.skipped_lines >= 1
    assert "the gzip stream is cut or corrupt" in stream.errors[-1]["reason"]


def test_zero_padding_after_a_gzip_stream_is_not_an_error(tmp_path):
    log = tmp_path / "padded.jsonl.gz"
    log.write_bytes(gzip.compress(_lines(_chat(1), _chat(2)), mtime=0) + bytes(16))
    stream = _ingest(log)
    assert stream.requests == 2 and not stream.errors


def test_a_request_id_repeated_in_another_file_is_a_duplicate(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(_lines(_chat(1), _chat(2)))
    second.write_bytes(_lines(_chat(3), _chat(4, id="r2")))
    stream = ingest([first, second], IngestOptions(hash_key=KEY))
    assert stream.requests == 3
    assert [(e["file"], e["line"]) for e in stream.errors] == [("b.jsonl", 2)]
