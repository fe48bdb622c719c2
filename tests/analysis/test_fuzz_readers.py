"""Fuzzing the readers: random bytes, mutated valid lines (and gateway CSV rows) and random
JSON in every field never raise anything but UnusableInput from an ingest (LineError from
a reader); junk CSV rows never cost a valid one."""

from __future__ import annotations

import csv
import gzip
import io
import os

import orjson
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis import IngestOptions, UnusableInput, ingest
from analysis.errors import ErrorLog, LineError
from analysis.readers import BailianReader, ChatReader, MooncakeReader, ReadLimits

KEY = b"test-secret-0123456789"
FUZZ = settings(max_examples=int(os.environ.get("KVSCOPE_FUZZ_EXAMPLES", 150)), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
OPTIONS = IngestOptions(hash_key=KEY, max_bad_lines=50, limits=ReadLimits(max_line_bytes=4096))

CHAT = orjson.dumps({"id": "a", "timestamp": "2026-11-02T08:00:00Z", "model": "m",
                     "metadata": {"tenant": "t"}, "messages": [
                         {"role": "system", "content": "Be brief."},
                         {"role": "user", "content": [{"type": "document", "title": "d",
                                                       "text": "Some text."}]}],
                     "usage": {"completion_tokens": 3}})  # fmt: skip
TRACE = orjson.dumps({"timestamp": 5, "input_length": 700, "output_length": 2,
                      "hash_ids": [1, 2]})  # fmt: skip
# a Bailian line ("a" as its chat_id, so the third line of a mutated log is another chat)
BAILIAN = orjson.dumps({"chat_id": "a", "parent_chat_id": -1, "timestamp": 61.114,
                        "input_length": 20, "output_length": 2, "type": "text", "turn": 1,
                        "hash_ids": [1, 2]})  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                   max_size=4),
    max_leaves=12,
)  # fmt: skip


def _ingest_survives(path) -> None:
    try:
        stream = ingest([path], OPTIONS)
    except UnusableInput as exc:
        assert str(exc)  # a reason, always
        return
    assert stream.requests >= 1 and stream.skipped_lines == len(stream.errors)


@FUZZ
@given(data=st.binary(max_size=3000), gz=st.booleans())
def test_random_bytes(tmp_path_factory, data, gz):
    path = tmp_path_factory.mktemp("fuzz") / "log.jsonl"
    path.write_bytes(gzip.compress(data) if gz else data)
    _ingest_survives(path)


@FUZZ
@given(
    base=st.sampled_from([CHAT, TRACE, BAILIAN]),
    edits=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 3), st.binary(max_size=3)),
                   min_size=1, max_size=6),
    gz=st.booleans(),
    cut=st.integers(0, 100),
)  # fmt: skip
def test_mutated_valid_lines(tmp_path_factory, base, edits, gz, cut):
    line = bytearray(base)
    for at, remove, insert in edits:
        at %= len(line) + 1
        line[at : at + remove] = insert
    data = base + b"\n" + bytes(line) + b"\n" + base.replace(b'"a"', b'"b"') + b"\n"
    if gz:
        packed = gzip.compress(data)
        data = packed[: max(2, len(packed) * cut // 100)] if cut < 100 else packed
    path = tmp_path_factory.mktemp("fuzz") / "log.jsonl"
    path.write_bytes(data)
    _ingest_survives(path)


@FUZZ
@given(field=st.sampled_from(["timestamp", "messages", "content", "role", "part", "usage",
                              "id", "metadata"]), value=json_values)  # fmt: skip
def test_random_json_in_chat_fields(field, value):
    obj = orjson.loads(CHAT)
    if field == "content":
        obj["messages"][0]["content"] = value
    elif field == "role":
        obj["messages"][1]["role"] = value
    elif field == "part":
        obj["messages"][1]["content"] = [value]
    else:
        obj[field] = value
    try:
        ChatReader(ErrorLog()).parse(obj, 1)
    except LineError as exc:
        assert str(exc)


@FUZZ
@given(field=st.sampled_from(["timestamp", "input_length", "output_length", "hash_ids",
                              "tenant", "metadata"]), value=json_values)  # fmt: skip
def test_random_json_in_trace_fields(field, value):
    obj = orjson.loads(TRACE)
    obj[field] = value
    try:
        MooncakeReader(ErrorLog(), 512).parse(obj, 1)
    except LineError as exc:
        assert str(exc)


@FUZZ
@given(field=st.sampled_from(["chat_id", "parent_chat_id", "timestamp", "input_length",
                              "output_length", "hash_ids", "type", "turn"]),
       value=json_values, parent=st.booleans())  # fmt: skip
def test_random_json_in_bailian_fields(field, value, parent):
    reader = BailianReader(ErrorLog(), 16)
    if parent:  # an earlier line, for the chain to follow
        reader.parse({**orjson.loads(BAILIAN), "chat_id": 1}, 1)
    obj = orjson.loads(BAILIAN) | {"parent_chat_id": 1 if parent else -1}
    obj[field] = value
    try:
        request = reader.parse(obj, 2)
    except LineError as exc:
        assert str(exc).startswith("Bailian trace line: ")
    else:
        assert request.session  # every request read has a session: its chain's root


# --- gateway CSV ----------------------------------------------------------------------------

CSV_HEADER = ["ts", "model_name", "tenant", "request_json"]
# its body indented: the row spans lines, its text holds a comma and quotes
CSV_ROW = ["1762070400", "m", "t", orjson.dumps({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Line one,\nline \"two\"."}]},
    option=orjson.OPT_INDENT_2).decode()]  # fmt: skip
# any text but a byte-order mark, which a row's start drops (so a cell of one is blank)
cell_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\ufeff"), max_size=30)
cells = st.lists(cell_text | json_values.map(lambda v: orjson.dumps(v).decode()), max_size=6)


def _csv_bytes(rows: list[list[str]]) -> tuple[bytes, list[int]]:
    """The rows written by the csv module after the header, and each row's first line."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    starts = []
    for row in rows:
        starts.append(out.getvalue().count("\n") + 1)
        writer.writerow(row)
    return out.getvalue().encode(), starts


@FUZZ
@given(data=st.binary(max_size=3000), gz=st.booleans())
def test_random_bytes_after_a_gateway_csv_header(tmp_path_factory, data, gz):
    data = b"ts,request_json\n" + data
    path = tmp_path_factory.mktemp("fuzz") / "log.csv"
    path.write_bytes(gzip.compress(data) if gz else data)
    _ingest_survives(path)


@FUZZ
@given(
    junk=st.lists(cells, max_size=5),
    where=st.lists(st.integers(0, 3), max_size=5),
    gz=st.booleans(),
)
def test_well_quoted_junk_rows_never_lose_a_valid_row(tmp_path_factory, junk, where, gz):
    """Junk rows (any cells, quoted as the csv module quotes them) among valid ones: every
    valid row is a request, and every row with content a request or a named error, at its
    first line (a row is never merged with its neighbour, nor lost)."""
    rows = [CSV_ROW] * 4
    for cells_, at in zip(junk, where + [0] * len(junk), strict=False):
        rows.insert(at, cells_)
    data, starts = _csv_bytes(rows)
    path = tmp_path_factory.mktemp("fuzz") / "log.csv"
    path.write_bytes(gzip.compress(data) if gz else data)
    stream = ingest([path], OPTIONS)
    valid = {line for row, line in zip(rows, starts, strict=True) if row is CSV_ROW}
    with_content = {line for row, line in zip(rows, starts, strict=True)
                    if any(cell.strip() for cell in row)}  # fmt: skip
    lines = set(stream.req_line.tolist())
    assert valid <= lines
    assert lines | {e["line"] for e in stream.errors} == with_content
    assert stream.requests + stream.skipped_lines == len(with_content)


@FUZZ
@given(
    edits=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 3), st.binary(max_size=3)),
                   min_size=1, max_size=6),
    gz=st.booleans(),
)  # fmt: skip
def test_mutated_gateway_csv(tmp_path_factory, edits, gz):
    data = bytearray(_csv_bytes([CSV_ROW] * 3)[0])
    for at, remove, insert in edits:
        at %= len(data) + 1
        data[at : at + remove] = insert
    path = tmp_path_factory.mktemp("fuzz") / "log.csv"
    path.write_bytes(gzip.compress(bytes(data)) if gz else bytes(data))
    _ingest_survives(path)
