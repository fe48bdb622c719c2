"""`planner`: "what does N GiB buy?" read off a stored report (#16) — how large the stored
curve steps are, how long one answer takes, and how far a reading is from the exact curve.

    python -m bench planner [--asks 2000]

On the shared Mooncake trace, default parameters: the report's
curve_steps (points, JSON bytes), then --asks sizes spread log-evenly from one slot to
twice the ceiling's capacity, each answered by analysis.metrics.at_budget.buys from the
report as the console stores it (its JSON, parsed), timed one by one; and each reading
against the exact curve at the same size (the engine's at_budget, every size asked as a budget of
the same analysis), the largest difference printed against the bound (one step, 0.0005).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import numpy as np
import orjson

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.metrics.at_budget import buys
from bench.harness import HASH_KEY
from tests.golden.cases import shared_trace

GIB = 1 << 30


def run(asks: int) -> None:
    path = shared_trace()
    if path is None:
        print("planner: the shared Mooncake trace is not there (tests/golden/cases.py)")
        return
    stream = ingest([path], IngestOptions(hash_key=HASH_KEY))
    params = AnalysisParams()
    report = orjson.loads(analyze(stream, params).to_json(indent=False))
    steps = report["curve_steps"]
    size = len(orjson.dumps(steps))
    whole = len(orjson.dumps(report))
    print(f"planner: shared Mooncake trace, {stream.block_refs:,} block references")
    print(f"  curve_steps: {len(steps['capacity_slots']):,} points, {size / 1024:,.1f} KiB "
          f"of the report's {whole / 1024:,.1f} KiB")  # fmt: skip
    rec = report["recommendation"]
    top = 2 * int(steps["capacity_slots"][-1]) * report["slot_bytes"] * (1 + rec["headroom"])
    sizes = np.geomspace(report["slot_bytes"], top, asks)
    took = []
    readings = []
    for ram in sizes:
        start = time.perf_counter()
        got = buys(report, round(float(ram) / GIB * GIB))
        took.append(time.perf_counter() - start)
        readings.append(got)
    print(f"  buys(): median {statistics.median(took) * 1e6:,.1f} us, "
          f"max {max(took) * 1e6:,.1f} us over {asks:,} sizes")  # fmt: skip
    _against_exact(stream, params, sizes, readings)


def _against_exact(stream, params: AnalysisParams, sizes: np.ndarray, readings: list) -> None:
    """Each reading against the exact curve at the same size: the engine's at_budget for
    every size, asked of the same analysis as budgets."""
    asked = replace(params, budgets_gib=tuple(float(ram) / GIB for ram in sizes))
    exact = analyze(stream, asked).at_budget
    worst = max(e["hit_ratio"] - got["hit_ratio"] for e, got in zip(exact, readings, strict=True))
    step = readings[0]["within"]
    met = "within" if worst < step else "NOT within"
    print(f"  largest reading error {worst:.6f} of hit ratio ({met} one step, {step})")
