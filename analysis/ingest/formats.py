"""A file's first lines: which format it is in (every file of a log must agree), how a
line is decoded, and the column-wise path for a clean pre-hashed trace."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from analysis.errors import ErrorLog, LineError, UnusableInput
from analysis.ingest.builder import StreamBuilder
from analysis.ingest.options import DEFAULT_BLOCK_TOKENS, STREAM_KIND, IngestOptions
from analysis.readers import (
    PRECHECK_BYTES,
    TRACE_BLOCK_TOKENS,
    BailianReader,
    ChatReader,
    LogFile,
    MooncakeReader,
    Reader,
    TraceColumns,
    TraceFit,
    blocks_fit,
    decode_line,
    detect_format,
    precheck_line,
    read_trace,
    trace_block_sizes,
)
from analysis.spill import SpillColumns

Line = tuple[int, bytes | bytearray | LineError]  # (line number, its bytes or its error)

_HEAD_LINES = 1000  # lines with content looked at for a first request (the fast path)
_FORMAT_NAMES = {"chat": "a chat log", "mooncake": "a pre-hashed (Mooncake) trace",
                 "bailian": "a Bailian trace"}  # fmt: skip


def detect_format_or_none(obj: dict) -> str | None:
    try:
        return detect_format(obj)
    except LineError:
        return None


def decode(
    raw: bytes | bytearray | LineError, builder: StreamBuilder | None, options: IngestOptions
) -> dict | None:
    """The line's object (None: nothing on it). A long line is prechecked before it is
    parsed, as a trace line or not; LineError for a bad one."""
    if not isinstance(raw, LineError) and len(raw) > PRECHECK_BYTES:
        precheck_line(raw, _trace_block_tokens(builder, options, raw))
    return decode_line(raw)


def _trace_block_tokens(
    builder: StreamBuilder | None, options: IngestOptions, raw: bytes | bytearray
) -> int | None:
    """The block size if this line is to be read as a pre-hashed trace line, else None."""
    if builder is not None:
        return builder.block_tokens if builder.source_format == "mooncake" else None
    log_format = options.format
    if log_format == "auto" and b'"hash_ids"' in raw and b'"messages"' not in raw:
        log_format = "bailian" if b'"chat_id"' in raw else "mooncake"  # (as detect_format)
    if STREAM_KIND.get(log_format) != "mooncake":
        return None
    return options.block_tokens or DEFAULT_BLOCK_TOKENS[log_format]


def head(
    lines: Iterator[Line], builder: StreamBuilder | None, options: IngestOptions
) -> tuple[list[Line], dict | None]:
    """The lines up to and including the first that decodes, and its object (None if
    none did among the first _HEAD_LINES). A line precheck_line refuses is not parsed;
    a bad line is kept as its error, not its bytes (a thousand 60 MB lines of garbage
    must not be held at once)."""
    found: list[Line] = []
    for number, raw in lines:
        try:
            obj = decode(raw, builder, options)
        except LineError as exc:
            found.append((number, exc.detached()))
        else:
            found.append((number, raw))
            if obj is not None:
                return found, obj
        if len(found) >= _HEAD_LINES:
            break
    return found, None


def fast_trace(
    log_file: LogFile,
    first: dict | None,
    builder: StreamBuilder | None,
    options: IngestOptions,
    spill: SpillColumns | None,
) -> tuple[StreamBuilder, TraceColumns] | None:
    """The column-wise path for a clean pre-hashed trace in Mooncake's format, if this file
    is one (its first request is `first`) and is read as one. Never a Bailian trace: its
    timestamps are seconds, and its sessions are chains followed line by line."""
    log_format = builder.log_format if builder is not None else options.format
    if log_format not in ("auto", "mooncake"):
        return None
    if first is None or detect_format_or_none(first) != "mooncake":
        return None
    if builder is None:
        builder = StreamBuilder.for_request(first, options, spill)
    cols = read_trace(log_file.path, builder.block_tokens, options.limits, log_file.name)
    return (builder, cols) if cols is not None else None


def columns_fit(cols: TraceColumns, block_tokens: int) -> TraceFit:
    """The other sizes every line of a trace file read column-wise fits (none contradicts
    `block_tokens`: the column-wise reader takes only such a file)."""
    fitting = tuple(b for b in trace_block_sizes(TRACE_BLOCK_TOKENS) if b != block_tokens
                    and bool(np.all(blocks_fit(cols.input_length, cols.nblocks, b))))  # fmt: skip
    return TraceFit(block_tokens, fitting, 0)


def same_format(formats: dict[int, str], index: int, names: list[str], first: dict) -> None:
    """Record a file's format (from its first valid line); a multi-file upload whose files
    differ cannot be read as one log: say so, naming both files and what each is."""
    found = detect_format_or_none(first)
    if found is None:
        return  # not a request of either kind: its lines are skipped one by one
    formats[index] = found
    other = next(((i, f) for i, f in formats.items() if f != found), None)
    if other is not None:
        raise UnusableInput(
            f"the files are in different formats: {names[other[0]]} is "
            f"{_FORMAT_NAMES[other[1]]}, {names[index]} is {_FORMAT_NAMES[found]}; upload "
            "each kind on its own"
        )


def reader_for(builder: StreamBuilder, log: ErrorLog) -> Reader:
    if builder.log_format == "bailian":
        return BailianReader(log, builder.block_tokens)
    if builder.source_format == "mooncake":
        return MooncakeReader(log, builder.block_tokens)
    return ChatReader(log, builder.tools_position)
