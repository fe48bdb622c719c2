"""Gateway CSV logs (metrics.md section 7): a request_json cell per row, read like JSONL.

Small CSV files are written by hand (so every line number is known) or with the csv
module from the same requests a JSONL log holds; expected values come from the canonical
rendering (the `render` fixture) or from the JSONL path itself, which other tests pin."""

from __future__ import annotations

import calendar
import csv
import gzip
import io
import json
import zlib

import numpy as np
import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, UnusableInput, analyze, ingest, ingest_streams
from analysis.ingest import splittable
from analysis.readers import ByteRange, ReadLimits
from analysis.stream import ROLE_TOOLS
from tests.golden.cases import CASES, HASH_KEY as GOLDEN_KEY

KEY = b"test-secret-0123456789"
T0 = calendar.timegm((2024, 5, 1, 10, 0, 0))  # 2024-05-01T10:00:00Z in epoch seconds
US = 1_000_000


def _ingest(path, **options):
    return ingest([path], IngestOptions(hash_key=KEY, **options))


def _csv_text(header: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)  # quotes what needs it: commas, quotes, newlines
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


# --- one small file, by hand --------------------------------------------------------------

BY_HAND = (
    "ts,model_name,request_json,created_at\n"
    # line 2: epoch seconds in ts, the route from model_name
    '1714557600,gpt-4o,"{""messages"": [{""role"": ""system"", ""content"": ""Be brief.""}, '
    '{""role"": ""user"", ""content"": ""Hello world""}]}",\n'
    # lines 3-7: the body pretty-printed, so its cell holds newlines; its text has a JSON
    # escaped newline (a real one in the message), and the time is ISO 8601
    '2024-05-01T10:00:10Z,llama-3.1-8b,"{\n'
    '  ""messages"": [\n'
    '    {""role"": ""user"", ""content"": ""line one\\nline two""}\n'
    "  ]\n"
    '}",\n'
    # line 8: no ts, so created_at (the next time column); the body's own model wins over
    # model_name, and Anthropic's top-level system is a first system message
    ',mistral-large,"{""model"": ""claude-3-5-sonnet"", ""system"": ""S"", '
    '""messages"": [{""role"": ""user"", ""content"": ""Hi""}]}",1714557630.5\n'
)


def test_rows_by_hand(tmp_path, render):
    path = tmp_path / "gateway.csv"
    path.write_text(BY_HAND)
    stream = _ingest(path)
    assert stream.requests == 3 and stream.errors == [] and stream.skipped_lines == 0
    assert stream.log_format == "csv" and stream.source_format == "chat"
    assert stream.req_line.tolist() == [2, 3, 8]  # each row's first line
    assert stream.req_t_us.tolist() == [T0 * US, (T0 + 10) * US, round((T0 + 30.5) * US)]
    routes = [stream.routes[c] for c in stream.req_route]
    assert routes == ["gpt-4o", "llama-3.1-8b", "claude-3-5-sonnet"]
    prompts = [
        [("system", "Be brief."), ("user", "Hello world")],
        [("user", "line one\nline two")],
        [("system", "S"), ("user", "Hi")],
    ]
    assert stream.req_prompt_tokens.tolist() == [len(render(p)) for p in prompts]


def test_a_body_keeps_its_own_time_and_who_sent_it(tmp_path):
    """Columns fill in what the body lacks; they never override it. The time columns are
    taken in the order timestamp, ts, created_at, the first non-empty one."""
    body = {"timestamp": T0 + 5, "metadata": {"tenant": "acme", "user": "ann"},
            "messages": [{"role": "user", "content": "q"}]}  # fmt: skip
    bare = {"messages": [{"role": "user", "content": "q"}]}
    path = tmp_path / "log.csv"
    path.write_text(_csv_text(
        ["created_at", "ts", "timestamp", "tenant", "user", "request_json"],
        [[str(T0 + 1), str(T0 + 2), str(T0 + 3), "globex", "bob", json.dumps(body)],
         [str(T0 + 1), str(T0 + 2), " ", "globex", "bob", json.dumps(bare)],
         [str(T0 + 1), "", "", "", "", json.dumps(bare)]],
    ))  # fmt: skip
    stream = _ingest(path)
    # line 2: the body's own; line 3: ts (timestamp is blank); line 4: created_at
    by_line = dict(zip(stream.req_line.tolist(), stream.req_t_us.tolist(), strict=True))
    assert by_line == {2: (T0 + 5) * US, 3: (T0 + 2) * US, 4: (T0 + 1) * US}
    order = np.argsort(stream.req_line)
    assert [stream.tenants[stream.req_tenant[i]] for i in order] == ["acme", "globex", ""]
    assert [stream.users[stream.req_user[i]] for i in order] == ["ann", "bob", ""]


# --- the same requests as JSONL and as gateway CSV -----------------------------------------

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}  # fmt: skip
SEARCH_TOOL = {"name": "search", "description": "Search the manuals", "input_schema": {
    "type": "object", "properties": {"q": {"type": "string"}}}}  # fmt: skip
SYSTEM = "You are the support assistant of Example Corp; answer from the manuals. " * 40


def _body(i: int) -> dict:
    """Request i's body: OpenAI chat with tools and a tool call, Anthropic Messages with
    tools, tool_use, tool_result and a cache mark, OpenAI Responses with function items,
    or plain OpenAI chat; a long shared system prompt, so blocks are reused."""
    question = f"Question {i}: what about item {i % 5}?"
    kind = i % 4
    if kind == 0:
        call = {"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}  # fmt: skip
        return {"tools": [WEATHER_TOOL], "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 21 C"},
            {"role": "user", "content": question}]}  # fmt: skip
    if kind == 1:
        return {"model": "claude-3-5-sonnet", "system": [
            {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "tools": [SEARCH_TOOL], "messages": [
                {"role": "user", "content": "Find the reset steps."},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "reset"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "Hold the button."},
                    {"type": "text", "text": question}]}]}  # fmt: skip
    if kind == 2:
        return {"instructions": SYSTEM, "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Order status?"}]},
            {"type": "function_call", "call_id": "f1", "name": "order", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "f1", "output": "shipped"},
            {"role": "user", "content": [{"type": "input_text", "text": question}]}]}  # fmt: skip
    return {"messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": question}]}  # fmt: skip


def _columns(i: int) -> dict:
    """What a gateway records beside request i's body (as a JSONL line's keys)."""
    when = T0 + 7 * i if i % 2 else f"2024-05-01T10:{i // 8:02d}:{7 * i % 60:02d}Z"
    return {"timestamp": when, "model": "gpt-4o" if i % 3 else "llama-3.1-8b",
            "tenant": f"t{i % 2}", "user": f"u{i % 3}", "session_id": f"s{i % 5}",
            "request_id": f"r{i}"}  # fmt: skip


N = 16


def _jsonl(path, indices=range(N)):
    # the JSONL line: the gateway's keys, then the body's (the body's model wins, as in CSV)
    lines = [json.dumps({**_columns(i), **_body(i)}) for i in indices]
    path.write_text("\n".join(lines) + "\n")
    return path


def _gateway_csv(path, indices=range(N)):
    header = ["request_id", "ts", "model_name", "tenant", "user", "session_id", "request_json"]
    rows = []
    for i in indices:
        c = _columns(i)
        # every other body pretty-printed: its cell then spans lines
        body = json.dumps(_body(i), indent=2 if i % 2 else None)
        rows.append([c["request_id"], str(c["timestamp"]), c["model"], c["tenant"], c["user"],
                     c["session_id"], body])  # fmt: skip
    path.write_text(_csv_text(header, rows), newline="")
    return path


def _same_streams(a, b) -> None:
    """Every column but the line numbers (a CSV has a header, and rows span lines)."""
    columns = ("req_t_us", "req_tenant", "req_user", "req_route", "req_prompt_tokens",
               "req_output_tokens", "req_session", "req_cache_control", "req_ref_start",
               "ref_key", "ref_tokens", "seg_id", "seg_tokens", "occ_seg",
               "occ_offset")  # fmt: skip
    for name in columns:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.tenants, a.users, a.routes) == (b.tenants, b.users, b.routes)


def _report(stream):
    return analyze(stream, AnalysisParams(scope="tenant", windows_s=(60, 600))).to_dict()


def _compact(value) -> str:
    """J(v) of metrics.md section 7."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_jsonl_and_gateway_csv_give_the_same_report(tmp_path, enc):
    jsonl = _ingest(_jsonl(tmp_path / "log.jsonl"))
    gateway = _ingest(_gateway_csv(tmp_path / "log.csv"))
    assert (jsonl.log_format, gateway.log_format) == ("chat", "csv")
    _same_streams(jsonl, gateway)
    report = _report(gateway)
    assert report == _report(jsonl)
    # and the bodies were read, not skipped: by hand, every request is there; kinds 0 and
    # 1 (half of them) carry tools, two lists, each one tools segment of J(tools); kind 1
    # (a quarter) a cache mark; every request a session
    assert report["requests"] == N and report["errors"] == []
    tools = np.flatnonzero(gateway.seg_role_class == ROLE_TOOLS)
    expected = sorted(len(enc(_compact([t]))) for t in (WEATHER_TOOL, SEARCH_TOOL))
    assert sorted(gateway.seg_tokens[tools].tolist()) == expected
    assert np.unique(gateway.occ_req[np.isin(gateway.occ_seg, tools)]).size == N // 2
    assert int(gateway.req_cache_control.sum()) == N // 4
    assert bool(np.all(gateway.req_session != 0))


def test_the_sample_log_as_gateway_csv_writes_the_golden_report(tmp_path):
    """The golden report of the sample chat log (tests/golden), byte for byte, from the
    same requests as a gateway CSV: the time, model, tenant, user and id in columns."""
    case = next(c for c in CASES if c.name == "sample-default")
    with gzip.open(case.log, "rt") as fh:
        lines = [json.loads(line) for line in fh]
    rows = []
    for i, line in enumerate(lines):
        body = {"messages": line["messages"], "usage": line["usage"]}
        text = json.dumps(body, ensure_ascii=False, indent=2 if i % 3 == 0 else None)
        who = line["metadata"]
        rows.append([line["id"], line["timestamp"], line["model"], who["tenant"], who["user"],
                     text])  # fmt: skip
    path = tmp_path / "sample.csv"
    path.write_text(_csv_text(["request_id", "ts", "model_name", "tenant", "user",
                               "request_json"], rows), newline="")  # fmt: skip
    stream = ingest([path], IngestOptions(hash_key=GOLDEN_KEY.encode()))
    assert analyze(stream, AnalysisParams()).to_json() == case.golden.read_bytes()


def test_gzip_bom_and_any_name_read_alike(tmp_path):
    plain = _gateway_csv(tmp_path / "log.csv")
    data = plain.read_bytes()
    gz = tmp_path / "log.csv.gz"
    gz.write_bytes(gzip.compress(data))
    bom = tmp_path / "with-bom.txt"  # told by its content, not its name
    bom.write_bytes(b"\xef\xbb\xbf" + data)
    misnamed = tmp_path / "really.jsonl"
    misnamed.write_bytes(data)
    first = _ingest(plain)
    for other in (gz, bom, misnamed):
        stream = _ingest(other)
        assert stream.log_format == "csv", other.name
        _same_streams(first, stream)
        assert stream.req_line.tolist() == first.req_line.tolist()
    # and a JSONL log named .csv is read as JSONL
    named_csv = _jsonl(tmp_path / "chat.csv")
    assert _ingest(named_csv).log_format == "chat"


def test_one_log_of_jsonl_and_csv_files(tmp_path):
    """Both hold chat bodies: one upload may mix them, and it reads as all JSONL does."""
    half = N // 2
    mixed = ingest([_jsonl(tmp_path / "a.jsonl", range(half)),
                    _gateway_csv(tmp_path / "b.csv", range(half, N))],
                   IngestOptions(hash_key=KEY))  # fmt: skip
    jsonl = ingest([_jsonl(tmp_path / "a2.jsonl", range(half)),
                    _jsonl(tmp_path / "b2.jsonl", range(half, N))],
                   IngestOptions(hash_key=KEY))  # fmt: skip
    assert mixed.requests == N
    _same_streams(mixed, jsonl)
    assert _report(mixed) == _report(jsonl)


# --- bad rows -----------------------------------------------------------------------------


def _row(when: int | str, text: str) -> str:
    """A one-line row: ts, then a chat body of one user message (quotes doubled)."""
    body = json.dumps({"messages": [{"role": "user", "content": text}]}, ensure_ascii=False)
    body = body.replace('"', '""')
    return f'{when},"{body}"\n'


def test_bad_rows_are_named_by_their_first_line_and_the_rest_kept(tmp_path):
    text = (
        "ts,request_json\n"  # line 1
        + _row(T0, "a")  # line 2
        + f'{T0 + 1},"{{\n'  # lines 3-5: one row
        + ' ""messages"": [{""role"": ""user"", ""content"": ""b""}]\n'
        + '}"\n'
        + "\n"  # line 6: blank
        + f"{T0 + 2},{{broken\n"  # line 7
        + f"{T0 + 3},\n"  # line 8
        + f'{T0 + 4},"[1, 2]"\n'  # line 9
        + f'{T0 + 5},"{{""messages"": [{{""content"": ""x""}}]}}"\n'  # line 10
        + _row("", "c")  # line 11
        + _row(T0 + 7, "d")  # line 12
    )
    path = tmp_path / "bad.csv"
    path.write_text(text)
    stream = _ingest(path)
    assert stream.req_line.tolist() == [2, 3, 12]
    assert stream.req_t_us.tolist() == [T0 * US, (T0 + 1) * US, (T0 + 7) * US]
    errors = stream.errors
    assert [e["line"] for e in errors] == [7, 8, 9, 10, 11]
    assert errors[0]["reason"].startswith("gateway CSV row: request_json is not valid JSON (")
    assert [e["reason"] for e in errors[1:]] == [
        "gateway CSV row: no request_json",
        "gateway CSV row: request_json is a JSON list, not an object",
        "OpenAI chat body: message 0 has no role",
        "gateway CSV row: no timestamp (none in the body, nor in a timestamp, ts or "
        "created_at column)",
    ]
    assert stream.skipped_lines == 5
    assert "1 blank lines were ignored" in stream.notes


def test_rows_that_cannot_be_read_are_skipped_and_reading_goes_on(tmp_path):
    limits = ReadLimits(max_line_bytes=200)
    data = (
        b"ts,request_json\n"  # line 1
        + _row(T0, "caf\xe9").encode("latin-1")  # line 2: not UTF-8
        + _row(T0 + 1, "a").encode()  # line 3
        + _row(T0 + 2, "x" * 300).encode()  # line 4: over the 200-byte limit
        + _row(T0 + 3, "b").encode()  # line 5
        + f'{T0 + 4},"{{""messages"":\n'.encode()  # line 6: its quote never closes
        + b"and so on\n"  # line 7
    )
    path = tmp_path / "rough.csv"
    path.write_bytes(data)
    stream = _ingest(path, limits=limits)
    assert stream.req_line.tolist() == [3, 5]
    assert stream.errors == [
        {"line": 2, "reason": "gateway CSV row: line 2 is not valid UTF-8"},
        {"line": 4, "reason": "gateway CSV row: longer than the limit of 200 bytes; not read"},
        {"line": 6, "reason": "gateway CSV row: a quoted cell is not closed before the end "
                              "of the file"},
    ]  # fmt: skip


def test_a_row_over_the_limit_across_lines_is_named_by_its_first(tmp_path):
    # lines 3 to 6 hold one row of 4 x 70 bytes, more than the 200-byte limit though no
    # line is: it is skipped, named by line 3; what of it is left is read as rows of
    # their own (the csv module's own way past a broken row), which cannot be requests
    pieces = [f'{T0 + 1},"{{""messages"": [{{', ' ""role"": ""user"",', ' ""content"": ',
              '""b""}]}"']  # fmt: skip
    long_row = "".join(piece.ljust(69) + "\n" for piece in pieces)
    assert len(long_row) == 4 * 70
    text = "ts,request_json\n" + _row(T0, "a") + long_row + _row(T0 + 2, "c")  # line 7
    path = tmp_path / "long-row.csv"
    path.write_text(text)
    stream = _ingest(path, limits=ReadLimits(max_line_bytes=200))
    assert stream.req_line.tolist() == [2, 7]
    assert stream.errors[0] == {
        "line": 3,
        "reason": "gateway CSV row: longer than the limit of 200 bytes; not read",
    }
    assert all(4 <= e["line"] <= 6 for e in stream.errors[1:])
    # the same row under a limit it fits is a request like the others
    whole = _ingest(path, limits=ReadLimits(max_line_bytes=300))
    assert whole.req_line.tolist() == [2, 3, 7] and whole.errors == []


def test_a_header_without_request_json_is_refused_naming_the_columns(tmp_path):
    path = tmp_path / "events.csv"
    path.write_text("ts,body\n1714557600,{}\n")
    with pytest.raises(UnusableInput) as caught:
        _ingest(path, format="csv")
    message = str(caught.value)
    assert message.startswith("events.csv: not a gateway CSV log: its header (line 1) has no "
                              "request_json column, only 'ts', 'body'")  # fmt: skip
    # with auto it is no gateway CSV log at all: read as JSONL, whose first line is no JSON
    with pytest.raises(UnusableInput, match="line 1: not valid JSON"):
        _ingest(path)


def test_a_gateway_csv_log_is_never_split(tmp_path):
    gateway = _gateway_csv(tmp_path / "log.csv")
    jsonl = _jsonl(tmp_path / "log.jsonl")
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl.read_bytes()))
    bailian = tmp_path / "trace.jsonl"
    bailian.write_text('{"chat_id": 7, "parent_chat_id": -1, "timestamp": 0.5, '
                       '"input_length": 20, "output_length": 2, "type": "text", "turn": 1, '
                       '"hash_ids": [1, 2]}\n')  # fmt: skip
    mooncake = tmp_path / "mooncake.jsonl"
    mooncake.write_text('{"timestamp": 0, "input_length": 600, "output_length": 2, '
                        '"hash_ids": [1, 2]}\n')  # fmt: skip
    assert splittable(jsonl) and splittable(mooncake) and splittable(gateway, "chat")
    assert not splittable(gateway) and not splittable(gateway, "csv")
    assert not splittable(jsonl, "csv") and not splittable(jsonl, "bailian")
    assert not splittable(bailian) and not splittable(gz)
    # and a byte range of one is refused, not misread
    size = gateway.stat().st_size
    with pytest.raises(UnusableInput, match="cannot be read in byte-range parts"):
        ingest_streams([gateway], IngestOptions(hash_key=KEY), byte_range=ByteRange(0, size, 1))


def test_progress_moves_through_a_gateway_csv_log(tmp_path):
    # 1,000 rows of about 4 kB (a padding column and a long system prompt): progress is
    # reported about every MiB read
    pad = "p" * 1000
    rows = [[str(T0 + i), pad, json.dumps(_body(3))] for i in range(1000)]
    path = tmp_path / "big.csv"
    path.write_text(_csv_text(["ts", "note", "request_json"], rows), newline="")
    size = path.stat().st_size
    seen = []
    stream = ingest([path], IngestOptions(hash_key=KEY), progress=seen.append)
    assert stream.requests == 1000
    done = [p.done for p in seen if p.stage == "reading"]
    assert done == sorted(done) and done[-1] == size
    assert len({d for d in done if 0 < d < size}) >= size // (1 << 20) - 1 >= 2


def test_a_cut_gzip_keeps_the_rows_before_the_cut(tmp_path):
    data = _gateway_csv(tmp_path / "log.csv").read_bytes()
    packed = gzip.compress(data)
    cut = packed[: len(packed) * 2 // 3]
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(cut)
    # what the cut stream still holds, decompressed on its own: the rows that end in it
    # (their last newline included: where the next row starts) are the ones kept
    held = len(zlib.decompressobj(wbits=31).decompress(cut))
    starts = sorted(_ingest(tmp_path / "log.csv").req_line.tolist())
    ends = [_line_offset(data, line) for line in starts[1:]] + [len(data)]
    expected = [line for line, end in zip(starts, ends, strict=True) if end <= held]
    stream = _ingest(path)
    assert 0 < len(expected) < N
    assert sorted(stream.req_line.tolist()) == expected
    last = stream.errors[-1]
    assert last["reason"].startswith("the gzip stream is cut or corrupt (")
    assert last["reason"].endswith("the rows before it were kept")
    assert last["line"] == starts[len(expected)]  # the first row not read whole


def _line_offset(data: bytes, line: int) -> int:
    """Where line `line` (1-based) starts."""
    offset = 0
    for _ in range(line - 1):
        offset = data.index(b"\n", offset) + 1
    return offset


def test_a_jsonl_log_that_mentions_request_json_is_still_jsonl(tmp_path):
    """A first JSONL line whose prompt holds ",request_json," is no CSV header."""
    row = {"timestamp": 1, "messages": [{"role": "user", "content": "cols ts,request_json,x"}]}
    path = tmp_path / "log.jsonl"
    path.write_bytes(orjson.dumps(row) + b"\n" + orjson.dumps({**row, "timestamp": 2}) + b"\n")
    assert splittable(path)
    stream = _ingest(path)
    assert stream.requests == 2 and stream.log_format == "chat" and not stream.errors


def test_a_bailian_trace_behind_a_foreign_first_line_is_not_split(tmp_path):
    line = ('{"chat_id": 7, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 20, '
            '"output_length": 2, "type": "text", "turn": 1, "hash_ids": [1, 2]}')  # fmt: skip
    path = tmp_path / "trace.jsonl"
    path.write_text('{"note": "exported 2026-11-30"}\nnot json\n' + line + "\n")
    assert not splittable(path)
