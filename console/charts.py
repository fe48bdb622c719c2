"""Plotly figures of an analysis report, as plain JSON-ready dicts.

The only module of the console that imports plotly. Every number drawn is read from the
report dict (analysis.report.Report.to_dict()); the only arithmetic here is unit conversion
for display (bytes -> GiB, ratios -> %, seconds -> minutes/hours), plus the share of hits
of the segment panel, which is each class's reused tokens over all reused tokens.

Each figure is {"data": [...], "layout": {...}}, ready for Django's json_script and
Plotly.newPlot(el, fig.data, fig.layout) (static/js/charts.js). Traces that tests and
templates may want to find carry a stable `uid`.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.compare import window_name
from console.format import GIB
from console.plotting import (
    CLASS_COLOURS,
    CLASS_LABELS,
    INK,
    KINDS,
    MARGIN,
    MUTED,
    PALETTE,
    SIDE_LEGEND,
    STAT_COLOURS,
    color,
    style,
    to_dict,
)

# --- formatting ---------------------------------------------------------------------------


# 300 -> "5 min", 3600 -> "1 h": the one formatter, shared with the pages and comparisons
window_label = window_name


def _gib(nbytes: float) -> float:
    return nbytes / GIB


def _gib_text(nbytes: float) -> str:
    value = nbytes / GIB
    return f"{value:.2f}" if value >= 1 or value == 0 else f"{value:.3g}"


def _pct(ratio: float) -> float:
    return ratio * 100


# --- figures ------------------------------------------------------------------------------


def _curve_xy(report: dict) -> tuple[list[float], list[float]]:
    points = report.get("mrc") or []
    return (
        [_gib(p["capacity_bytes"]) for p in points],
        [_pct(p["hit_ratio"]) for p in points],
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
        f"recommended {_gib_text(rec['capacity_bytes'])} GiB "
        f"(+{_pct(rec['headroom']):g}% headroom{copies} → {_gib_text(rec['ram_bytes'])} GiB)"
    )


def mrc_figure(report: dict) -> dict:
    """Token hit ratio (%) vs cache capacity (GiB, log axis), the ceiling, the recommended
    point."""
    rec = report["recommendation"]
    xs, ys = _curve_xy(report)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            name="LRU hit ratio",
            uid="curve",
            line={"color": PALETTE[0], "width": 2.5},
            hovertemplate="%{x:.2f} GiB<br>%{y:.1f}% of prompt tokens hit<extra></extra>",
        )
    )
    unresolved = [p for p in report["mrc"] if p.get("resolved") is False]
    if unresolved:  # a SHARDS-sampled curve is noise below 100 / R slots: say so on it
        rate = report.get("mrc_sampling_rate")
        fig.add_trace(
            go.Scatter(
                x=[p["capacity_bytes"] / GIB for p in unresolved],
                y=[_pct(p["hit_ratio"]) for p in unresolved],
                mode="markers",
                name=f"unresolved (sampled at {rate:g})",
                uid="unresolved",
                marker={"color": MUTED, "symbol": "x", "size": 6},
                hovertemplate="%{x:.2f} GiB: below 100/R slots, not resolved<extra></extra>",
            )
        )
    positive = [x for x in xs if x > 0]
    span = [positive[0], positive[-1]] if positive else [1 / 1024, 1]
    lifetime = rec.get("lifetime_s")
    ceiling_name = "ceiling" if lifetime is None else f"ceiling (lifetime {window_label(lifetime)})"
    fig.add_trace(
        go.Scatter(
            x=span,
            y=[_pct(rec["ceiling"])] * 2,
            mode="lines",
            name=ceiling_name,
            uid="ceiling",
            line={"color": INK, "dash": "dash", "width": 1.5},
            hovertemplate=f"{ceiling_name}: %{{y:.1f}}%<extra></extra>",
        )
    )
    infinite = report.get("infinite_hit_ratio")
    if infinite is not None and abs(infinite - rec["ceiling"]) > 1e-12:
        fig.add_trace(
            go.Scatter(
                x=span,
                y=[_pct(infinite)] * 2,
                mode="lines",
                name="infinite cache",
                uid="infinite",
                line={"color": MUTED, "dash": "dot", "width": 1.5},
                hovertemplate="infinite cache: %{y:.1f}%<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[_gib(rec["capacity_bytes"])],
            y=[_pct(rec["hit_ratio"])],
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
    )
    title = "Hit ratio vs host RAM (exact LRU)"
    if not report.get("mrc_exact", True):
        title = f"Hit ratio vs host RAM (sampled at {_pct(report['mrc_sampling_rate']):g}%)"
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
        name = window_label(window["window_s"])
        colour = color(i)
        fig.add_trace(
            go.Scatter(
                x=t,
                y=[_gib(b) for b in series.get("useful_ws_bytes", [])],
                mode="lines",
                name=f"useful ≤ {name}",
                uid=f"useful-{window['window_s']:g}",
                legendgroup=name,
                line={"color": colour, "width": 2},
                hovertemplate=(
                    f"%{{x:.1f}} {unit}<br>useful ≤ {name}: %{{y:.2f}} GiB<extra></extra>"
                ),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=t,
                y=[_gib(b) for b in series.get("ttl_occupancy_bytes", [])],
                mode="lines",
                name=f"TTL {name}",
                uid=f"ttl-{window['window_s']:g}",
                legendgroup=name,
                line={"color": colour, "width": 1.5, "dash": "dash"},
                hovertemplate=f"%{{x:.1f}} {unit}<br>TTL {name}: %{{y:.2f}} GiB<extra></extra>",
            )
        )
    style(
        fig,
        "Working set over time: useful vs store-everything (TTL)",
        xaxis={"title": {"text": f"time since first request ({unit})"}, "rangemode": "tozero"},
        yaxis={"title": {"text": "KV bytes (GiB)"}, "rangemode": "tozero"},
        hovermode="x",
    )
    return to_dict(fig)


def reuse_figure(report: dict) -> dict:
    """Token-weighted reuse-time distribution on the report's log-spaced bins, as a step
    outline (exact bin edges on a log axis), with the windows marked."""
    hist = report.get("reuse_histogram") or {}
    edges = list(hist.get("edges_s") or [])
    tokens = list(hist.get("tokens") or [])
    fig = go.Figure()
    if edges and tokens:
        fig.add_trace(
            go.Scatter(
                # the value of bin i holds from edges[i] to edges[i+1] (shape hv)
                x=edges,
                y=[*tokens, tokens[-1]],
                customdata=[*edges[1:], edges[-1]],
                mode="lines",
                line={"shape": "hv", "color": PALETTE[0], "width": 1.5},
                fill="tozeroy",
                name="tokens reused",
                uid="reuse",
                hovertemplate=(
                    "reused after %{x:.3g}–%{customdata:.3g} s<br>%{y:,} tokens<extra></extra>"
                ),
            )
        )
    shapes, annotations = [], []
    for window_s in (report.get("params") or {}).get("windows_s") or [
        w["window_s"] for w in report.get("windows") or []
    ]:
        # shapes take data values on a log axis, annotations take log10 of them
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": window_s,
                "x1": window_s,
                "y0": 0,
                "y1": 1,
                "line": {"color": MUTED, "dash": "dash", "width": 1},
            }
        )
        annotations.append(
            {
                "xref": "x",
                "yref": "paper",
                "x": math.log10(window_s),
                "y": 1,
                "xanchor": "left",
                "yanchor": "top",
                "xshift": 3,
                "showarrow": False,
                "text": window_label(window_s),
                "font": {"color": MUTED, "size": 11},
            }
        )
    first = hist.get("first_reference_tokens")
    if first is not None:
        annotations.append(
            {
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
        )
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


def segments_figure(report: dict) -> dict | None:
    """Hot / occasional / one-off material by kind (in the largest window, the last one when
    windows are in increasing order) and each one's share of the reused tokens; None when
    the report has no segment view (pre-hashed traces: segments None or absent)."""
    windows = report.get("windows") or []
    if not windows:
        return None
    # the largest window, like the engine's segment tables; the last of equals
    window = max(reversed(windows), key=lambda w: w["window_s"])
    if not window.get("segments"):
        return None
    segments = window["segments"]
    kinds = [k for k in KINDS if k in segments] + [k for k in segments if k not in KINDS]
    classes = list(CLASS_COLOURS)
    reused_total = sum(
        cell.get("reused_tokens", 0) for by_class in segments.values() for cell in by_class.values()
    )
    name = window_label(window["window_s"])
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("tokens sent (all occurrences)", f"share of reused tokens (≤ {name})"),
        horizontal_spacing=0.12,
    )
    for klass in classes:
        label = CLASS_LABELS.get(klass, klass)
        colour = CLASS_COLOURS.get(klass, MUTED)
        cells = [segments[k].get(klass, {}) for k in kinds]
        fig.add_trace(
            go.Bar(
                x=kinds,
                y=[c.get("total_tokens", 0) for c in cells],
                customdata=[[c.get("count", 0), c.get("unique_tokens", 0)] for c in cells],
                name=label,
                uid=f"tokens-{klass}",
                legendgroup=klass,
                marker={"color": colour},
                hovertemplate=(
                    f"%{{x}}, {label}<br>%{{y:,}} tokens sent<br>%{{customdata[0]:,}} segments,"
                    " %{customdata[1]:,} unique tokens<extra></extra>"
                ),
            ),
            row=1,
            col=1,
        )
        shares = [
            (_pct(c.get("reused_tokens", 0) / reused_total) if reused_total else 0.0) for c in cells
        ]
        fig.add_trace(
            go.Bar(
                x=kinds,
                y=shares,
                customdata=[c.get("reused_tokens", 0) for c in cells],
                name=label,
                uid=f"share-{klass}",
                legendgroup=klass,
                showlegend=False,
                marker={"color": colour},
                hovertemplate=(
                    f"%{{x}}, {label}<br>%{{y:.1f}}% of reused tokens"
                    "<br>%{customdata:,} tokens<extra></extra>"
                ),
            ),
            row=1,
            col=2,
        )
    # subplot titles sit above the panels: the legend goes to the side
    style(
        fig,
        f"What material is hot (window {name})",
        barmode="stack",
        legend=SIDE_LEGEND,
        margin={**MARGIN, "r": 110},
    )
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    fig.update_yaxes(title_text="share of reused tokens (%)", row=1, col=2)
    return to_dict(fig)


def budgets_figure(report: dict) -> dict | None:
    """The GPU (weights + active KV) and host RAM (reusable blocks + reserves) budgets as two
    stacked bars, each against its capacity; None without budgets."""
    budgets = report.get("budgets")
    if not budgets:
        return None
    host = (report.get("recommendation") or {}).get("host")
    gpu_x, host_x = "GPU (per replica)", "Host RAM"
    fig = go.Figure()

    def bar(x: str, nbytes: int, name: str, uid: str, colour: str) -> None:
        fig.add_trace(
            go.Bar(
                x=[x],
                y=[_gib(nbytes)],
                name=name,
                uid=uid,
                marker={"color": colour},
                hovertemplate=f"{name}: %{{y:.2f}} GiB<extra>%{{x}}</extra>",
            )
        )

    bar(gpu_x, budgets["weights_bytes"], "model weights", "weights", PALETTE[4])
    active = f"active KV ({budgets['concurrent_sequences']} × {budgets['context_tokens']:,} tokens)"
    bar(gpu_x, budgets["active_kv_bytes"], active, "active_kv", PALETTE[2])
    bar(host_x, budgets["host_reusable_bytes"], "reusable KV blocks", "host_reusable", PALETTE[0])
    reserve_colours = ("#b8c0cc", "#a3adbb", "#8d99ae", "#78849a", "#647087", "#505c73")
    if host is not None:
        for i, (name, nbytes) in enumerate((host.get("reserves_bytes") or {}).items()):
            label = f"reserve: {name.replace('_', ' ')}"
            colour = reserve_colours[i % len(reserve_colours)]
            bar(host_x, nbytes, label, f"reserve-{name}", colour)
    gpus = budgets.get("gpus", 1)
    gpu_label = f"GPU memory ({gpus} GPU{'s' if gpus != 1 else ''})"
    capacities = [(0, gpu_x, budgets["gpu_total_bytes"], gpu_label)]
    if host is not None:
        capacities.append((1, host_x, host["host_ram_bytes"], "host RAM"))
    shapes = []
    for index, _x, nbytes, label in capacities:
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "y",
                "x0": index - 0.45,
                "x1": index + 0.45,
                "y0": _gib(nbytes),
                "y1": _gib(nbytes),
                "line": {"color": INK, "width": 2.5, "dash": "dash"},
                "label": {
                    "text": f"{label}: {_gib_text(nbytes)} GiB",
                    "textposition": "middle",
                    "yanchor": "bottom",
                    "font": {"size": 11, "color": INK},
                },
            }
        )
    # the dashed lines do not hover: a near-invisible marker on each one does
    fig.add_trace(
        go.Scatter(
            x=[x for _, x, _, _ in capacities],
            y=[_gib(nbytes) for _, _, nbytes, _ in capacities],
            text=[label for _, _, _, label in capacities],
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 1, "color": INK},
            name="capacity",
            uid="capacity",
            showlegend=False,
            hovertemplate="%{text}: %{y:.2f} GiB<extra></extra>",
        )
    )
    style(
        fig,
        "Memory budgets: GPU per replica and host RAM",
        barmode="stack",
        bargap=0.35,
        xaxis={"title": {"text": ""}, "categoryorder": "array", "categoryarray": [gpu_x, host_x]},
        yaxis={"title": {"text": "GiB"}, "rangemode": "tozero"},
        shapes=shapes,
        legend=SIDE_LEGEND,
        margin={**MARGIN, "r": 200},
    )
    return to_dict(fig)


def routes_figure(report: dict) -> dict:
    """p50 / p90 / p99 / max of prompt and output tokens per model route."""
    routes = report.get("routes") or []
    labels = [r.get("route") or "(no route)" for r in routes]
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("prompt tokens", "output tokens"), horizontal_spacing=0.1
    )
    for col, field in ((1, "prompt_tokens"), (2, "output_tokens")):
        stats = [r.get(field) or {"count": 0} for r in routes]
        for stat, colour in STAT_COLOURS.items():
            fig.add_trace(
                go.Bar(
                    x=labels,
                    y=[s.get(stat) if s.get("count") else None for s in stats],
                    customdata=[s.get("count", 0) for s in stats],
                    name=stat,
                    uid=f"{field}-{stat}",
                    legendgroup=stat,
                    showlegend=col == 1,
                    marker={"color": colour},
                    hovertemplate=(
                        f"%{{x}} {stat}: %{{y:,.0f}} tokens<br>%{{customdata:,}} requests"
                        "<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
    style(
        fig,
        "Request lengths per model route",
        barmode="group",
        legend=SIDE_LEGEND,
        margin={**MARGIN, "r": 80},
    )
    fig.update_yaxes(title_text="tokens", row=1, col=1)
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
    """Hit-ratio curves of several reports overlaid, each with its recommended point."""
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
                x=[_gib(rec["capacity_bytes"])],
                y=[_pct(rec["hit_ratio"])],
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
        "Hit ratio vs host RAM, compared",
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
    "budgets_figure",
    "compare_figure",
    "mrc_figure",
    "report_figures",
    "reuse_figure",
    "routes_figure",
    "segments_figure",
    "window_label",
    "working_set_figure",
]
