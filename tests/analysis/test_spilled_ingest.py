"""Spilled ingest: block keys and occurrences written to disk in chunks as they grow give
exactly the stream the in-memory pass builds (and leave no spill files behind)."""

from __future__ import annotations

import importlib

import numpy as np
import orjson
import pytest

import analysis.spill
from analysis import BlockStream, IngestOptions, ingest_streams, ingest_to_folders
from bench.generate import chat_requests, mooncake_requests

ingest_module = importlib.import_module("analysis.ingest.tables")

KEY = b"test-secret-0123456789"
ARRAYS = ("req_t_us", "req_tenant", "req_user", "req_route", "req_prompt_tokens",
          "req_output_tokens", "req_line", "req_file", "req_ref_start", "ref_key", "ref_tokens",
          "seg_id", "seg_role_class", "seg_tokens", "occ_req", "occ_seg", "occ_offset")  # fmt: skip


@pytest.fixture
def tiny_spill(monkeypatch):
    """Spill after a hundred values, so small logs cross many chunk boundaries."""
    monkeypatch.setattr(ingest_module, "SPILL_ROWS", 100)
    monkeypatch.setattr(analysis.spill, "SPILL_ROWS", 40)


def _assert_same(stored: BlockStream, memory: BlockStream) -> None:
    for name in ARRAYS:
        assert np.array_equal(getattr(stored, name), getattr(memory, name)), name
    assert stored.ref_key.dtype == np.uint64 and stored.ref_key.size > 2 * ingest_module.SPILL_ROWS
    for name in ("tenants", "users", "routes", "files", "seg_label", "seg_preview", "errors",
                 "skipped_lines", "notes", "stats"):  # fmt: skip
        assert getattr(stored, name) == getattr(memory, name), name


def _write(path, rows, swap: tuple[int, int] | None = None):
    lines = [orjson.dumps(r) for r in rows]
    if swap:
        a, b = swap
        lines[a], lines[b] = lines[b], lines[a]
    lines.insert(7, b'{"timestamp": "soon", "messages": []}')
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("swap", [None, (30, 150)], ids=["in-order", "out-of-order"])
def test_chat_spilled_in_chunks_is_the_in_memory_stream(tmp_path, tiny_spill, swap):
    log = _write(tmp_path / "chat.jsonl", chat_requests(200, seed=5, documents=8,
                                                         doc_words=(100, 300)), swap)  # fmt: skip
    options = IngestOptions(hash_key=KEY, extra_block_tokens=(16,), previews=True)
    memory = ingest_streams([log], options)
    folders = ingest_to_folders([log], options, tmp_path / "store")
    assert sorted(folders) == [16, 256]
    for size, folder in folders.items():
        _assert_same(BlockStream.load(folder), memory[size])
    assert memory[256].skipped_lines == 1
    assert bool(swap) == any("out of time order" in n for n in memory[256].notes)
    # the spill folder is gone: only the stream folders remain
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["b16", "b256"]


def test_trace_spilled_in_chunks_keeps_each_last_block_partial(tmp_path, tiny_spill):
    rows = list(mooncake_requests(400, seed=3))
    log = _write(tmp_path / "trace.jsonl", rows)  # a bad line: the line reader, not Arrow's
    memory = ingest_streams([log], IngestOptions(hash_key=KEY))[512]
    stored = BlockStream.load(ingest_to_folders([log], IngestOptions(hash_key=KEY),
                                                tmp_path / "store")[512])  # fmt: skip
    _assert_same(stored, memory)
    # hand check: a request's last block holds what its input length leaves over
    last = stored.req_ref_start[1:] - 1
    assert stored.ref_tokens[last].tolist() == [
        r["input_length"] - 512 * (len(r["hash_ids"]) - 1) for r in rows
    ]


def test_a_clean_trace_read_column_wise_spills_the_same_stream(tmp_path, tiny_spill):
    log = tmp_path / "trace.jsonl"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in mooncake_requests(400, seed=6)))
    memory = ingest_streams([log], IngestOptions(hash_key=KEY))[512]
    assert memory.req_line.tolist() == list(range(1, 401))  # the column-wise path's rows
    stored = BlockStream.load(ingest_to_folders([log], IngestOptions(hash_key=KEY),
                                                tmp_path / "store")[512])  # fmt: skip
    _assert_same(stored, memory)
