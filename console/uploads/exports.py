"""CSV downloads of an analysis report (the dict of analysis.report.Report.to_dict()), and
of benchmark runs (their tags and the numbers read from their files).

Each builder returns the whole file as a str. Numbers are written as stored in the report;
the only derived column is capacity_gib (a unit conversion). Text cells that a spreadsheet
would take for a formula (segment labels and previews come from uploaded logs) are
prefixed with a single quote.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable

import orjson

from console.format import gib

CURVE_COLUMNS = ("capacity_slots", "capacity_bytes", "capacity_gib", "hit_ratio")
SERIES_COLUMNS = ("window_s", "t_s", "useful_ws_bytes", "ttl_occupancy_bytes")
SEGMENT_LEADING = ("key", "kind", "tokens", "occurrences")
SEGMENT_TRAILING = ("first_seen_s", "last_seen_s", "label", "preview")

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return "" if value is None else value


def _write(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(list(header))
    for row in rows:
        writer.writerow([_cell(v) for v in row])
    return out.getvalue()


def curve_csv(report: dict) -> str:
    """The hit-ratio curve: one row per point of report["mrc"] (the key says miss-ratio
    curve, after the algorithm; its points hold hit ratios)."""
    rows = (
        (p["capacity_slots"], p["capacity_bytes"], gib(p["capacity_bytes"]), p["hit_ratio"])
        for p in report.get("mrc") or []
    )
    return _write(CURVE_COLUMNS, rows)


def series_csv(report: dict) -> str:
    """Working-set series of every window, long format (one row per window and bucket)."""

    def rows():
        for window in report.get("windows") or []:
            series = window.get("series") or {}
            yield from (
                (window["window_s"], t, useful, ttl)
                for t, useful, ttl in zip(
                    series.get("t_s", []),
                    series.get("useful_ws_bytes", []),
                    series.get("ttl_occupancy_bytes", []),
                    strict=True,
                )
            )

    return _write(SERIES_COLUMNS, rows())


def _window_columns(report: dict) -> list[str]:
    windows = (report.get("params") or {}).get("windows_s") or [
        w["window_s"] for w in report.get("windows") or []
    ]
    return [f"reuses_{float(w):g}s" for w in windows]


def segment_columns(report: dict, rows: list[dict]) -> list[str]:
    """Stable header: key, kind, tokens, occurrences, reuses_<W>s (window order), first and
    last seen, label, preview (when any row has one), then any other key by first sight."""
    seen: list[str] = []
    for row in rows:
        seen.extend(k for k in row if k not in seen)
    reuses = _window_columns(report)
    reuses += [k for k in seen if k.startswith("reuses_") and k not in reuses]
    trailing = [k for k in SEGMENT_TRAILING if k != "preview" or "preview" in seen]
    known = {*SEGMENT_LEADING, *reuses, *trailing}
    others = [k for k in seen if k not in known]
    return [*SEGMENT_LEADING, *reuses, *trailing, *others]


def segments_csv(report: dict) -> str:
    """The most reused segments (report["top_segments"]); an empty table keeps its header."""
    rows = report.get("top_segments") or []
    header = segment_columns(report, rows)
    return _write(header, ([row.get(k) for k in header] for row in rows))


__all__ = ["curve_csv", "json_file", "segment_columns", "segments_csv", "series_csv"]


def _no_infinities(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no infinity; orjson writes null for it too
    if isinstance(value, dict):
        return {k: _no_infinities(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_infinities(v) for v in value]
    return value


def json_file(data: object) -> bytes:
    """A stored report (or any stored JSON) as an indented JSON file. orjson is fast but
    stops at integers past 64 bits, which a report stored before the form had bounds may
    hold (10^30 reuses): those files are written by the standard library instead, every
    integer exact and non-finite floats as null, as orjson writes them."""
    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:
        text = json.dumps(_no_infinities(data), indent=2, ensure_ascii=False, allow_nan=False)
        return text.encode()


RUN_LATENCIES = tuple(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el")
                      for stat in ("mean", "median", "p99"))  # fmt: skip
RUN_COLUMNS = (
    "file", "tool", "model", "tiers", "ram_gib", "kv_dtype", "weights_offload",
    "context_tokens", "concurrency", "request_rate", "warm", "completed", "failed",
    *RUN_LATENCIES, "request_throughput", "output_throughput", "total_token_throughput",
    "duration_s", "host_ram_growth_gib", "driver", "cuda", "engine", "model_revision",
    "tokenizer", "numa_binding", "uploaded_at",
)  # fmt: skip


def runs_csv(runs: Iterable[dict]) -> str:
    """One row per run: `runs` are dicts with the RUN_COLUMNS keys (a missing key: blank;
    request_rate None: unlimited)."""
    rows = []
    for run in runs:
        row = {**run, "request_rate": "unlimited" if run.get("request_rate") is None
               else run["request_rate"]}  # fmt: skip
        rows.append([row.get(column) for column in RUN_COLUMNS])
    return _write(RUN_COLUMNS, rows)
