"""What a log may cost to read (ReadLimits), and gzip decompression that stops a zip bomb
early instead of inflating it whole (InflateGuard)."""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from analysis.errors import UnusableInput

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class ReadLimits:
    """What a log may cost before reading it stops being worth it (settings in the console)."""

    max_line_bytes: int = 64 << 20  # one request; bigger is a broken or hostile file
    max_inflated_bytes: int = 64 << 30  # a gzip log, decompressed
    max_inflate_ratio: int = 200  # decompressed / compressed: text logs are far below
    # blank lines allowed beyond one per line with content (None: any number); reading
    # them is cheap, but a file that is mostly blank is not a log
    max_blank_lines: int | None = 1_000_000


class InflateLimit(UnusableInput):
    """A gzip log that decompresses past the limits (a zip bomb): read no further."""


class InflateGuard(io.RawIOBase):
    """Gzip decompression (concatenated members too) that raises InflateLimit as soon as
    it has produced more than the limits allow, so a zip bomb is stopped early, never
    inflated whole. Unlike gzip.GzipFile it hands out everything before a cut, then
    raises EOFError, so a truncated log keeps all its complete lines."""

    def __init__(
        self,
        raw: IO[bytes],
        path: Path,
        limits: ReadLimits,
        owns_raw: bool = False,
        name: str | None = None,
    ):
        self._raw = raw
        self._owns_raw = owns_raw
        self._name = name or path.name
        self._compressed = path.stat().st_size
        self._limits = limits
        self.limit = min(limits.max_inflated_bytes, limits.max_inflate_ratio * self._compressed)
        self.inflated = 0
        self._z = zlib.decompressobj(wbits=31)
        self._input = b""
        self._in_member = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._inflate(len(buffer))
        if not data:
            return 0
        buffer[: len(data)] = data
        self.inflated += len(data)
        if self.inflated > self.limit:
            raise InflateLimit(
                f"{self._name}: decompresses to more than {self.limit:,} bytes "
                f"({self._limits.max_inflate_ratio}x its {self._compressed:,} bytes, at most "
                f"{self._limits.max_inflated_bytes:,}); reading stopped there"
            )
        return len(data)

    def _inflate(self, size: int) -> bytes:
        """Up to `size` decompressed bytes; b"" at the end of the file."""
        while True:
            if not self._input:
                self._input = self._raw.read(1 << 16)
                if not self._input:
                    if self._in_member and not self._z.eof:
                        raise EOFError("the file ends before the gzip end-of-stream marker")
                    return b""
            if self._z.eof:  # another gzip member follows, or zero padding (as gzip allows)
                self._input = self._input.lstrip(b"\x00")
                self._in_member = False
                if not self._input:
                    continue
                self._z = zlib.decompressobj(wbits=31)
            # small pieces: a damaged stream fails at the end of its member (the CRC), and
            # everything handed out before that is kept
            data = self._z.decompress(self._input, min(size, 1 << 16))
            self._in_member = True
            self._input = self._z.unused_data if self._z.eof else self._z.unconsumed_tail
            if data:
                return data

    def close(self) -> None:
        if self._owns_raw:
            self._raw.close()
        super().close()


def open_gzip(
    path: Path, limits: ReadLimits, raw: IO[bytes] | None = None, name: str | None = None
) -> InflateGuard:
    """A gzip file, decompressed under the inflate limits (`raw`: already open, at 0;
    `name`: the file's name as the user knows it, for the messages)."""
    if raw is None:
        return InflateGuard(open(path, "rb"), path, limits, owns_raw=True, name=name)
    return InflateGuard(raw, path, limits, name=name)
