"""Log readers: timestamps, where messages / tenants / output counts live, content parts,
gzip, bad lines and unusable input."""

from __future__ import annotations

import calendar

import numpy as np
import pytest

from analysis import AnalysisParams, IngestOptions, UnusableInput, analyze, ingest
from analysis.timestamps import NO_ZONE_NOTE

HELLO = [{"role": "user", "content": "Hello world"}]
T0 = calendar.timegm((2024, 5, 1, 10, 0, 0))  # 2024-05-01T10:00:00Z in epoch seconds
US = 1_000_000


def test_timestamps(ingest_rows):
    stream = ingest_rows(
        [
            {"timestamp": "2024-05-01T12:00:00+02:00", "messages": HELLO},  # 10:00:00Z
            {"timestamp": "2024-05-01T10:00:10Z", "messages": HELLO},
            {"timestamp": T0 + 30.5, "messages": HELLO},  # epoch seconds, float
            {"timestamp": (T0 + 60) * 1000, "messages": HELLO},  # epoch milliseconds
            {"timestamp": str(T0 + 70), "messages": HELLO},  # epoch seconds as a string
            {"timestamp": "2024-05-01T10:01:20", "messages": HELLO},  # no zone: UTC
        ]
    )
    offsets_s = [0, 10, 30.5, 60, 70, 80]
    assert stream.req_t_us.tolist() == [round((T0 + s) * US) for s in offsets_s]
    assert NO_ZONE_NOTE in stream.notes
    assert stream.skipped_lines == 0
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.span_s == 80.0


def test_messages_locations_give_the_same_prompt(ingest_rows, render):
    rendered = render([("system", "Be brief."), ("user", "Hello world")])
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello world"},
    ]
    stream = ingest_rows(
        [
            {"timestamp": 1, "messages": messages},
            {"timestamp": 2, "request": {"model": "m-req", "messages": messages}},
            {"timestamp": 3, "body": {"model": "m-body", "messages": messages}},
        ],
        block_tokens=4,
    )
    assert stream.req_prompt_tokens.tolist() == [len(rendered)] * 3
    full = len(rendered) // 4
    keys = stream.ref_key
    assert stream.req_ref_start.tolist() == [0, full, 2 * full, 3 * full]
    assert np.array_equal(keys[:full], keys[full : 2 * full])
    assert np.array_equal(keys[:full], keys[2 * full :])
    routes = [stream.routes[c] for c in stream.req_route]
    assert routes == ["", "m-req", "m-body"]


def test_tenant_and_user(ingest_rows):
    stream = ingest_rows(
        [
            {"timestamp": 1, "metadata": {"tenant": "acme", "user": "ann"}, "messages": HELLO},
            {"timestamp": 2, "tenant": "globex", "user": "bob", "messages": HELLO},
            {"timestamp": 3, "messages": HELLO},
        ]
    )
    assert [stream.tenants[c] for c in stream.req_tenant] == ["acme", "globex", ""]
    assert [stream.users[c] for c in stream.req_user] == ["ann", "bob", ""]


def test_content_parts(ingest_rows, render, enc):
    parts = [
        {"type": "text", "text": "Hello "},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "input_text", "text": "wor"},
        "ld",
    ]
    stream = ingest_rows(
        [
            {"timestamp": 1, "messages": [{"role": "user", "content": parts}]},
            {"timestamp": 2, "messages": HELLO},
        ]
    )
    # text parts concatenated in order ("Hello " + "wor" + "ld"); image and audio ignored
    n = len(render([("user", "Hello world")]))
    assert stream.req_prompt_tokens.tolist() == [n, n]
    # both are the same segment H("user", "Hello world"), seen twice
    assert stream.seg_id.size == 1
    assert stream.seg_tokens.tolist() == [len(enc("Hello world"))]
    assert stream.occ_seg.tolist() == [0, 0]
    # the text starts after the role header "user\n"
    assert stream.occ_offset.tolist() == [len(enc("user\n"))] * 2


def test_output_tokens(ingest_rows, trace):
    stream = ingest_rows(
        [
            {"timestamp": 1, "messages": HELLO, "usage": {"completion_tokens": 12}},
            {"timestamp": 2, "messages": HELLO, "response": {"usage": {"completion_tokens": 34}}},
            {"timestamp": 3, "messages": HELLO, "output_tokens": 56},
            {"timestamp": 4, "messages": HELLO},
        ]
    )
    assert stream.req_output_tokens.tolist() == [12, 34, 56, -1]  # -1: the log does not say
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    (route,) = report.routes
    assert route["output_tokens"]["count"] == 3
    assert route["output_tokens"]["max"] == 56
    assert route["output_tokens"]["mean"] == (12 + 34 + 56) / 3


def test_bad_lines_are_skipped_and_listed(write_jsonl):
    path = write_jsonl(
        [
            "{not json",  # 1
            {"timestamp": 1, "messages": HELLO},  # 2 ok
            "[1, 2]",  # 3: not an object
            "",  # 4: blank, ignored
            {"timestamp": 2, "messages": []},  # 5: no messages
            {"messages": HELLO},  # 6: no timestamp
            {"timestamp": "yesterday", "messages": HELLO},  # 7
            {"timestamp": 3, "messages": [{"content": "no role"}]},  # 8
            {"timestamp": 4, "messages": HELLO, "usage": {"completion_tokens": -3}},  # 9
            {"timestamp": 5, "messages": HELLO, "usage": {"completion_tokens": 7}},  # 10 ok
            {"timestamp": 6, "messages": [{"role": "user", "content": 42}]},  # 11
            {"timestamp": 7, "messages": HELLO},  # 12 ok
        ]
    )
    stream = ingest([path], IngestOptions(hash_key=b"test-secret-0123456789"))
    assert stream.req_line.tolist() == [2, 10, 12]
    assert stream.skipped_lines == 8
    assert [e["line"] for e in stream.errors] == [1, 3, 5, 6, 7, 8, 9, 11]
    assert all(isinstance(e["reason"], str) and e["reason"] for e in stream.errors)
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.requests == 3
    assert report.errors == stream.errors
    assert report.skipped_lines == 8


def test_bad_trace_lines(write_jsonl, trace):
    path = write_jsonl(
        [
            trace(0, [1, 2], 4),  # 1 ok: 4 + 4 tokens
            {"timestamp": 10, "input_length": 9, "hash_ids": [1, 2]},  # 2: 9 > 2 blocks of 4
            {"timestamp": 20, "input_length": 4, "hash_ids": [1, 2]},  # 3: last block empty
            {"timestamp": 30, "input_length": 5, "hash_ids": ["a"]},  # 4
            {"timestamp": 40, "input_length": 5, "hash_ids": [1, 2]},  # 5 ok: 4 + 1
        ]
    )
    stream = ingest([path], IngestOptions(hash_key=b"test-secret-0123456789", block_tokens=4))
    assert stream.source_format == "mooncake"
    assert stream.req_line.tolist() == [1, 5]
    assert [e["line"] for e in stream.errors] == [2, 3, 4]
    assert stream.ref_tokens.tolist() == [4, 4, 4, 1]
    assert stream.req_prompt_tokens.tolist() == [8, 5]


@pytest.mark.parametrize(
    "lines",
    [
        [],  # empty file
        ["", "   "],  # blank lines only
        ["{oops", "[]", '{"timestamp": 1}'],  # nothing usable
        ['{"timestamp": 1, "messages": []}'],
    ],
)
def test_unusable_input(write_jsonl, lines):
    path = write_jsonl(lines)
    with pytest.raises(UnusableInput):
        ingest([path], IngestOptions(hash_key=b"test-secret-0123456789"))


def test_gzip_gives_the_same_report(write_jsonl):
    rows = [
        {
            "timestamp": 100 + i,
            "metadata": {"tenant": f"t{i % 2}"},
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": f"Question number {i % 3}?"},
            ],
            "usage": {"completion_tokens": i},
        }
        for i in range(12)
    ] + ["not json"]
    plain = write_jsonl(rows, name="day.jsonl")
    packed = write_jsonl(rows, name="day.jsonl.gz", gz=True)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    opts = IngestOptions(hash_key=b"test-secret-0123456789", block_tokens=4)
    params = AnalysisParams(windows_s=(5, 60), scope="tenant")
    a = analyze(ingest([plain], opts), params).to_dict()
    b = analyze(ingest([packed], opts), params).to_dict()
    assert a["requests"] == 12 and a["skipped_lines"] == 1
    assert a == b


def test_gzip_detected_by_content_not_name(write_jsonl, trace):
    path = write_jsonl([trace(0, [1], 8), trace(1, [1], 8)], name="trace.jsonl", gz=True)
    stream = ingest([path], IngestOptions(hash_key=b"test-secret-0123456789", block_tokens=8))
    assert stream.requests == 2


def test_several_files_are_one_stream(write_jsonl, trace):
    first = write_jsonl([trace(0, [1], 8), "bad"], name="a.jsonl")
    second = write_jsonl([trace(500, [1], 8)], name="b.jsonl")
    stream = ingest(
        [first, second], IngestOptions(hash_key=b"test-secret-0123456789", block_tokens=8)
    )
    assert stream.files == ["a.jsonl", "b.jsonl"]
    assert stream.req_file.tolist() == [0, 1]
    assert stream.errors == [{"line": 2, "reason": stream.errors[0]["reason"], "file": "a.jsonl"}]
    report = analyze(stream, AnalysisParams(windows_s=(1,)))
    assert report.infinite_hit_ratio == 8 / 16  # the second file's request reuses block 1


def test_trace_ids_are_64_bit(write_jsonl, trace):
    big = 2**64 - 1  # the largest unsigned 64-bit id
    path = write_jsonl(
        [
            trace(0, [big, 2**63], 4),  # 1: ids past int64 used to stop the whole ingest
            trace(1000, [-1], 4),  # 2: -1 has the same 64 bits as 2**64 - 1
            '{"timestamp": 2000, "input_length": 4, "hash_ids": [18446744073709551616]}',  # 3
        ]
    )
    stream = ingest([path], IngestOptions(hash_key=b"test-secret-0123456789", block_tokens=4))
    assert stream.ref_key.tolist() == [big, 2**63, big]
    assert [e["line"] for e in stream.errors] == [3]  # 2**64 does not fit in 64 bits
    report = analyze(stream, AnalysisParams(windows_s=(1,)))
    assert report.infinite_hit_ratio == 4 / (8 + 4)  # request 2 reuses block `big`
