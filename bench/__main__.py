"""kvscope benchmarks: python -m bench [--repeat N] NAME [options]

Each benchmark generates its input deterministically, runs the real code paths, and prints
wall time, throughput and peak RSS. Whole-process figures come from os.wait4 on a child
process, so they include interpreter start-up and imports, as a user would see them.
BENCHMARKS.md gives the sizes its figures were measured at.

  mrc         exact LRU curve on a synthetic Zipf stream, engine only (and SHARDS at R)
              python -m bench mrc --refs 10000000 --keys 1000000 [--shards-rate 0.01]
  trace       pre-hashed trace, manage.py analyze whole process, vs kvcache-simulator
              python -m bench trace --requests 500000 [--kvsim PATH] [--workdir DIR]
  chat        chat log, manage.py analyze whole process, vs the read+parse+tokenize floor
              python -m bench chat --requests 20000 [--naive] [--workdir DIR]
  small       a small trace, manage.py analyze whole process vs llmtrafficlens, in turn
              python -m bench small [--trace FILE] [--ltl PATH] [--runs 5]
  scale       ~100 M block references (generated conversations), whole process
              python -m bench scale --refs 100000000 [--workdir DIR]
  phases      one log's ingest and analysis steps: time and resident memory of each
              python -m bench phases LOG | --stream DIR
  reanalyze   new scope and lifetime on a stored block stream: load, then analyze
              python -m bench reanalyze --requests 500000 [--workdir DIR]
  replay      replay-trace page summary and whole export from a stored block stream
              python -m bench replay --requests 1000000 [--workdir DIR]
  fleet       fleet analysis (every router x N replicas) vs the single cache, analyze():
              the shared Mooncake trace at 4 replicas, then a generated conversation trace
              python -m bench fleet --refs 10000000 --replicas 8 [--runs 10] [--workdir DIR]
  parallel    split ingest in plain worker processes + merge, vs one process
              python -m bench parallel --requests 150000 --workers 2 [--workdir DIR]
  workers     split ingest through real Celery workers (PostgreSQL, Redis): one vs two
              python -m bench workers --requests 150000 [--workdir DIR]
  memory      ingest peak RSS: a log vs the same content N times over
              python -m bench memory --requests 75000 --copies 10 [--workdir DIR]
  longline    peak RSS of ingesting one line of each kind at the line-length limit
              python -m bench longline [--kinds letters,...] [--limit BYTES] [--workdir DIR]
  blanklines  a gzip of nothing but newlines: time, progress, with and without the budget
              python -m bench blanklines --mib 1024 [--workdir DIR]
  load        pages and uploads under 1, 8, 32 concurrent users (gunicorn, Locust)
              python -m bench load --seconds 30 [--users 1,8,32] [--workdir DIR]
  pagecost    each page's server time for one client (Django's test client), and a profile
              python -m bench pagecost [--views 20] [--uploads 0] [--workdir DIR]
  pageload    the first analysis page as a browser loads it: HTML + scripts, Chromium
              python -m bench pageload [--mode dev|prod|both] [--runs 5] [--workdir DIR]

--repeat N (before NAME; default 3): whole-process runs to take the best of. `ingest-once`,
`longline-once`, `blanklines-once` and `fleet-once` are the measured children of memory,
longline, blanklines and fleet, not benchmarks of their own.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.harness import ProcessTimer, print_header


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=3, help="whole-process runs to take the best of"
    )
    sub = parser.add_subparsers(dest="what", required=True)
    # in the order --help lists them
    _add_curve_and_logs(sub)
    _add_ingest_limits(sub)
    _add_stored_fleet_and_pages(sub)
    return parser


def _add_curve_and_logs(sub: argparse._SubParsersAction) -> None:
    """The engine's curve, logs end to end, and ingest split across processes."""
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
    p = sub.add_parser("agent", help="tools-heavy agent log (3 body shapes) end to end")
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--naive", action="store_true", help="also time tokenizing every message")
    p.add_argument("--workdir")
    p = sub.add_parser("small", help="a small trace, whole process, vs llmtrafficlens")
    p.add_argument("--trace", default=None, help="a Mooncake-format trace (default: shared)")
    p.add_argument("--ltl", default=None, help="the llmtrafficlens executable")
    p.add_argument("--runs", type=int, default=5)
    p = sub.add_parser("scale", help="~100 M references, manage.py analyze whole process")
    p.add_argument("--refs", type=int, default=100_000_000)
    p.add_argument("--workdir", default=None)
    p = sub.add_parser("phases", help="one log's ingest and analysis steps, time and memory")
    p.add_argument("log", nargs="?", default=None)
    p.add_argument("--stream", default=None, help="a stored stream's folder instead of a log")
    p = sub.add_parser("parallel", help="split ingest in worker processes vs one process")
    p.add_argument("--requests", type=int, default=150_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--workdir")
    p = sub.add_parser("load", help="pages and uploads under 1, 8, 32 concurrent users")
    p.add_argument("--seconds", type=int, default=30, help="per level")
    p.add_argument("--users", default="1,8,32")
    p.add_argument("--workdir")
    p = sub.add_parser("pagecost", help="each page's server time for one client")
    p.add_argument("--views", type=int, default=20)
    p.add_argument("--uploads", type=int, default=0, help="other uploads, each analyzed")
    p.add_argument("--workdir")
    p = sub.add_parser("workers", help="split ingest: one Celery worker vs two")
    p.add_argument("--requests", type=int, default=150_000)
    p.add_argument("--workdir")


def _add_ingest_limits(sub: argparse._SubParsersAction) -> None:
    """Ingest's peak memory and its input limits, each with its measured child."""
    p = sub.add_parser("memory", help="ingest peak RSS: a log vs the same content N times")
    p.add_argument("--requests", type=int, default=75_000)
    p.add_argument("--copies", type=int, default=10)
    p.add_argument("--workdir")
    _child(sub, "ingest-once", "mode", choices=("spilled", "in-memory"))
    p = sub.add_parser("longline", help="peak RSS of one line at the line-length limit")
    p.add_argument("--kinds", default="letters,tokens,prose,messages,hash_ids")
    p.add_argument("--limit", type=int, default=None, help="line limit (default: the engine's)")
    p.add_argument("--workdir")
    _child(sub, "longline-once", "limit", type=int)
    p = sub.add_parser("blanklines", help="a gzip of newlines: time and progress")
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--workdir")
    _child(sub, "blanklines-once", "mode", choices=("default", "no-budget"))


def _add_stored_fleet_and_pages(sub: argparse._SubParsersAction) -> None:
    """Re-analysis and replay of a stored stream, the fleet (with its measured child), and
    the first page in a browser."""
    p = sub.add_parser("reanalyze", help="new parameters on a stored block stream")
    p.add_argument("--requests", type=int, default=500_000)
    p.add_argument("--workdir")
    p = sub.add_parser("replay", help="replay-trace page summary and export, stored stream")
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--workdir")
    p = sub.add_parser("fleet", help="fleet analysis (routers x replicas) vs one cache")
    p.add_argument("--refs", type=int, default=10_000_000)
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--runs", type=int, default=10, help="shared trace: analyses, best shown")
    p.add_argument("--workdir")
    _child(sub, "fleet-once", "replicas", type=int)
    p = sub.add_parser("planner", help="what N GiB buys, read off a stored report")
    p.add_argument("--asks", type=int, default=2000, help="sizes asked, log-spaced")
    p = sub.add_parser("pageload", help="the first analysis page: HTML + scripts, browser")
    p.add_argument("--mode", choices=("dev", "prod", "both"), default="both")
    p.add_argument("--runs", type=int, default=5, help="timed loads, median shown")
    p.add_argument("--workdir")


def _child(sub: argparse._SubParsersAction, name: str, last: str, **last_kwargs: Any) -> None:
    """A measured child's command: LOG OUT and one more positional argument, `last`."""
    p = sub.add_parser(name)
    p.add_argument("log")
    p.add_argument("out")
    p.add_argument(last, **last_kwargs)


# the benchmarks each runner starts (the input limits' have their own)
_ANALYSES = (
    "mrc",
    "trace",
    "chat",
    "agent",
    "small",
    "scale",
    "phases",
    "reanalyze",
    "replay",
    "fleet",
    "fleet-once",
    "planner",
)
_INPUT_LIMITS = ("longline", "longline-once", "blanklines", "blanklines-once")


def _run(args: argparse.Namespace, timer: ProcessTimer) -> None:
    """Runs the benchmark `args.what` names. Each imports only its own family's module, so
    a measured child (`*-once`) carries no other benchmark's imports in its peak memory."""
    if args.what in _ANALYSES:
        _run_analysis(args, timer)
    elif args.what in _INPUT_LIMITS:
        _run_input_limits(args, timer)
    else:
        _run_ingest_and_pages(args, timer)


def _run_analysis(args: argparse.Namespace, timer: ProcessTimer) -> None:
    """The engine's curve, logs end to end, stored streams and the fleet."""
    match args.what:
        case "mrc":
            from bench import curve

            curve.run(args.refs, args.keys, args.seed, args.shards_rate)
        case "trace":
            from bench import end_to_end

            end_to_end.run_trace(args.requests, args.kvsim, args.kvsim_model, args.workdir, timer)
        case "chat":
            from bench import end_to_end

            end_to_end.run_chat(args.requests, args.naive, args.workdir, timer)
        case "agent":
            from bench import end_to_end

            end_to_end.run_chat(args.requests, args.naive, args.workdir, timer, agent=True)
        case "small":
            from bench import startup

            startup.run(args.trace, args.ltl, args.runs)
        case "scale":
            from bench import scale

            scale.run(args.refs, args.workdir, timer)
        case "phases":
            from bench import phases

            if (args.log is None) == (args.stream is None):
                raise SystemExit("phases: give a LOG or --stream DIR, not both")
            phases.run(args.log, args.stream)
        case "reanalyze":
            from bench import stored_stream

            stored_stream.run_reanalyze(args.requests, args.workdir)
        case "replay":
            from bench import stored_stream

            stored_stream.run_replay(args.requests, args.workdir)
        case "fleet":
            from bench import fleet

            fleet.run(args.refs, args.replicas, args.runs, args.workdir, timer)
        case "fleet-once":
            from bench import fleet

            fleet.analyze_once(args.log, args.out, args.replicas)
        case "planner":
            from bench import planner

            planner.run(args.asks)


def _run_ingest_and_pages(args: argparse.Namespace, timer: ProcessTimer) -> None:
    """Ingest across processes and workers, its peak memory, and the pages under load."""
    match args.what:
        case "parallel":
            from bench import parallel

            parallel.run(args.requests, args.workers, args.workdir)
        case "workers":
            from bench import workers

            workers.run(args.requests, args.workdir)
        case "memory":
            from bench import memory

            memory.run(args.requests, args.copies, args.workdir, timer)
        case "ingest-once":
            from bench import memory

            memory.ingest_once(args.log, args.out, args.mode)
        case "load":
            from bench import load

            load.run(args.seconds, [int(x) for x in args.users.split(",")], args.workdir)
        case "pagecost":
            from bench import page_cost

            page_cost.run(args.views, args.uploads, args.workdir)
        case "pageload":
            from bench import pageload

            pageload.run(["dev", "prod"] if args.mode == "both" else [args.mode], args.runs,
                         args.workdir)  # fmt: skip


def _run_input_limits(args: argparse.Namespace, timer: ProcessTimer) -> None:
    from bench import input_limits

    match args.what:
        case "longline":
            input_limits.run_longline(args.kinds.split(","), args.limit, args.workdir, timer)
        case "longline-once":
            input_limits.longline_once(args.log, args.out, args.limit)
        case "blanklines":
            input_limits.run_blanklines(args.mib, args.workdir, timer)
        case "blanklines-once":
            input_limits.blanklines_once(args.log, args.out, args.mode)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if not args.what.endswith("-once"):
        print_header()
    _run(args, ProcessTimer(repeat=max(1, args.repeat)))


if __name__ == "__main__":
    main()
