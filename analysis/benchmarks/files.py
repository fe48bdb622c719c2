"""Benchmark result files read into a BenchResult: `vllm bench serve --save-result` files and
AIPerf summaries, every number checked (a file kvscope cannot read raises ResultFileError).

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

from analysis.benchmarks.results import BenchResult, ResultFileError, parse_rate

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
        raise ResultFileError("not a JSON object")
    missing = [k for k in ("completed", "p99_ttft_ms") if obj.get(k) is None]
    if missing:
        raise ResultFileError(
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
        request_rate=parse_rate(obj.get("request_rate")),
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
        raise ResultFileError("the AIPerf run was cancelled (was_cancelled: true): its numbers "
                            "cover only part of the schedule")  # fmt: skip
    missing = [k for k in ("request_count", "time_to_first_token") if not _block(obj, k)]
    if missing:
        raise ResultFileError(
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
        raise ResultFileError("time_to_first_token has no p99 (AIPerf writes it for a "
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
        raise ResultFileError(f"{key} is out of range")
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
        raise ResultFileError(f"{tag} is in {unit or 'no unit'!r}, not a time unit kvscope knows")
    return _MS_PER_UNIT[unit]


def _whole(value: object, key: str) -> int:
    """A count AIPerf writes as a float (e.g. 20.0)."""
    number = _number(value, key)
    if number < 0 or number != int(number):
        raise ResultFileError(f"{key} is {value!r}, not a count")
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
                raise ResultFileError(f"{key} is {value!r}, not a number of GiB") from None
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
        raise ResultFileError(f"{key} is {value!r}, not a finite number")
    return float(value)


def _count(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ResultFileError(f"{key} is {value!r}, not a count")
    return value


def _optional_count(value: object) -> int | None:
    """A positive count that fits the database (else: not given)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31:
        return value
    return None
