"""Pre-hashed traces, column-wise: pyarrow's multi-threaded JSON reader and bulk checks.

A 500,000-request trace is ~7 s line by line in Python and ~1 s this way. Any doubt — a
parse error, an unexpected type, a value the line reader would refuse (the same rules,
analysis.readers.trace_rules) — returns None, and the line-by-line reader reads the file
instead, naming each bad line. So the fast path never changes a result; it only skips
Python work on clean files.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from analysis.readers.inflate import GZIP_MAGIC, InflateLimit, ReadLimits, open_gzip
from analysis.readers.lines import BOM
from analysis.readers.trace_rules import check_trace
from analysis.timestamps import MILLISECONDS, now_us

_SCHEMA = pa.schema(
    [
        ("timestamp", pa.float64()),
        ("input_length", pa.int64()),
        ("output_length", pa.int64()),
        ("hash_ids", pa.list_(pa.int64())),
        ("tenant", pa.string()),
        ("user", pa.string()),
        ("model", pa.string()),
        ("metadata", pa.struct([("tenant", pa.string()), ("user", pa.string())])),
    ]
)
_PARSE = pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
_READ = pj.ReadOptions(block_size=8 << 20)


@dataclass(frozen=True)
class TraceColumns:
    t_us: np.ndarray  # int64
    input_length: np.ndarray  # int64
    output_tokens: np.ndarray  # int64, -1 unknown
    nblocks: np.ndarray  # int64
    keys: np.ndarray  # uint64, request by request
    last_tokens: np.ndarray  # int64 tokens in each request's last block
    tenant: list[str]
    user: list[str]
    model: list[str]


_LINE_BOM = b"\n" + BOM


class _NoBom(io.RawIOBase):
    """A byte stream without the UTF-8 byte-order marks that start its lines (some tools
    write one per line; Arrow's reader takes one at the start of the file only)."""

    def __init__(self, raw: IO[bytes] | io.RawIOBase):
        self._raw = raw
        self._held = b""  # bytes not handed out yet: maybe the start of "\n" + a mark
        self._first = True
        self._eof = False
        self.newlines = 0  # in what was handed out: with the rows, tells of blank lines
        self.last = b""  # the last byte handed out

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while True:
            # (a raw stream's None, "no data yet", is never said by a file)
            chunk = b"" if self._eof else self._raw.read(max(len(buffer), 1 << 16)) or b""
            self._eof = not chunk
            data = self._held + chunk
            if self._first:
                if len(data) < 3 and not self._eof:
                    self._held = data
                    continue
                self._first = False
                data = data[3:] if data.startswith(BOM) else data
            data = data.replace(_LINE_BOM, b"\n")
            keep = 0 if self._eof else next(
                (k for k in (3, 2, 1) if data.endswith(_LINE_BOM[:k])), 0)  # fmt: skip
            keep = max(keep, len(data) - len(buffer))  # hand out no more than fits
            out, self._held = data[: len(data) - keep], data[len(data) - keep :]
            if out or self._eof:
                break
        buffer[: len(out)] = out
        if out:
            self.newlines += out.count(b"\n")
            self.last = out[-1:]
        return len(out)

    def close(self) -> None:
        self._raw.close()
        super().close()


def read_trace(
    path: str | Path, block_tokens: int, limits: ReadLimits | None = None, name: str | None = None
) -> TraceColumns | None:
    """The whole trace, or None when the line-by-line reader must decide. A gzip trace is
    decompressed under the inflate limits (InflateLimit propagates); `name` is the file's
    name as the user knows it."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(3)
    parts: list[TraceColumns] = []
    # byte-order marks filtered out, newlines counted (closed with `source`, below)
    if head[:2] == GZIP_MAGIC:
        stream = _NoBom(open_gzip(path, limits or ReadLimits(), name=name))
    else:
        stream = _NoBom(open(path, "rb"))  # noqa: SIM115
    source = pa.PythonFile(stream, mode="r")
    try:
        # batch by batch: the parse buffers of one block at a time, not of the whole file
        for batch in pj.open_json(source, read_options=_READ, parse_options=_PARSE):
            part = (
                _checked(pa.Table.from_batches([batch]), block_tokens) if batch.num_rows else None
            )
            if part is None and batch.num_rows:
                return None
            if part is not None:
                parts.append(part)
    except InflateLimit:
        raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError, zlib.error):
        return None  # a corrupt or cut gzip too: the line reader keeps what it can
    finally:
        source.close()
        # numpy owns copies of all that is kept; hand Arrow's pooled memory back to the OS
        pa.default_memory_pool().release_unused()
    if not parts:
        return None
    cols = _joined(parts)
    # Arrow skips blank lines; rows are numbered as lines, so a file with any goes to the
    # line reader, which numbers, counts and notes them
    lines = stream.newlines + (stream.last not in (b"", b"\n"))
    return cols if lines == cols.t_us.size else None


def _joined(parts: list[TraceColumns]) -> TraceColumns:
    if len(parts) == 1:
        return parts[0]

    def arrays(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    def strings(name: str) -> list[str]:
        return [v for p in parts for v in getattr(p, name)]

    return TraceColumns(
        t_us=arrays("t_us"),
        input_length=arrays("input_length"),
        output_tokens=arrays("output_tokens"),
        nblocks=arrays("nblocks"),
        keys=arrays("keys"),
        last_tokens=arrays("last_tokens"),
        tenant=strings("tenant"),
        user=strings("user"),
        model=strings("model"),
    )


def _strings(table: pa.Table, name: str, nested: str | None = None) -> list[str]:
    values = table.column(name)
    if nested is not None:
        meta = table.column("metadata").combine_chunks()
        values = pc.coalesce(values.combine_chunks(), meta.field(nested))
    return ["" if v is None else v for v in values.to_pylist()]


class _Refused(Exception):
    """A batch with a row the line reader must decide."""


def _refuse_batch(broken: bool | np.bool_ | np.ndarray) -> bool:
    """A batch's Refuse: any broken row sends the file to the line reader, which words it."""
    if np.any(broken):
        raise _Refused
    return False


class _TraceBatch:
    """A batch's columns as TraceFields: a missing value is refused; the Arrow schema fixed
    the types. Keeps the arrays it fetched. Mooncake's format only (milliseconds)."""

    clock = MILLISECONDS

    def __init__(self, table: pa.Table):
        self._table = table
        self.ms = np.zeros(0)
        self.inputs = np.zeros(0, dtype=np.int64)
        self.hash_ids = pa.array([], pa.list_(pa.int64()))
        self.counts = np.zeros(0, dtype=np.int64)
        self.output = np.zeros(0)  # NaN: not given

    def _column(self, name: str) -> pa.ChunkedArray:
        column = self._table.column(name)
        if column.null_count:
            raise _Refused
        return column

    def timestamp(self) -> np.ndarray:
        self.ms = self._column("timestamp").to_numpy()
        return self.ms

    def t_us(self) -> np.ndarray:
        return np.rint(self.ms * self.clock.us).astype(np.int64)

    def input_length(self) -> np.ndarray:
        self.inputs = self._column("input_length").to_numpy()
        return self.inputs

    def listed_blocks(self) -> np.ndarray:
        self.hash_ids = self._column("hash_ids").combine_chunks()
        self.counts = np.diff(self.hash_ids.offsets.to_numpy()).astype(np.int64)
        return self.counts

    def nblocks(self) -> np.ndarray:
        return self.counts

    def output_length(self) -> np.ndarray:
        self.output = self._table.column("output_length").to_numpy(zero_copy_only=False)
        return self.output


def _checked(table: pa.Table, block_tokens: int) -> TraceColumns | None:
    """The batch's columns, or None when a row breaks a rule (analysis.readers.trace_rules):
    the line reader names each such line (and, for a contradiction, the size that fits)."""
    batch = _TraceBatch(table)
    try:
        check_trace(batch, block_tokens, now_us(), _refuse_batch)
    except _Refused:
        return None
    flat = batch.hash_ids
    offsets = flat.offsets.to_numpy()
    nblocks = batch.counts
    last = batch.inputs - block_tokens * (nblocks - 1)
    keys = flat.values.to_numpy()[offsets[0] : offsets[-1]].astype(np.int64).view(np.uint64)
    return TraceColumns(
        t_us=batch.t_us(),
        input_length=batch.inputs.astype(np.int64),
        output_tokens=np.where(np.isnan(batch.output), -1, batch.output).astype(np.int64),
        nblocks=nblocks,
        keys=keys,
        last_tokens=last.astype(np.int64),
        tenant=_strings(table, "tenant", "tenant"),
        user=_strings(table, "user", "user"),
        model=_strings(table, "model"),
    )
