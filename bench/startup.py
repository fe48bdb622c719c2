"""`small`: a small trace end to end, the whole `manage.py analyze` process against
`llmtrafficlens profile` on the same file, run in turn (paired: the VM is noisy), and
`manage.py analyze --help` alone (the start-up every command pays).

    python -m bench small [--trace FILE] [--ltl PATH] [--runs 5]

The issue's file is the FAST'25 conversation trace (12,031 requests): kvcache-ai/Mooncake,
FAST25-release/traces/conversation_trace.jsonl, passed with --trace; without it, the
shared synthetic trace.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.harness import MANAGE, ROOT, ProcessRun, ProcessTimer

SHARED_TRACE = ROOT.parent / "shared" / "data" / "mooncake_synthetic_trace.jsonl"


def _line(name: str, runs: list[ProcessRun]) -> str:
    walls = [r.wall_s for r in runs]
    best = min(runs)
    return (
        f"  {name}: best {best.wall_s:.3f} s, median {statistics.median(walls):.3f} s, "
        f"peak RSS {best.peak_rss_mb:.0f} MB, exit {best.exit_code}"
    )


def run(trace: str | None, ltl: str | None, runs: int) -> None:
    path = Path(trace) if trace else SHARED_TRACE
    lines = sum(1 for _ in path.open("rb"))
    print(f"small: {path.name}, {lines:,} requests, {path.stat().st_size / 1e6:.1f} MB")
    with tempfile.TemporaryDirectory(prefix="kvscope-small-") as folder:
        _compare(path, Path(folder), ltl, runs)


def _compare(path: Path, out: Path, ltl: str | None, runs: int) -> None:
    """Each run in turn: kvscope's analyze, the peer's profile, kvscope's --help."""
    ours = [*MANAGE, "analyze", str(path), "--json", str(out / "report.json")]
    peer = (
        [ltl, "profile", "--format", "mooncake", str(path), "-o", str(out / "ltl")] if ltl else None
    )
    helps = [*MANAGE, "analyze", "--help"]
    ProcessTimer.once(ours)  # warm: numba's on-disk cache, the page cache
    if peer:
        ProcessTimer.once(peer)
    mine: list[ProcessRun] = []
    theirs: list[ProcessRun] = []
    started: list[ProcessRun] = []
    for _ in range(runs):
        mine.append(ProcessTimer.once(ours))
        if peer:
            theirs.append(ProcessTimer.once(peer))
        started.append(ProcessTimer.once(helps))
    print(_line("kvscope manage.py analyze", mine))
    print(_line("kvscope manage.py analyze --help", started))
    if theirs:
        print(_line("llmtrafficlens profile", theirs))
        pairs = ", ".join(f"{a.wall_s / b.wall_s:.2f}" for a, b in zip(mine, theirs, strict=True))
        best = min(mine).wall_s / min(theirs).wall_s
        print(f"  kvscope / llmtrafficlens: best {best:.2f}, run by run {pairs}")
