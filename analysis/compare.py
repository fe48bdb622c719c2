"""Several reports side by side: the parameters they were asked that differ (the log read,
block size, model, ... and a fleet's), then their headline numbers, each with its
difference to a chosen baseline report."""

from __future__ import annotations

from analysis.params import ROUTER_NAMES

# (key, label, unit): unit says how the console formats the value
HEADLINES = (
    ("requests", "Requests", "count"),
    ("prompt_tokens", "Prompt tokens", "count"),
    ("distinct_blocks", "Distinct blocks", "count"),
    ("kv_bytes_per_token", "KV bytes per token", "count"),
    ("infinite_hit_ratio", "Infinite-cache hit ratio", "ratio"),
    ("ceiling", "Ceiling (within lifetime)", "ratio"),
    ("recommended_hit_ratio", "Hit ratio at the recommendation", "ratio"),
    ("capacity_bytes", "Capacity reaching the target", "bytes"),
    ("ram_bytes", "Recommended RAM (with headroom)", "bytes"),
    ("per_rank_bytes", "Recommended RAM per rank", "bytes"),
    # metrics.md section 8: differs between layouts when heads are replicated or MLA
    ("per_rank_kv_bytes_per_token", "KV bytes per token per rank", "count"),
)
# What an analysis was asked (metrics.md sections 2-9), as rows shown where the reports
# differ; "source" (the log read) is named by the caller: a report does not know its upload
PARAMETERS = (
    ("source", "Upload (log)", "text"),
    ("block_tokens", "Block size (tokens)", "count"),
    ("model", "Model", "text"),
    ("kv_dtype", "KV cache dtype", "text"),
    ("scope", "Sharing scope", "text"),
    ("windows", "Reuse windows", "text"),
    ("lifetime", "Block lifetime", "text"),
    ("warmup", "Warm-up (share of requests left out)", "ratio"),
    ("target", "Target (share of the ceiling)", "ratio"),
    ("headroom", "Headroom", "ratio"),
    ("tp", "Tensor-parallel ranks", "count"),
    ("host_available_bytes", "Host RAM available for KV", "bytes"),
    ("budgets", "Budgets asked (GiB per replica)", "text"),
    ("min_reuses", "Reuses that make a segment hot", "count"),
    ("doc_min_tokens", "Tokens that make a message a document", "count"),
    ("knee_gain", "Knee: least gain of a doubling", "ratio"),
)
# the parameters a report's `params` holds as they are shown
_AS_RECORDED = ("warmup", "target", "headroom", "tp", "min_reuses", "doc_min_tokens", "knee_gain")
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


def parameter_values(report: dict, source: str | None = None) -> dict:
    """What the report's analysis was asked, by PARAMETERS' key ("source" only when
    given; None where a report stored before a parameter existed lacks it)."""
    params = report.get("params") or {}
    host = (report.get("recommendation") or {}).get("host") or {}
    windows = params.get("windows_s") or [w["window_s"] for w in report.get("windows") or []]
    values = {key: params.get(key) for key in _AS_RECORDED}
    values |= {
        "block_tokens": report.get("block_tokens"),
        "model": (report.get("model") or {}).get("name") or params.get("model"),
        "kv_dtype": report.get("kv_dtype") or params.get("kv_dtype"),
        "scope": report.get("scope") or params.get("scope"),
        "windows": ", ".join(window_name(float(w)) for w in windows) or None,
        "host_available_bytes": host.get("available_bytes"),
    }
    if "lifetime_s" in params:
        lifetime = params["lifetime_s"]
        values["lifetime"] = "none" if lifetime is None else window_name(float(lifetime))
    if "budgets_gib" in params:
        values["budgets"] = ", ".join(f"{float(b):g}" for b in params["budgets_gib"]) or "none"
    if source is not None:
        values["source"] = source
    return values


def _differs(values: list) -> bool:
    return len({repr(v) for v in values}) > 1


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


def _asked(reports: list[dict], sources: list[str] | None) -> list[dict]:
    """Each report's parameter_values, with its source when `sources` names them."""
    names: list[str | None] = list(sources) if sources is not None else [None] * len(reports)
    if len(names) != len(reports):
        raise ValueError("name one source per report")
    return [parameter_values(r, name) for r, name in zip(reports, names, strict=True)]


def _differing_asked(asked: list[dict]) -> list[tuple[str, str, str]]:
    """The PARAMETERS some report has and whose values are not all the same."""
    return [(key, label, unit) for key, label, unit in PARAMETERS
            if any(key in a for a in asked) and _differs([a.get(key) for a in asked])]  # fmt: skip


def differing_parameters(reports: list[dict], sources: list[str] | None = None) -> list[str]:
    """The parameters whose values differ between the reports, by label: what the
    analyses were asked (the log first, when `sources` names each report's), then
    "Fleet (…)" when some reports have a fleet and others not, then the fleet parameters
    that differ between the reports that have one."""
    out = [label for _, label, _ in _differing_asked(_asked(reports, sources))]
    values = [fleet_values(r) for r in reports if r.get("fleet")]
    out += [NO_FLEET] if 0 < len(values) < len(reports) else []
    out += [
        label
        for key, label, _ in FLEET_PARAMETERS
        if _differs([v.get(f"fleet_{key}") for v in values])
    ]
    return out


def _row_keys(reports: list[dict], asked: list[dict]) -> list[tuple[str, str, str]]:
    """(key, label, unit) of every row: the parameters that differ, the headlines, a hit
    ratio per window any report has, then the fleet's rows."""
    keys = [(f"param_{key}", label, unit) for key, label, unit in _differing_asked(asked)]
    keys += list(HEADLINES)
    windows = sorted({w["window_s"] for r in reports for w in r["windows"]})
    keys += [(f"hit_{w:g}", f"Hit ratio within {window_name(w)}", "ratio") for w in windows]
    return keys + _fleet_keys(reports)


def _delta(value, base, unit: str):
    """A value's difference to the baseline's in a row of `unit` (None for words, or
    where either is missing)."""
    return None if value is None or base is None or unit == "text" else value - base


def headline_rows(
    reports: list[dict], baseline: int = 0, sources: list[str] | None = None
) -> list[dict]:
    """One row per parameter that differs and per headline: label, unit, the value in
    each report, and each report's difference to the baseline report's (`deltas`, one per
    report: None for the baseline itself, where a report lacks the value, and for text
    rows); `differs` says whether the values are not all the same, `parameter` whether the
    row is a parameter of the analysis (what it was asked, or its fleet's) rather than a
    figure. `sources` names the log each report read (its row is the first parameter)."""
    if not 0 <= baseline < len(reports):
        raise ValueError(f"the baseline must be one of the {len(reports)} reports")
    asked = _asked(reports, sources)
    heads = [headline(r) | fleet_values(r) | {f"param_{k}": v for k, v in a.items()}
             for r, a in zip(reports, asked, strict=True)]  # fmt: skip
    rows = []
    for key, label, unit in _row_keys(reports, asked):
        values = [h.get(key) for h in heads]
        base = values[baseline]
        deltas = [None if i == baseline else _delta(v, base, unit) for i, v in enumerate(values)]
        parameter = key.startswith(("fleet_", "param_"))
        # a fleet parameter differs among the fleets: one cache has none of them ("—")
        compared = [v for v in values if v is not None] if key.startswith("fleet_") else values
        rows.append({"key": key, "label": label, "unit": unit, "values": values,
                     "deltas": deltas, "differs": _differs(compared),
                     "parameter": parameter})  # fmt: skip
    return rows
