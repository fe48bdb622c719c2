"""`memory`: ingest's peak memory is bounded by the distinct content, not the file's length —
a chat log against the same requests N times over, each ingested by a child process
(`ingest-once`), spilled to disk as the console's task does and all in memory.

    python -m bench memory --requests 75000 --copies 10 [--workdir DIR]
"""

from __future__ import annotations

import shutil
from pathlib import Path

from analysis import IngestOptions, ingest_streams, ingest_to_folders
from bench.generate import chat_copies, write_jsonl
from bench.harness import HASH_KEY, ProcessTimer, child_command, work_folder

MODES = ("spilled", "in-memory")


def run(requests: int, copies: int, workdir: str | None, timer: ProcessTimer) -> None:
    work = work_folder(workdir)
    logs = []
    for count in (1, copies):
        log = work / f"chat-{requests}x{count}.jsonl"
        if not log.exists():
            write_jsonl(chat_copies(requests, count, documents=200), log)
        logs.append(log)
    print(f"ingest memory: {requests:,} requests once, and {copies} times over")
    peaks = {}
    for mode in MODES:
        for log in logs:
            out = work / f"store-{log.stem}-{mode}"
            wall, rss, code = timer.best(child_command("ingest-once", str(log), str(out), mode))
            peaks[mode, log] = rss
            size = log.stat().st_size / 1e6
            print(f"  {mode:9s} {size:6.0f} MB log: {wall:6.2f} s, peak RSS {rss:5.0f} MB, "
                  f"exit {code}")  # fmt: skip
            shutil.rmtree(out, ignore_errors=True)
        ratio = peaks[mode, logs[1]] / peaks[mode, logs[0]]
        print(f"  {mode}: peak RSS {copies}x the log / 1x = {ratio:.2f}")


def ingest_once(log: str, out: str, mode: str) -> None:
    """One ingest as the console's task runs it (a child process of `memory`)."""
    options = IngestOptions(hash_key=HASH_KEY)
    if mode == "spilled":
        ingest_to_folders([log], options, out)
    else:
        for size, stream in ingest_streams([log], options).items():
            stream.save(Path(out) / f"b{size}")
