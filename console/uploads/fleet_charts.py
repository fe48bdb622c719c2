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
  block only at its second use, each with its recommended point, and both at each other's
  recommended capacity (the report's at_equal_size: only equal sizes compare the two).

A router that deals exactly as an earlier one (the report's same_partition_as) draws
nothing of its own: the earlier's legend names it ("round robin (= session)"). Each router
has one colour on every chart (ROUTER_COLOURS), whichever routers an analysis asked for.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from console.format import gib, gib_number, percent
from console.plotting import INK, LEGEND_TOP, MARGIN, PALETTE, SIDE_LEGEND, color, style, to_dict
from console.uploads.fleet_words import router_name, use_ordinal

# the load per replica's panels: the key of a replica's load, the panel's title
LOAD_PANELS = (
    ("requests", "requests"),
    ("prompt_tokens", "prompt tokens"),
    ("prefill_tokens", "prefill tokens (at the recommended size)"),
)
RECOMMENDED_MARKER = {"size": 11, "line": {"color": "#fff", "width": 1.5}}
# each router's colour, the same on every chart of every analysis
ROUTER_COLOURS = {
    "round_robin": PALETTE[0],
    "session": PALETTE[1],
    "prefix": PALETTE[2],
    "pooled": PALETTE[3],
}
OTHER_ROUTER_COLOUR = PALETTE[5]  # a router this console does not know yet
EQUAL_SIZE_MARKER = {"size": 9, "symbol": "circle-open", "line": {"width": 2}}


def router_colour(router: str) -> str:
    return ROUTER_COLOURS.get(router, OTHER_ROUTER_COLOUR)


def _drawn(routers: list[dict]) -> list[tuple[dict, str]]:
    """The routers that deal their own way, each with its legend name: the routers that
    deal alike named after it ("round robin (= session)")."""
    drawn = []
    for entry in routers:
        if entry.get("same_partition_as"):
            continue
        alike = [router_name(e["router"]) for e in routers
                 if e.get("same_partition_as") == entry["router"]]  # fmt: skip
        name = router_name(entry["router"])
        drawn.append((entry, f"{name} (= {', '.join(alike)})" if alike else name))
    return drawn


def _span(xs: list[float]) -> list[float]:
    """The leftmost and rightmost positive capacities (a log axis drops the others)."""
    positive = sorted(x for x in xs if x > 0)
    return [positive[0], positive[-1]] if positive else [1 / 1024, 1]


def _router_line(router: str) -> dict:
    """A router's line; the pooled store's dotted: it is one store, not a way to route."""
    if router == "pooled":
        return {"color": router_colour(router), "width": 2, "dash": "dot"}
    return {"color": router_colour(router), "width": 2.5}


def _router_curve(entry: dict, name: str) -> go.Scatter:
    points = entry.get("mrc") or []
    return go.Scatter(
        x=[gib(p["capacity_bytes"]) for p in points],
        y=[percent(p["hit_ratio"]) for p in points],
        customdata=[[percent(p["gpu_hit_ratio"]), percent(p["ram_hit_ratio"])] for p in points],
        mode="lines",
        name=name,
        uid=f"fleet-{entry['router']}",
        legendgroup=entry["router"],
        line=_router_line(entry["router"]),
        hovertemplate=(
            f"{name}<br>%{{x:.2f}} GiB cache per replica<br>%{{y:.1f}}% of prompt tokens hit"
            "<br>GPU %{customdata[0]:.1f}% + RAM %{customdata[1]:.1f}%<extra></extra>"
        ),
    )  # fmt: skip


def _router_recommended(entry: dict, name: str) -> go.Scatter:
    rec = entry["recommendation"]
    return go.Scatter(
        x=[gib(rec["capacity_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers",
        name=f"{name}: recommended",
        uid=f"fleet-recommended-{entry['router']}",
        legendgroup=entry["router"],
        showlegend=False,
        marker={"color": router_colour(entry["router"]), **RECOMMENDED_MARKER},
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
        title += f", stored at its {use_ordinal(fleet['store_threshold'])} use"
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
    drawn = _drawn(fleet["routers"])
    for entry, name in drawn:
        curve = _router_curve(entry, name)
        xs.extend(curve.x)
        fig.add_trace(curve)
    for entry, name in drawn:
        fig.add_trace(_router_recommended(entry, name))
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


def _load_bar(entry: dict, name: str, key: str, label: str, first: bool) -> go.Bar:
    per_replica = (entry.get("load") or {}).get("per_replica") or []
    return go.Bar(
        x=[f"{n + 1}" for n in range(len(per_replica))],
        y=[replica[key] for replica in per_replica],
        name=name,
        uid=f"load-{key}-{entry['router']}",
        legendgroup=entry["router"],
        showlegend=first,
        marker={"color": router_colour(entry["router"])},
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
        for entry, name in _drawn(fleet["routers"]):
            fig.add_trace(_load_bar(entry, name, key, label, col == 1), row=1, col=col)
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


def _equal_size_points(points: list[dict], key: str, name: str, i: int) -> go.Scatter:
    """One curve's values at the equal sizes (the report's at_equal_size)."""
    return go.Scatter(
        x=[gib(p["capacity_bytes"]) for p in points],
        y=[percent(p[key]) for p in points],
        mode="markers",
        name="at equal sizes",
        uid=f"admission-{'k' if key == 'hit_ratio' else '1'}-at-equal-size",
        legendgroup="at-equal-size",
        showlegend=key == "hit_ratio",
        marker={"color": color(i), **EQUAL_SIZE_MARKER},
        cliponaxis=False,
        hovertemplate=f"{name}<br>%{{x:.2f}} GiB: %{{y:.1f}}% hit<extra></extra>",
    )


def admission_figure(report: dict) -> dict | None:
    """The usual curve (store at first use, LRU) and the one admitting a block only at its
    second use, each with its recommended point, and both at the equal sizes; None without
    the admission curve."""
    admission = report.get("admission")
    if not admission or not report.get("mrc"):
        return None
    usual = "stored at first use (LRU)"
    k = admission["store_threshold"]
    admitted = f"stored at its {use_ordinal(k)} use (store_threshold {k})"
    fig = go.Figure()
    fig.add_trace(_admission_curve(report["mrc"], usual, "admission-1", 0))
    fig.add_trace(_admission_curve(admission["mrc"], admitted, "admission-k", 1))
    fig.add_trace(_admission_point(report["recommendation"], usual, "admission-1-recommended", 0))
    fig.add_trace(_admission_point(admission["recommendation"], admitted,
                                   "admission-k-recommended", 1))  # fmt: skip
    if equal := admission.get("at_equal_size"):
        fig.add_trace(_equal_size_points(equal, "store_every_block_hit_ratio", usual, 0))
        fig.add_trace(_equal_size_points(equal, "hit_ratio", admitted, 1))
    style(
        fig,
        "What admission recovers: storing a block only when it comes back",
        xaxis={"type": "log", "title": {"text": "cache capacity (GiB, log scale)"}},
        yaxis={"title": {"text": "token hit ratio (%)"}, "rangemode": "tozero"},
        legend={**LEGEND_TOP, "traceorder": "normal"},
        showlegend=True,
    )
    return to_dict(fig)


__all__ = [
    "LOAD_PANELS",
    "ROUTER_COLOURS",
    "admission_figure",
    "fleet_figure",
    "fleet_load_figure",
    "router_colour",
]
