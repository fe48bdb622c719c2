"""The CSV download of a model's benchmark runs: their tags and the numbers read from their
files, one row per run."""

from __future__ import annotations

from collections.abc import Iterable

from console.downloads import csv_text

RUN_LATENCIES = tuple(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el")
                      for stat in ("mean", "median", "p99"))  # fmt: skip
RUN_COLUMNS = (
    "file", "tool", "model", "tiers", "ram_gib", "kv_dtype", "weights_offload",
    "context_tokens", "concurrency", "request_rate", "warm", "completed", "failed",
    *RUN_LATENCIES, "request_throughput", "output_throughput", "total_token_throughput",
    "duration_s", "host_ram_growth_gib", "measured_hit_ratio", "measured_by", "measured_of",
    "predicted_hit_ratio", "replay_export", "driver",
    "cuda", "engine", "model_revision", "tokenizer", "numa_binding", "uploaded_at",
)  # fmt: skip


def runs_csv(runs: Iterable[dict]) -> str:
    """One row per run: `runs` are dicts with the RUN_COLUMNS keys (a missing key: blank;
    request_rate None: unlimited)."""
    rows = []
    for run in runs:
        row = {**run, "request_rate": "unlimited" if run.get("request_rate") is None
               else run["request_rate"]}  # fmt: skip
        rows.append([row.get(column) for column in RUN_COLUMNS])
    return csv_text(RUN_COLUMNS, rows)
