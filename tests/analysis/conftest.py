"""Shared fixtures for the engine's tests. Nothing here (or in tests/analysis) imports Django.

Logs are written as small JSONL files in tmp_path; expected values are worked out by hand
in each test.
"""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import orjson
import pytest

from analysis import IngestOptions, ingest
from analysis.profiles import KVProfile
from analysis.tokens import load_encoding

HASH_KEY = b"test-secret-0123456789"


def pytest_addoption(parser, pluginmanager):
    # pyproject sets DJANGO_SETTINGS_MODULE for pytest-django and uses --strict-config; with
    # `-p no:django` nobody registers that ini key, so register it here to keep pytest quiet.
    if not pluginmanager.has_plugin("django"):
        parser.addini("DJANGO_SETTINGS_MODULE", "used by pytest-django only")


@pytest.fixture(scope="session")
def hash_key() -> bytes:
    return HASH_KEY


@pytest.fixture(scope="session")
def enc():
    """cl100k_base encode_ordinary, the tokenizer of the canonical rendering."""
    return load_encoding("cl100k_base").encode_ordinary


@pytest.fixture(scope="session")
def render(enc):
    """Canonical rendering of a list of (role, text): enc(role+"\\n") + enc(text) + enc("\\n")
    per message, computed here independently of the engine."""

    def _render(messages: list[tuple[str, str]]) -> list[int]:
        tokens: list[int] = []
        for role, text in messages:
            tokens += enc(role + "\n") + enc(text) + enc("\n")
        return tokens

    return _render


@pytest.fixture
def write_jsonl(tmp_path):
    """Write rows (dicts, or raw str/bytes lines) to a fresh JSONL file; gz=True gzips it."""
    counter = itertools.count()

    def _write(rows, name: str | None = None, gz: bool = False) -> Path:
        lines = []
        for row in rows:
            if isinstance(row, bytes):
                lines.append(row)
            elif isinstance(row, str):
                lines.append(row.encode())
            else:
                lines.append(orjson.dumps(row))
        data = b"\n".join(lines) + b"\n"
        path = tmp_path / (name or f"log{next(counter)}.jsonl{'.gz' if gz else ''}")
        if gz:
            with gzip.open(path, "wb") as f:
                f.write(data)
        else:
            path.write_bytes(data)
        return path

    return _write


@pytest.fixture
def ingest_rows(write_jsonl):
    """Write rows to a log and ingest it with the test secret."""

    def _ingest(rows, block_tokens: int | None = None, fmt: str = "auto", gz: bool = False):
        path = write_jsonl(rows, gz=gz)
        return ingest(
            [path], IngestOptions(hash_key=HASH_KEY, format=fmt, block_tokens=block_tokens)
        )

    return _ingest


@pytest.fixture(scope="session")
def trace():
    """A Mooncake-format trace line: ids all full blocks of B tokens, except the last one,
    which holds `last` tokens (B when not given)."""

    def _trace(t_ms, ids, block_tokens, last=None, **extra) -> dict:
        last = block_tokens if last is None else last
        input_length = block_tokens * (len(ids) - 1) + last if ids else 0
        return {
            "timestamp": t_ms,
            "input_length": input_length,
            "output_length": 1,
            "hash_ids": list(ids),
            **extra,
        }

    return _trace


@pytest.fixture(scope="session")
def tiny_profile():
    """1 layer, 1 KV head, head_dim 1, FP16: 1*1*1*2*2 = 4 bytes of KV per token."""
    return KVProfile("tiny", layers=1, kv_heads=1, head_dim=1, dtype="fp16")
