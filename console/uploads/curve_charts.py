"""The hit-ratio curve of a report, and several reports' curves compared, as Plotly figure
dicts (console.uploads.charts draws a report's whole set; its rules hold here: every number
is read from the report, converted for display only).

The curve is the total hit ratio over the capacity (GiB, log axis), drawn over a stacked
band of its two parts (metrics.md section 7) when the log names sessions: cross-session
hits (shared material) from zero, same-session hits (conversation history) on them; with
the ceiling, the infinite cache when a lifetime makes it differ, and the recommended
point.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from console.format import gib, gib_number, percent, window_name
from console.plotting import INK, LEGEND_TOP, MUTED, PALETTE, color, style, to_dict

# the hit-ratio curve's stacked band (metrics.md section 7), in the palette's colours: the
# analysis page's cards and legend use the same ones (static/css/kvscope.css)
SESSION_BAND = (
    # uid, the points' key, legend name, what it is, line colour, fill
    ("cross-session", "cross_session_hit_ratio", "cross-session", "shared material",
     PALETTE[2], "rgba(42, 157, 143, 0.5)"),
    ("same-session", "same_session_hit_ratio", "same-session", "conversation history",
     PALETTE[4], "rgba(123, 97, 201, 0.5)"),
)  # fmt: skip


def _curve_xy(report: dict) -> tuple[list[float], list[float]]:
    points = report.get("mrc") or []
    return (
        [gib(p["capacity_bytes"]) for p in points],
        [percent(p["hit_ratio"]) for p in points],
    )


def _recommended_lines(report: dict) -> list[str]:
    """What the recommended point says: the capacity, then the headroom (and the copies
    of a replica's KV, if any) that make it the RAM."""
    rec = report["recommendation"]
    # metrics.md section 8: with heads replicated (kv_heads < tp) or an MLA latent on every
    # rank the replica keeps more than the model's bytes per token; say by how much, or
    # the RAM figure would not follow from the curve's capacity
    replica = rec.get("replica_kv_bytes_per_token") or 0
    model = report.get("kv_bytes_per_token") or 0
    copies = ""
    if model and replica > model:
        copies = f", ×{replica / model:.3g} on {rec['tp']} TP ranks"
    return [
        f"recommended {gib_number(rec['capacity_bytes'])} GiB",
        f"+{percent(rec['headroom']):g}% headroom{copies}",
        f"→ {gib_number(rec['ram_bytes'])} GiB",
    ]


def _recommended_text(report: dict) -> str:
    """The recommendation in one line (the comparison's hover text)."""
    capacity, headroom, ram = _recommended_lines(report)
    return f"{capacity} ({headroom} {ram})"


def _recommended_label(report: dict) -> str:
    """The recommendation beside its point, in short lines: a third of a chart wide at
    most, so it fits on either side of the point."""
    capacity, headroom, ram = _recommended_lines(report)
    if len(headroom) + len(ram) > 32:  # with the copies of a replica: three lines
        return "<br>".join((capacity, headroom, ram))
    return f"{capacity}<br>{headroom} {ram}"


def _split_points(report: dict) -> list[dict]:
    """The curve's points when they carry the same-/cross-session split and the log names
    sessions; else none. A log without session ids (the bundled sample, Mooncake traces)
    has every request its own session: its "same-session" part is empty by construction,
    not a finding, so no band is drawn for it."""
    points = report.get("mrc") or []
    keys = [band[1] for band in SESSION_BAND]
    if not report.get("session_share") or not points:
        return []
    if any(key not in point for point in points for key in keys):
        return []  # a report stored before the split
    return points


def _curve_trace(xs: list[float], ys: list[float], split: list[dict]) -> go.Scatter:
    """The total hit ratio; with the split, its hover names both parts at that capacity
    (the same-session band's points lie on this line, so their own hover never won)."""
    hover = "%{x:.2f} GiB<br>%{y:.1f}% of prompt tokens hit"
    parts: dict = {}
    if split:  # same-session first, as the cards say it (and the band lies)
        bands = SESSION_BAND[::-1]
        parts["customdata"] = [[percent(p[band[1]]) for band in bands] for p in split]
        hover += "".join(
            f"<br>{name} ({what}): %{{customdata[{i}]:.1f}}%"
            for i, (_, _, name, what, _, _) in enumerate(bands)
        )
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines",
        name="LRU hit ratio",
        uid="curve",
        line={"color": PALETTE[0], "width": 2.5},
        hovertemplate=f"{hover}<extra></extra>",
        **parts,
    )


def _band_traces(split: list[dict], xs: list[float]) -> list[go.Scatter]:
    """The hits under the curve split by who touched the block before: cross-session hits
    (shared material) from zero, same-session hits (conversation history) stacked on them,
    so the curve drawn over them is their sum (see _split_points for when there are none).
    Each trace's y is its own share (plotly.js stacks them); listed after the curve in the
    legend, the upper one first, as they lie. Their values show in the curve's hover."""
    if not split:
        return []
    return [
        go.Scatter(
            x=xs,
            y=[percent(p[key]) for p in split],
            mode="lines",
            stackgroup="sessions",
            name=name,
            uid=uid,
            legendrank=1002 - i,
            line={"color": colour, "width": 0.5},
            fillcolor=fill,
            hoverinfo="skip",
        )
        for i, (uid, key, name, _, colour, fill) in enumerate(SESSION_BAND)
    ]


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


def _in_right_half(x: float, xs: list[float]) -> bool:
    """Whether capacity x lies in the right half of the curve's (log) axis."""
    positive = [v for v in xs if v > 0]
    if x <= 0 or len(positive) < 2 or positive[-1] <= positive[0]:
        return False
    low, high = math.log(positive[0]), math.log(positive[-1])
    return (math.log(x) - low) / (high - low) > 0.5


def _recommended_note(report: dict, xs: list[float]) -> dict:
    """The recommended point's label, an annotation beside it on a light box (readable
    over the band or the ceiling's line). Written right of the point in one line it ran
    past the chart's edge and was cut off whenever the point lay in the right half: in
    short lines it is at most a third of a chart wide, and it goes left of a point in the
    right half (at its height: the curve is lower there), right of and below a point in
    the left half (the curve is higher there)."""
    rec = report["recommendation"]
    x, y = gib(rec["capacity_bytes"]), percent(rec["hit_ratio"])
    right_half = _in_right_half(x, xs)
    return {
        "xref": "x",
        "yref": "y",
        "x": math.log10(x) if x > 0 else 0,  # (annotations take log10 on a log axis)
        "y": y,
        "text": _recommended_label(report),
        "showarrow": False,
        "xanchor": "right" if right_half else "left",
        "yanchor": "middle" if right_half else "top",
        "xshift": -10 if right_half else 8,
        "yshift": 0 if right_half else -8,
        "align": "right" if right_half else "left",
        "font": {"color": PALETTE[1], "size": 12},
        "bgcolor": "rgba(255,255,255,0.85)",
    }


def _recommended_trace(report: dict) -> go.Scatter:
    """The recommended point (its label is an annotation: see _recommended_note)."""
    rec = report["recommendation"]
    return go.Scatter(
        x=[gib(rec["capacity_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers",
        name="recommended",
        uid="recommended",
        text=[_recommended_text(report)],
        marker={"color": PALETTE[1], "size": 11, "line": {"color": "#fff", "width": 1.5}},
        cliponaxis=False,
        hovertemplate="%{text}<br>%{y:.1f}% hit<extra></extra>",
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
    split = _split_points(report)
    fig = go.Figure()
    for band in _band_traces(split, xs):  # under the curve, which is drawn over them
        fig.add_trace(band)
    fig.add_trace(_curve_trace(xs, ys, split))
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
        # in the traces' order (plotly.js lists stacked areas reversed unless told)
        legend={**LEGEND_TOP, "traceorder": "normal"},
        annotations=[_recommended_note(report, xs)],
        showlegend=True,
    )
    return to_dict(fig)


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


__all__ = ["SESSION_BAND", "compare_figure", "mrc_figure"]
