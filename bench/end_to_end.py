"""`trace`, `chat` and `agent`: `manage.py analyze` as a whole process, on a pre-hashed
trace (against kvcache-simulator) and on a chat or agent log (against the read + parse +
tokenize floor).

    python -m bench trace --requests 500000 [--kvsim PATH] [--workdir DIR]
    python -m bench chat --requests 20000 [--naive] [--workdir DIR]
    python -m bench agent --requests 20000 [--naive] [--workdir DIR]
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
from tiktoken import Encoding

from analysis.errors import ErrorLog
from analysis.readers import ChatReader, ChatRequest, decode_line
from analysis.tokens import load_encoding
from bench.harness import (
    MANAGE,
    ROOT,
    ProcessRun,
    ProcessTimer,
    agent_log,
    chat_log,
    mooncake_trace,
    work_folder,
)


def run_trace(
    requests: int, kvsim: str | None, kvsim_model: str, workdir: str | None, timer: ProcessTimer
) -> None:
    work = work_folder(workdir)
    trace = mooncake_trace(work, requests)
    refs = sum(len(orjson.loads(line)["hash_ids"]) for line in trace.open("rb"))
    print(
        f"trace: {requests:,} requests, {refs:,} block references, "
        f"{trace.stat().st_size / 1e6:.0f} MB ({trace})"
    )
    ours = [*MANAGE, "analyze", str(trace), "--json", str(work / "report.json")]
    timer.once(ours)  # warm: numba's cache, page cache
    wall, rss, code = timer.best(ours)
    print(
        f"  kvscope analyze (every window, exact curve, working sets): {wall:.2f} s, "
        f"peak RSS {rss:.0f} MB, exit {code}"
    )
    if kvsim:
        swall, srss, scode = _kvsim(kvsim, kvsim_model, trace, work, timer)
        print(
            f"  kvcache-simulator run (5 budgets x lru,optimal): {swall:.2f} s, "
            f"peak RSS {srss:.0f} MB, exit {scode}"
        )
        print(f"  speed-up {swall / wall:.2f}x, memory ratio {rss / srss:.2f}")
    shared = ROOT.parent / "shared" / "data" / "mooncake_synthetic_trace.jsonl"
    if shared.exists():
        cmd = [*MANAGE, "analyze", str(shared), "--json", str(work / "mooncake.json")]
        wall, rss, code = timer.best(cmd)
        print(f"  shared Mooncake trace, whole process: {wall:.2f} s, peak RSS {rss:.0f} MB")


def _kvsim(kvsim: str, model: str, trace: Path, work: Path, timer: ProcessTimer) -> ProcessRun:
    """kvcache-simulator on the same trace: five budgets, LRU and the optimal policy."""
    sim = [kvsim, "run", "--trace", str(trace), "--model", model, "--block-size", "512",
           "--budgets-gib", "1,4,16,64,256", "--policies", "lru,optimal", "--no-progress",
           "--format", "json", "--output", str(work / "kvsim.json")]  # fmt: skip
    timer.once(sim)  # its one-time C++ compile
    return timer.best(sim)


def _parse_all(log: Path) -> Iterator[ChatRequest]:
    reader = ChatReader(ErrorLog())  # a fresh one per pass (it remembers request ids)
    for n, raw in enumerate(log.open("rb"), 1):
        yield reader.parse(decode_line(raw), n)


def _floor(log: Path, enc: Encoding) -> float:
    """One pass of the floor: read, parse and render every line, tokenize each distinct
    text once."""
    start = time.perf_counter()
    seen: set[str] = set()
    for request in _parse_all(log):
        for m in request.messages:
            if m.text not in seen:
                seen.add(m.text)
                enc.encode_ordinary(m.text)
    return time.perf_counter() - start


def run_chat(
    requests: int, naive: bool, workdir: str | None, timer: ProcessTimer, agent: bool = False
) -> None:
    """The floor reads, parses and renders each line (tools and tool calls included) as
    the engine does, and tokenizes each distinct text once."""
    work = work_folder(workdir)
    log = agent_log(work, requests) if agent else chat_log(work, requests)
    size_mb = log.stat().st_size / 1e6
    print(f"{'agent' if agent else 'chat'}: {requests:,} requests, {size_mb:.0f} MB ({log})")
    enc = load_encoding()
    floor = min(_floor(log, enc) for _ in range(timer.repeat))  # best of, as kvscope's
    print(f"  floor (read + parse + tokenize each distinct text once): {floor:.2f} s "
          f"(best of {timer.repeat})")  # fmt: skip
    if naive:
        start = time.perf_counter()
        for request in _parse_all(log):
            for m in request.messages:
                enc.encode_ordinary(m.text)
        print(f"  naive (tokenize every message of every request): "
              f"{time.perf_counter() - start:.2f} s")  # fmt: skip
    cmd = [*MANAGE, "analyze", str(log), "--json", str(work / "chat-report.json")]
    wall, rss, code = timer.best(cmd)
    print(
        f"  kvscope analyze, whole process (3 windows, exact curve): {wall:.2f} s, "
        f"{size_mb / wall:.1f} MB/s, peak RSS {rss:.0f} MB, exit {code}"
    )
    print(f"  ratio to the floor: {wall / floor:.2f}x")
