"""Fixtures of the uploads wing's tests: pre-hashed traces cut from Mooncake's published one."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench.generate import mooncake_requests, write_jsonl

SHARED_TRACE = Path("/work/shared/data/mooncake_synthetic_trace.jsonl")


@pytest.fixture
def trace(tmp_path) -> Path:
    """The first 2,000 lines of Mooncake's published synthetic trace (its 512-token
    hash_ids), or, where that file is not on the machine, a generated one like it."""
    path = tmp_path / "mooncake-trace.jsonl"
    if SHARED_TRACE.exists():
        with open(SHARED_TRACE, "rb") as src:
            path.write_bytes(b"".join(line for _, line in zip(range(2000), src, strict=False)))
    else:
        rows = list(mooncake_requests(2000, seed=12))
        for i in range(0, len(rows), 3):  # short prompts of one block also fit 256
            rows[i] |= {"input_length": 60 + i % 190, "hash_ids": rows[i]["hash_ids"][:1]}
        write_jsonl(iter(rows), path)
    return path


@pytest.fixture
def long_prompts(trace, tmp_path) -> Path:
    """The trace's requests of two blocks or more: each contradicts input_length at 256,
    128 or 64 tokens per block (n 512-token blocks would be about 2n, 4n, 8n of those),
    so read at one of them no line is usable: the ingest fails, as on every machine (a
    real worker keeps its own error budget, so none is changed here)."""
    path = tmp_path / "mooncake-long.jsonl"
    lines = [line for line in trace.read_bytes().splitlines(keepends=True)
             if len(orjson.loads(line)["hash_ids"]) >= 2]  # fmt: skip
    path.write_bytes(b"".join(lines))
    return path


@pytest.fixture
def shared_head(tmp_path) -> Path:
    """The first 1,500 lines of Mooncake's published synthetic trace: its short prompts
    also fit 256, the rest fit 512 only (the browser walk-through's upload, cut short)."""
    if not SHARED_TRACE.exists():
        pytest.skip(f"{SHARED_TRACE} is not on this machine")
    path = tmp_path / "mooncake-head.jsonl"
    with open(SHARED_TRACE, "rb") as src:
        path.write_bytes(b"".join(line for _, line in zip(range(1500), src, strict=False)))
    return path
