"""`parallel`: a chat log ingested in byte-range parts by plain worker processes and merged
(the functions the Celery chord runs), against one process; `workers` runs the same through
real Celery workers.

    python -m bench parallel --requests 150000 --workers 2 [--workdir DIR]
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from analysis import BlockStream, IngestOptions, ingest, ingest_streams
from analysis.ingest import merge_streams
from analysis.readers import ByteRange, split_lines
from bench.harness import HASH_KEY, chat_log, work_folder


def _ingest_part(path: str, index: int, start: int, end: int, first_line: int, out: str) -> str:
    """One part in a worker process: ingest its byte range, save it, return its folder."""
    streams = ingest_streams([path], IngestOptions(hash_key=HASH_KEY),
                             byte_range=ByteRange(start, end, first_line))  # fmt: skip
    return str(next(iter(streams.values())).save(Path(out) / f"p{index:04d}"))


def run(requests: int, workers: int, workdir: str | None) -> None:
    work = work_folder(workdir)
    log = chat_log(work, requests)
    print(
        f"parallel ingest: {log.stat().st_size / 1e6:.0f} MB chat log, "
        f"{workers} worker processes (the functions the Celery chord runs)"
    )
    start = time.perf_counter()
    one = ingest([log], IngestOptions(hash_key=HASH_KEY))
    single = time.perf_counter() - start
    out = work / "parts"
    start = time.perf_counter()
    ranges = split_lines(log, workers)
    with ProcessPoolExecutor(workers) as pool:
        jobs = [(str(log), i, r.start, r.end, r.first_line, str(out)) for i, r in enumerate(ranges)]
        folders = list(pool.map(_ingest_part, *map(list, zip(*jobs, strict=True))))
    merged = merge_streams([BlockStream.load(f) for f in folders])
    parallel = time.perf_counter() - start
    same = bool((merged.ref_key == one.ref_key).all()) and merged.requests == one.requests
    print(
        f"  one process {single:.2f} s; {workers} processes + merge {parallel:.2f} s: "
        f"{single / parallel:.2f}x; identical block stream: {same}"
    )
