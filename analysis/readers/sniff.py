"""What a file's first line says it is, before it is read: a gateway CSV log (a header
naming request_json) or a Bailian trace (chat_id and hash_ids). Both are read whole,
never split into byte ranges: a CSV row may span lines, a Bailian session chains them."""

from __future__ import annotations

import zlib
from pathlib import Path

from analysis.readers.gateway_csv import is_gateway_header
from analysis.readers.inflate import GZIP_MAGIC, InflateLimit, ReadLimits, open_gzip
from analysis.readers.lines import content_start

SNIFF_BYTES = 1 << 16  # of the file (decompressed): a header or a trace line fits


def first_line(path: str | Path, limits: ReadLimits | None = None) -> bytes:
    """The file's first line with content (past whitespace and byte-order marks), as much
    of it as lies in its first SNIFF_BYTES (decompressed when gzip); b"" when none."""
    return _first_line(_head(Path(path), limits or ReadLimits()))


def _first_line(data: bytes) -> bytes:
    start = content_start(data)
    end = data.find(b"\n", start)
    return data[start : end if end >= 0 else len(data)]


def _head(path: Path, limits: ReadLimits) -> bytes:
    with open(path, "rb") as raw:
        if raw.read(2) != GZIP_MAGIC:
            raw.seek(0)
            return raw.read(SNIFF_BYTES)
        raw.seek(0)
        data = bytearray()
        guard = open_gzip(path, limits, raw)
        try:
            while len(data) < SNIFF_BYTES and (chunk := guard.read(SNIFF_BYTES - len(data))):
                data += chunk
        except (OSError, EOFError, zlib.error, InflateLimit):
            pass  # cut, damaged or bombed: its head is what came out (the read says why)
        return bytes(data)


def sniff_format(path: str | Path, limits: ReadLimits | None = None) -> str | None:
    """The format the file's head names: "csv" (its first line a gateway CSV header),
    "bailian" (a Bailian trace line among its first lines: a bad or foreign first line
    must not make it splittable) or None (anything else: a JSONL chat log or a Mooncake
    trace, told apart line by line)."""
    data = _head(Path(path), limits or ReadLimits())
    if is_gateway_header(_first_line(data)):
        return "csv"
    if any(b'"chat_id"' in line and b'"hash_ids"' in line for line in data.split(b"\n")):
        return "bailian"
    return None
