"""Headline numbers of several reports side by side, with differences to the first."""

from __future__ import annotations

# (key, label, unit): unit says how the console formats the value
HEADLINES = (
    ("requests", "Requests", "count"),
    ("prompt_tokens", "Prompt tokens", "count"),
    ("distinct_blocks", "Distinct blocks", "count"),
    ("kv_bytes_per_token", "KV bytes per token", "bytes"),
    ("infinite_hit_ratio", "Infinite-cache hit ratio", "ratio"),
    ("ceiling", "Ceiling (within lifetime)", "ratio"),
    ("recommended_hit_ratio", "Hit ratio at the recommendation", "ratio"),
    ("capacity_bytes", "Capacity reaching the target", "bytes"),
    ("ram_bytes", "Recommended RAM (with headroom)", "bytes"),
    ("per_rank_bytes", "Recommended RAM per rank", "bytes"),
    # metrics.md section 8: differs between layouts when heads are replicated or MLA
    ("per_rank_kv_bytes_per_token", "KV bytes per token per rank", "bytes"),
)


def window_name(seconds: float) -> str:
    """300 -> 5 min, 3600 -> 1 h, 86400 -> 24 h, 90 -> 90 s."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def headline(report: dict) -> dict:
    rec = report["recommendation"]
    values = {key: report.get(key) for key, _, _ in HEADLINES if key in report}
    values |= {
        "ceiling": rec["ceiling"],
        "recommended_hit_ratio": rec["hit_ratio"],
        "capacity_bytes": rec["capacity_bytes"],
        "ram_bytes": rec["ram_bytes"],
        "per_rank_bytes": rec["per_rank_bytes"],
        # reports from before #12 lack it
        "per_rank_kv_bytes_per_token": rec.get("per_rank_kv_bytes_per_token"),
    }
    for window in report["windows"]:
        values[f"hit_{window['window_s']:g}"] = window["hit_ratio"]
    return values


def headline_rows(reports: list[dict]) -> list[dict]:
    """One row per headline: label, unit, the value in each report, and each report's
    difference to the first (None where a report lacks the value)."""
    heads = [headline(r) for r in reports]
    keys = [(key, label, unit) for key, label, unit in HEADLINES]
    windows = sorted({w["window_s"] for r in reports for w in r["windows"]})
    keys += [(f"hit_{w:g}", f"Hit ratio within {window_name(w)}", "ratio") for w in windows]
    rows = []
    for key, label, unit in keys:
        values = [h.get(key) for h in heads]
        base = values[0]
        deltas = [None if v is None or base is None else v - base for v in values[1:]]
        rows.append({"key": key, "label": label, "unit": unit, "values": values, "deltas": deltas})
    return rows
