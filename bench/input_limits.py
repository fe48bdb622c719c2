"""`longline` and `blanklines`: inputs at the readers' limits, each ingested by a child process
as the console's task runs it (`longline-once`, `blanklines-once`) — one line of each kind
just under the line-length limit (peak memory), and a gzip of nothing but newlines (time
proportional to bytes, progress from the start).

    python -m bench longline [--kinds letters,tokens,...] [--limit BYTES] [--workdir DIR]
    python -m bench blanklines --mib 1024 [--workdir DIR]

The children report their own peak from /proc (VmHWM): wait4's ru_maxrss also counts the
parent's memory at fork (Linux keeps the pre-exec peak), here the generated input's.
"""

from __future__ import annotations

import shutil
import time
import zlib

from analysis import IngestOptions, Progress, UnusableInput, ingest_to_folders
from analysis.readers import ReadLimits
from bench.generate import long_line
from bench.harness import (
    HASH_KEY,
    ProcessTimer,
    child_command,
    child_report,
    vm_hwm_kib,
    work_folder,
)


def run_longline(
    kinds: list[str], limit: int | None, workdir: str | None, timer: ProcessTimer
) -> None:
    work = work_folder(workdir)
    limit = limit or ReadLimits().max_line_bytes
    print(f"longline: one line of each kind just under the line limit ({limit:,} bytes), "
          "ingested whole by a child process as the console's task runs it")  # fmt: skip
    for kind in kinds:
        log = work / f"long-{kind}-{limit}.jsonl"
        if not log.exists():
            log.write_bytes(long_line(kind, limit - 64))
        out = work / f"store-long-{kind}"
        wall, _, code = timer.best(child_command("longline-once", str(log), str(out), str(limit)))
        hwm, outcome = child_report(out).read_text().split(" ", 1)
        shutil.rmtree(out, ignore_errors=True)
        print(f"  {kind:9s} {log.stat().st_size / 2**20:6.1f} MiB line: {wall:6.2f} s, "
              f"peak RSS {int(hwm) / 1024:6.0f} MB, exit {code}: {outcome}")  # fmt: skip


def longline_once(log: str, out: str, limit: int) -> None:
    """A child of `longline`: ingest the file; report the outcome (an error is fine)."""
    options = IngestOptions(hash_key=HASH_KEY, limits=ReadLimits(max_line_bytes=limit))
    try:
        ingest_to_folders([log], options, out)
        outcome = "ingested"
    except UnusableInput as exc:
        outcome = f"refused ({str(exc)[:160]})"
    child_report(out).write_text(f"{vm_hwm_kib()} {outcome}")


BLANKLINES_MODES = ("default", "no-budget")


def run_blanklines(mib: int, workdir: str | None, timer: ProcessTimer) -> None:
    work = work_folder(workdir)
    log = work / f"newlines-{mib}MiB.jsonl.gz"
    if not log.exists():
        z, block = zlib.compressobj(6, zlib.DEFLATED, 31), b"\n" * (1 << 20)
        with open(log, "wb") as gz:
            for _ in range(mib):
                gz.write(z.compress(block))
            gz.write(z.flush())
    print(f"blanklines: {mib:,} MiB of newlines, gzip {log.stat().st_size / 1e6:.1f} MB")
    for mode in BLANKLINES_MODES:
        out = work / f"store-blank-{mode}"
        wall, _, code = timer.best(child_command("blanklines-once", str(log), str(out), mode))
        report = child_report(out).read_text()
        shutil.rmtree(out, ignore_errors=True)
        print(f"  {mode:9s}: {wall:6.2f} s whole process, exit {code}; {report}")


def blanklines_once(log: str, out: str, mode: str) -> None:
    """A child of `blanklines`: ingest the file with the default limits or with no budget
    at all; report the time, peak memory, progress reports and the outcome."""
    limits = ReadLimits() if mode == "default" else ReadLimits(
        max_inflate_ratio=10**9, max_inflated_bytes=1 << 50, max_blank_lines=None)  # fmt: skip
    calls: list[Progress] = []
    start = time.perf_counter()
    try:
        ingest_to_folders([log], IngestOptions(hash_key=HASH_KEY, limits=limits), out,
                          progress=calls.append)  # fmt: skip
        outcome = "ingested"
    except UnusableInput as exc:
        outcome = str(exc)[:150]
    took = time.perf_counter() - start
    first = next((p for p in calls if p.done > 0), None)
    child_report(out).write_text(
        f"ingest {took:.2f} s, peak RSS {vm_hwm_kib() / 1024:.0f} MB; {len(calls):,} progress "
        f"reports, the first with bytes > 0 at {first.done if first else 0:,} of "
        f"{calls[-1].total if calls else 0:,} (requests {first.requests if first else 0}); "
        f"-> {outcome}"
    )
