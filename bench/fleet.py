"""`fleet`: the fleet analysis (metrics.md section 8) against the single cache's, engine time
of analyze() — every router over N replicas, each replica's curve exact.

    python -m bench fleet [--refs 10000000] [--replicas 8] [--runs 10] [--workdir DIR]

First the shared Mooncake trace, 4 routers x 4 replicas, in this process: the best of
--runs analyses each, numba's code compiled beforehand. Then a generated trace of --refs
block references shaped like chat traffic — chained prefixes (system prompts, Zipf-popular
documents), conversations that resend their history under a session id, one-off tails —
ingested and stored once, each analysis by a child process (`fleet-once`) that loads it,
warms numba on a small stream of the same kind, and reports its analyze() time and its
peak memory from /proc (VmHWM: wait4's ru_maxrss also counts the parent at fork).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from analysis import AnalysisParams, BlockStream, IngestOptions, analyze, ingest
from analysis.params import FleetParams
from bench.generate import mooncake_requests, write_jsonl
from bench.harness import (
    HASH_KEY,
    ProcessTimer,
    child_command,
    child_report,
    vm_hwm_kib,
    work_folder,
)
from tests.golden.cases import shared_trace

TARGET_RATIO = 3.0  # issue 15: the fleet analysis in at most 3x the single cache's
SHARED_REPLICAS = 4
CONVERSATIONS = 0.4  # share of the generated requests that are a later turn of a session
WARM_REFS = 20_000  # the small stream each child warms numba on
SINGLE = 0  # fleet-once's replica count for the single-cache analysis


def fleet_params(replicas: int) -> AnalysisParams:
    """The analysis timed: the single cache (replicas 0), or every router over N."""
    if replicas == SINGLE:
        return AnalysisParams()
    return AnalysisParams(fleet=FleetParams(replicas=replicas))


def run(refs: int, replicas: int, runs: int, workdir: str | None, timer: ProcessTimer) -> None:
    run_shared_trace(runs)
    run_generated(refs, replicas, workdir, timer)


def run_shared_trace(runs: int) -> None:
    path = shared_trace()
    if path is None:
        print("fleet: the shared Mooncake trace is not there (tests/golden/cases.py)")
        return
    stream = ingest([path], IngestOptions(hash_key=HASH_KEY))
    single, fleet = fleet_params(SINGLE), fleet_params(SHARED_REPLICAS)
    for params in (single, fleet):  # numba's code compiled (or loaded), not timed
        analyze(stream, params)
    # taken in turn, so a burst of other work on the machine weighs on both alike
    times: dict[int, list[float]] = {SINGLE: [], SHARED_REPLICAS: []}
    for _ in range(runs):
        for replicas, params in ((SINGLE, single), (SHARED_REPLICAS, fleet)):
            start = time.perf_counter()
            analyze(stream, params)
            times[replicas].append(time.perf_counter() - start)
    one, many = min(times[SINGLE]), min(times[SHARED_REPLICAS])
    ratio = many / one
    met = "met" if ratio <= TARGET_RATIO else "missed"
    print(f"fleet: shared Mooncake trace, {stream.requests:,} requests, "
          f"{stream.block_refs:,} block references; analyze(), best of {runs}")  # fmt: skip
    print(f"  single cache {one * 1e3:.1f} ms; 4 routers x {SHARED_REPLICAS} replicas "
          f"{many * 1e3:.1f} ms = {ratio:.2f}x (target <= {TARGET_RATIO:g}x: {met})")  # fmt: skip


def run_generated(refs: int, replicas: int, workdir: str | None, timer: ProcessTimer) -> None:
    work = work_folder(workdir)
    folder = stored_conversations(work, refs)
    stored_conversations(work, WARM_REFS)
    stream = BlockStream.load(folder)
    sessions = np.unique(stream.req_session[stream.req_session != 0]).size
    print(f"fleet: generated conversation trace, {stream.requests:,} requests, "
          f"{stream.block_refs:,} block references ({np.unique(stream.ref_key).size:,} "
          f"distinct), {sessions:,} sessions ({folder}); one child process per analysis, "
          f"best of {timer.repeat}")  # fmt: skip
    del stream
    results = {}
    for count in (SINGLE, replicas):
        out = work / f"fleet-once-{refs}-{count}"
        runs = []
        for _ in range(timer.repeat):
            code = timer.once(child_command("fleet-once", str(folder), str(out), str(count)))[2]
            if code != 0:
                raise SystemExit(f"fleet-once {count} exited {code}")
            runs.append(child_report(out).read_text().split(" ", 3))
        results[count] = min(runs, key=lambda r: float(r[0]))
        took, before, peak, ceilings = results[count]
        what = "single cache" if count == SINGLE else f"4 routers x {count} replicas"
        print(f"  {what}: analyze {float(took):.2f} s, peak RSS {int(peak) / 1024:,.0f} MB "
              f"({int(before) / 1024:,.0f} MB with the stream loaded); {ceilings}")  # fmt: skip
    ratio = float(results[replicas][0]) / float(results[SINGLE][0])
    print(f"  fleet / single cache: {ratio:.2f}x the time")


def stored_conversations(work: Path, refs: int) -> Path:
    """The generated conversation trace of about `refs` block references, ingested and
    stored once per work folder."""
    folder = work / f"conversations-{refs}-stream"
    if not folder.exists():
        ingest([conversation_trace(work, refs)], IngestOptions(hash_key=HASH_KEY)).save(folder)
    return folder


def conversation_trace(work: Path, refs: int, chat_ids: bool = True) -> Path:
    """The generated conversation trace of about `refs` references, written once per work
    folder: Bailian's lines (sessions named), or without `chat_ids` Mooncake's."""
    log = work / f"conversations-{'' if chat_ids else 'mooncake-'}{refs}.jsonl"
    if not log.exists():
        rows = mooncake_requests(refs, conversations=CONVERSATIONS, chat_ids=chat_ids)
        write_jsonl(_up_to_refs(rows, refs), log)
    return log


def _up_to_refs(rows: Iterator[dict], refs: int) -> Iterator[dict]:
    """The rows up to the one that brings their block references to `refs`."""
    taken = 0
    for row in rows:
        yield row
        taken += len(row["hash_ids"])
        if taken >= refs:
            return


def analyze_once(folder: str, out: str, replicas: int) -> None:
    """A child of `fleet`: load the stored stream, warm numba on the small one beside it,
    then time one analyze(); report the time, the peak before and after, the ceilings."""
    params = fleet_params(replicas)
    analyze(BlockStream.load(Path(folder).parent / f"conversations-{WARM_REFS}-stream"), params)
    stream = BlockStream.load(folder)
    before = vm_hwm_kib()
    start = time.perf_counter()
    report = analyze(stream, params)
    took = time.perf_counter() - start
    ceilings = f"ceiling {report.recommendation.ceiling:.3f}"
    if report.fleet is not None:
        ceilings += ", by router " + ", ".join(
            f"{r['router']} {r['ceiling']:.3f}" for r in report.fleet["routers"]
        )
    child_report(out).write_text(f"{took} {before} {vm_hwm_kib()} {ceilings}")
