"""What every benchmark shares: where inputs go, in-process and whole-process peak memory,
whole-process timing (the best of --repeat runs), the inputs several benchmarks generate,
and how a measured child process reports back to its parent."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bench.agent_log import agent_requests
from bench.generate import chat_requests, mooncake_requests, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(ROOT / "manage.py")]
# every ingest a benchmark runs pseudonymises with this key (the console would use its own)
HASH_KEY = b"bench-secret-0123456789"


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (getrusage)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vm_hwm_kib() -> int:
    """This process's peak resident memory (KiB) since its exec (or reset_vm_hwm), from
    /proc."""
    return _status_kib("VmHWM:")


def vm_rss_kib() -> int:
    """This process's resident memory (KiB) now, from /proc."""
    return _status_kib("VmRSS:")


def reset_vm_hwm() -> None:
    """Start vm_hwm_kib's peak again from the memory resident now (Linux's clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def _status_kib(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith(field)).split()[1])


class ProcessRun(NamedTuple):
    """One whole-process run; compared as a tuple, so the fastest run is the smallest."""

    wall_s: float
    peak_rss_mb: float
    exit_code: int


@dataclass(frozen=True)
class ProcessTimer:
    """Times whole processes from os.wait4, so the figures include interpreter start-up and
    imports, as a user would see them."""

    repeat: int = 3  # the best of this many runs (shared VMs are noisy)

    def best(self, cmd: list[str]) -> ProcessRun:
        """The fastest of `repeat` runs of `cmd`."""
        return min(self.once(cmd) for _ in range(self.repeat))

    @staticmethod
    def once(cmd: list[str]) -> ProcessRun:
        """One run of `cmd`, its output dropped; the tail of its errors shown if it failed."""
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if status != 0 and proc.stderr is not None:
            sys.stderr.write(proc.stderr.read().decode()[-2000:])
        return ProcessRun(wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status))


def print_header() -> None:
    """The line every benchmark's output starts with: which machine, and when."""
    machine = f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"
    print(f"# {machine} · {time.strftime('%Y-%m-%d %H:%M')}")


def work_folder(workdir: str | None, prefix: str = "kvscope-bench-") -> Path:
    """The folder given (kept between runs, so generated inputs are reused), or a new one."""
    work = Path(workdir or tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return work


def chat_log(work: Path, requests: int) -> Path:
    """A generated chat log of `requests` over 200 documents, written once per work folder."""
    log = work / f"chat-{requests}.jsonl"
    if not log.exists():
        write_jsonl(chat_requests(requests, documents=200), log)
    return log


def agent_log(work: Path, requests: int) -> Path:
    """A generated tools-heavy agent log of `requests`, written once per work folder."""
    log = work / f"agent-{requests}.jsonl"
    if not log.exists():
        write_jsonl(agent_requests(requests), log)
    return log


def mooncake_trace(work: Path, requests: int) -> Path:
    """A generated Mooncake-format trace of `requests`, written once per work folder."""
    trace = work / f"trace-{requests}.jsonl"
    if not trace.exists():
        write_jsonl(mooncake_requests(requests), trace)
    return trace


def child_command(name: str, *args: str) -> list[str]:
    """`python -m bench NAME ARGS...`: a measured child, so its peak memory is its own."""
    return [sys.executable, "-m", "bench", name, *args]


def child_report(out: str | Path) -> Path:
    """Where a child that writes `out` leaves its one-line report for the parent (its
    output goes nowhere: ProcessTimer drops it)."""
    return Path(f"{out}.txt")
