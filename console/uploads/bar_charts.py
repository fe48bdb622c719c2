"""Bar charts of an analysis report, as plain JSON-ready dicts: what material is hot, the
memory budgets, and request lengths per model route (console.uploads.charts draws the
curves and lists a report's figures; its docstring says what every figure follows).
"""

from __future__ import annotations

import plotly.graph_objects as go

from console.format import gib, gib_number, percent, window_name
from console.palette import (
    ACTIVE_KV,
    CLASSES,
    INK,
    MUTED,
    RESERVES,
    REUSABLE_KV,
    STATS,
    WEIGHTS,
)
from console.plotting import (
    CLASS_LABELS,
    KINDS,
    LEGEND_FOOT,
    MARGIN,
    MARGIN_FOOT,
    SIDE_LEGEND,
    panels,
    style,
    to_dict,
)


def _hot_window(report: dict) -> dict | None:
    """The largest window, like the engine's segment tables (the last of equals); None when
    it has no segments."""
    windows = report.get("windows") or []
    if not windows:
        return None
    window = max(reversed(windows), key=lambda w: w["window_s"])
    return window if window.get("segments") else None


def _tokens_bar(kinds: list[str], klass: str, cells: list[dict]) -> go.Bar:
    label = CLASS_LABELS.get(klass, klass)
    return go.Bar(
        x=kinds,
        y=[c.get("total_tokens", 0) for c in cells],
        customdata=[[c.get("count", 0), c.get("unique_tokens", 0)] for c in cells],
        name=label,
        uid=f"tokens-{klass}",
        legendgroup=klass,
        marker={"color": CLASSES.get(klass, MUTED)},
        hovertemplate=(
            f"%{{x}}, {label}<br>%{{y:,}} tokens sent<br>%{{customdata[0]:,}} segments,"
            " %{customdata[1]:,} unique tokens<extra></extra>"
        ),
    )


def _share_bar(kinds: list[str], klass: str, cells: list[dict], reused_total: int) -> go.Bar:
    label = CLASS_LABELS.get(klass, klass)
    shares = [
        (percent(c.get("reused_tokens", 0) / reused_total) if reused_total else 0.0) for c in cells
    ]
    return go.Bar(
        x=kinds,
        y=shares,
        customdata=[c.get("reused_tokens", 0) for c in cells],
        name=label,
        uid=f"share-{klass}",
        legendgroup=klass,
        showlegend=False,
        marker={"color": CLASSES.get(klass, MUTED)},
        hovertemplate=(
            f"%{{x}}, {label}<br>%{{y:.1f}}% of reused tokens"
            "<br>%{customdata:,} tokens<extra></extra>"
        ),
    )


def segments_figure(report: dict) -> dict | None:
    """Hot / occasional / one-off material by kind (in the largest window, the last one when
    windows are in increasing order) and each one's share of the reused tokens; None when
    the report has no segment view (pre-hashed traces: segments None or absent)."""
    window = _hot_window(report)
    if window is None:
        return None
    segments = window["segments"]
    kinds = [k for k in KINDS if k in segments] + [k for k in segments if k not in KINDS]
    reused_total = sum(
        cell.get("reused_tokens", 0) for by_class in segments.values() for cell in by_class.values()
    )
    name = window_name(window["window_s"])
    # in two lines: one panel is under a third of a narrow chart wide
    titles = ("tokens sent<br>(all occurrences)", f"share of reused tokens<br>(≤ {name})")
    fig = panels(2, titles, spacing=0.14)
    for klass in CLASSES:
        cells = [segments[k].get(klass, {}) for k in kinds]
        fig.add_trace(_tokens_bar(kinds, klass, cells), row=1, col=1)
        fig.add_trace(_share_bar(kinds, klass, cells, reused_total), row=1, col=2)
    # panel titles sit above the panels: the legend goes to the foot
    style(
        fig,
        f"What material is hot (window {name})",
        barmode="stack",
        legend=LEGEND_FOOT,
        margin=MARGIN_FOOT,
    )
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    fig.update_yaxes(title_text="% of reused tokens", row=1, col=2)
    return to_dict(fig)


GPU_X, HOST_X = "GPU (per replica)", "Host RAM"
# a capacity line of the budgets figure: (bar index, bar name, bytes, label)
Capacity = tuple[int, str, int, str]


def _budget_bar(x: str, nbytes: int, name: str, uid: str, colour: str) -> go.Bar:
    return go.Bar(
        x=[x],
        y=[gib(nbytes)],
        name=name,
        uid=uid,
        marker={"color": colour},
        hovertemplate=f"{name}: %{{y:.2f}} GiB<extra>%{{x}}</extra>",
    )


def _budget_bars(budgets: dict, host: dict | None) -> list[go.Bar]:
    """Weights and active KV stacked on the GPU; reusable blocks and reserves in host RAM."""
    active = f"active KV ({budgets['concurrent_sequences']} × {budgets['context_tokens']:,} tokens)"
    bars = [
        _budget_bar(GPU_X, budgets["weights_bytes"], "model weights", "weights", WEIGHTS),
        _budget_bar(GPU_X, budgets["active_kv_bytes"], active, "active_kv", ACTIVE_KV),
        _budget_bar(
            HOST_X,
            budgets["host_reusable_bytes"],
            "reusable KV blocks",
            "host_reusable",
            REUSABLE_KV,
        ),
    ]
    if host is not None:
        for i, (name, nbytes) in enumerate((host.get("reserves_bytes") or {}).items()):
            label = f"reserve: {name.replace('_', ' ')}"
            colour = RESERVES[i % len(RESERVES)]
            bars.append(_budget_bar(HOST_X, nbytes, label, f"reserve-{name}", colour))
    return bars


def _capacities(budgets: dict, host: dict | None) -> list[Capacity]:
    gpus = budgets.get("gpus", 1)
    gpu_label = f"GPU memory ({gpus} GPU{'s' if gpus != 1 else ''})"
    capacities = [(0, GPU_X, budgets["gpu_total_bytes"], gpu_label)]
    if host is not None:
        capacities.append((1, HOST_X, host["host_ram_bytes"], "host RAM"))
    return capacities


def _capacity_line(index: int, nbytes: int, label: str) -> dict:
    return {
        "type": "line",
        "xref": "x",
        "yref": "y",
        "x0": index - 0.45,
        "x1": index + 0.45,
        "y0": gib(nbytes),
        "y1": gib(nbytes),
        "line": {"color": INK, "width": 2.5, "dash": "dash"},
        # from the line's left end rightwards: centred, a label wider than its bar's
        # slot ran past the plot's left edge and was cut ("U memory (2 GPUs)")
        "label": {
            "text": f"{label}: {gib_number(nbytes)} GiB",
            "textposition": "start",
            "xanchor": "left",
            "yanchor": "bottom",
            "font": {"size": 11, "color": INK},
        },
    }


def _capacity_hover(capacities: list[Capacity]) -> go.Scatter:
    # the dashed lines do not hover: a near-invisible marker on each one does
    return go.Scatter(
        x=[x for _, x, _, _ in capacities],
        y=[gib(nbytes) for _, _, nbytes, _ in capacities],
        text=[label for _, _, _, label in capacities],
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 1, "color": INK},
        name="capacity",
        uid="capacity",
        showlegend=False,
        hovertemplate="%{text}: %{y:.2f} GiB<extra></extra>",
    )


def budgets_figure(report: dict) -> dict | None:
    """The GPU (weights + active KV) and host RAM (reusable blocks + reserves) budgets as two
    stacked bars, each against its capacity; None without budgets."""
    budgets = report.get("budgets")
    if not budgets:
        return None
    host = (report.get("recommendation") or {}).get("host")
    fig = go.Figure()
    for bar in _budget_bars(budgets, host):
        fig.add_trace(bar)
    capacities = _capacities(budgets, host)
    fig.add_trace(_capacity_hover(capacities))
    style(
        fig,
        "Memory budgets: GPU per replica and host RAM",
        barmode="stack",
        bargap=0.35,
        xaxis={"title": {"text": ""}, "categoryorder": "array", "categoryarray": [GPU_X, HOST_X]},
        yaxis={"title": {"text": "GiB"}, "rangemode": "tozero"},
        shapes=[_capacity_line(index, nbytes, label) for index, _x, nbytes, label in capacities],
        legend=SIDE_LEGEND,
        margin={**MARGIN, "r": 200},
    )
    return to_dict(fig)


def routes_figure(report: dict) -> dict:
    """p50 / p90 / p99 / max of prompt and output tokens per model route."""
    routes = report.get("routes") or []
    labels = [r.get("route") or "(no route)" for r in routes]
    fig = panels(2, ("prompt tokens", "output tokens"), spacing=0.1)
    for col, field in ((1, "prompt_tokens"), (2, "output_tokens")):
        stats = [r.get(field) or {"count": 0} for r in routes]
        for stat, colour in STATS.items():
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
        legend=LEGEND_FOOT,
        margin=MARGIN_FOOT,
    )
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    return to_dict(fig)
