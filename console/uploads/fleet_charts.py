"""The figures of a fleet and of admission (metrics.md section 8), as Plotly figure dicts
(console.uploads.charts lists them among a report's figures; its rules hold here: every
number is read from the report, converted for display only).

- the router chart: the fleet hit ratio over the host RAM per replica holding its cache,
  with headroom (log axis, as the single-cache chart's: console.uploads.ram_axis), one
  line per router (the pooled store among them), each router's recommended point (at its
  RAM per replica, read from the report), and the single-cache ceiling as a dashed
  reference;
- the load per replica: requests, prompt tokens and prefill tokens (at the recommended
  size) of each replica, grouped by router, so prefix routing's imbalance shows;
- admission: the usual curve (a block stored at its first use) beside the one storing a
  block only at its second use, each with its recommended point, and both at each other's
  recommended capacity (the report's at_equal_size: only equal sizes compare the two).

A router that deals exactly as an earlier one (the report's same_partition_as) draws
nothing of its own: the earlier's legend names it ("round robin (= session)"). Each router
has one colour on every chart (console.palette.ROUTERS), whichever routers an analysis
asked for.
"""

from __future__ import annotations

import plotly.graph_objects as go

from console.format import gib, gib_number, gib_text, percent
from console.log_axis import BYTES_IN_GIB, log_axis
from console.palette import INK, RECOMMENDED, ROUTERS, SINGLE_CACHE, router_colour
from console.plotting import LEGEND_FOOT, LEGEND_TOP, MARGIN_FOOT, panels, style, to_dict
from console.uploads.curve_charts import RECOMMENDED_MARKER
from console.uploads.fleet_words import router_name, use_ordinal
from console.uploads.ram_axis import ram_gib, ram_title

# the load per replica's panels: the key of a replica's load, the panel's title
LOAD_PANELS = (
    ("requests", "requests"),
    ("prompt_tokens", "prompt tokens"),
    ("prefill_tokens", "prefill tokens<br>(at the recommended size)"),
)
# each router's colour, the same on every chart of every analysis (the palette's)
ROUTER_COLOURS = ROUTERS
# the admission chart's two curves: the usual one is the single-cache curve
ADMISSION_COLOURS = (SINGLE_CACHE, RECOMMENDED)
EQUAL_SIZE_MARKER = {"size": 9, "symbol": "circle-open", "line": {"width": 2}}


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


def _span(axis: dict) -> list[float]:
    """A log axis's ends, in its values (its range is log10)."""
    return [10**end for end in axis["range"]]


def _router_line(router: str) -> dict:
    """A router's line; the pooled store's dotted: it is one store, not a way to route."""
    if router == "pooled":
        return {"color": router_colour(router), "width": 2, "dash": "dot"}
    return {"color": router_colour(router), "width": 2.5}


def _router_curve(report: dict, entry: dict, name: str) -> go.Scatter:
    points = entry.get("mrc") or []
    return go.Scatter(
        x=[ram_gib(report, p["capacity_bytes"]) for p in points],
        y=[percent(p["hit_ratio"]) for p in points],
        customdata=[[percent(p["gpu_hit_ratio"]), percent(p["ram_hit_ratio"])] for p in points],
        mode="lines",
        name=name,
        uid=f"fleet-{entry['router']}",
        legendgroup=entry["router"],
        line=_router_line(entry["router"]),
        hovertemplate=(
            f"{name}<br>%{{x:,.2f}} GiB of RAM per replica<br>%{{y:.1f}}% of prompt tokens hit"
            "<br>GPU %{customdata[0]:.1f}% + RAM %{customdata[1]:.1f}%<extra></extra>"
        ),
    )  # fmt: skip


def _router_recommended(entry: dict, name: str) -> go.Scatter:
    rec = entry["recommendation"]
    return go.Scatter(
        x=[gib(rec["ram_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers",
        name=f"{name}: recommended",
        uid=f"fleet-recommended-{entry['router']}",
        legendgroup=entry["router"],
        showlegend=False,
        marker={"color": router_colour(entry["router"]), **RECOMMENDED_MARKER},
        cliponaxis=False,
        text=[f"recommended {gib_text(rec['ram_bytes'])} of RAM per replica"],
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
    title = "Fleet hit ratio vs RAM per replica: "
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
    drawn = _drawn(fleet["routers"])
    for entry, name in drawn:
        fig.add_trace(_router_curve(report, entry, name))
    for entry, name in drawn:
        fig.add_trace(_router_recommended(entry, name))
    axis = log_axis([x for trace in fig.data for x in trace.x], BYTES_IN_GIB,
                    ram_title(report, "host RAM per replica"))  # fmt: skip
    fig.add_trace(_ceiling_trace(_span(axis), fleet["single_cache_ceiling"]))
    style(
        fig,
        _fleet_title(fleet),
        xaxis=axis,
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
    fig = panels(len(LOAD_PANELS), [title for _, title in LOAD_PANELS], spacing=0.08)
    for col, (key, label) in enumerate(LOAD_PANELS, start=1):
        for entry, name in _drawn(fleet["routers"]):
            fig.add_trace(_load_bar(entry, name, key, label, col == 1), row=1, col=col)
    style(
        fig,
        "Load per replica, by router",
        barmode="group",
        legend=LEGEND_FOOT,
        margin=MARGIN_FOOT,
    )
    fig.update_xaxes(title_text="replica", type="category")
    return to_dict(fig)


def _admission_curve(report: dict, points: list[dict], name: str, uid: str,
                     i: int) -> go.Scatter:  # fmt: skip
    return go.Scatter(
        x=[ram_gib(report, p["capacity_bytes"]) for p in points],
        y=[percent(p["hit_ratio"]) for p in points],
        mode="lines",
        name=name,
        uid=uid,
        line={"color": ADMISSION_COLOURS[i], "width": 2.5},
        hovertemplate=f"{name}<br>%{{x:,.2f}} GiB of RAM<br>%{{y:.1f}}% of prompt tokens hit"
        "<extra></extra>",
    )


def _admission_point(rec: dict, name: str, uid: str, i: int) -> go.Scatter:
    return go.Scatter(
        x=[gib(rec["ram_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers",
        name=f"{name}: recommended",
        uid=uid,
        showlegend=False,
        marker={"color": ADMISSION_COLOURS[i], **RECOMMENDED_MARKER},
        cliponaxis=False,
        text=[f"recommended {gib_text(rec['ram_bytes'])} of RAM"],
        hovertemplate=f"{name}<br>%{{text}}<br>%{{y:.1f}}% hit<extra></extra>",
    )  # fmt: skip


def _equal_size_points(report: dict, points: list[dict], key: str, name: str,
                       i: int) -> go.Scatter:  # fmt: skip
    """One curve's values at the equal sizes (the report's at_equal_size)."""
    return go.Scatter(
        x=[ram_gib(report, p["capacity_bytes"]) for p in points],
        y=[percent(p[key]) for p in points],
        mode="markers",
        name="at equal sizes",
        uid=f"admission-{'k' if key == 'hit_ratio' else '1'}-at-equal-size",
        legendgroup="at-equal-size",
        showlegend=key == "hit_ratio",
        marker={"color": ADMISSION_COLOURS[i], **EQUAL_SIZE_MARKER},
        cliponaxis=False,
        hovertemplate=f"{name}<br>%{{x:,.2f}} GiB of RAM: %{{y:.1f}}% hit<extra></extra>",
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
    fig.add_trace(_admission_curve(report, report["mrc"], usual, "admission-1", 0))
    fig.add_trace(_admission_curve(report, admission["mrc"], admitted, "admission-k", 1))
    fig.add_trace(_admission_point(report["recommendation"], usual, "admission-1-recommended", 0))
    fig.add_trace(_admission_point(admission["recommendation"], admitted,
                                   "admission-k-recommended", 1))  # fmt: skip
    if equal := admission.get("at_equal_size"):
        fig.add_trace(_equal_size_points(report, equal, "store_every_block_hit_ratio", usual, 0))
        fig.add_trace(_equal_size_points(report, equal, "hit_ratio", admitted, 1))
    axis = log_axis([x for trace in fig.data for x in trace.x], BYTES_IN_GIB, ram_title(report))
    style(
        fig,
        "What admission recovers: storing a block only when it comes back",
        xaxis=axis,
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
