"""Ingest in worker processes while the caller goes on: a big plain log in line-aligned
parts, one per process, merged into exactly the stream one pass makes (merge.py). The
caller is free meanwhile: `manage.py analyze` loads the analysis kernels then
(metrics/warm.py). A small log, a gzip or several logs are read whole by the caller:
a worker's start-up and the parts' merge would cost more than a core wins back; so is a
pre-hashed trace, whose column reader (Arrow's) uses every core already.

Parts are written to a temporary folder (as a Celery part task writes them), so memory
follows the log's distinct content, and read back by the caller; the folder is removed
on the way out, whatever happened. Workers are spawned, not forked (a fork copies the
thread pools of a caller that has run Arrow or numba, half-made); as multiprocessing
does, each imports the caller's main module again: a script that calls this starts its
work under `if __name__ == "__main__":` (manage.py does)."""

from __future__ import annotations

import multiprocessing
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.errors import WorkerStopped
from analysis.ingest.options import IngestOptions
from analysis.ingest.split import plan_parts
from analysis.readers.lines import ByteRange

if TYPE_CHECKING:
    from analysis.stream import BlockStream


_STOPPED = ("a worker process reading the log stopped before its part was read (killed, or "
            "out of memory?)")  # fmt: skip


@dataclass
class PendingIngest:
    """The worker processes' reading, under way."""

    options: IngestOptions
    folders: list[Path]
    futures: list[Future[list[int]]]

    def result(self) -> BlockStream:
        """The block stream of the options' main block size, once every part is read;
        raises as ingest() does (UnusableInput, TooManyBadLines, a part's own error)."""
        # the merging half of the engine (Arrow with it): once the workers have started
        from analysis.ingest.parallel import merge_part_results
        from analysis.ingest.part_files import load_part

        try:
            sizes = [future.result() for future in self.futures]
        except BrokenProcessPool:
            raise WorkerStopped(_STOPPED) from None
        main = [written[0] for written in sizes if written][:1]
        parts = [part for folder in self.folders if (part := load_part(folder)) is not None]
        merged = merge_part_results(parts, self.options.max_bad_lines, main or None)
        return next(iter(merged.values()))


def _start(options: IngestOptions) -> None:
    """In a worker, while the caller plans the parts: the reading half of the engine
    imported, and the tokenizer's ranks loaded (cached for the part that follows). A
    tokenizer that cannot be loaded is left for the part to report."""
    from analysis.ingest.parallel import ingest_part_to_folder  # noqa: F401
    from analysis.tokens import EncodingUnavailable, load_encoding

    if not options.tokenizer_file:
        with suppress(EncodingUnavailable):
            load_encoding(options.encoding, options.tiktoken_dir)


def _read_part(
    paths: list[str | Path],
    options: IngestOptions,
    byte_range: ByteRange | None,
    folder: Path,
    names: Sequence[str] | None,
) -> list[int]:
    """In a worker: one part to its folder (ingest_part_to_folder)."""
    from analysis.ingest.parallel import ingest_part_to_folder

    return ingest_part_to_folder(paths, options, byte_range, folder, names)


@contextmanager
def ingest_in_processes(
    paths: Sequence[str | Path],
    options: IngestOptions,
    ranges: Sequence[ByteRange | None] | int,
    names: Sequence[str] | None = None,
) -> Iterator[PendingIngest]:
    """Start reading `paths` in worker processes, one per range of part_ranges; the caller
    works on, then asks the PendingIngest for the stream. `ranges` may instead be a count
    of parts of the one log (parts_to_read): they are then planned here while the workers
    start (a worker's start-up, ~0.4 s, and the planning's read of the log, ~0.25 s a GB,
    overlap)."""
    context = multiprocessing.get_context("spawn")
    count = ranges if isinstance(ranges, int) else len(ranges)
    futures: list[Future[list[int]]] = []
    with tempfile.TemporaryDirectory(prefix="kvscope-parts-") as root:
        pool = ProcessPoolExecutor(count, mp_context=context)
        try:
            if isinstance(ranges, int):
                for _ in range(count):  # each submission starts a worker while none is idle
                    pool.submit(_start, options)
                ranges = plan_parts(paths[0], count)
            folders = [Path(root) / f"p{i:04d}" for i in range(len(ranges))]
            try:
                futures = [
                    pool.submit(_read_part, list(paths), options, part, folder, names)
                    for part, folder in zip(ranges, folders, strict=True)
                ]
            except BrokenProcessPool:  # a worker stopped while it started
                raise WorkerStopped(_STOPPED) from None
            yield PendingIngest(options, folders, futures)
        finally:
            # every part read: the workers' exit (each tearing down what it held, ~0.08 s
            # of the 1 GB chat log's run) is not waited for. Otherwise it is, before
            # their folder goes (a part may still be writing to it)
            pool.shutdown(wait=not all(f.done() for f in futures), cancel_futures=True)
