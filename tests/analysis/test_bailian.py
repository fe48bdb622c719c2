"""Alibaba's Bailian traces (metrics.md section 7): pre-hashed 16-token blocks, timestamps
in seconds, `type` the route, and the session of a request the root chat_id of its
parent_chat_id chain; bad lines named as Bailian trace lines; never split into parts."""

from __future__ import annotations

import json

import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, UnusableInput, analyze, ingest
from analysis.errors import ErrorLog, LineError
from analysis.hashing import KeyedHasher
from analysis.ingest import ingest_in_parts
from analysis.readers import BailianReader, TraceFit, detect_format

KEY = b"test-secret-0123456789"
US = 1_000_000


def _line(chat, parent, t, kind, input_length, ids, **extra) -> dict:
    """A line as the release writes one (its README's fields, in its order)."""
    return {"chat_id": chat, "parent_chat_id": parent, "timestamp": t,
            "input_length": input_length, "output_length": 7, "type": kind, "turn": 1,
            "hash_ids": ids, **extra}  # fmt: skip


# Two conversations and a cut one. Tokens per block, by hand: all but the last block of a
# line hold 16; the last holds input_length - 16 * (blocks - 1). A turn's partial last block
# is a different block once the next turn fills it (13 -> 14, 15 -> 16).
TRACE = [
    _line(1, -1, 10.5, "text", 40, [11, 12, 13]),  # 16 16 8; conversation 1, turn 1
    _line(7, -1, 11, "search", 20, [21, 22]),  # 16 4; conversation 7
    _line(2, 1, 12.25, "text", 56, [11, 12, 14, 15]),  # 16 16 16 8; turn 2 of 1
    _line(3, 2, 13.0, "text", 64, [11, 12, 14, 16]),  # 16 16 16 16; turn 3 of 1
    _line(9, 8, 14.125, "image", 33, [21, 31, 32]),  # 16 16 1; parent 8 is not in the trace
    _line(10, 9, 15, "file", 48, [21, 31, 33]),  # 16 16 16; a turn of the cut conversation
]


def _write(tmp_path, rows, name="bailian.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join(r if isinstance(r, bytes) else orjson.dumps(r) + b"\n"
                              for r in rows))  # fmt: skip
    return path


def test_a_trace_gives_times_routes_blocks_and_sessions(tmp_path):
    # a clean file, as a Mooncake one the column-wise path would take: seconds, not ms
    stream = ingest([_write(tmp_path, TRACE)], IngestOptions(hash_key=KEY))
    assert (stream.log_format, stream.source_format, stream.block_tokens) == (
        "bailian", "mooncake", 16)  # fmt: skip
    assert stream.requests == 6 and stream.skipped_lines == 0
    assert stream.req_t_us.tolist() == [10_500_000, 11 * US, 12_250_000, 13 * US,
                                        14_125_000, 15 * US]  # fmt: skip
    assert [stream.routes[c] for c in stream.req_route] == ["text", "search", "text", "text",
                                                             "image", "file"]  # fmt: skip
    assert stream.req_ref_start.tolist() == [0, 3, 5, 9, 13, 16, 19]
    assert stream.ref_key.tolist() == [11, 12, 13, 21, 22, 11, 12, 14, 15, 11, 12, 14, 16,
                                       21, 31, 32, 21, 31, 33]  # fmt: skip
    assert stream.ref_tokens.tolist() == [16, 16, 8, 16, 4, 16, 16, 16, 8, 16, 16, 16, 16,
                                          16, 16, 1, 16, 16, 16]  # fmt: skip
    assert stream.req_prompt_tokens.tolist() == [40, 20, 56, 64, 33, 48]
    assert stream.req_output_tokens.tolist() == [7] * 6
    # sessions: the chain 1 <- 2 <- 3 is conversation 1; 7 its own; 9 (its parent 8 cut
    # off) starts one that its turn 10 joins. The keyed value of the root chat_id:
    hasher = KeyedHasher(KEY)
    one, seven, nine = (hasher.session_key(root) for root in ("1", "7", "9"))
    assert len({one, seven, nine, 0}) == 4
    assert stream.req_session.tolist() == [one, seven, one, one, nine, nine]
    assert stream.notes == [
        "1 line names a parent_chat_id that no earlier line has as its chat_id (the first: "
        "line 5, parent_chat_id 8); each starts a session of its own (the trace may begin "
        "after their earlier turns, or its files were given out of order)"
    ]


def test_the_infinite_hit_ratio_by_hand(tmp_path):
    report = analyze(ingest([_write(tmp_path, TRACE)], IngestOptions(hash_key=KEY)),
                     AnalysisParams())  # fmt: skip
    # a reference hits when its block was referenced before, weighted by its own tokens:
    # line 3 hits 11, 12 (32); line 4 hits 11, 12, 14 (48); line 5 hits 21 of line 2 (16);
    # line 6 hits 21, 31 (32). Tokens: 40 + 20 + 56 + 64 + 33 + 48 = 261.
    assert report.prompt_tokens == 261
    assert report.infinite_hit_ratio == pytest.approx((32 + 48 + 16 + 32) / 261)
    assert (report.block_tokens, report.log_format, report.source_format) == (
        16, "bailian", "mooncake")  # fmt: skip


def test_bad_lines_are_named_as_bailian_lines(tmp_path):
    rows = [
        _line(1, -1, 1, "text", 16, [1]),  # 1 ok
        {k: v for k, v in _line(2, 1, 2, "text", 16, [1]).items() if k != "chat_id"},  # 2
        _line([3], -1, 3, "text", 16, [1]),  # 3
        _line(1, -1, 4, "text", 16, [1]),  # 4: chat_id 1 again
        _line(5, -1, 5, "text", 40, [1, 2]),  # 5: 40 tokens are 3 blocks of 16, not 2
        _line(6, 3.5, 6, "text", 16, [1]),  # 6
        _line(7, -1, "7", "text", 16, [1]),  # 7
        _line(8, -1, -1, "text", 16, [1]),  # 8
        _line(-1, -1, 9, "text", 16, [1]),  # 9
        _line(10, 5, 10, "text", 32, [1, 2]),  # 10 ok: its parent's line 5 was refused
        b"not json\n",  # 11
        json.dumps(_line(1 << 64, -1, 12, "text", 16, [1])).encode() + b"\n",  # 12
    ]
    stream = ingest([_write(tmp_path, rows)], IngestOptions(hash_key=KEY))
    shape = "Bailian trace line: "
    bad_json = stream.errors.pop(8)
    assert bad_json["line"] == 11
    assert stream.errors == [
        {"line": 2, "reason": shape + "no chat_id"},
        {"line": 3, "reason": shape + "chat_id [3] is neither a whole number nor a string"},
        {"line": 4, "reason": shape + "chat_id 1 was already used by an earlier line (logged "
                              "twice?); this line is skipped"},
        {"line": 5, "reason": shape + "2 hash_ids contradict input_length 40 at 16 tokens "
                              "per block"},
        {"line": 6, "reason": shape + "parent_chat_id 3.5 is neither a whole number nor a "
                              "string"},
        {"line": 7, "reason": shape + "timestamp '7' is not a number of seconds"},
        {"line": 8, "reason": shape + "timestamp -1 is negative (before the trace's start)"},
        {"line": 9, "reason": shape + "chat_id -1 is parent_chat_id's mark of a first turn, "
                              "not an id"},
        # orjson reads an integer past 64 bits as a float
        {"line": 12, "reason": shape + f"chat_id {float(1 << 64)} is neither a whole number "
                               "nor a string"},
    ]  # fmt: skip
    # (a line that is not JSON is refused before any shape is assumed)
    assert bad_json["reason"].startswith("not valid JSON (")
    assert stream.req_line.tolist() == [1, 10]
    # line 10's chain goes through the refused line 5, which had no parent: its root is 5
    assert stream.req_session.tolist()[1] == KeyedHasher(KEY).session_key("5")
    assert stream.notes == []  # no parent was missing


def test_ids_past_64_bits_are_refused():
    # (the parser of long lines, the standard library's, keeps such an integer exact)
    reader = BailianReader(ErrorLog(), 16)
    with pytest.raises(LineError, match=r"^Bailian trace line: chat_id is not a 64-bit integer$"):
        reader.parse(_line(1 << 64, -1, 1, "text", 16, [1]), 1)
    with pytest.raises(LineError, match=r"^Bailian trace line: parent_chat_id is not a 64-bit"):
        reader.parse(_line(1, -(1 << 63) - 1, 1, "text", 16, [1]), 1)
    # the bounds themselves are ids
    assert reader.parse(_line((1 << 64) - 1, -(1 << 63), 1, "t", 16, [1]), 1).session == str(
        (1 << 64) - 1)  # fmt: skip


def test_the_block_size_advice_names_the_formats_own(tmp_path):
    # n ids hold t tokens at b per block when (n-1)*b < t <= n*b: of the sizes tried, 40
    # tokens in 3 ids fit 16 only (32 < 40 <= 48; at 32, 64 < 40 fails), 20 in 2 ids too
    # (16 < 20 <= 32; at 32, 32 < 20 fails); at 512 both contradict
    rows = [_line(1, -1, 1, "text", 40, [1, 2, 3]), _line(2, 1, 2, "text", 20, [1, 4])]
    path = _write(tmp_path, rows)
    with pytest.raises(UnusableInput) as refused:
        ingest([path], IngestOptions(hash_key=KEY, block_tokens=512))
    assert refused.value.fit == TraceFit(512, (16,), 2, own=16)
    assert refused.value.advice == ("hash_ids contradict input_length on 2 lines at 512 "
                                    "tokens per block; they fit 16: retry with 16, or leave "
                                    "the block size to the format")  # fmt: skip
    # made at 512 and read at the format's own 16: 1100 tokens in 3 ids fit 512 only
    # (1024 < 1100 <= 1536; at 256, 1100 > 768; at 1024, 2048 > 1100)
    path = _write(tmp_path, [_line(1, -1, 1, "text", 1100, [1, 2, 3])], "at512.jsonl")
    with pytest.raises(UnusableInput) as refused:
        ingest([path], IngestOptions(hash_key=KEY))
    assert refused.value.advice == ("hash_ids contradict input_length on 1 line at 16 tokens "
                                    "per block; they fit 512: retry with 512")  # fmt: skip


def test_fits_of_bailian_lines_combine_in_their_own_order():
    # the format's own size first, then the others smallest first
    parts = [TraceFit(512, (16, 32, 64), 2, own=16), TraceFit(512, (64, 32, 16), 1, own=16)]
    assert TraceFit.combine(parts) == TraceFit(512, (16, 32, 64), 3, own=16)
    stored = TraceFit(256, (16,), 4, own=16)
    assert TraceFit.from_dict(stored.to_dict()) == stored
    # a fit stored before Bailian's traces were read is Mooncake's
    assert TraceFit.from_dict({"block_tokens": 256, "fitting": [512], "contradictions": 4}) == (
        TraceFit(256, (512,), 4, own=512))  # fmt: skip
    # another size fits, not the format's own: nothing to leave to the format
    assert TraceFit(512, (32,), 1, own=16).advice().endswith("they fit 32: retry with 32")


def test_detection_and_forcing_the_format(tmp_path):
    assert detect_format({"chat_id": 1, "hash_ids": []}) == "bailian"
    assert detect_format({"timestamp": 1, "hash_ids": []}) == "mooncake"
    # forced, a line without a chat_id is refused as a Bailian line
    mooncake = {"timestamp": 5, "input_length": 16, "output_length": 1, "hash_ids": [1]}
    path = _write(tmp_path, [mooncake, TRACE[0]])
    stream = ingest([path], IngestOptions(hash_key=KEY, format="bailian"))
    assert stream.log_format == "bailian" and stream.req_line.tolist() == [2]
    assert stream.errors == [{"line": 1, "reason": "Bailian trace line: no chat_id"}]


def test_files_continue_each_others_chains_and_must_agree_in_format(tmp_path):
    first = _write(tmp_path, TRACE[:3], "a.jsonl")
    second = _write(tmp_path, TRACE[3:], "b.jsonl")
    stream = ingest([first, second], IngestOptions(hash_key=KEY))
    one = KeyedHasher(KEY).session_key("1")
    assert stream.req_session.tolist()[3] == one  # chat 3's parent 2 is in a.jsonl
    mooncake = _write(tmp_path, [{"timestamp": 5, "input_length": 16, "hash_ids": [1]}],
                      "m.jsonl")  # fmt: skip
    with pytest.raises(UnusableInput) as mixed:
        ingest([mooncake, first], IngestOptions(hash_key=KEY))
    assert str(mixed.value) == ("the files are in different formats: m.jsonl is a pre-hashed "
                                "(Mooncake) trace, a.jsonl is a Bailian trace; upload each "
                                "kind on its own")  # fmt: skip


def test_a_bailian_trace_is_never_read_in_parts(tmp_path):
    path = _write(tmp_path, TRACE)
    with pytest.raises(ValueError, match="a Bailian trace is read whole, not in byte-range"):
        ingest_in_parts(path, IngestOptions(hash_key=KEY), 2)
