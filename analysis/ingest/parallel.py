"""A split ingest, the one way every runner does it (in one process, in a pool of
processes, as a Celery chord): plan the line-aligned byte ranges of a log, ingest each
part on its own (in memory, or to a folder another process reads back), merge the parts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from analysis.errors import TooManyBadLines, UnusableInput
from analysis.ingest.merge import merge_parts
from analysis.ingest.options import IngestOptions
from analysis.ingest.run import ingest_streams, ingest_to_folders
from analysis.readers import GZIP_MAGIC, ByteRange, TraceFit, sniff_format, split_lines
from analysis.stream import BlockStream

PART_NOTE = "part-note.json"  # in a part's folder: why the part had no usable line


@dataclass
class PartResult:
    """One part of a split ingest: its block streams by block size (the main size first
    when it was read in this process), or why it had none."""

    streams: dict[int, BlockStream] = field(default_factory=dict)
    unusable: UnusableInput | None = None


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
    byte_range: ByteRange,
    folder: str | Path,
    names: Sequence[str] | None = None,
) -> None:
    """One part, written to `folder` for load_part: its streams in b<size>/ (spilled as
    they grow, see ingest_to_folders), or PART_NOTE when it had no usable line. Any other
    error is raised: the runner says the part failed."""
    folder = Path(folder)
    try:
        ingest_to_folders(paths, options, folder, byte_range=byte_range, names=names)
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


def load_part(folder: str | Path) -> PartResult | None:
    """What ingest_part_to_folder left in `folder`; None when it left nothing (the part
    never ran, or did not finish)."""
    folder = Path(folder)
    note_file = folder / PART_NOTE
    if note_file.exists():
        note = orjson.loads(note_file.read_bytes())
        kind = TooManyBadLines if note.get("budget") else UnusableInput
        return PartResult(unusable=kind(note["reason"], note["errors"], note["skipped_lines"],
                                        advice=note.get("advice", ""),
                                        fit=TraceFit.from_dict(note.get("fit")),
                                        requests=note.get("requests", 0)))  # fmt: skip
    streams = sorted(folder.glob("b*")) if folder.is_dir() else []
    if not streams:
        return None
    return PartResult({int(sub.name[1:]): BlockStream.load(sub) for sub in streams})


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
