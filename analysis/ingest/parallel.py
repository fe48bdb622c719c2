"""A split ingest, the one way every runner does it (in one process, in a pool of
processes, as a Celery chord): plan the line-aligned byte ranges of a log, ingest each
part on its own (in memory, or to a folder another process reads back), merge the parts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import orjson

from analysis.errors import TooManyBadLines, UnusableInput
from analysis.ingest.merge import merge_parts
from analysis.ingest.options import IngestOptions
from analysis.ingest.part_files import PART_NOTE, PartResult
from analysis.ingest.run import ingest_streams, ingest_to_folders
from analysis.ingest.split import plan_parts
from analysis.readers import ByteRange
from analysis.stream import BlockStream


def ingest_part(
    paths: Sequence[str | Path],
    options: IngestOptions,
    byte_range: ByteRange,
    names: Sequence[str] | None = None,
) -> PartResult:
    """One part, in memory."""
    try:
        return PartResult(ingest_streams(paths, options, byte_range=byte_range, names=names))
    except UnusableInput as exc:
        return PartResult(unusable=exc)


def ingest_part_to_folder(
    paths: Sequence[str | Path],
    options: IngestOptions,
    byte_range: ByteRange | None,
    folder: str | Path,
    names: Sequence[str] | None = None,
) -> list[int]:
    """One part, written to `folder` for load_part: its streams in b<size>/ (spilled as
    they grow, see ingest_to_folders), or PART_NOTE when it had no usable line. Returns
    the block sizes written, the main one first (none for a PART_NOTE). Any other error
    is raised: the runner says the part failed."""
    folder = Path(folder)
    try:
        return list(ingest_to_folders(paths, options, folder, byte_range=byte_range, names=names))
    except UnusableInput as exc:
        # the advice as data too: the merge words it once for all the parts
        note = {"reason": str(exc), "errors": exc.errors, "skipped_lines": exc.skipped_lines,
                "budget": isinstance(exc, TooManyBadLines), "advice": exc.advice,
                "fit": exc.fit.to_dict() if exc.fit is not None else None,
                "requests": exc.requests}  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{PART_NOTE}"
        tmp.write_bytes(orjson.dumps(note))
        os.replace(tmp, folder / PART_NOTE)
        return []


def merge_part_results(
    results: Sequence[PartResult],
    max_bad_lines: int | None = None,
    sizes: Iterable[int] | None = None,
) -> dict[int, BlockStream]:
    """The parts (in file order) merged, one stream per block size: `sizes`, or every
    size the parts read, smallest first (as one pass orders them when stored). Raises as
    merge_parts: UnusableInput when no part had a usable line, TooManyBadLines past the
    budget, or a trace made at another block size."""
    return dict(merged_by_size(results, max_bad_lines, sizes))


def merged_by_size(
    results: Sequence[PartResult],
    max_bad_lines: int | None = None,
    sizes: Iterable[int] | None = None,
) -> Iterator[tuple[int, BlockStream]]:
    """merge_part_results one size at a time, so a caller that saves each merged stream
    and lets it go holds only one in memory (raising as merge_part_results does)."""
    by_size: dict[int, list[BlockStream]] = {}
    for result in results:
        for size, stream in result.streams.items():
            by_size.setdefault(size, []).append(stream)
    unusable = [r.unusable for r in results if r.unusable is not None]
    if not by_size:
        merge_parts([], unusable)  # raises: no part had a usable line
    chosen = sorted(by_size) if sizes is None else list(sizes)
    for size in chosen:
        yield size, merge_parts(by_size[size], unusable, max_bad_lines)


def ingest_in_parts(
    path: str | Path, options: IngestOptions, parts: int, name: str | None = None
) -> BlockStream:
    """The single-process form of parallel ingest: split one plain log into line-aligned
    byte ranges, ingest each on its own, merge (the main block size only). A part with
    no usable line contributes its errors only."""
    names = [name] if name else None
    results = [ingest_part([path], options, r, names) for r in plan_parts(path, parts)]
    main = [next(iter(r.streams)) for r in results if r.streams][:1]
    return next(iter(merge_part_results(results, options.max_bad_lines, main).values()))
