"""A benchmark run's numbers, as read from its result file (analysis.benchmarks.files) and as
stored: p99 TTFT / TPOT / ITL and the other latency statistics, throughput, completed and
failed requests, and what the file says about the run (model, concurrency, request rate)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields


class ResultFileError(ValueError):
    """A file that is not a benchmark result kvscope can read (the message says why)."""


@dataclass(frozen=True)
class BenchResult:
    completed: int
    failed: int
    latencies_ms: dict[str, float]  # e.g. "p99_ttft" -> 812.5
    throughputs: dict[str, float]
    model: str = ""
    tokenizer: str = ""
    max_concurrency: int | None = None
    request_rate: float | None = None
    num_prompts: int | None = None
    duration_s: float | None = None
    date: str = ""
    tool: str = "vllm"  # which benchmark wrote the file: "vllm" or "aiperf"
    ram_growth_gib: float | None = None  # host RAM at the end minus at the start, if given

    def p99(self, metric: str) -> float | None:
        return self.latencies_ms.get(f"p99_{metric}")

    def stats(self, metric: str) -> list[tuple[str, float]]:
        """The statistics present for one latency: mean, median, then percentiles ascending
        (std left out: it is not a latency a user waits)."""
        found = []
        has_median = f"median_{metric}" in self.latencies_ms
        for key, value in self.latencies_ms.items():
            stat, _, name = key.rpartition("_")
            # vLLM's p50 (--metric-percentiles 50) is its median again
            if name == metric and stat != "std" and not (stat == "p50" and has_median):
                found.append((stat_order(stat), stat, value))
        return [(stat, value) for _, stat, value in sorted(found)]


def stat_order(stat: str) -> tuple[int, float]:
    """The display order of latency statistics: mean, median, then percentiles by rank."""
    if stat == "mean":
        return (0, 0.0)
    if stat == "median":
        return (1, 0.0)
    return (2, float(stat[1:]))


def result_to_json(result: BenchResult) -> dict:
    """The numbers to store (JSON has no infinity: an unlimited rate is "inf", as vLLM
    writes it)."""
    data = asdict(result)
    if data["request_rate"] is not None and math.isinf(data["request_rate"]):
        data["request_rate"] = "inf"
    return data


def result_from_json(data: dict) -> BenchResult:
    known = {f.name for f in fields(BenchResult)}
    values = {k: v for k, v in data.items() if k in known}
    return BenchResult(**{**values, "request_rate": parse_rate(values.get("request_rate"))})


def parse_rate(value: object) -> float | None:
    """vLLM writes "inf" (a string) for an unlimited request rate."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    return None
