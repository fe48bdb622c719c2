"""Headline numbers of several reports side by side, with differences to the first."""

from __future__ import annotations

from analysis.params import ROUTER_NAMES

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
# metrics.md section 8: the parameters of a fleet, as rows (unit "text": shown as is)
FLEET_PARAMETERS = (
    ("replicas", "Replicas", "count"),
    ("routers", "Routers", "text"),
    ("gpu_cache_bytes", "GPU prefix cache per replica", "bytes"),
    ("store_threshold", "Store threshold (stored at reference k)", "count"),
    ("prefix_threshold", "Prefix threshold (share of the prompt)", "ratio"),
)
# what differs when some analyses have a fleet and others are one cache
NO_FLEET = "Fleet (some analyses have one, others are one cache)"
# each router's figures, as rows: key in the router's entry (or its recommendation)
ROUTER_HEADLINES = (
    ("ceiling", "fleet ceiling", "ratio"),
    ("hit_ratio", "hit ratio at the recommendation", "ratio"),
    ("ram_bytes", "recommended RAM per replica", "bytes"),
    ("per_rank_bytes", "recommended RAM per TP rank", "bytes"),
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


def router_name(router: str) -> str:
    """A router in words, as a row label starts ("prefix" -> "Prefix-aware")."""
    return ROUTER_NAMES.get(router, router.replace("_", " ")).capitalize()


def fleet_values(report: dict) -> dict:
    """A report's fleet parameters and each router's figures, by row key (empty without a
    fleet: one cache fed all of the traffic)."""
    fleet = report.get("fleet")
    if not fleet:
        return {}
    routers = fleet.get("routers") or []
    values: dict = {f"fleet_{key}": fleet.get(key) for key, _, unit in FLEET_PARAMETERS
                    if unit != "text"}  # fmt: skip
    values["fleet_routers"] = ", ".join(router_name(r["router"]) for r in routers)
    for entry in routers:
        figures = {**entry.get("recommendation", {}), "ceiling": entry.get("ceiling")}
        for key, _, _ in ROUTER_HEADLINES:
            values[f"router_{entry['router']}_{key}"] = figures.get(key)
    return values


def _fleet_keys(reports: list[dict]) -> list[tuple[str, str, str]]:
    """The fleet rows (none when no report has a fleet): its parameters, then each router
    any report has, in ROUTER_NAMES' order, then any other by first sight."""
    fleets = [r["fleet"] for r in reports if r.get("fleet")]
    if not fleets:
        return []
    keys = [(f"fleet_{key}", label, unit) for key, label, unit in FLEET_PARAMETERS]
    seen = [entry["router"] for fleet in fleets for entry in fleet.get("routers") or []]
    routers = [r for r in ROUTER_NAMES if r in seen]
    routers += [r for r in dict.fromkeys(seen) if r not in ROUTER_NAMES]
    for router in routers:
        keys += [(f"router_{router}_{key}", f"{router_name(router)}: {label}", unit)
                 for key, label, unit in ROUTER_HEADLINES]  # fmt: skip
    return keys


def differing_parameters(reports: list[dict]) -> list[str]:
    """The fleet parameters whose values differ between the reports that have a fleet, by
    label; first "Fleet (…)" when some reports have one and others not."""
    values = [fleet_values(r) for r in reports if r.get("fleet")]
    out = [NO_FLEET] if 0 < len(values) < len(reports) else []
    out += [
        label
        for key, label, _ in FLEET_PARAMETERS
        if len({repr(v.get(f"fleet_{key}")) for v in values}) > 1
    ]
    return out


def headline_rows(reports: list[dict]) -> list[dict]:
    """One row per headline: label, unit, the value in each report, and each report's
    difference to the first (None where a report lacks the value, and for text rows);
    `differs` says whether the values are not all the same, `parameter` whether the row
    is a parameter of the analysis (a fleet's) rather than a figure."""
    heads = [headline(r) | fleet_values(r) for r in reports]
    keys = [(key, label, unit) for key, label, unit in HEADLINES]
    windows = sorted({w["window_s"] for r in reports for w in r["windows"]})
    keys += [(f"hit_{w:g}", f"Hit ratio within {window_name(w)}", "ratio") for w in windows]
    keys += _fleet_keys(reports)
    rows = []
    for key, label, unit in keys:
        values = [h.get(key) for h in heads]
        base = values[0]
        deltas = [
            None if v is None or base is None or unit == "text" else v - base for v in values[1:]
        ]
        parameter = key.startswith("fleet_")
        # a parameter differs among the fleets: one cache has none of them ("—")
        compared = [v for v in values if v is not None] if parameter else values
        differs = len({repr(v) for v in compared}) > 1
        rows.append({"key": key, "label": label, "unit": unit, "values": values,
                     "deltas": deltas, "differs": differs,
                     "parameter": parameter})  # fmt: skip
    return rows
