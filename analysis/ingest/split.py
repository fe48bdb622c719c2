"""Where a log may be cut for a split ingest: whether it may be at all, and its
line-aligned byte ranges. Light on purpose: a caller plans the parts, and starts the
processes that read them, before it imports the reading half of the engine."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from analysis.ingest.options import SPLIT_BYTES, IngestOptions
from analysis.readers.inflate import GZIP_MAGIC
from analysis.readers.lines import ByteRange, split_lines
from analysis.readers.sniff import first_line, sniff_format


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


def part_ranges(
    paths: Sequence[str | Path],
    options: IngestOptions,
    processes: int,
    split_bytes: int | None = None,
) -> list[ByteRange | None]:
    """What each worker process reads: line-aligned parts (up to `processes`, none under
    half of `split_bytes`) of one plain log of at least `split_bytes` (default
    SPLIT_BYTES), or every log whole ([None])."""
    parts = parts_to_read(paths, options, processes, split_bytes)
    return [None] if parts == 1 else list(plan_parts(paths[0], parts))


def parts_to_read(
    paths: Sequence[str | Path],
    options: IngestOptions,
    processes: int,
    split_bytes: int | None = None,
) -> int:
    """How many parts part_ranges cuts the logs into (1: every log whole), without
    planning them: planning reads the log (plan_parts), which a caller can do while its
    worker processes start (ingest_in_processes)."""
    if processes < 2 or len(paths) != 1 or _pre_hashed(paths[0], options.format):
        return 1
    path = paths[0]
    parts = part_count(os.path.getsize(path), processes, split_bytes or SPLIT_BYTES)
    return parts if parts >= 2 and splittable(path, options.format) else 1


def part_count(size: int, wanted: int, split_bytes: int) -> int:
    """How many parts a log of `size` bytes is read in: one under `split_bytes`, else up to
    `wanted` but none under half of `split_bytes` (each part pays its own start-up, the
    tokenizer's ranks and the reading half of the engine, and its merge, which a sliver of
    a log does not win back)."""
    if wanted < 2 or size < split_bytes:
        return 1
    return min(wanted, size // max(split_bytes // 2, 1))


def _pre_hashed(path: str | Path, log_format: str) -> bool:
    """A pre-hashed trace, asked for or as its first line says: read whole, by Arrow's
    column reader, which uses every core already (parts would go line by line)."""
    if log_format in ("mooncake", "bailian"):
        return True
    return log_format == "auto" and b'"hash_ids"' in first_line(path)
