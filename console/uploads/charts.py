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

import itertools
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from console.format import gib, window_name
from console.log_axis import SECONDS, log_axis
from console.palette import LABEL_BOX, MUTED, REUSE_FILL, SINGLE_CACHE, series_colour
from console.plotting import HEIGHT, style, to_dict
from console.uploads.bar_charts import budgets_figure, routes_figure, segments_figure
from console.uploads.curve_charts import compare_figure, mrc_figure
from console.uploads.fleet_charts import admission_figure, fleet_figure, fleet_load_figure
from console.uploads.logged_charts import logged_cache_figure

# The version of the figures these modules draw (this one, curve_charts, bar_charts,
# fleet_charts and console.plotting).
# Stored figures carry it (console.uploads.figures): raise it whenever a change here would
# draw any figure differently, and every stored analysis is redrawn once, when its page is
# next opened. Figures stored before they carried a version count as version 1.
CHARTS_VERSION = 9  # 5: admission and the fleet's figures (#15); 6: its x axis is cache capacity;
# 7: routers drawn once each in fixed colours, admission at equal sizes; 8: hit-ratio charts
# over RAM with headroom, the knee and budgets marked, TTL occupancy in its own panel,
# 1-2-5 log ticks with units, one palette, legends clear of panel titles (#16); 9: the
# working set's longer windows drawn first and wider, so a line a shorter one coincides
# with still shows


# the working set's two panels, each on its own y axis: TTL occupancy (a store-everything
# cache) runs to several times the useful working set, and on one axis it flattened it
WORKING_SET_PANELS = (
    # kind, the series' key, the panel's y axis title, a line's name, its hover's, its dash
    ("useful", "useful_ws_bytes", "useful working set (GiB)", "≤", "useful ≤", "solid"),
    ("ttl", "ttl_occupancy_bytes", "TTL occupancy (GiB)", "TTL", "TTL", "dash"),
)
WORKING_SET_HEIGHT = HEIGHT + 120
WIDER_PER_WINDOW = 1.5  # px: a window's line over the next shorter one's


def _working_set_trace(window: dict, i: int, panel: tuple, unit: str, per: int) -> go.Scatter:
    kind, key, _, words, hover_words, dash = panel
    series = window.get("series") or {}
    name, w = window_name(window["window_s"]), window["window_s"]
    label, hover = f"{words} {name}", f"{hover_words} {name}"
    # the legend names each window once (the useful line's "≤ 5 min"), and a click on it
    # shows or hides both of its lines; the panels' axes say which line is which. The
    # i-th smallest window's line is wider than the smaller ones' drawn over it: where a
    # window longer than the log's gaps coincides with a smaller one, its edges still
    # show (a line drawn over its twin was hidden)
    width = (2.0 if kind == "useful" else 1.5) + WIDER_PER_WINDOW * i
    return go.Scatter(
        x=[s / per for s in series.get("t_s", [])],
        y=[gib(b) for b in series.get(key) or []],
        mode="lines", name=label, uid=f"{kind}-{w:g}", legendgroup=name,
        showlegend=kind == "useful", legendrank=1000 + i,
        line={"color": series_colour(i), "width": width, "dash": dash},
        hovertemplate=f"%{{x:.1f}} {unit}<br>{hover}: %{{y:,.2f}} GiB<extra></extra>",
    )  # fmt: skip


def working_set_figure(report: dict) -> dict:
    """Useful working set (top panel, solid) and TTL occupancy (bottom panel, dashed) over
    time, a colour per window, each panel on its own y axis; the longest window drawn
    first and widest, each shorter one over it, the legend in the windows' order."""
    hours = report.get("span_s", 0) > 3 * 3600
    unit, per = ("h", 3600) if hours else ("min", 60)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    by_length = sorted(report.get("windows") or [], key=lambda w: w["window_s"])
    windows = list(enumerate(by_length))
    for row, panel in enumerate(WORKING_SET_PANELS, start=1):
        for i, window in reversed(windows):
            fig.add_trace(_working_set_trace(window, i, panel, unit, per), row=row, col=1)
        fig.update_yaxes(title_text=panel[2], rangemode="tozero", tickformat=",", row=row, col=1)
    style(
        fig,
        "Working set over time: useful vs store-everything (TTL)",
        height=WORKING_SET_HEIGHT,
        hovermode="x",
    )
    fig.update_xaxes(rangemode="tozero")
    fig.update_xaxes(title_text=f"time since first request ({unit})", row=2, col=1)
    return to_dict(fig)


# The engine's first bin starts at 1 ms and holds every reuse under its upper edge, the
# 0 s ones among them (analysis.metrics.tables: a reuse time is counted as at least 1 ms).
# Reuse times are the requests' logged times apart, so 0 s is a block used again by a
# request logged at the same time as its previous use (the log's clock ticks in ms or in
# seconds): parallel requests, or a burst within one tick.
SAME_INSTANT = "0 s (same instant)"


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s" if value < 1000 else f"{value:,.0f} s"


def _bin_words(edges: list[float]) -> list[str]:
    """Each bin in words for its hover, "reused after 1.36–1.84 ms"; the first one says
    that it holds the reuses at 0 s."""
    words = [f"reused after {_seconds(a)}–{_seconds(b)}" for a, b in itertools.pairwise(edges)]
    if words:
        words[0] = f"reused at once: {SAME_INSTANT} to {_seconds(edges[1])}"
    return [*words, words[-1]] if words else []


def _reuse_trace(edges: list[float], tokens: list[int]) -> go.Scatter:
    return go.Scatter(
        # the value of bin i holds from edges[i] to edges[i+1] (shape hv)
        x=edges,
        y=[*tokens, tokens[-1]],
        customdata=_bin_words(edges),
        mode="lines",
        line={"shape": "hv", "color": SINGLE_CACHE, "width": 1.5},
        fill="tozeroy",
        fillcolor=REUSE_FILL,
        name="tokens reused",
        uid="reuse",
        hovertemplate="%{customdata}<br>%{y:,} tokens<extra></extra>",
    )


def _same_instant_label(edges: list[float], tokens: list[int]) -> dict:
    """The first bin's label, pointing at it from above: "0 s (same instant)"."""
    return {
        "xref": "x",
        "yref": "y",
        "x": math.log10(edges[0]),  # (annotations take log10 on a log axis)
        "y": tokens[0],
        "text": SAME_INSTANT,
        "showarrow": True,
        "arrowhead": 0,
        "arrowcolor": MUTED,
        "ax": 0,
        "ay": -28,
        "xanchor": "left",
        "font": {"color": MUTED, "size": 11},
        "bgcolor": LABEL_BOX,
    }


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


def _window_label(window_s: float, axis: dict) -> dict:
    """A window's name beside its line: right of it, or left of a line near the axis's
    right end (the largest window is often the last bin's edge: its name was cut off)."""
    low, high = axis["range"]
    near_end = (math.log10(window_s) - low) / (high - low) > 0.9
    return {
        "xref": "x",
        "yref": "paper",
        "x": math.log10(window_s),
        "y": 1,
        "xanchor": "right" if near_end else "left",
        "yanchor": "top",
        "xshift": -3 if near_end else 3,
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
        "bgcolor": LABEL_BOX,
    }


def reuse_figure(report: dict) -> dict:
    """Token-weighted reuse-time distribution on the report's log-spaced bins, as a step
    outline (exact bin edges on a log axis), with the windows marked."""
    hist = report.get("reuse_histogram") or {}
    edges = list(hist.get("edges_s") or [])
    tokens = list(hist.get("tokens") or [])
    fig = go.Figure()
    windows_s = (report.get("params") or {}).get("windows_s") or [
        w["window_s"] for w in report.get("windows") or []
    ]
    shapes = [_window_line(window_s) for window_s in windows_s]
    # the bins' edges are the axis's ends (no marker to leave room for)
    axis = log_axis([*edges, *windows_s], SECONDS, "time since the previous reference (log scale)",
                    pad=0)  # fmt: skip
    annotations = [_window_label(window_s, axis) for window_s in windows_s]
    if edges and tokens:
        fig.add_trace(_reuse_trace(edges, tokens))
        if tokens[0]:  # reuses at 0 s: the bin at the axis's left edge says so
            annotations.append(_same_instant_label(edges, tokens))
    first = hist.get("first_reference_tokens")
    if first is not None:
        annotations.append(_first_reference_note(first))
    style(
        fig,
        "When blocks come back: reuse time, weighted by tokens",
        xaxis=axis,
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
    admission curve, "fleet" and "fleet_load" when it has a fleet, and "logged_cache" when
    its log reported cached tokens and a prediction stands beside them: these in sections
    of their own, after the others (SECTION_FIGURES of console.uploads.fleet_view)."""
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
        ("logged_cache", logged_cache_figure),
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
