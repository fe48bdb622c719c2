"""Odd but real input: timestamp units, out-of-range numbers, order-independent kinds."""

from __future__ import annotations

import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest, profile_from_config
from analysis.errors import LineError
from analysis.timestamps import parse_timestamp

KEY = b"test-secret-0123456789"


@pytest.mark.parametrize(
    ("value", "expected_us"),
    [
        (1_700_000_000, 1_700_000_000_000_000),  # seconds
        (1_700_000_000_123, 1_700_000_000_123_000),  # milliseconds
        (1_700_000_000_123_456, 1_700_000_000_123_456),  # microseconds
        (1_700_000_000_123_456_789, 1_700_000_000_123_456),  # nanoseconds, truncated to µs
        ("1700000000.5", 1_700_000_000_500_000),
        ("2023-11-14T22:13:20.25+00:00", 1_700_000_000_250_000),
    ],
)
def test_epoch_units_are_told_apart_by_magnitude(value, expected_us):
    assert parse_timestamp(value) == (expected_us, False)


@pytest.mark.parametrize("value", [1e300, 10**25, "9" * 30])
def test_out_of_range_timestamps_are_line_errors(value):
    with pytest.raises(LineError, match="out of range"):
        parse_timestamp(value)


def _write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_absurd_numbers_skip_the_line_not_the_ingest(tmp_path):
    msg = [{"role": "user", "content": "hello"}]
    log = _write(
        tmp_path / "a.jsonl",
        [
            {"timestamp": 1e300, "messages": msg},
            {
                "timestamp": 1_700_000_000,
                "messages": msg,
                "usage": {"completion_tokens": 18446744073709551615},
            },
            {"timestamp": 1_700_000_060, "messages": msg},
        ],
    )
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.requests == 1
    assert [e["line"] for e in stream.errors] == [1, 2]
    assert "absurd" in stream.errors[1]["reason"]


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 1e300, 0, -5])
def test_windows_and_lifetimes_must_be_finite_and_positive(bad):
    with pytest.raises(ValueError, match="finite"):
        AnalysisParams(windows_s=(bad,)).validate()
    with pytest.raises(ValueError, match="finite"):
        AnalysisParams(lifetime_s=bad).validate()


def test_a_segment_kind_does_not_depend_on_line_order(tmp_path):
    text = "quarterly numbers " * 20  # 40 tokens: below doc_min_tokens
    plain = {"timestamp": 0, "messages": [{"role": "user", "content": text}]}
    typed = {
        "timestamp": 10,
        "messages": [
            {"role": "user", "content": [{"type": "document", "title": "Q3", "text": text}]}
        ],
    }
    results = []
    for rows in ([plain, typed], [typed, plain]):
        stream = ingest([_write(tmp_path / "x.jsonl", rows)], IngestOptions(hash_key=KEY))
        seg = analyze(stream, AnalysisParams(windows_s=(60,))).windows[0].segments
        results.append((seg["document"]["occasional"]["count"], stream.seg_label))
    # the same segment, typed as a document once: a document either way, labelled "Q3"
    assert results == [(1, ["Q3"]), (1, ["Q3"])]


def test_block_size_zero_is_refused_not_replaced(tmp_path):
    log = _write(
        tmp_path / "x.jsonl", [{"timestamp": 0, "messages": [{"role": "user", "content": "hi"}]}]
    )
    with pytest.raises(ValueError, match="positive"):
        ingest([log], IngestOptions(hash_key=KEY, block_tokens=0))


@pytest.mark.parametrize(
    ("extra", "kv_heads"),
    [
        ({"num_kv_heads": 8}, 8),  # Falcon-40B
        ({"multi_query": True}, 1),  # Falcon-7B: multi-query attention
        ({"multi_query_group_num": 2}, 2),  # ChatGLM
        ({}, 32),  # plain multi-head attention
    ],
)
def test_config_kv_head_fallbacks(extra, kv_heads):
    config = {"num_hidden_layers": 2, "num_attention_heads": 32, "hidden_size": 4096, **extra}
    profile = profile_from_config(config)
    assert profile.kv_heads == kv_heads
    # 2 layers * kv_heads * (4096 / 32) * 2 (K, V) * 2 bytes (bf16 default)
    assert profile.kv_bytes_per_token() == 2 * kv_heads * 128 * 2 * 2
