"""Where a log may be cut for a split ingest: whether it may be at all, and its
line-aligned byte ranges. Light on purpose: a caller plans the parts, and starts the
processes that read them, before it imports the reading half of the engine."""

from __future__ import annotations

from pathlib import Path

from analysis.readers.inflate import GZIP_MAGIC
from analysis.readers.lines import ByteRange, split_lines
from analysis.readers.sniff import sniff_format


def splittable(path: str | Path, log_format: str = "auto") -> bool:
    """Whether a log may be split into line-aligned byte ranges, read part by part: a plain
    (not gzip) file whose requests are its lines. A gateway CSV row may span lines (a
    quoted cell holding newlines) and a Bailian trace's sessions chain its lines: those
    are read whole, as asked for or (auto) as their first line says."""
    if log_format in ("csv", "bailian"):
        return False
    with open(path, "rb") as fh:
        if fh.read(2) == GZIP_MAGIC:
            return False
    return log_format != "auto" or sniff_format(path) is None


def plan_parts(path: str | Path, parts: int) -> list[ByteRange]:
    """The byte ranges of a plain (not gzip) log, line-aligned, for `parts` parts (fewer
    when the log is short)."""
    return split_lines(path, parts)
