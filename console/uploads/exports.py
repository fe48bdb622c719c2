"""CSV downloads of an analysis report (the dict of analysis.report.Report.to_dict()).

Each builder returns the whole file as a str. Numbers are written as stored in the report;
the only derived column is capacity_gib (a unit conversion). Text cells that a spreadsheet
would take for a formula (segment labels and previews come from uploaded logs) are
prefixed with a single quote.
"""

from __future__ import annotations

from console.downloads import csv_text
from console.format import gib

# a hit ratio and its two parts (metrics.md section 7): blank in a report stored before them
SPLIT_COLUMNS = ("same_session_hit_ratio", "cross_session_hit_ratio")
CURVE_COLUMNS = ("capacity_slots", "capacity_bytes", "capacity_gib", "hit_ratio", *SPLIT_COLUMNS)
WINDOW_COLUMNS = (
    "window_s", "hit_ratio", *SPLIT_COLUMNS, "hit_tokens", "useful_ws_peak_bytes",
    "useful_ws_p95_bytes", "useful_ws_median_bytes", "ttl_occupancy_peak_bytes",
)  # fmt: skip
SERIES_COLUMNS = ("window_s", "t_s", "useful_ws_bytes", "ttl_occupancy_bytes")
# metrics.md section 8: each router's curve, the capacity being each replica's host RAM
FLEET_COLUMNS = (
    "router", "replicas", "capacity_slots", "capacity_bytes", "capacity_gib", "hit_ratio",
    "gpu_hit_ratio", "ram_hit_ratio",
)  # fmt: skip
SEGMENT_LEADING = ("key", "kind", "tokens", "occurrences")
SEGMENT_TRAILING = ("first_seen_s", "last_seen_s", "label", "preview")


def curve_csv(report: dict) -> str:
    """The hit-ratio curve: one row per point of report["mrc"] (the key says miss-ratio
    curve, after the algorithm; its points hold hit ratios)."""
    rows = (
        (p["capacity_slots"], p["capacity_bytes"], gib(p["capacity_bytes"]), p["hit_ratio"],
         *(p.get(column) for column in SPLIT_COLUMNS))
        for p in report.get("mrc") or []
    )  # fmt: skip
    return csv_text(CURVE_COLUMNS, rows)


def windows_csv(report: dict) -> str:
    """One row per reuse window: its hit ratio split by session, and its working sets."""
    rows = ([window.get(column) for column in WINDOW_COLUMNS]
            for window in report.get("windows") or [])  # fmt: skip
    return csv_text(WINDOW_COLUMNS, rows)


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

    return csv_text(SERIES_COLUMNS, rows())


def fleet_csv(report: dict) -> str:
    """Every router's curve of the fleet hit ratio vs cache capacity per replica (before
    headroom), long format (one row per router and point); header only for a report
    without a fleet."""
    fleet = report.get("fleet") or {}

    def rows():
        for entry in fleet.get("routers") or []:
            for p in entry["mrc"]:
                yield (entry["router"], fleet["replicas"], p["capacity_slots"],
                       p["capacity_bytes"], gib(p["capacity_bytes"]), p["hit_ratio"],
                       p["gpu_hit_ratio"], p["ram_hit_ratio"])  # fmt: skip

    return csv_text(FLEET_COLUMNS, rows())


def compare_csv(names: list[str], rows: list[dict], baseline: int = 0) -> str:
    """The compare page's table (analysis.compare.headline_rows against the analysis
    `baseline` indexes): one row per parameter that differs and per headline, each
    analysis's value (the baseline's column named "<name> (baseline)"), then each other
    one's difference to the baseline; a fleet's parameters and routers included, blank
    where an analysis has none."""
    base = names[baseline]
    header = ["key", "label", "unit", "differs"]
    header += [f"{name} (baseline)" if i == baseline else name for i, name in enumerate(names)]
    header += [f"delta {name} vs {base}" for i, name in enumerate(names) if i != baseline]
    lines = ([row["key"], row["label"], row["unit"], row["differs"], *row["values"],
              *(d for i, d in enumerate(row["deltas"]) if i != baseline)]
             for row in rows)  # fmt: skip
    return csv_text(header, lines)


def _window_columns(report: dict) -> list[str]:
    windows = (report.get("params") or {}).get("windows_s") or [
        w["window_s"] for w in report.get("windows") or []
    ]
    return [f"reuses_{float(w):g}s" for w in windows]


def segment_columns(report: dict, rows: list[dict]) -> list[str]:
    """Stable header: key, tenant (under tenant scope: a segment shared within two tenants
    is two rows), kind, tokens, occurrences, reuses_<W>s (window order), first and last
    seen, label, preview (when any row has one), then any other key by first sight."""
    leading = list(SEGMENT_LEADING)
    if report.get("scope") == "tenant":
        leading.insert(1, "tenant")
    seen: list[str] = []
    for row in rows:
        seen.extend(k for k in row if k not in seen)
    reuses = _window_columns(report)
    reuses += [k for k in seen if k.startswith("reuses_") and k not in reuses]
    trailing = [k for k in SEGMENT_TRAILING if k != "preview" or "preview" in seen]
    known = {*leading, *reuses, *trailing}
    others = [k for k in seen if k not in known]
    return [*leading, *reuses, *trailing, *others]


def segments_csv(report: dict) -> str:
    """The most reused segments (report["top_segments"]); an empty table keeps its header."""
    rows = report.get("top_segments") or []
    header = segment_columns(report, rows)
    return csv_text(header, ([row.get(k) for k in header] for row in rows))


__all__ = [
    "compare_csv",
    "curve_csv",
    "fleet_csv",
    "segment_columns",
    "segments_csv",
    "series_csv",
    "windows_csv",
]
