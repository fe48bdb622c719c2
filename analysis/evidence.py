"""Benchmark evidence: `vllm bench serve --save-result` files and AIPerf summaries read into
the numbers a capacity review compares (p99 TTFT / TPOT / ITL, throughput, completed and
failed), the degradation boundary of a context x concurrency matrix against service-level
objectives, and runs of one schedule side by side (cold vs warm, offload off vs on).

vLLM's result keys: `completed`, `failed`, `request_throughput`, `output_throughput`,
`total_token_throughput`, and `mean_/median_/std_/p99_` x `ttft/tpot/itl/e2el` + `_ms`
(the percentiles listed in `--metric-percentiles`, 99 by default), plus `model_id`,
`tokenizer_id`, `max_concurrency`, `request_rate`, `num_prompts`, `duration`, `date`.

AIPerf's `profile_export_aiperf.json` (schema 1.x, docs/reference/json-export-schema.md): one
stats block per metric tag (`unit`, `avg`, `std`, `p1`..`p99`; counts and throughputs carry
only `avg`)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields

LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "median", "std", "p99")
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")
_PERCENTILE = r"p\d+(?:\.\d+)?"  # p99, p99.9
# any percentile `vllm bench serve --metric-percentiles` wrote, e.g. p90_ttft_ms, p99.9_itl_ms
_VLLM_PERCENTILE = re.compile(rf"^({_PERCENTILE})_(ttft|tpot|itl|e2el)_ms$")
# AIPerf metric tag -> our latency. AIPerf's inter_token_latency is per request
# (latency - TTFT) / (tokens - 1): vLLM's TPOT. Its inter_chunk_latency is every gap between
# streamed chunks: vLLM's ITL when each chunk carries one token.
AIPERF_LATENCIES = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "inter_chunk_latency": "itl",
    "request_latency": "e2el",
}
AIPERF_THROUGHPUTS = {
    "request_throughput": "request_throughput",
    "output_token_throughput": "output_throughput",
    "total_token_throughput": "total_token_throughput",
}
_MS_PER_UNIT = {"ms": 1.0, "s": 1000.0, "sec": 1000.0, "us": 1e-3, "ns": 1e-6}
# RAM growth is in neither tool's file; these keys can be added (vLLM's --metadata writes
# top-level KEY=VALUE strings; the end value is added after the run)
RAM_KEYS = ("host_ram_start_gib", "host_ram_end_gib", "host_ram_growth_gib")


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
                found.append((_stat_order(stat), stat, value))
        return [(stat, value) for _, stat, value in sorted(found)]


def _stat_order(stat: str) -> tuple[int, float]:
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
    return BenchResult(**{**values, "request_rate": _rate(values.get("request_rate"))})


def parse_result(obj: object) -> BenchResult:
    """A vLLM result or an AIPerf summary, told apart by their keys."""
    if (
        isinstance(obj, dict)
        and "completed" not in obj
        and ("schema_version" in obj or any(isinstance(obj.get(k), dict) for k in AIPERF_LATENCIES))
    ):
        return parse_aiperf_summary(obj)
    return parse_vllm_result(obj)


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
    for key, value in obj.items():
        match = _VLLM_PERCENTILE.match(key)
        if match and value is not None:
            latencies[f"{match[1]}_{match[2]}"] = _number(value, key)
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
        ram_growth_gib=_ram_growth(obj),
    )


def parse_aiperf_summary(obj: dict) -> BenchResult:
    """One AIPerf `profile_export_aiperf.json`. Model, concurrency and request rate come
    from the upload's tags: they sit in `input_config`, whose shape the schema page leaves
    to the version that wrote it."""
    if obj.get("was_cancelled") is True:
        raise EvidenceError("the AIPerf run was cancelled (was_cancelled: true): its numbers "
                            "cover only part of the schedule")  # fmt: skip
    missing = [k for k in ("request_count", "time_to_first_token") if not _block(obj, k)]
    if missing:
        raise EvidenceError(
            f"not an AIPerf summary kvscope can read: no {', '.join(missing)} (upload "
            "profile_export_aiperf.json from a streaming run)"
        )
    latencies = {}
    for tag, metric in AIPERF_LATENCIES.items():
        block = _block(obj, tag)
        if not block:
            continue
        scale = _ms_per(block, tag)
        for name, value in block.items():
            stat = {"avg": "mean", "p50": "median"}.get(name, name)
            wanted = stat in ("mean", "median", "std") or re.fullmatch(_PERCENTILE, stat)
            if wanted and value is not None:  # unset fields are left out, or null
                key = f"{tag}.{name}"
                latencies[f"{stat}_{metric}"] = _finite(_number(value, key) * scale, key)
    if "p99_ttft" not in latencies:
        raise EvidenceError("time_to_first_token has no p99 (AIPerf writes it for a "
                            "streaming run with requests)")  # fmt: skip
    return BenchResult(
        completed=_whole(_avg(obj, "request_count"), "request_count"),
        failed=_whole(_avg(obj, "error_request_count") or 0, "error_request_count"),
        latencies_ms=latencies,
        throughputs={ours: _number(_avg(obj, tag), tag)
                     for tag, ours in AIPERF_THROUGHPUTS.items() if _avg(obj, tag) is not None},
        duration_s=_seconds(_block(obj, "benchmark_duration")),
        date=str(obj.get("start_time") or ""),
        tool="aiperf",
        ram_growth_gib=_ram_growth(obj),
    )  # fmt: skip


def _seconds(block: dict | None) -> float | None:
    if not block or block.get("avg") is None:
        return None
    ms = _number(block["avg"], "benchmark_duration") * _ms_per(block, "benchmark_duration")
    return _finite(ms, "benchmark_duration") / 1000


def _finite(value: float, key: str) -> float:
    """After a unit change or a difference: storage (JSON) has no infinity."""
    if not math.isfinite(value):
        raise EvidenceError(f"{key} is out of range")
    return value


def _block(obj: dict, tag: str) -> dict | None:
    block = obj.get(tag)
    return block if isinstance(block, dict) else None


def _avg(obj: dict, tag: str) -> object:
    block = _block(obj, tag)
    return None if block is None else block.get("avg")


def _ms_per(block: dict, tag: str) -> float:
    """AIPerf: the unit is authoritative (latencies are displayed in ms by default)."""
    unit = str(block.get("unit", "")).strip().lower()
    if unit not in _MS_PER_UNIT:
        raise EvidenceError(f"{tag} is in {unit or 'no unit'!r}, not a time unit kvscope knows")
    return _MS_PER_UNIT[unit]


def _whole(value: object, key: str) -> int:
    """A count AIPerf writes as a float (e.g. 20.0)."""
    number = _number(value, key)
    if number < 0 or number != int(number):
        raise EvidenceError(f"{key} is {value!r}, not a count")
    return int(number)


def _ram_growth(obj: dict) -> float | None:
    """From `host_ram_growth_gib`, or `host_ram_end_gib` minus `host_ram_start_gib`; numbers
    or numeric strings (as vLLM's --metadata writes them)."""
    values = {}
    for key in RAM_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise EvidenceError(f"{key} is {value!r}, not a number of GiB") from None
        if value is not None:
            values[key] = _number(value, key)
    if "host_ram_growth_gib" in values:
        return values["host_ram_growth_gib"]
    if "host_ram_start_gib" in values and "host_ram_end_gib" in values:
        growth = values["host_ram_end_gib"] - values["host_ram_start_gib"]
        return _finite(growth, "host_ram_end_gib - host_ram_start_gib")
    return None


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
        stats = sorted({s for row in rows for s in row.ttft}, key=_stat_order)
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
