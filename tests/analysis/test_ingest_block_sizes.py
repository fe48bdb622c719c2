"""One pass, several block sizes: the same streams as separate ingests, and progress."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import AnalysisParams, IngestOptions, Progress, analyze, ingest, ingest_streams
from bench.generate import chat_requests, write_jsonl

KEY = b"test-secret-0123456789"


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "chat.jsonl"
    write_jsonl(chat_requests(60, seed=5, documents=5, doc_words=(200, 500)), path)
    return path


def test_extra_block_sizes_equal_separate_ingests(log):
    streams = ingest_streams(
        [log], IngestOptions(hash_key=KEY, block_tokens=256, extra_block_tokens=(16, 256, 64))
    )
    assert list(streams) == [256, 16, 64]  # the first size, then the extra ones, once each
    for size, stream in streams.items():
        alone = ingest([log], IngestOptions(hash_key=KEY, block_tokens=size))
        assert stream.block_tokens == size
        assert np.array_equal(stream.ref_key, alone.ref_key)
        assert np.array_equal(stream.req_ref_start, alone.req_ref_start)
        # full blocks only: each request has floor(prompt tokens / size) of them
        assert np.array_equal(np.diff(stream.req_ref_start), stream.req_prompt_tokens // size)
        assert (
            analyze(stream, AnalysisParams()).to_dict()
            == analyze(alone, AnalysisParams()).to_dict()
        )


def test_a_trace_has_only_its_own_block_size(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 700, "hash_ids": [1, 2]}\n')
    streams = ingest_streams([trace], IngestOptions(hash_key=KEY, extra_block_tokens=(16,)))
    assert list(streams) == [512]


def test_progress_reports_bytes_requests_and_skipped_lines(log, tmp_path):
    data = log.read_bytes()
    bad = tmp_path / "bad-first.jsonl"
    bad.write_bytes(b"not json\n" + data)
    seen: list[Progress] = []
    ingest([bad], IngestOptions(hash_key=KEY), progress=seen.append)
    last = seen[-1]
    assert last.stage == "reading"
    assert last.done == last.total == len(data) + len(b"not json\n")
    assert last.requests == 60 and last.skipped == 1
