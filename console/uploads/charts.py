"""Plotly figures of an analysis report, as plain JSON-ready dicts: the working set over
time, the reuse times, and the whole set of a report's figures (the hit-ratio curve and
the comparison of several curves are in console.uploads.curve_charts, the bar charts in
console.uploads.bar_charts, the fleet's and admission's in console.uploads.fleet_charts).

With bar_charts, curve_charts and fleet_charts, the only modules of the uploads wing that
import plotly.
Every number drawn is read from the report dict (analysis.report.Report.to_dict()); the
only arithmetic here is unit conversion for display (console.format: bytes -> GiB, ratios
-> %, windows in words), plus the share of hits of the segment panel, which is each
class's reused tokens over all reused tokens.

The curve is stored under the report's key "mrc" (the name of the algorithm's usual output,
a miss-ratio curve), but its points hold hit ratios: every figure here draws hit ratios.

Each figure is {"data": [...], "layout": {...}}, ready for Django's json_script and
Plotly.newPlot(el, fig.data, fig.layout) (static/js/charts.js). Traces that tests and
templates may want to find carry a stable `uid`.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from console.format import gib, window_name
from console.plotting import MUTED, PALETTE, color, style, to_dict
from console.uploads.bar_charts import budgets_figure, routes_figure, segments_figure
from console.uploads.curve_charts import compare_figure, mrc_figure
from console.uploads.fleet_charts import admission_figure, fleet_figure, fleet_load_figure

# The version of the figures these modules draw (this one, curve_charts, bar_charts,
# fleet_charts and console.plotting).
# Stored figures carry it (console.uploads.figures): raise it whenever a change here would
# draw any figure differently, and every stored analysis is redrawn once, when its page is
# next opened. Figures stored before they carried a version count as version 1.
CHARTS_VERSION = 7  # 5: admission and the fleet's figures (#15); 6: its x axis is cache capacity;
# 7: routers drawn once each in fixed colours, admission at equal sizes


def working_set_figure(report: dict) -> dict:
    """Useful working set (solid) and TTL occupancy (dashed) over time, per window."""
    hours = report.get("span_s", 0) > 3 * 3600
    unit, per = ("h", 3600) if hours else ("min", 60)
    fig = go.Figure()
    for i, window in enumerate(report.get("windows") or []):
        series = window.get("series") or {}
        t = [s / per for s in series.get("t_s", [])]
        name, colour, w = window_name(window["window_s"]), color(i), window["window_s"]
        for kind, label, line in (
            ("useful", f"useful ≤ {name}", {"color": colour, "width": 2}),
            ("ttl", f"TTL {name}", {"color": colour, "width": 1.5, "dash": "dash"}),
        ):
            values = series.get("useful_ws_bytes" if kind == "useful" else "ttl_occupancy_bytes")
            fig.add_trace(go.Scatter(
                x=t, y=[gib(b) for b in values or []], mode="lines", name=label,
                uid=f"{kind}-{w:g}", legendgroup=name, line=line,
                hovertemplate=f"%{{x:.1f}} {unit}<br>{label}: %{{y:.2f}} GiB<extra></extra>",
            ))  # fmt: skip
    style(
        fig,
        "Working set over time: useful vs store-everything (TTL)",
        xaxis={"title": {"text": f"time since first request ({unit})"}, "rangemode": "tozero"},
        yaxis={"title": {"text": "KV bytes (GiB)"}, "rangemode": "tozero"},
        hovermode="x",
    )
    return to_dict(fig)


def _reuse_trace(edges: list[float], tokens: list[int]) -> go.Scatter:
    return go.Scatter(
        # the value of bin i holds from edges[i] to edges[i+1] (shape hv)
        x=edges,
        y=[*tokens, tokens[-1]],
        customdata=[*edges[1:], edges[-1]],
        mode="lines",
        line={"shape": "hv", "color": PALETTE[0], "width": 1.5},
        fill="tozeroy",
        name="tokens reused",
        uid="reuse",
        hovertemplate="reused after %{x:.3g}–%{customdata:.3g} s<br>%{y:,} tokens<extra></extra>",
    )


def _window_line(window_s: float) -> dict:
    # shapes take data values on a log axis (annotations take log10 of them)
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": window_s,
        "x1": window_s,
        "y0": 0,
        "y1": 1,
        "line": {"color": MUTED, "dash": "dash", "width": 1},
    }


def _window_label(window_s: float) -> dict:
    return {
        "xref": "x",
        "yref": "paper",
        "x": math.log10(window_s),
        "y": 1,
        "xanchor": "left",
        "yanchor": "top",
        "xshift": 3,
        "showarrow": False,
        "text": window_name(window_s),
        "font": {"color": MUTED, "size": 11},
    }


def _first_reference_note(first: int) -> dict:
    return {
        "xref": "paper",
        "yref": "paper",
        "x": 0,
        "y": 1,
        "xanchor": "left",
        "yanchor": "top",
        "showarrow": False,
        "align": "left",
        "text": f"not shown: {first:,} tokens in first references (no reuse)",
        "font": {"color": MUTED, "size": 11},
        "bgcolor": "rgba(255,255,255,0.8)",
    }


def reuse_figure(report: dict) -> dict:
    """Token-weighted reuse-time distribution on the report's log-spaced bins, as a step
    outline (exact bin edges on a log axis), with the windows marked."""
    hist = report.get("reuse_histogram") or {}
    edges = list(hist.get("edges_s") or [])
    tokens = list(hist.get("tokens") or [])
    fig = go.Figure()
    if edges and tokens:
        fig.add_trace(_reuse_trace(edges, tokens))
    windows_s = (report.get("params") or {}).get("windows_s") or [
        w["window_s"] for w in report.get("windows") or []
    ]
    shapes = [_window_line(window_s) for window_s in windows_s]
    annotations = [_window_label(window_s) for window_s in windows_s]
    first = hist.get("first_reference_tokens")
    if first is not None:
        annotations.append(_first_reference_note(first))
    style(
        fig,
        "When blocks come back: reuse time, weighted by tokens",
        xaxis={"type": "log", "title": {"text": "time since previous reference (s, log scale)"}},
        yaxis={"title": {"text": "tokens reused per bin"}, "rangemode": "tozero"},
        shapes=shapes,
        annotations=annotations,
        showlegend=False,
    )
    return to_dict(fig)


def report_figures(report: dict) -> dict[str, dict]:
    """All figures of one report, by name, in the order the analysis page shows them:
    "mrc", "working_set", "reuse", "routes" always; "segments" for chat logs only;
    "budgets" only when the report has budgets; then "admission" when the report has the
    admission curve, and "fleet" and "fleet_load" when it has a fleet: these three in
    sections of their own, after the others (SECTION_FIGURES of console.uploads.fleet_view)."""
    figures = {
        "mrc": mrc_figure(report),
        "working_set": working_set_figure(report),
        "reuse": reuse_figure(report),
    }
    segments = segments_figure(report)
    if segments is not None:
        figures["segments"] = segments
    budgets = budgets_figure(report)
    if budgets is not None:
        figures["budgets"] = budgets
    figures["routes"] = routes_figure(report)
    for name, draw in (
        ("admission", admission_figure),
        ("fleet", fleet_figure),
        ("fleet_load", fleet_load_figure),
    ):
        figure = draw(report)
        if figure is not None:
            figures[name] = figure
    return figures


__all__ = [
    "CHARTS_VERSION",
    "compare_figure",
    "mrc_figure",
    "report_figures",
    "reuse_figure",
    "working_set_figure",
]
