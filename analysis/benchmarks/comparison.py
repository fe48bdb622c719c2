"""Runs of one schedule side by side (cold vs warm, offload off vs on), each against the
baseline: the cold run without offload."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from analysis.benchmarks.results import BenchResult, stat_order


@dataclass(frozen=True)
class Schedule:
    """What makes runs comparable: the same load replayed (context, concurrency, rate)."""

    context_tokens: int
    concurrency: int
    request_rate: float | None = None  # None: as fast as the concurrency allows


@dataclass(frozen=True)
class Run:
    """One run of a schedule, on one configuration, from a cold or a warmed cache."""

    label: str  # the tier configuration, e.g. "CPU RAM 64 GiB, KV fp8"
    offload: bool
    warm: bool
    result: BenchResult
    name: str = ""  # the result file's name, to tell runs of one configuration apart


@dataclass(frozen=True)
class Row:
    run: Run
    ttft: dict[str, float]  # statistic -> ms, e.g. {"median": 400.0, "p99": 812.5}
    is_baseline: bool = False
    # against the baseline (offload off, cold): None for the baseline itself or without one
    p99_ttft_change: float | None = None  # fraction: -0.25 is a quarter faster
    # None too when the two runs sent different numbers of requests (not comparable)
    completed_change: int | None = None


@dataclass(frozen=True)
class SideBySide:
    schedule: Schedule
    rows: list[Row]
    ttft_stats: list[str]  # the TTFT statistics present in any row, in display order
    baseline: Run | None  # what the changes are against
    has_ram_growth: bool


def side_by_side(runs: Iterable[tuple[Schedule, Run]]) -> list[SideBySide]:
    """Runs grouped by schedule (schedules with one run have nothing to compare and are
    left out). Rows: offload off before on, cold before warm; the baseline is the first
    cold run without offload."""
    groups: dict[Schedule, list[Run]] = {}
    for schedule, run in runs:
        groups.setdefault(schedule, []).append(run)
    compared = []
    for schedule in sorted(groups, key=_schedule_order):
        members = sorted(groups[schedule], key=lambda r: (r.offload, r.warm, r.label))
        if len(members) < 2:
            continue
        base = members[0] if not members[0].offload and not members[0].warm else None
        rows = [_row(run, base) for run in members]
        stats = sorted({s for row in rows for s in row.ttft}, key=stat_order)
        compared.append(SideBySide(
            schedule, rows, stats, baseline=base,
            has_ram_growth=any(r.run.result.ram_growth_gib is not None for r in rows)))  # fmt: skip
    return compared


def _schedule_order(schedule: Schedule) -> tuple:
    rate = math.inf if schedule.request_rate is None else schedule.request_rate
    return (schedule.context_tokens, schedule.concurrency, rate)


def _row(run: Run, base: Run | None) -> Row:
    ttft = dict(run.result.stats("ttft"))
    if run is base:
        return Row(run, ttft, is_baseline=True)
    if base is None:
        return Row(run, ttft)
    mine, theirs = run.result.p99("ttft"), base.result.p99("ttft")
    change = (mine - theirs) / theirs if mine is not None and theirs else None
    a, b = run.result, base.result
    same_load = a.completed + a.failed == b.completed + b.failed
    return Row(run, ttft, p99_ttft_change=change,
               completed_change=a.completed - b.completed if same_load else None)  # fmt: skip
