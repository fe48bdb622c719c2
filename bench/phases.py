"""`phases`: where one log's time and memory go, in one process: the ingest (or the load
of a stored stream), then each step of the analysis as its progress reports it, with the
wall time of each and the most resident memory the process held during it (its peak,
reset between steps).

    python -m bench phases LOG            # e.g. the scale benchmark's generated trace
    python -m bench phases --stream DIR   # a stream stored by `analyze --save-stream DIR`

The analysis's steps are those analyze() reports: the scoped columns (each reference's
request, scoped key id, previous reference, reuse time), then the single cache with the
windows and the admission cache beside it in helper threads, then the windows' reports,
the budgets and the rest.
"""

from __future__ import annotations

import time
from pathlib import Path

from analysis import AnalysisParams, BlockStream, IngestOptions, analyze, ingest
from analysis.metrics.warm import warm_kernels
from analysis.progress import Progress
from bench.harness import HASH_KEY, reset_vm_hwm, vm_hwm_kib, vm_rss_kib


def run(log: str | None, stream_folder: str | None) -> None:
    warm_kernels()  # numba's start-up, not a phase of the log's
    reset_vm_hwm()
    started = last = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        print(f"  {name:<44} {now - last:7.2f} s   resident {vm_rss_kib() >> 10:6,} MiB, "
              f"most {vm_hwm_kib() >> 10:6,} MiB")  # fmt: skip
        reset_vm_hwm()
        last = now

    if stream_folder:
        stream = BlockStream.load(Path(stream_folder))
        print(f"phases: stored stream {stream_folder}, {stream.block_refs:,} references")
        phase("load")
    else:
        assert log is not None
        stream = ingest([log], IngestOptions(hash_key=HASH_KEY))
        print(f"phases: {log}, {stream.requests:,} requests, {stream.block_refs:,} references")
        phase("ingest")
    names = iter(("scoped columns", "single cache (windows, admission beside it)",
                  "the windows' thread, after the single cache"))  # fmt: skip

    def progress(p: Progress) -> None:
        if p.stage == "analyzing" and (name := next(names, None)) is not None:
            phase(name)  # (the later steps, each a moment, go with the rest)

    analyze(stream, AnalysisParams(), progress, consume=True)  # as the command does
    phase("the rest of the report")
    print(f"  whole: {time.perf_counter() - started:.2f} s")
