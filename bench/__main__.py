"""kvscope benchmarks: python -m bench {mrc,trace,chat,longline,blanklines,pageload,...} [options]

Each benchmark generates its input deterministically, runs the real code paths, and prints
wall time, throughput and peak RSS. Whole-process figures come from os.wait4 on a child
process, so they include interpreter start-up and imports, as a user would see them.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(ROOT / "manage.py")]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vm_hwm_kib() -> int:
    """This process's peak resident memory (KiB) since its exec, from /proc."""
    status = Path("/proc/self/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1])


REPEAT = 3  # whole-process timings: the best of this many runs (shared VMs are noisy)


def run_process(cmd: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code): the fastest of REPEAT whole-process runs."""
    runs = [_run_once(cmd, env) for _ in range(REPEAT)]
    return min(runs)


def _run_once(cmd: list[str], env: dict | None = None) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0 and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode()[-2000:])
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def machine() -> str:
    return f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"


# --- exact miss-ratio curve ----------------------------------------------------------------
def bench_mrc(args) -> None:
    from analysis.mrc import hit_tokens_by_capacity, stack_distances
    from analysis.reuse import dense_ids, prev_next

    rng = np.random.default_rng(args.seed)
    # Zipf-popular keys over ~args.keys distinct ids, plus a share of one-offs
    ids = rng.zipf(1.05, args.refs) % args.keys
    tokens = np.full(args.refs, 256, dtype=np.int64)
    stack_distances(np.array([-1, 0], dtype=np.int64))  # numba compile, not timed
    prev_next(np.array([0, 0], dtype=np.int64), 1)
    start = time.perf_counter()
    dense, distinct = dense_ids(ids)
    prev, _ = prev_next(dense, distinct)
    dist = stack_distances(prev)
    curve = hit_tokens_by_capacity(dist, tokens)
    engine = time.perf_counter() - start
    print(f"mrc: {args.refs:,} references, {distinct:,} distinct keys")
    print(
        f"  engine time {engine:.2f} s ({args.refs / engine / 1e6:.1f} M refs/s), "
        f"peak RSS {peak_rss_mb():.0f} MB, ceiling {curve[-1] / tokens.sum():.4f}"
    )
    if args.shards_rate:
        from analysis.mrc import sampled, shards_hit_tokens

        rate, total = args.shards_rate, int(tokens.sum())
        start = time.perf_counter()
        keep = sampled(dense, rate)
        sub, sub_distinct = dense_ids(dense[keep])
        approx = shards_hit_tokens(
            stack_distances(prev_next(sub, sub_distinct)[0]), tokens[keep], rate, total
        )
        took = time.perf_counter() - start
        caps = np.arange(int(np.ceil(100 / rate)), curve.size)
        error = np.abs(curve[caps] - approx[np.minimum(caps, approx.size - 1)]).max() / total
        print(
            f"  SHARDS rate {rate}: {int(keep.sum()):,} sampled references, {took:.2f} s; "
            f"max |error| vs exact for capacities >= {caps[0]:,} slots: {error:.4f}"
        )


# --- pre-hashed traces vs kvcache-simulator ------------------------------------------------
def bench_trace(args) -> None:
    from bench.generate import mooncake_requests, write_jsonl

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    trace = work / f"trace-{args.requests}.jsonl"
    if not trace.exists():
        write_jsonl(mooncake_requests(args.requests), trace)
    refs = sum(len(orjson.loads(line)["hash_ids"]) for line in trace.open("rb"))
    print(
        f"trace: {args.requests:,} requests, {refs:,} block references, "
        f"{trace.stat().st_size / 1e6:.0f} MB ({trace})"
    )
    ours = [*MANAGE, "analyze", str(trace), "--json", str(work / "report.json")]
    _run_once(ours)  # warm: numba's cache, page cache
    wall, rss, code = run_process(ours)
    print(
        f"  kvscope analyze (every window, exact curve, working sets): {wall:.2f} s, "
        f"peak RSS {rss:.0f} MB, exit {code}"
    )
    if args.kvsim:
        sim = [
            args.kvsim,
            "run",
            "--trace",
            str(trace),
            "--model",
            args.kvsim_model,
            "--block-size",
            "512",
            "--budgets-gib",
            "1,4,16,64,256",
            "--policies",
            "lru,optimal",
            "--no-progress",
            "--format",
            "json",
            "--output",
            str(work / "kvsim.json"),
        ]
        _run_once(sim)  # its one-time C++ compile
        swall, srss, scode = run_process(sim)
        print(
            f"  kvcache-simulator run (5 budgets x lru,optimal): {swall:.2f} s, "
            f"peak RSS {srss:.0f} MB, exit {scode}"
        )
        print(f"  speed-up {swall / wall:.2f}x, memory ratio {rss / srss:.2f}")
    shared = ROOT.parent / "shared" / "data" / "mooncake_synthetic_trace.jsonl"
    if shared.exists():
        cmd = [*MANAGE, "analyze", str(shared), "--json", str(work / "mooncake.json")]
        wall, rss, code = run_process(cmd)
        print(f"  shared Mooncake trace, whole process: {wall:.2f} s, peak RSS {rss:.0f} MB")


# --- chat logs: ours vs the floor vs naive -------------------------------------------------
def bench_chat(args) -> None:
    from analysis.errors import ErrorLog
    from analysis.readers import ChatReader, decode_line
    from analysis.tokens import load_encoding
    from bench.generate import chat_requests, write_jsonl

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    log = work / f"chat-{args.requests}.jsonl"
    if not log.exists():
        write_jsonl(chat_requests(args.requests, documents=200), log)
    size_mb = log.stat().st_size / 1e6
    print(f"chat: {args.requests:,} requests, {size_mb:.0f} MB ({log})")
    enc = load_encoding()

    def parse_all():
        reader = ChatReader(ErrorLog())  # a fresh one per pass (it remembers request ids)
        for n, raw in enumerate(log.open("rb"), 1):
            yield reader.parse(decode_line(raw), n)

    start = time.perf_counter()
    seen: set[str] = set()
    for request in parse_all():
        for m in request.messages:
            if m.text not in seen:
                seen.add(m.text)
                enc.encode_ordinary(m.text)
    floor = time.perf_counter() - start
    print(f"  floor (read + parse + tokenize each distinct text once): {floor:.2f} s")
    if args.naive:
        start = time.perf_counter()
        for request in parse_all():
            for m in request.messages:
                enc.encode_ordinary(m.text)
        naive = time.perf_counter() - start
        print(f"  naive (tokenize every message of every request): {naive:.2f} s")
    cmd = [*MANAGE, "analyze", str(log), "--json", str(work / "chat-report.json")]
    wall, rss, code = run_process(cmd)
    print(
        f"  kvscope analyze, whole process (3 windows, exact curve): {wall:.2f} s, "
        f"{size_mb / wall:.1f} MB/s, peak RSS {rss:.0f} MB, exit {code}"
    )
    print(f"  ratio to the floor: {wall / floor:.2f}x")


# --- re-analysis from a stored block stream ---------------------------------------------
def _stored_trace_stream(requests: int, workdir: str | None) -> Path:
    """A generated Mooncake trace of `requests`, ingested and saved once per work folder."""
    from analysis import IngestOptions, ingest
    from bench.generate import mooncake_requests, write_jsonl

    work = Path(workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    trace = work / f"trace-{requests}.jsonl"
    if not trace.exists():
        write_jsonl(mooncake_requests(requests), trace)
    folder = work / f"stream-{requests}"
    if not folder.exists():
        ingest([trace], IngestOptions(hash_key=b"bench-secret-0123456789")).save(folder)
    return folder


def bench_reanalyze(args) -> None:
    from analysis import AnalysisParams, BlockStream, analyze

    folder = _stored_trace_stream(args.requests, args.workdir)
    stream = BlockStream.load(folder)  # warm numba's cache on a small slice first
    start = time.perf_counter()
    stream = BlockStream.load(folder)
    loaded = time.perf_counter() - start
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


# --- replay trace export from a stored stream ---------------------------------------------
def bench_replay(args) -> None:
    from analysis import BlockStream
    from analysis.replay import ReplayOptions, replay_lines, summary

    folder = _stored_trace_stream(args.requests, args.workdir)
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


# --- split ingest through real Celery workers -------------------------------------------
def bench_workers(args) -> None:
    from bench import workers
    from bench.generate import chat_requests, write_jsonl

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    log = work / f"chat-{args.requests}.jsonl"
    if not log.exists():
        write_jsonl(chat_requests(args.requests, documents=200), log)
    print(f"workers: {log.stat().st_size / 1e6:.0f} MB chat log through Celery (Redis, PostgreSQL)")
    workers.run(log, work, [(1, 1), (1, 2), (2, 2)])


# --- load test of the pages (gunicorn, PostgreSQL, Locust) -----------------------------
def bench_load(args) -> None:
    from bench import load

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-load-"))
    load.run(work, args.seconds, [int(x) for x in args.users.split(",")])


# --- ingest memory: bounded by the distinct content, not the file length ----------------
def bench_memory(args) -> None:
    from bench.generate import chat_copies, write_jsonl

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    logs = []
    for copies in (1, args.copies):
        log = work / f"chat-{args.requests}x{copies}.jsonl"
        if not log.exists():
            write_jsonl(chat_copies(args.requests, copies, documents=200), log)
        logs.append(log)
    print(f"ingest memory: {args.requests:,} requests once, and {args.copies} times over")
    peaks = {}
    for mode in ("spilled", "in-memory"):
        for log in logs:
            out = work / f"store-{log.stem}-{mode}"
            cmd = [sys.executable, "-m", "bench", "ingest-once", str(log), str(out), mode]
            wall, rss, code = run_process(cmd)
            peaks[mode, log] = rss
            size = log.stat().st_size / 1e6
            print(f"  {mode:9s} {size:6.0f} MB log: {wall:6.2f} s, peak RSS {rss:5.0f} MB, "
                  f"exit {code}")  # fmt: skip
            shutil.rmtree(out, ignore_errors=True)
        ratio = peaks[mode, logs[1]] / peaks[mode, logs[0]]
        print(f"  {mode}: peak RSS {args.copies}x the log / 1x = {ratio:.2f}")


def bench_ingest_once(args) -> None:
    """One ingest as the console's task runs it (a child process of `memory`)."""
    from analysis import IngestOptions, ingest_streams, ingest_to_folders

    options = IngestOptions(hash_key=b"bench-secret-0123456789")
    if args.mode == "spilled":
        ingest_to_folders([args.log], options, args.out)
    else:
        for size, stream in ingest_streams([args.log], options).items():
            stream.save(Path(args.out) / f"b{size}")


# --- one line at the length limit: peak memory of the task that reads it --------------
def bench_longline(args) -> None:
    from analysis.readers import ReadLimits
    from bench.generate import long_line

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    limit = args.limit or ReadLimits().max_line_bytes
    print(f"longline: one line of each kind just under the line limit ({limit:,} bytes), "
          "ingested whole by a child process as the console's task runs it")  # fmt: skip
    for kind in args.kinds.split(","):
        log = work / f"long-{kind}-{limit}.jsonl"
        if not log.exists():
            log.write_bytes(long_line(kind, limit - 64))
        out = work / f"store-long-{kind}"
        cmd = [sys.executable, "-m", "bench", "longline-once", str(log), str(out), str(limit)]
        wall, _, code = run_process(cmd)
        # the child's own high-water mark: wait4's ru_maxrss also counts the parent's
        # memory at fork (Linux keeps the pre-exec peak), here the generated line's
        hwm, outcome = (out.parent / f"{out.name}.txt").read_text().split(" ", 1)
        shutil.rmtree(out, ignore_errors=True)
        print(f"  {kind:9s} {log.stat().st_size / 2**20:6.1f} MiB line: {wall:6.2f} s, "
              f"peak RSS {int(hwm) / 1024:6.0f} MB, exit {code}: {outcome}")  # fmt: skip


def bench_longline_once(args) -> None:
    """A child of `longline`: ingest the file; print the outcome (an error is fine)."""
    from analysis import IngestOptions, UnusableInput, ingest_to_folders
    from analysis.readers import ReadLimits

    options = IngestOptions(hash_key=b"bench-secret-0123456789",
                            limits=ReadLimits(max_line_bytes=int(args.limit)))  # fmt: skip
    try:
        ingest_to_folders([args.log], options, args.out)
        outcome = "ingested"
    except UnusableInput as exc:
        outcome = f"refused ({str(exc)[:160]})"
    Path(f"{args.out}.txt").write_text(f"{vm_hwm_kib()} {outcome}")


# --- a gzip of nothing but newlines: time proportional to bytes, progress from the start
def bench_blanklines(args) -> None:
    import zlib

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"newlines-{args.mib}MiB.jsonl.gz"
    if not log.exists():
        z, block = zlib.compressobj(6, zlib.DEFLATED, 31), b"\n" * (1 << 20)
        with open(log, "wb") as out:
            for _ in range(args.mib):
                out.write(z.compress(block))
            out.write(z.flush())
    print(f"blanklines: {args.mib:,} MiB of newlines, gzip {log.stat().st_size / 1e6:.1f} MB")
    for mode in ("default", "no-budget"):
        out = work / f"store-blank-{mode}"
        wall, _, code = run_process([sys.executable, "-m", "bench", "blanklines-once", str(log),
                                     str(out), mode])  # fmt: skip
        report = (out.parent / f"{out.name}.txt").read_text()
        shutil.rmtree(out, ignore_errors=True)
        print(f"  {mode:9s}: {wall:6.2f} s whole process, exit {code}; {report}")


def bench_blanklines_once(args) -> None:
    from analysis import IngestOptions, UnusableInput, ingest_to_folders
    from analysis.readers import ReadLimits

    limits = ReadLimits() if args.mode == "default" else ReadLimits(
        max_inflate_ratio=10**9, max_inflated_bytes=1 << 50, max_blank_lines=None)  # fmt: skip
    calls = []
    start = time.perf_counter()
    try:
        ingest_to_folders([args.log], IngestOptions(hash_key=b"bench-secret-0123456789",
                          limits=limits), args.out, progress=calls.append)  # fmt: skip
        outcome = "ingested"
    except UnusableInput as exc:
        outcome = str(exc)[:150]
    took = time.perf_counter() - start
    first = next((p for p in calls if p.done > 0), None)
    Path(f"{args.out}.txt").write_text(
        f"ingest {took:.2f} s, peak RSS {vm_hwm_kib() / 1024:.0f} MB; {len(calls):,} progress "
        f"reports, the first with bytes > 0 at {first.done if first else 0:,} of "
        f"{calls[-1].total if calls else 0:,} (requests {first.requests if first else 0}); "
        f"-> {outcome}"
    )


# --- parallel ingest: parts in worker processes, merged --------------------------------
def _ingest_part(path: str, index: int, start: int, end: int, first_line: int, out: str):
    from analysis import IngestOptions, ingest_streams
    from analysis.readers import ByteRange

    streams = ingest_streams([path], IngestOptions(hash_key=b"bench-secret-0123456789"),
                             byte_range=ByteRange(start, end, first_line))  # fmt: skip
    return str(next(iter(streams.values())).save(Path(out) / f"p{index:04d}"))


def bench_parallel(args) -> None:
    from concurrent.futures import ProcessPoolExecutor

    from analysis import BlockStream, IngestOptions, ingest
    from analysis.ingest import merge_streams
    from analysis.readers import split_lines
    from bench.generate import chat_requests, write_jsonl

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kvscope-bench-"))
    log = work / f"chat-{args.requests}.jsonl"
    if not log.exists():
        write_jsonl(chat_requests(args.requests, documents=200), log)
    print(
        f"parallel ingest: {log.stat().st_size / 1e6:.0f} MB chat log, "
        f"{args.workers} worker processes (the functions the Celery chord runs)"
    )
    start = time.perf_counter()
    one = ingest([log], IngestOptions(hash_key=b"bench-secret-0123456789"))
    single = time.perf_counter() - start
    out = work / "parts"
    start = time.perf_counter()
    ranges = split_lines(log, args.workers)
    with ProcessPoolExecutor(args.workers) as pool:
        jobs = [(str(log), i, r.start, r.end, r.first_line, str(out)) for i, r in enumerate(ranges)]
        folders = list(pool.map(_ingest_part, *map(list, zip(*jobs, strict=True))))
    merged = merge_streams([BlockStream.load(f) for f in folders])
    parallel = time.perf_counter() - start
    same = bool((merged.ref_key == one.ref_key).all()) and merged.requests == one.requests
    print(
        f"  one process {single:.2f} s; {args.workers} processes + merge {parallel:.2f} s: "
        f"{single / parallel:.2f}x; identical block stream: {same}"
    )


def bench_pageload(args) -> None:
    from bench.pageload import run

    run(["dev", "prod"] if args.mode == "both" else [args.mode], args.runs, args.workdir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("mrc", help="exact LRU curve on a synthetic reference stream")
    p.add_argument("--refs", type=int, default=10_000_000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--shards-rate", type=float, default=None, help="also compare SHARDS at R")
    p = sub.add_parser("trace", help="pre-hashed trace, whole process, vs kvcache-simulator")
    p.add_argument("--requests", type=int, default=500_000)
    p.add_argument("--kvsim", help="path of the kvcache-simulator executable (optional)")
    p.add_argument("--kvsim-model", default="llama-3.1-8b")
    p.add_argument("--workdir")
    p = sub.add_parser("chat", help="chat log end to end vs the read+tokenize floor")
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--naive", action="store_true", help="also time tokenizing every message")
    p.add_argument("--workdir")
    parser.add_argument(
        "--repeat", type=int, default=3, help="whole-process runs to take the best of"
    )
    p = sub.add_parser("parallel", help="split ingest in worker processes vs one process")
    p.add_argument("--requests", type=int, default=150_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--workdir")
    p = sub.add_parser("load", help="pages and uploads under 1, 8, 32 concurrent users")
    p.add_argument("--seconds", type=int, default=30, help="per level")
    p.add_argument("--users", default="1,8,32")
    p.add_argument("--workdir")
    p = sub.add_parser("workers", help="split ingest: one Celery worker vs two")
    p.add_argument("--requests", type=int, default=150_000)
    p.add_argument("--workdir")
    p = sub.add_parser("memory", help="ingest peak RSS: a log vs the same content N times")
    p.add_argument("--requests", type=int, default=75_000)
    p.add_argument("--copies", type=int, default=10)
    p.add_argument("--workdir")
    p = sub.add_parser("ingest-once")
    p.add_argument("log")
    p.add_argument("out")
    p.add_argument("mode", choices=("spilled", "in-memory"))
    p = sub.add_parser("longline", help="peak RSS of one line at the line-length limit")
    p.add_argument("--kinds", default="letters,tokens,prose,messages,hash_ids")
    p.add_argument("--limit", type=int, default=None, help="line limit (default: the engine's)")
    p.add_argument("--workdir")
    p = sub.add_parser("longline-once")
    p.add_argument("log")
    p.add_argument("out")
    p.add_argument("limit")
    p = sub.add_parser("blanklines", help="a gzip of newlines: time and progress")
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--workdir")
    p = sub.add_parser("blanklines-once")
    p.add_argument("log")
    p.add_argument("out")
    p.add_argument("mode", choices=("default", "no-budget"))
    p = sub.add_parser("reanalyze", help="new parameters on a stored block stream")
    p.add_argument("--requests", type=int, default=500_000)
    p.add_argument("--workdir")
    p = sub.add_parser("replay", help="replay-trace page summary and export, stored stream")
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--workdir")
    p = sub.add_parser("pageload", help="the first analysis page: HTML + scripts, browser")
    p.add_argument("--mode", choices=("dev", "prod", "both"), default="both")
    p.add_argument("--runs", type=int, default=5, help="timed loads, median shown")
    p.add_argument("--workdir")
    args = parser.parse_args(argv)
    global REPEAT
    REPEAT = max(1, args.repeat)
    benches = {
        "mrc": bench_mrc,
        "trace": bench_trace,
        "chat": bench_chat,
        "reanalyze": bench_reanalyze,
        "replay": bench_replay,
        "parallel": bench_parallel,
        "memory": bench_memory,
        "workers": bench_workers,
        "load": bench_load,
        "ingest-once": bench_ingest_once,
        "longline": bench_longline,
        "longline-once": bench_longline_once,
        "blanklines": bench_blanklines,
        "blanklines-once": bench_blanklines_once,
        "pageload": bench_pageload,
    }
    if not args.what.endswith("-once"):
        print(f"# {machine()} · {time.strftime('%Y-%m-%d %H:%M')}")
    benches[args.what](args)


if __name__ == "__main__":
    main()
