"""Plotly figures of an analysis report, as plain JSON-ready dicts: the hit-ratio curve,
the working set over time, the reuse times, the comparison of several curves, and the whole
set of a report's figures (the bar charts are in console.uploads.bar_charts).

With bar_charts, the only modules of the uploads wing that import plotly. Every number drawn
is read from the report dict (analysis.report.Report.to_dict()); the only arithmetic here
is unit conversion for display (console.format: bytes -> GiB, ratios -> %, windows in
words), plus the share of hits of the segment panel, which is each class's reused tokens
over all reused tokens.

The curve is stored under the report's key "mrc" (the name of the algorithm's usual output,
a miss-ratio curve), but its points hold hit ratios: every figure here draws hit ratios.

Each figure is {"data": [...], "layout": {...}}, ready for Django's json_script and
Plotly.newPlot(el, fig.data, fig.layout) (static/js/charts.js). Traces that tests and
templates may want to find carry a stable `uid`.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from console.format import gib, gib_number, percent, window_name
from console.plotting import INK, MUTED, PALETTE, color, style, to_dict
from console.uploads.bar_charts import budgets_figure, routes_figure, segments_figure

# The version of the figures these modules draw (this one, bar_charts and console.plotting).
# Stored figures carry it (console.uploads.figures): raise it whenever a change here would
# draw any figure differently, and every stored analysis is redrawn once, when its page is
# next opened. Figures stored before they carried a version count as version 1.
CHARTS_VERSION = 2


def _curve_xy(report: dict) -> tuple[list[float], list[float]]:
    points = report.get("mrc") or []
    return (
        [gib(p["capacity_bytes"]) for p in points],
        [percent(p["hit_ratio"]) for p in points],
    )


def _recommended_text(report: dict) -> str:
    rec = report["recommendation"]
    # metrics.md section 8: with heads replicated (kv_heads < tp) or an MLA latent on every
    # rank the replica keeps more than the model's bytes per token; say by how much, or
    # the RAM figure would not follow from the curve's capacity
    replica = rec.get("replica_kv_bytes_per_token") or 0
    model = report.get("kv_bytes_per_token") or 0
    copies = ""
    if model and replica > model:
        copies = f", ×{replica / model:.3g} on {rec['tp']} TP ranks"
    return (
        f"recommended {gib_number(rec['capacity_bytes'])} GiB "
        f"(+{percent(rec['headroom']):g}% headroom{copies} → {gib_number(rec['ram_bytes'])} GiB)"
    )


def _curve_trace(xs: list[float], ys: list[float]) -> go.Scatter:
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines",
        name="LRU hit ratio",
        uid="curve",
        line={"color": PALETTE[0], "width": 2.5},
        hovertemplate="%{x:.2f} GiB<br>%{y:.1f}% of prompt tokens hit<extra></extra>",
    )


def _unresolved_trace(report: dict, unresolved: list[dict]) -> go.Scatter:
    """The capacities a SHARDS-sampled curve cannot resolve (below 100 / R slots)."""
    return go.Scatter(
        x=[gib(p["capacity_bytes"]) for p in unresolved],
        y=[percent(p["hit_ratio"]) for p in unresolved],
        mode="markers",
        name=f"unresolved (sampled at {report.get('mrc_sampling_rate'):g})",
        uid="unresolved",
        marker={"color": MUTED, "symbol": "x", "size": 6},
        hovertemplate="%{x:.2f} GiB: below 100/R slots, not resolved<extra></extra>",
    )


def _level_trace(span: list[float], ratio: float, name: str, uid: str, line: dict) -> go.Scatter:
    """A horizontal line across the curve's capacities at one hit ratio."""
    return go.Scatter(
        x=span,
        y=[percent(ratio)] * 2,
        mode="lines",
        name=name,
        uid=uid,
        line=line,
        hovertemplate=f"{name}: %{{y:.1f}}%<extra></extra>",
    )


def _recommended_trace(report: dict) -> go.Scatter:
    rec = report["recommendation"]
    return go.Scatter(
        x=[gib(rec["capacity_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers+text",
        name="recommended",
        uid="recommended",
        text=[_recommended_text(report)],
        textposition="bottom right",
        textfont={"color": PALETTE[1]},
        marker={"color": PALETTE[1], "size": 11, "line": {"color": "#fff", "width": 1.5}},
        cliponaxis=False,
        hovertemplate="recommended: %{x:.2f} GiB<br>%{y:.1f}% hit<extra></extra>",
    )


def _level_traces(report: dict, xs: list[float]) -> list[go.Scatter]:
    """The ceiling the recommendation aims under, and the infinite-cache hit ratio when a
    lifetime makes the two differ."""
    rec = report["recommendation"]
    positive = [x for x in xs if x > 0]
    span = [positive[0], positive[-1]] if positive else [1 / 1024, 1]
    lifetime = rec.get("lifetime_s")
    ceiling_name = "ceiling" if lifetime is None else f"ceiling (lifetime {window_name(lifetime)})"
    ceiling_line = {"color": INK, "dash": "dash", "width": 1.5}
    traces = [_level_trace(span, rec["ceiling"], ceiling_name, "ceiling", ceiling_line)]
    infinite = report.get("infinite_hit_ratio")
    if infinite is not None and abs(infinite - rec["ceiling"]) > 1e-12:
        infinite_line = {"color": MUTED, "dash": "dot", "width": 1.5}
        traces.append(_level_trace(span, infinite, "infinite cache", "infinite", infinite_line))
    return traces


def mrc_figure(report: dict) -> dict:
    """The hit-ratio curve: token hit ratio (%) vs cache capacity (GiB, log axis), with the
    ceiling the recommendation aims under (the hit ratio of an unbounded cache within the
    block lifetime, if any), the infinite-cache hit ratio when a lifetime makes it differ,
    and the recommended point."""
    xs, ys = _curve_xy(report)
    fig = go.Figure()
    fig.add_trace(_curve_trace(xs, ys))
    unresolved = [p for p in report["mrc"] if p.get("resolved") is False]
    if unresolved:  # a SHARDS-sampled curve is noise below 100 / R slots: say so on it
        fig.add_trace(_unresolved_trace(report, unresolved))
    for trace in _level_traces(report, xs):
        fig.add_trace(trace)
    fig.add_trace(_recommended_trace(report))
    # the curve's one name on every page and download: the hit-ratio curve (its x axis is
    # the cache's capacity; host RAM adds headroom and copies to it)
    title = "Hit-ratio curve (exact LRU)"
    if not report.get("mrc_exact", True):
        title = f"Hit-ratio curve (sampled at {percent(report['mrc_sampling_rate']):g}%)"
    style(
        fig,
        title,
        xaxis={"type": "log", "title": {"text": "cache capacity (GiB, log scale)"}},
        yaxis={"title": {"text": "token hit ratio (%)"}, "rangemode": "tozero"},
        showlegend=True,
    )
    return to_dict(fig)


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
    """All figures of one report, by name: "mrc", "working_set", "reuse", "routes" always;
    "segments" for chat logs only; "budgets" only when the report has budgets."""
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
    return figures


def compare_figure(items: list[tuple[str, dict]]) -> dict:
    """The hit-ratio curves of several reports overlaid, each with its recommended point."""
    fig = go.Figure()
    for i, (label, report) in enumerate(items):
        colour = color(i)
        xs, ys = _curve_xy(report)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name=label,
                uid=f"curve-{i}",
                legendgroup=f"r{i}",
                line={"color": colour, "width": 2},
                hovertemplate=(
                    "%{fullData.name}<br>%{x:.2f} GiB<br>%{y:.1f}% of prompt tokens hit"
                    "<extra></extra>"
                ),
            )
        )
        rec = report["recommendation"]
        fig.add_trace(
            go.Scatter(
                x=[gib(rec["capacity_bytes"])],
                y=[percent(rec["hit_ratio"])],
                mode="markers",
                name=f"{label}: recommended",
                uid=f"recommended-{i}",
                legendgroup=f"r{i}",
                showlegend=False,
                marker={"color": colour, "size": 11, "line": {"color": "#fff", "width": 1.5}},
                text=[_recommended_text(report)],
                meta=[label],
                hovertemplate="%{meta[0]}<br>%{text}<br>%{y:.1f}% hit<extra></extra>",
            )
        )
    style(
        fig,
        "Hit-ratio curves, compared",
        xaxis={"type": "log", "title": {"text": "cache capacity (GiB, log scale)"}},
        yaxis={"title": {"text": "token hit ratio (%)"}, "rangemode": "tozero"},
        legend={
            "orientation": "v",
            "x": 0.01,
            "xanchor": "left",
            "y": 0.99,
            "yanchor": "top",
            "bgcolor": "rgba(255,255,255,0.85)",
        },
        showlegend=True,
    )
    return to_dict(fig)


__all__ = [
    "CHARTS_VERSION",
    "compare_figure",
    "mrc_figure",
    "report_figures",
    "reuse_figure",
    "working_set_figure",
]
