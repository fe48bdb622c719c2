"""Parallel ingest: line-aligned parts, ingested alone and merged, give the single pass."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, UnusableInput, analyze, ingest
from analysis.errors import TooManyBadLines
from analysis.ingest import ingest_in_parts
from bench.generate import chat_requests, mooncake_requests

KEY = b"test-secret-0123456789"
ARRAYS = ("req_t_us", "req_tenant", "req_user", "req_route", "req_prompt_tokens",
          "req_output_tokens", "req_line", "req_ref_start", "ref_key", "ref_tokens",
          "seg_id", "seg_role_class", "seg_tokens", "occ_req", "occ_seg", "occ_offset")  # fmt: skip


def _chat_log(path):
    rows = list(chat_requests(300, seed=9, documents=12, doc_words=(200, 500)))
    rows[40], rows[250] = rows[250], rows[40]  # out of time order, across parts
    rows[10], rows[12] = rows[12], rows[10]  # and within the first part
    lines = [orjson.dumps(r) for r in rows]
    lines[100] = b'{"timestamp": "not a time", "messages": []}'  # a bad line in a part
    lines.insert(180, b"")  # a blank line
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("parts", [1, 2, 3, 5])
def test_parts_merge_to_the_single_pass(tmp_path, parts):
    log = _chat_log(tmp_path / "chat.jsonl")
    whole = ingest([log], IngestOptions(hash_key=KEY))
    merged = ingest_in_parts(log, IngestOptions(hash_key=KEY), parts)
    for name in ARRAYS:
        assert np.array_equal(getattr(whole, name), getattr(merged, name)), name
    assert (whole.tenants, whole.users, whole.routes) == (merged.tenants, merged.users,
                                                           merged.routes)  # fmt: skip
    assert merged.errors == whole.errors and merged.skipped_lines == whole.skipped_lines == 1
    assert merged.notes == whole.notes
    for scope in ("global", "tenant", "user"):
        params = AnalysisParams(scope=scope, windows_s=(60, 900))
        a, b = analyze(whole, params).to_dict(), analyze(merged, params).to_dict()
        # each part tokenizes its own distinct texts: only that count may differ
        a.pop("ingest_stats"), b.pop("ingest_stats")
        assert a == b


def test_trace_parts_merge_to_the_single_pass(tmp_path):
    log = tmp_path / "trace.jsonl"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in mooncake_requests(500, seed=2)))
    whole = ingest([log], IngestOptions(hash_key=KEY))
    merged = ingest_in_parts(log, IngestOptions(hash_key=KEY), 4)
    assert analyze(whole, AnalysisParams()).to_dict() == analyze(merged, AnalysisParams()).to_dict()


def test_a_part_with_no_usable_line_still_lists_its_errors(tmp_path):
    rows = [orjson.dumps(r) for r in chat_requests(60, seed=4, documents=4, doc_words=(50, 90))]
    bad = [b'{"timestamp": 1, "messages": []}'] * 200  # the whole first part is unusable
    log = tmp_path / "chat.jsonl"
    log.write_bytes(b"\n".join(bad + rows) + b"\n")
    whole = ingest([log], IngestOptions(hash_key=KEY))
    merged = ingest_in_parts(log, IngestOptions(hash_key=KEY), 3)
    assert merged.skipped_lines == whole.skipped_lines == 200
    assert merged.errors == whole.errors
    assert np.array_equal(merged.ref_key, whole.ref_key)
    with pytest.raises(UnusableInput):
        ingest_in_parts(_write_bad(tmp_path / "bad.jsonl"), IngestOptions(hash_key=KEY), 2)


def _write_bad(path):
    path.write_bytes(b'{"timestamp": 1, "messages": []}\n' * 50)
    return path


def test_the_error_budget_holds_across_parts(tmp_path):
    rows = [orjson.dumps(r) for r in chat_requests(80, seed=4, documents=4, doc_words=(50, 90))]
    lines = []
    for i, row in enumerate(rows):  # a bad line after every 8th request: 10 in all
        lines += [row, b"{bad"] if i % 8 == 7 else [row]
    log = tmp_path / "chat.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    # each of 4 parts stays under a budget of 6; together they are past it
    assert ingest_in_parts(log, IngestOptions(hash_key=KEY, max_bad_lines=10), 4).requests == 80
    with pytest.raises(TooManyBadLines, match=r"^stopped after 10 bad lines, past the budget of 6"):
        ingest_in_parts(log, IngestOptions(hash_key=KEY, max_bad_lines=6), 4)
    with pytest.raises(TooManyBadLines, match=r"past the budget of 1 "):  # within one part
        ingest_in_parts(log, IngestOptions(hash_key=KEY, max_bad_lines=1), 2)


def test_a_segment_typed_and_named_in_a_later_part_is_so_in_the_merge(tmp_path):
    """The same text: plain in the first part, a titled document in the second, titled
    again differently in the third; with previews. The merge types it as a document and
    names it by the first title, as one pass does."""
    text = "a reference manual about the cache " * 30

    def line(i: int, content) -> bytes:
        return orjson.dumps({"id": f"r{i}", "timestamp": 1_700_000_000 + i, "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": content}]})  # fmt: skip

    doc = [{"type": "document", "title": "Manual", "source": {"type": "text", "data": text}}]
    renamed = [{**doc[0], "title": "Other name"}]
    lines = [line(i, text) for i in range(40)] + [line(40 + i, doc) for i in range(40)]
    lines += [line(80 + i, renamed) for i in range(40)] + [
        line(120 + i, f"q{i}") for i in range(40)
    ]
    log = tmp_path / "chat.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    options = IngestOptions(hash_key=KEY, previews=True)
    whole = ingest([log], options)
    assert "Manual" in whole.seg_label  # (the log does what the test says)
    for parts in (2, 3, 4):
        merged = ingest_in_parts(log, options, parts)
        for name in ARRAYS:
            assert np.array_equal(getattr(whole, name), getattr(merged, name)), (parts, name)
        assert merged.seg_label == whole.seg_label, parts
        assert merged.seg_preview == whole.seg_preview, parts
