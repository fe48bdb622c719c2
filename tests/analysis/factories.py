"""Builders for the engine's and the console's tests (no Django): log rows, gateway CSV
logs and benchmark result files."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from analysis.benchmarks.files import LATENCIES, STATS


def vllm_result(ttft=500.0, tpot=40.0, itl=35.0, completed=100, failed=0, **extra) -> dict:
    """A `vllm bench serve --save-result` file's shape (values chosen by hand)."""
    base = {"ttft": ttft, "tpot": tpot, "itl": itl, "e2el": ttft + 200 * tpot}
    obj = {
        "date": "20261129-101500", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
        "tokenizer_id": "meta-llama/Llama-3.1-8B", "num_prompts": 200, "request_rate": "inf",
        "max_concurrency": 16, "duration": 61.5, "completed": completed, "failed": failed,
        "total_input_tokens": 400000, "total_output_tokens": 40000,
        "request_throughput": 3.25, "output_throughput": 650.4, "total_token_throughput": 7154.5,
        "input_lens": [2000] * 3, "ttfts": [0.5, 0.6, 0.4], "errors": ["", "", ""],
    }  # fmt: skip
    for stat in STATS:
        for metric in LATENCIES:
            scale = {"mean": 0.7, "median": 0.6, "std": 0.2, "p99": 1.0}[stat]
            obj[f"{stat}_{metric}_ms"] = base[metric] * scale
    return {**obj, **extra}


def aiperf_summary(ttft_p99=812.5, count=20.0, errors=None, unit="ms", **extra) -> dict:
    """A `profile_export_aiperf.json` shape from its schema page (record metrics carry a
    distribution, counts and throughputs only `unit` + `avg`)."""

    def record(p99, unit=unit):
        return {"unit": unit, "avg": p99 * 0.7, "min": p99 * 0.1, "max": p99 * 1.2,
                "p50": p99 * 0.6, "p90": p99 * 0.9, "p99": p99, "std": p99 * 0.2,
                "count": int(count), "sum": p99 * 0.7 * count}  # fmt: skip

    obj = {
        "schema_version": "1.5", "aiperf_version": "0.14.0", "benchmark_id": "abc123",
        "start_time": "2026-11-29T10:00:00Z", "end_time": "2026-11-29T10:01:00Z",
        "was_cancelled": False,
        "time_to_first_token": record(ttft_p99),
        "inter_token_latency": record(40.0),
        "inter_chunk_latency": record(35.0),
        "request_latency": record(9000.0),
        "request_count": {"unit": "requests", "avg": count},
        "request_throughput": {"unit": "requests/sec", "avg": 1.45},
        "output_token_throughput": {"unit": "tokens/sec", "avg": 290.0},
        "benchmark_duration": {"unit": "sec", "avg": 13.8},
        "input_config": {"endpoint": {"streaming": True}},
    }  # fmt: skip
    if errors is not None:
        obj["error_request_count"] = {"unit": "requests", "avg": errors}
    return {**obj, **extra}


def chat_row(timestamp: float, *messages: tuple[str, str]) -> dict:
    """One chat log line: its time and its (role, content) messages, nothing else."""
    return {
        "timestamp": timestamp,
        "messages": [{"role": role, "content": content} for role, content in messages],
    }


def as_gateway_csv(jsonl: Path, out: Path) -> Path:
    """The requests of a JSONL chat log as a gateway CSV log: each line's timestamp in a
    ts column, the rest of the line in request_json (indented, so every cell spans lines).
    """
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["ts", "request_json"])
    for line in jsonl.read_text().splitlines():
        obj = json.loads(line)
        writer.writerow([str(obj.pop("timestamp")), json.dumps(obj, indent=2)])
    out.write_text(text.getvalue(), newline="")
    return out


# A log where one document is shared within two tenants (and by requests without one),
# each time after a different question (tests/analysis/test_segment_tenants.py works out
# its segment tables by hand).
SHARED_DOCUMENT = "The quick brown fox jumps over the lazy dog near the quiet river bank today."
TENANT_QUESTIONS = ("Alpha question", "Beta question", "Gamma question", "Delta question",
                    "Epsilon question", "Zeta question")  # fmt: skip
QUESTION_TENANTS = ("A", "B", "A", "B", None, None)


def two_tenant_rows() -> list[dict]:
    """Request i at 10 * i seconds: TENANT_QUESTIONS[i] then SHARED_DOCUMENT, of tenant
    QUESTION_TENANTS[i] (None: the line names no tenant)."""
    rows = []
    for i, (question, tenant) in enumerate(zip(TENANT_QUESTIONS, QUESTION_TENANTS, strict=True)):
        messages = [{"role": "user", "content": text} for text in (question, SHARED_DOCUMENT)]
        row = {"timestamp": 10 * i, "messages": messages}
        if tenant is not None:
            row["tenant"] = tenant
        rows.append(row)
    return rows


def shards_sample(ids, rate: float):
    """SHARDS' spatial sample by its definition (metrics.md): a key id is in it when the top
    24 bits of id * 0x9E3779B97F4A7C15 (mod 2**64) fall under rate * 2**24."""
    import numpy as np

    top = (np.asarray(ids).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    return top < np.uint64(round(rate * 2**24))
