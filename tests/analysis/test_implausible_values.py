"""Values no request can have pass no longer silently (issue #12): negative and future
timestamps and prompts past any model's context are line errors; a span of years gets a
note. Relative trace times (Mooncake's ms from 0) stay legitimate."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis import IngestOptions, ingest
from analysis.readers import read_trace

KEY = b"test-secret-0123456789"
_ROOT = Path(__file__).resolve().parents[2]
# the shared data sits beside the main checkout, two levels up from a worktree, or at the
# machine's /work/shared (a clean clone elsewhere, as CI makes)
SHARED_TRACE = next(
    (p for base in (_ROOT.parent, _ROOT.parent.parent, Path("/work"))
     if (p := base / "shared/data/mooncake_synthetic_trace.jsonl").exists()),
    _ROOT / "missing",
)  # fmt: skip
MSG = [{"role": "user", "content": "hello"}]


def _write(path: Path, rows: list) -> Path:
    path.write_bytes(b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n"
                              for r in rows))  # fmt: skip
    return path


def _reasons(stream) -> dict[int, str]:
    return {e["line"]: e["reason"] for e in stream.errors}


def test_negative_and_future_chat_timestamps_are_line_errors(tmp_path):
    log = _write(tmp_path / "chat.jsonl", [
        {"timestamp": 1_700_000_000, "messages": MSG},
        {"timestamp": -1, "messages": MSG},
        {"timestamp": "9999-12-31T00:00:00+00:00", "messages": MSG},
        {"timestamp": 4_102_444_800, "messages": MSG},  # 2100-01-01 in epoch seconds
        {"timestamp": 1_700_000_060, "messages": MSG},
    ])  # fmt: skip
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.req_line.tolist() == [1, 5]
    assert _reasons(stream) == {
        2: "timestamp -1 is negative (before 1970)",
        3: "timestamp '9999-12-31T00:00:00+00:00' is in the future (9999-12-31)",
        4: "timestamp 4102444800 is in the future (2100-01-01)",
    }
    assert not any("span" in n for n in stream.notes)


def test_a_span_of_years_gets_a_note_naming_the_lines(tmp_path):
    log = _write(tmp_path / "chat.jsonl", [
        {"timestamp": 1_700_000_000, "messages": MSG},
        {"timestamp": 0, "messages": MSG},  # a placeholder: 1970-01-01
        {"timestamp": 1_700_000_060, "messages": MSG},
    ])  # fmt: skip
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.requests == 3 and not stream.errors
    assert stream.notes == [
        "the requests span 19,676 days (the earliest on line 2, the latest on line 3): "
        "timestamps this far apart usually mean a wrong unit, clock or placeholder (such as "
        "0); check them",
        "2 requests were out of time order; they were sorted by timestamp",
    ]


def _trace(t, n_ids=2, **extra) -> dict:
    return {"timestamp": t, "input_length": 512 * (n_ids - 1) + 88, "output_length": 5,
            "hash_ids": list(range(n_ids)), **extra}  # fmt: skip


def test_implausible_trace_lines_are_named_and_the_fast_path_steps_aside(tmp_path):
    rows = [_trace(0), _trace(-1), _trace(250_000_000_000_000),
            _trace(2000, n_ids=30_000, input_length=10),
            _trace(3000, input_length=20_000_000), _trace(4000)]  # fmt: skip
    log = _write(tmp_path / "trace.jsonl", rows)
    assert read_trace(log, 512) is None  # the line reader names each line
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.req_line.tolist() == [1, 6]
    assert _reasons(stream) == {
        2: "timestamp -1 is negative (before the trace's start)",
        3: "timestamp 250000000000000 is in the future (9892-03-08)",
        4: "30,000 hash_ids are more blocks than any model's context holds (10,000,000 "
        "tokens = 19,532 blocks of 512)",
        5: "input_length 20,000,000 is more than any model's context (10,000,000 tokens)",
    }


def test_a_huge_hash_ids_line_is_refused_before_it_is_parsed(tmp_path):
    ids = b",".join(b"%d" % i for i in range(300_000))  # 2 MB: past the precheck size
    huge = b'{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[' + ids + b"]}"
    log = _write(tmp_path / "trace.jsonl", [_trace(0), huge, _trace(9)])
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.req_line.tolist() == [1, 3]
    assert _reasons(stream) == {
        2: "about 300,003 hash_ids, more blocks than any model's context holds (10,000,000 "
        "tokens = 19,532 blocks of 512); not read"
    }


@pytest.mark.skipif(not SHARED_TRACE.exists(), reason="the shared Mooncake trace")
def test_a_real_mooncake_trace_with_relative_times_reads_clean():
    assert read_trace(SHARED_TRACE, 512) is not None  # still the column-wise path
    stream = ingest([SHARED_TRACE], IngestOptions(hash_key=KEY))
    assert stream.requests == 3993 and not stream.errors and stream.notes == []
    assert stream.req_t_us[0] == 0


def test_a_chat_prompt_past_any_context_is_a_line_error_and_adds_nothing(tmp_path):
    text = "1 " * 500_000  # one token a byte: 1,000,000 tokens
    huge = {"timestamp": 1_700_000_001, "messages": [{"role": "user", "content": text}] * 11}
    small = [{"timestamp": 1_700_000_000 + 2 * i, "messages": MSG} for i in range(2)]
    log = _write(tmp_path / "chat.jsonl", [small[0], huge, small[1]])
    stream = ingest([log], IngestOptions(hash_key=KEY))
    assert stream.req_line.tolist() == [1, 3] and stream.seg_tokens.tolist() == [1]
    assert _reasons(stream) == {
        2: "the prompt is 11,000,033 tokens, more than any model's context (10,000,000)"
    }


def test_a_message_past_any_context_is_refused_without_tokenizing_all_of_it(tmp_path):
    text = "1 " * 5_100_000  # 10.2 M tokens in one message
    big = [{"role": "user", "content": text}]
    rows = [{"timestamp": 1_700_000_000, "messages": MSG},
            {"timestamp": 1_700_000_001, "messages": big}]  # fmt: skip
    stream = ingest([_write(tmp_path / "chat.jsonl", rows)], IngestOptions(hash_key=KEY))
    assert stream.req_line.tolist() == [1]
    assert _reasons(stream) == {
        2: "message 0 alone is more than 10,000,000 tokens, more than any model's context"
    }
    assert stream.stats["tokens_tokenized"] == 1  # the refused text was not memoised
