"""The column-wise trace reader gives exactly what the line-by-line reader gives."""

from __future__ import annotations

import gzip
import importlib

import numpy as np
import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from bench.generate import mooncake_requests

# the module, not the function of the same name that `analysis` exports
ingest_module = importlib.import_module("analysis.ingest.formats")
KEY = b"test-secret-0123456789"


def _rows():
    rows = list(mooncake_requests(400, seed=3, documents=30))
    for i, row in enumerate(rows):  # tenants, users and routes in both spellings
        if i % 3 == 0:
            row["tenant"] = f"t{i % 2}"
        elif i % 3 == 1:
            row["metadata"] = {"tenant": "t1", "user": f"u{i % 4}"}
        if i % 5 == 0:
            row["model"] = "llama-3.1-8b"
            del row["output_length"]
    rows[7]["timestamp"] = 12.5  # a fractional millisecond
    return rows


def _write(path, rows, gz=False):
    data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _line_by_line(monkeypatch, path):
    with monkeypatch.context() as m:
        m.setattr(ingest_module, "read_trace", lambda *a: None)
        return ingest([path], IngestOptions(hash_key=KEY))


@pytest.mark.parametrize("gz", [False, True])
def test_fast_and_line_paths_agree(tmp_path, monkeypatch, gz):
    path = _write(tmp_path / "t.jsonl", _rows(), gz)
    calls = []
    real = ingest_module.read_trace
    monkeypatch.setattr(ingest_module, "read_trace", lambda *a: calls.append(a) or real(*a))
    fast = ingest([path], IngestOptions(hash_key=KEY))
    assert len(calls) == 1 and real(path, 512) is not None  # the fast path was taken
    slow = _line_by_line(monkeypatch, path)
    for name in ("req_t_us", "req_tenant", "req_user", "req_route", "req_prompt_tokens",
                 "req_output_tokens", "req_ref_start", "ref_key", "ref_tokens"):  # fmt: skip
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    assert (fast.tenants, fast.users, fast.routes) == (slow.tenants, slow.users, slow.routes)
    for scope in ("global", "tenant", "user"):
        params = AnalysisParams(scope=scope, windows_s=(5, 60))
        assert analyze(fast, params).to_dict() == analyze(slow, params).to_dict()


def test_a_bad_line_sends_the_file_to_the_line_reader(tmp_path):
    rows = _rows()
    rows[10]["hash_ids"] = rows[10]["hash_ids"][:-1] + [rows[10]["hash_ids"][-1]] * 3
    path = _write(tmp_path / "t.jsonl", rows)
    assert ingest_module.read_trace(path, 512) is None
    stream = ingest([path], IngestOptions(hash_key=KEY))
    assert stream.requests == 399
    assert (
        stream.errors[0]["line"] == 11 and "contradict input_length" in stream.errors[0]["reason"]
    )
