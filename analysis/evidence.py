"""Benchmark evidence: `vllm bench serve --save-result` files read into the numbers a
capacity review compares (p99 TTFT / TPOT / ITL, throughput, completed and failed), and the
degradation boundary of a context x concurrency matrix against service-level objectives.

vLLM's result keys: `completed`, `failed`, `request_throughput`, `output_throughput`,
`total_token_throughput`, and `mean_/median_/std_/p99_` x `ttft/tpot/itl/e2el` + `_ms`
(the percentiles listed in `--metric-percentiles`, 99 by default), plus `model_id`,
`tokenizer_id`, `max_concurrency`, `request_rate`, `num_prompts`, `duration`, `date`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "median", "std", "p99")
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")


class EvidenceError(ValueError):
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

    def p99(self, metric: str) -> float | None:
        return self.latencies_ms.get(f"p99_{metric}")


def parse_vllm_result(obj: object) -> BenchResult:
    """One `vllm bench serve --save-result` JSON object."""
    if not isinstance(obj, dict):
        raise EvidenceError("not a JSON object")
    missing = [k for k in ("completed", "p99_ttft_ms") if obj.get(k) is None]
    if missing:
        raise EvidenceError(
            f"not a vllm bench serve result: no {', '.join(missing)} (save it with "
            "--save-result; keep the default --metric-percentiles 99 or include 99)"
        )
    latencies = {}
    for stat in STATS:
        for metric in LATENCIES:
            value = obj.get(f"{stat}_{metric}_ms")
            if value is not None:
                latencies[f"{stat}_{metric}"] = _number(value, f"{stat}_{metric}_ms")
    throughputs = {k: _number(obj[k], k) for k in THROUGHPUTS if obj.get(k) is not None}
    completed = _count(obj["completed"], "completed")
    failed = _count(obj.get("failed", 0), "failed")
    return BenchResult(
        completed=completed,
        failed=failed,
        latencies_ms=latencies,
        throughputs=throughputs,
        model=str(obj.get("model_id") or ""),
        tokenizer=str(obj.get("tokenizer_id") or ""),
        max_concurrency=_optional_count(obj.get("max_concurrency")),
        request_rate=_rate(obj.get("request_rate")),
        num_prompts=_optional_count(obj.get("num_prompts")),
        duration_s=_number(obj["duration"], "duration")
        if obj.get("duration") is not None
        else None,
        date=str(obj.get("date") or ""),
    )


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise EvidenceError(f"{key} is {value!r}, not a finite number")
    return float(value)


def _count(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EvidenceError(f"{key} is {value!r}, not a count")
    return value


def _optional_count(value: object) -> int | None:
    """A positive count that fits the database (else: not given)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31:
        return value
    return None


def _rate(value: object) -> float | None:
    """vLLM writes "inf" (a string) for an unlimited request rate."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    return None


@dataclass(frozen=True)
class Slo:
    """Service-level objectives: p99 ceilings in ms (None: not checked), no failures."""

    p99_ttft_ms: float | None = None
    p99_tpot_ms: float | None = None
    p99_itl_ms: float | None = None
    allow_failed: bool = False

    def misses(self, result: BenchResult) -> list[str]:
        """What the result breaks (empty: inside the SLO)."""
        broken = []
        for metric, limit in (("ttft", self.p99_ttft_ms), ("tpot", self.p99_tpot_ms),
                              ("itl", self.p99_itl_ms)):  # fmt: skip
            value = result.p99(metric)
            if limit is not None and (value is None or value > limit):
                broken.append(f"p99 {metric.upper()}")
        if result.failed and not self.allow_failed:
            broken.append("failed requests")
        return broken


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a tier configuration at a context length and concurrency."""

    tier: str
    context_tokens: int
    concurrency: int
    result: BenchResult


@dataclass
class Boundary:
    """For one tier: per context length, the largest concurrency still inside the SLO as
    load grows (the run before the first miss: a lucky pass past a miss does not count),
    and the largest context length, in the same way, at which some concurrency passes."""

    tier: str
    max_concurrency_by_context: dict[int, int] = field(default_factory=dict)
    max_context: int | None = None


def degradation_boundary(cells: Iterable[Cell], slo: Slo) -> list[Boundary]:
    """The boundary of each tier, tiers in first-seen order."""
    grid: dict[str, dict[int, list[Cell]]] = {}
    for cell in cells:
        grid.setdefault(cell.tier, {}).setdefault(cell.context_tokens, []).append(cell)
    boundaries = []
    for tier, by_context in grid.items():
        boundary = Boundary(tier)
        for context in sorted(by_context):
            inside = None
            for cell in sorted(by_context[context], key=lambda c: c.concurrency):
                if slo.misses(cell.result):
                    break
                inside = cell.concurrency
            if inside is None:  # not even the lightest load: longer contexts do not count
                break
            boundary.max_concurrency_by_context[context] = inside
            boundary.max_context = context
        boundaries.append(boundary)
    return boundaries


def matrix_axes(cells: Sequence[Cell]) -> tuple[list[int], list[int]]:
    """(context lengths, concurrencies) present, ascending."""
    return sorted({c.context_tokens for c in cells}), sorted({c.concurrency for c in cells})
