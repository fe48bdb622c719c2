"""A log's lines, streamed: plain or gzip (told by the magic bytes, not the name), whole
or one line-aligned byte range of it; blank lines counted and skipped, byte-order marks
dropped, over-long lines read past without being held."""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import LineError, UnusableInput
from analysis.readers.inflate import GZIP_MAGIC, ReadLimits, open_gzip

BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: some tools write one per file, some per line
# bytes.isspace's set, so a line is blank exactly when bytes.strip() empties it
_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")
_CHUNK = 1 << 20  # bytes read at a time: blank runs are skipped a chunk at a time, in C

# (line number, raw line); a line over the length limit comes as its LineError
Numbered = tuple[int, bytes | bytearray | LineError]


@dataclass(frozen=True)
class ByteRange:
    """Part of a plain log: the lines that start in [start, end); the first is line
    `first_line` of the file (so errors name the file's own line numbers)."""

    start: int
    end: int
    first_line: int


def split_lines(path: str | Path, parts: int, chunk: int = 1 << 20) -> list[ByteRange]:
    """About equal, line-aligned byte ranges of a plain (not gzip) file, for parallel
    ingest. One read of the file, counting newlines."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if fh.read(2) == GZIP_MAGIC:
            raise ValueError(f"{path.name}: a gzip file cannot be split; ingest it whole")
    targets = [size * i // parts for i in range(1, parts)]
    bounds, lines_before = [0], [1]
    offset, lines = 0, 0
    with open(path, "rb") as fh:
        while targets and (data := fh.read(chunk)):
            while targets:
                at = max(targets[0] - offset, 0)
                newline = data.find(b"\n", at)
                if newline < 0:
                    break
                cut = offset + newline + 1
                targets.pop(0)
                if cut > bounds[-1] and cut < size:
                    bounds.append(cut)
                    lines_before.append(lines + data.count(b"\n", 0, newline + 1) + 1)
            lines += data.count(b"\n")
            offset += len(data)
    bounds.append(size)
    return [ByteRange(bounds[i], bounds[i + 1], lines_before[i]) for i in range(len(bounds) - 1)]


class BlankLineLimit(UnusableInput):
    """A log that is mostly blank lines (whitespace only) past the budget: read no further.
    _read turns it into TooManyBadLines carrying what was skipped so far."""


def content_start(data: bytes | bytearray, pos: int = 0) -> int:
    """Where content starts at `pos`, past whitespace and byte-order marks (no copy)."""
    # _SPACE always matches (perhaps nothing); inline, as this runs for every line
    end = _SPACE.match(data, pos).end()  # type: ignore[union-attr]
    while data.startswith(BOM, end):
        end = _SPACE.match(data, end + 3).end()  # type: ignore[union-attr]
    return end


def _blank_line(line: bytes | bytearray) -> bool:
    """Whitespace and byte-order marks only."""
    return content_start(line) == len(line)


@dataclass(slots=True)
class _Cursor:
    """Where LogFile._split is: the number of the line being read, and a line begun in an
    earlier chunk: held (`carry`), or, over the length cap, read past (`over` >= 0, its
    length so far)."""

    number: int
    carry: bytearray | None = None
    over: int = -1


class LogFile:
    """A log opened for streaming: yields (line number, raw bytes) and reports progress
    in bytes of the file on disk (compressed bytes for gzip). With a ByteRange, only the
    lines that start inside it (plain files only). `name` is the file's name as the user
    knows it (the console stores uploads under generated names); every message uses it.

    Blank (whitespace-only) lines are never handed out: they are counted (blank_lines),
    skipped a chunk at a time, and past limits.max_blank_lines more than the lines with
    content the file is refused (BlankLineLimit). A UTF-8 byte-order mark at the start
    of the file or of any line is dropped."""

    def __init__(
        self,
        path: str | Path,
        byte_range: ByteRange | None = None,
        limits: ReadLimits | None = None,
        name: str | None = None,
    ):
        self.path = Path(path)
        self.name = name or self.path.name
        self.byte_range = byte_range
        self.limits = limits or ReadLimits()
        total = self.path.stat().st_size
        self.size = total if byte_range is None else byte_range.end - byte_range.start
        self._raw: io.BufferedReader | None = None
        # set when a gzip stream ended early: (first line not read, reason)
        self.truncated: tuple[int, str] | None = None
        self.blank_lines = 0
        self.content_lines = 0
        # called after each chunk read, so progress moves even through a file of
        # nothing but blank lines (where no line is ever handed out)
        self.on_chunk: Callable[[], None] | None = None

    def lines(self) -> Iterator[Numbered]:
        """(line number, raw line); a line over the length limit comes as a LineError
        (decode_line raises it), read past without holding it."""
        self.blank_lines = self.content_lines = 0
        if self.byte_range is not None:
            yield from self._range_lines(self.byte_range)
            return
        self.truncated = None
        with open(self.path, "rb") as raw:
            self._raw = raw
            if raw.read(2) == GZIP_MAGIC:
                raw.seek(0)
                stream = io.BufferedReader(open_gzip(self.path, self.limits, raw, self.name),
                                           _CHUNK)  # fmt: skip
                yield from self._gzip_lines(stream)
            else:
                raw.seek(0)
                yield from self._split(raw, 1)
            self._raw = None

    @contextmanager
    def stream(self) -> Iterator[io.BufferedIOBase]:
        """The whole file's bytes, decompressed when it is gzip (under the inflate limits),
        for a reader that finds its own records in them (a gateway CSV row may span lines);
        bytes_read follows it. Whole files only: such records cannot be cut by offset."""
        if self.byte_range is not None:
            raise ValueError(f"{self.name}: only whole files are read as a byte stream")
        self.blank_lines = self.content_lines = 0
        self.truncated = None
        with open(self.path, "rb") as raw:
            self._raw = raw
            try:
                if raw.read(2) == GZIP_MAGIC:
                    raw.seek(0)
                    with open_gzip(self.path, self.limits, raw, self.name) as guard:
                        yield io.BufferedReader(guard, _CHUNK)
                else:
                    raw.seek(0)
                    yield raw
            finally:
                self._raw = None

    def _gzip_lines(self, stream: io.BufferedIOBase) -> Iterator[Numbered]:
        """Lines of a gzip log (InflateGuard stops a zip bomb); a truncated or corrupt
        stream ends the file: the lines before it are kept, and it is said."""
        number = 0
        lines = self._split(stream, 1)
        while True:
            try:
                number, line = next(lines)
            except StopIteration:
                return
            except (OSError, EOFError, zlib.error) as exc:
                self.truncated = (number + 1, f"the gzip stream is cut or corrupt ({exc}); "
                                  "the lines before it were kept")  # fmt: skip
                return
            yield number, line

    def _range_lines(self, part: ByteRange) -> Iterator[Numbered]:
        with open(self.path, "rb") as raw:
            raw.seek(part.start)
            yield from self._split(raw, part.first_line, part.end - part.start)

    def bytes_read(self) -> int:
        raw = self._raw
        return raw.tell() if raw is not None and not raw.closed else self.size

    def count_blank(self, count: int, number: int) -> None:
        """`count` more blank lines, the last line `number`; BlankLineLimit past the budget."""
        self.blank_lines += count
        budget = self.limits.max_blank_lines
        if budget is not None and self.blank_lines > budget + self.content_lines:
            raise BlankLineLimit(
                f"{self.name}: stopped at line {number:,}: {self.blank_lines:,} blank "
                f"(whitespace-only) lines against {self.content_lines:,} with content, past "
                f"the budget of {budget:,} more blank lines than lines with content; "
                "is this a log?"
            )

    def _too_long(self, length: int) -> LineError:
        return LineError(
            f"the line is {length:,} bytes, over the limit of {self.limits.max_line_bytes:,}"
        )

    def _split(
        self, stream: io.BufferedIOBase, first: int, stop: int | None = None
    ) -> Iterator[Numbered]:
        """Lines read a chunk at a time. Runs of whitespace between lines are skipped by one
        regex match each (a GiB of newlines is a thousand chunks, not a billion Python
        iterations) and counted as blank lines. `stop`: only lines that start before this
        offset of the stream (a byte range)."""
        cursor = _Cursor(first)
        offset = 0  # of `data` in the stream
        data = b""
        while True:
            offset += len(data)
            # read1: at most one read of the stream below, so a gzip cut or damage loses
            # nothing InflateGuard has handed out (read() would drop a half-filled chunk)
            data = stream.read1(_CHUNK)
            if self.on_chunk is not None:
                self.on_chunk()
            if not data:
                break
            pos = 0
            if cursor.over >= 0 or cursor.carry is not None:
                pos = yield from self._go_on(cursor, data)
                if pos < 0:  # the line goes on in the next chunk
                    continue
            if (yield from self._chunk_lines(cursor, data, pos, offset, stop)):
                return
        if cursor.over >= 0:
            self.content_lines += 1
            yield cursor.number, self._too_long(cursor.over)
        elif cursor.carry is not None and (stop is None or offset < stop):
            if _blank_line(cursor.carry):
                self.count_blank(1, cursor.number)
            else:
                self.content_lines += 1
                yield cursor.number, cursor.carry

    def _go_on(self, cursor: _Cursor, data: bytes) -> Generator[Numbered, None, int]:
        """The end, in this chunk, of a line begun in an earlier one: where the next line
        starts (-1: this line goes on past the chunk too)."""
        cap = self.limits.max_line_bytes
        newline = data.find(b"\n")
        end = len(data) if newline < 0 else newline + 1
        # the cap is on the content; the length said counts the newline too
        if cursor.over < 0 and cursor.carry is not None and len(cursor.carry) + (
                newline if newline >= 0 else len(data)) > cap:  # fmt: skip
            cursor.over, cursor.carry = len(cursor.carry), None
        if cursor.over >= 0:
            cursor.over += end
            if newline < 0:
                return -1
            yield cursor.number, self._too_long(cursor.over)
            self.content_lines += 1
            cursor.over = -1
        else:
            assert cursor.carry is not None
            cursor.carry += data[:end]
            if newline < 0:
                return -1
            line, cursor.carry = cursor.carry, None
            if _blank_line(line):
                self.count_blank(1, cursor.number)
            else:
                self.content_lines += 1
                yield cursor.number, line
        cursor.number += 1
        return end

    def _chunk_lines(
        self, cursor: _Cursor, data: bytes, pos: int, offset: int, stop: int | None
    ) -> Generator[Numbered, None, bool]:
        """The lines that start in this chunk from `pos`; the last, when it goes on past
        the chunk, is left in `cursor`. True when the byte range ended."""
        cap = self.limits.max_line_bytes
        size = len(data)
        while pos < size:
            # the whitespace (and byte-order marks) before the next content: blank lines;
            # content_start written out, as this runs for every line
            end = _SPACE.match(data, pos).end()  # type: ignore[union-attr]
            while data.startswith(BOM, end):
                end = _SPACE.match(data, end + 3).end()  # type: ignore[union-attr]
            if stop is not None and offset + end >= stop:
                blank = data.count(b"\n", pos, max(stop - offset, pos))
                if blank:
                    self.count_blank(blank, cursor.number + blank - 1)
                return True
            blank = data.count(b"\n", pos, end)
            if blank:
                cursor.number += blank
                self.count_blank(blank, cursor.number - 1)  # (names the last blank line)
            pos = end
            if pos == size:
                break
            newline = data.find(b"\n", pos)
            if newline < 0:  # the line goes on in the next chunk
                if size - pos > cap:
                    cursor.over = size - pos  # read past, never held
                else:
                    cursor.carry = bytearray(data[pos:])
                break
            self.content_lines += 1
            if newline - pos > cap:
                yield cursor.number, self._too_long(newline + 1 - pos)
            else:
                yield cursor.number, data[pos : newline + 1]
            cursor.number += 1
            pos = newline + 1
        return False
