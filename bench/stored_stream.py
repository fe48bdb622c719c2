"""`reanalyze` and `replay`: what the console does with a block stream it stored at ingest —
analyse it again with new parameters, and summarise and export it as a replay trace.

    python -m bench reanalyze --requests 500000 [--workdir DIR]
    python -m bench replay --requests 1000000 [--workdir DIR]
"""

from __future__ import annotations

import time
from pathlib import Path

from analysis import AnalysisParams, BlockStream, IngestOptions, analyze, ingest
from analysis.replay import ReplayOptions, replay_lines, summary
from bench.harness import HASH_KEY, mooncake_trace, peak_rss_mb, work_folder


def stored_trace_stream(requests: int, workdir: str | None) -> Path:
    """A generated Mooncake trace of `requests`, ingested and saved once per work folder."""
    work = work_folder(workdir)
    trace = mooncake_trace(work, requests)
    folder = work / f"stream-{requests}"
    if not folder.exists():
        ingest([trace], IngestOptions(hash_key=HASH_KEY)).save(folder)
    return folder


def run_reanalyze(requests: int, workdir: str | None) -> None:
    folder = stored_trace_stream(requests, workdir)
    stream = BlockStream.load(folder)  # the page cache warm, as for a stored stream in use
    start = time.perf_counter()
    stream = BlockStream.load(folder)
    loaded = time.perf_counter() - start
    # a console worker re-analyses with its kernels loaded (its first analysis paid that):
    # load them on a small trace of the same kind
    small = mooncake_trace(work_folder(workdir), 2000)
    analyze(ingest([small], IngestOptions(hash_key=HASH_KEY)), AnalysisParams())
    timings = []
    for scope, lifetime in (("global", None), ("tenant", 600.0), ("user", 3600.0)):
        start = time.perf_counter()
        analyze(stream, AnalysisParams(scope=scope, lifetime_s=lifetime))
        timings.append(time.perf_counter() - start)
    print(f"reanalyze: {stream.block_refs:,} stored block references ({folder})")
    print(
        f"  load {loaded:.2f} s; analyze (global / tenant+600 s / user+3600 s): "
        + " / ".join(f"{t:.2f} s" for t in timings)
        + f"; peak RSS {peak_rss_mb():.0f} MB"
    )


def run_replay(requests: int, workdir: str | None) -> None:
    folder = stored_trace_stream(requests, workdir)
    summary(BlockStream.load(folder), ReplayOptions(end_s=0))  # load numba's cached code
    stream = BlockStream.load(folder)
    half = (stream.req_t_us[-1] - stream.req_t_us[0]) / 2e6
    pages = []  # what the export page does on each view: load the stream, summarize
    for options in (ReplayOptions(), ReplayOptions(end_s=half),
                    ReplayOptions(tenants=stream.tenants[:1])):  # fmt: skip
        start = time.perf_counter()
        summary(BlockStream.load(folder), options)
        pages.append(time.perf_counter() - start)
    start = time.perf_counter()
    written = sum(len(line) for line in replay_lines(stream, ReplayOptions()))
    export = time.perf_counter() - start
    print(f"replay: {stream.requests:,} requests, {stream.block_refs:,} block references")
    print(
        "  page view, load + summary (all / first half / first tenant): "
        + " / ".join(f"{t:.2f} s" for t in pages)
        + f"; whole export {export:.2f} s ({written / 1e6:.0f} MB, "
        f"{stream.requests / export / 1e3:.0f} k lines/s); peak RSS {peak_rss_mb():.0f} MB"
    )
