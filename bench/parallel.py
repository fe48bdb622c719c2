"""`parallel`: a chat log ingested in byte-range parts by plain worker processes and merged
(the functions the Celery chord runs), against one process; `workers` runs the same through
real Celery workers.

    python -m bench parallel --requests 150000 --workers 2 [--workdir DIR]
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor

from analysis import IngestOptions, ingest
from analysis.ingest import ingest_part_to_folder, load_part, merge_part_results, plan_parts
from analysis.readers import ByteRange
from bench.harness import HASH_KEY, chat_log, work_folder


def _ingest_part(path: str, byte_range: ByteRange, folder: str) -> str:
    """One part in a worker process, written to its folder (as a Celery part task does)."""
    ingest_part_to_folder([path], IngestOptions(hash_key=HASH_KEY), byte_range, folder)
    return folder


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
    ranges = plan_parts(log, workers)
    folders = [str(out / f"p{i:04d}") for i in range(len(ranges))]
    with ProcessPoolExecutor(workers) as pool:
        done = list(pool.map(_ingest_part, [str(log)] * len(ranges), ranges, folders))
    parts = [part for folder in done if (part := load_part(folder)) is not None]
    if len(parts) < len(done):
        raise SystemExit(f"a part left nothing in {out}: see its worker's error above")
    merged = next(iter(merge_part_results(parts).values()))
    parallel = time.perf_counter() - start
    same = bool((merged.ref_key == one.ref_key).all()) and merged.requests == one.requests
    print(
        f"  one process {single:.2f} s; {workers} processes + merge {parallel:.2f} s: "
        f"{single / parallel:.2f}x; identical block stream: {same}"
    )
