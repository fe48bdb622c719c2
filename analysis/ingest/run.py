"""The ingest's entry points: log files in, one block stream per block size out (in
memory, or written to folders with the long columns spilled to disk as they grow)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analysis.heap import release_free_heap
from analysis.ingest.options import IngestOptions
from analysis.ingest.read import read_log
from analysis.progress import Progress, ProgressFn
from analysis.readers import ByteRange
from analysis.spill import SpillColumns
from analysis.stream import BlockStream


def ingest(
    paths: Sequence[str | Path],
    options: IngestOptions,
    progress: ProgressFn | None = None,
    names: Sequence[str] | None = None,
) -> BlockStream:
    """Read every log into one block stream (options.block_tokens)."""
    streams = ingest_streams(paths, options, progress, names=names)
    return next(iter(streams.values()))


def ingest_streams(
    paths: Sequence[str | Path],
    options: IngestOptions,
    progress: ProgressFn | None = None,
    byte_range: ByteRange | None = None,
    names: Sequence[str] | None = None,
) -> dict[int, BlockStream]:
    """Read every log once into block streams, one per block size (the first is
    options.block_tokens or the format's default, then options.extra_block_tokens).

    Bad lines are skipped and listed; a log with no usable line at all raises
    UnusableInput with a one-line reason, and so does a whole trace whose contradicting
    lines all fit one other block size (TraceFit.advice: it was made at that size).
    `names`: each path's name as the user knows it (default: the path's own), used in
    every error, note and skipped-line entry.
    """
    builder, file_names, log = read_log(paths, options, progress, byte_range, None, names)
    streams = builder.finish(file_names, log)
    del builder  # its columns: the streams hold (or copied) what they need
    release_free_heap()
    return streams


def ingest_to_folders(
    paths: Sequence[str | Path],
    options: IngestOptions,
    root: str | Path,
    progress: ProgressFn | None = None,
    byte_range: ByteRange | None = None,
    names: Sequence[str] | None = None,
) -> dict[int, Path]:
    """ingest_streams, written straight to `root`/b<size> (one folder per block size).
    Block references and occurrences are spilled to disk as they grow, so the memory
    used follows the distinct content of the logs, not their length."""
    root = Path(root)
    with SpillColumns(root) as spill:
        builder, file_names, log = read_log(paths, options, progress, byte_range, spill, names)
        if progress is not None:
            progress(Progress("writing", 1, 1, builder.requests, log.skipped_lines))
        folders = {size: root / f"b{size}" for size in builder.block_sizes}
        return builder.write(folders, file_names, log)
