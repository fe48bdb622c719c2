"""The figures of a fleet and of admission (metrics.md section 8), as Plotly figure dicts
(console.uploads.charts lists them among a report's figures; its rules hold here: every
number is read from the report, converted for display only).

- the router chart: the fleet hit ratio over the cache capacity per replica (GiB, log
  axis: the report's `capacity_bytes`, before headroom, as the single-cache chart's), one
  line per router (the pooled store among them), each router's recommended point (its
  capacity and the RAM per replica with headroom, both read from the report), and the
  single-cache ceiling as a dashed reference;
- the load per replica: requests, prompt tokens and prefill tokens (at the recommended
  size) of each replica, grouped by router, so prefix routing's imbalance shows;
- admission: the usual curve (a block stored at its first use) beside the one storing a
  block only at its second use, each with its recommended point.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from console.format import gib, gib_number, percent
from console.plotting import INK, LEGEND_TOP, MARGIN, SIDE_LEGEND, color, style, to_dict
from console.uploads.fleet_words import router_name

# the load per replica's panels: the key of a replica's load, the panel's title
LOAD_PANELS = (
    ("requests", "requests"),
    ("prompt_tokens", "prompt tokens"),
    ("prefill_tokens", "prefill tokens (at the recommended size)"),
)
RECOMMENDED_MARKER = {"size": 11, "line": {"color": "#fff", "width": 1.5}}


def _span(xs: list[float]) -> list[float]:
    """The leftmost and rightmost positive capacities (a log axis drops the others)."""
    positive = sorted(x for x in xs if x > 0)
    return [positive[0], positive[-1]] if positive else [1 / 1024, 1]


def _router_line(i: int, router: str) -> dict:
    """A router's line; the pooled store's dotted: it is one store, not a way to route."""
    if router == "pooled":
        return {"color": color(i), "width": 2, "dash": "dot"}
    return {"color": color(i), "width": 2.5}


def _router_curve(i: int, entry: dict) -> go.Scatter:
    name = router_name(entry["router"])
    points = entry.get("mrc") or []
    return go.Scatter(
        x=[gib(p["capacity_bytes"]) for p in points],
        y=[percent(p["hit_ratio"]) for p in points],
        customdata=[[percent(p["gpu_hit_ratio"]), percent(p["ram_hit_ratio"])] for p in points],
        mode="lines",
        name=name,
        uid=f"fleet-{entry['router']}",
        legendgroup=entry["router"],
        line=_router_line(i, entry["router"]),
        hovertemplate=(
            f"{name}<br>%{{x:.2f}} GiB cache per replica<br>%{{y:.1f}}% of prompt tokens hit"
            "<br>GPU %{customdata[0]:.1f}% + RAM %{customdata[1]:.1f}%<extra></extra>"
        ),
    )  # fmt: skip


def _router_recommended(i: int, entry: dict) -> go.Scatter:
    rec, name = entry["recommendation"], router_name(entry["router"])
    return go.Scatter(
        x=[gib(rec["capacity_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers",
        name=f"{name}: recommended",
        uid=f"fleet-recommended-{entry['router']}",
        legendgroup=entry["router"],
        showlegend=False,
        marker={"color": color(i), **RECOMMENDED_MARKER},
        cliponaxis=False,
        text=[f"recommended {gib_number(rec['capacity_bytes'])} GiB cache capacity per replica"
              f"<br>→ {gib_number(rec['ram_bytes'])} GiB RAM per replica with headroom"],
        hovertemplate=f"{name}<br>%{{text}}<br>%{{y:.1f}}% hit<extra></extra>",
    )  # fmt: skip


def _ceiling_trace(span: list[float], ratio: float) -> go.Scatter:
    name = "single-cache ceiling"
    return go.Scatter(
        x=span,
        y=[percent(ratio)] * 2,
        mode="lines",
        name=name,
        uid="single-cache-ceiling",
        line={"color": INK, "dash": "dash", "width": 1.5},
        hovertemplate=f"{name}: %{{y:.1f}}%<extra></extra>",
    )


def _fleet_title(fleet: dict) -> str:
    replicas = fleet["replicas"]
    title = "Fleet hit ratio vs cache capacity per replica: "
    title += f"{replicas} replica{'s' * (replicas != 1)}"
    if fleet.get("gpu_cache_bytes"):
        title += f", {gib_number(fleet['gpu_cache_bytes'])} GiB GPU cache each"
    if fleet.get("store_threshold", 1) != 1:
        title += f", stored at use {fleet['store_threshold']}"
    if not fleet.get("exact", True):
        title += f" (sampled at {percent(fleet['sampling_rate']):g}%)"
    return title


def fleet_figure(report: dict) -> dict | None:
    """The router chart; None when the analysis asked for no fleet."""
    fleet = report.get("fleet")
    if not fleet:
        return None
    fig = go.Figure()
    xs: list[float] = []
    for i, entry in enumerate(fleet["routers"]):
        curve = _router_curve(i, entry)
        xs.extend(curve.x)
        fig.add_trace(curve)
    for i, entry in enumerate(fleet["routers"]):
        fig.add_trace(_router_recommended(i, entry))
    fig.add_trace(_ceiling_trace(_span(xs), fleet["single_cache_ceiling"]))
    style(
        fig,
        _fleet_title(fleet),
        xaxis={
            "type": "log",
            "title": {"text": "cache capacity per replica, before headroom (GiB, log scale)"},
        },
        yaxis={"title": {"text": "fleet token hit ratio (%)"}, "rangemode": "tozero"},
        legend={**LEGEND_TOP, "traceorder": "normal"},
        showlegend=True,
    )
    return to_dict(fig)


def _load_bar(i: int, entry: dict, key: str, label: str, first: bool) -> go.Bar:
    per_replica = (entry.get("load") or {}).get("per_replica") or []
    name = router_name(entry["router"])
    return go.Bar(
        x=[f"{n + 1}" for n in range(len(per_replica))],
        y=[replica[key] for replica in per_replica],
        name=name,
        uid=f"load-{key}-{entry['router']}",
        legendgroup=entry["router"],
        showlegend=first,
        marker={"color": color(i)},
        hovertemplate=f"{name}, replica %{{x}}<br>%{{y:,}} {label}<extra></extra>",
    )


def fleet_load_figure(report: dict) -> dict | None:
    """Requests, prompt tokens and prefill tokens per replica, bars grouped by router;
    None without a fleet."""
    fleet = report.get("fleet")
    if not fleet:
        return None
    fig = make_subplots(
        rows=1,
        cols=len(LOAD_PANELS),
        subplot_titles=[title for _, title in LOAD_PANELS],
        horizontal_spacing=0.08,
    )
    for col, (key, label) in enumerate(LOAD_PANELS, start=1):
        for i, entry in enumerate(fleet["routers"]):
            fig.add_trace(_load_bar(i, entry, key, label, col == 1), row=1, col=col)
    style(
        fig,
        "Load per replica, by router",
        barmode="group",
        legend=SIDE_LEGEND,
        margin={**MARGIN, "r": 130},
    )
    fig.update_xaxes(title_text="replica", type="category")
    return to_dict(fig)


def _admission_curve(points: list[dict], name: str, uid: str, i: int) -> go.Scatter:
    return go.Scatter(
        x=[gib(p["capacity_bytes"]) for p in points],
        y=[percent(p["hit_ratio"]) for p in points],
        mode="lines",
        name=name,
        uid=uid,
        line={"color": color(i), "width": 2.5},
        hovertemplate=f"{name}<br>%{{x:.2f}} GiB<br>%{{y:.1f}}% of prompt tokens hit"
        "<extra></extra>",
    )


def _admission_point(rec: dict, name: str, uid: str, i: int) -> go.Scatter:
    return go.Scatter(
        x=[gib(rec["capacity_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers",
        name=f"{name}: recommended",
        uid=uid,
        showlegend=False,
        marker={"color": color(i), **RECOMMENDED_MARKER},
        cliponaxis=False,
        text=[f"recommended {gib_number(rec['capacity_bytes'])} GiB "
              f"→ {gib_number(rec['ram_bytes'])} GiB RAM"],
        hovertemplate=f"{name}<br>%{{text}}<br>%{{y:.1f}}% hit<extra></extra>",
    )  # fmt: skip


def admission_figure(report: dict) -> dict | None:
    """The usual curve (store at first use, LRU) and the one admitting a block only at its
    second use, each with its recommended point; None without the admission curve."""
    admission = report.get("admission")
    if not admission or not report.get("mrc"):
        return None
    usual = "stored at first use (LRU)"
    k = admission["store_threshold"]
    admitted = f"stored at use {k} (store_threshold {k})"
    fig = go.Figure()
    fig.add_trace(_admission_curve(report["mrc"], usual, "admission-1", 0))
    fig.add_trace(_admission_curve(admission["mrc"], admitted, "admission-k", 1))
    fig.add_trace(_admission_point(report["recommendation"], usual, "admission-1-recommended", 0))
    fig.add_trace(_admission_point(admission["recommendation"], admitted,
                                   "admission-k-recommended", 1))  # fmt: skip
    style(
        fig,
        "What admission recovers: storing a block only when it comes back",
        xaxis={"type": "log", "title": {"text": "cache capacity (GiB, log scale)"}},
        yaxis={"title": {"text": "token hit ratio (%)"}, "rangemode": "tozero"},
        legend={**LEGEND_TOP, "traceorder": "normal"},
        showlegend=True,
    )
    return to_dict(fig)


__all__ = ["LOAD_PANELS", "admission_figure", "fleet_figure", "fleet_load_figure"]
