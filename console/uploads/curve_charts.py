"""The hit-ratio curve of a report, and several reports' curves compared, as Plotly figure
dicts (console.uploads.charts draws a report's whole set; its rules hold here: every number
is read from the report, converted for display only).

The curve is the total hit ratio over the host RAM holding the cache, with headroom (log
axis, console.uploads.ram_axis: the recommended point sits at the Recommended RAM card's
figure), drawn over a stacked band of its two parts (metrics.md section 7) when the log
names sessions: cross-session hits (shared material) from zero, same-session hits
(conversation history) on them; with the ceiling, the infinite cache when a lifetime
makes it differ, the recommended point, the knee and what each budget buys
(console.uploads.curve_marks).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from console.format import gib, gib_text, percent, percent_text, window_name
from console.log_axis import BYTES_IN_GIB, log_axis
from console.palette import (
    CROSS_SESSION,
    CROSS_SESSION_FILL,
    INK,
    LABEL_BOX,
    MUTED,
    RECOMMENDED,
    SAME_SESSION,
    SAME_SESSION_FILL,
    SINGLE_CACHE,
    UNRESOLVED,
    WHITE,
    series_colour,
)
from console.plotting import LEGEND_TOP, style, to_dict
from console.uploads.curve_marks import (
    Mark,
    curve_marks,
    mark_label,
    mark_line,
    mark_trace,
    y_top,
)
from console.uploads.curve_words import sampling_words
from console.uploads.ram_axis import headroom, ram_gib, ram_title

# the hit-ratio curve's stacked band (metrics.md section 7), in the palette's colours: the
# analysis page's cards and legend use the same ones (static/css/kvscope.css)
SESSION_BAND = (
    # uid, the points' key, legend name, what it is, line colour, fill
    ("cross-session", "cross_session_hit_ratio", "cross-session", "shared material",
     CROSS_SESSION, CROSS_SESSION_FILL),
    ("same-session", "same_session_hit_ratio", "same-session", "conversation history",
     SAME_SESSION, SAME_SESSION_FILL),
)  # fmt: skip
RECOMMENDED_MARKER = {"size": 11, "line": {"color": WHITE, "width": 1.5}}


def _curve_xy(report: dict) -> tuple[list[float], list[float]]:
    points = report.get("mrc") or []
    return (
        [ram_gib(report, p["capacity_bytes"]) for p in points],
        [percent(p["hit_ratio"]) for p in points],
    )


def _recommended_lines(report: dict) -> list[str]:
    """What the recommended point says: the RAM as the Recommended RAM card writes it
    (the axis's title states the headroom), and the hit ratio it buys."""
    rec = report["recommendation"]
    return [f"recommended {gib_text(rec['ram_bytes'])}", f"{percent_text(rec['hit_ratio'])} hit"]


def _recommended_text(report: dict) -> str:
    """The recommendation in one line (the hover text)."""
    return ", ".join(_recommended_lines(report))


def _recommended_label(report: dict) -> str:
    """The recommendation beside its point, in short lines: a third of a chart wide at
    most, so it fits on either side of the point."""
    return "<br>".join(_recommended_lines(report))


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
    hover = "%{x:,.2f} GiB of RAM<br>%{y:.1f}% of prompt tokens hit"
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
        line={"color": SINGLE_CACHE, "width": 2.5},
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
        x=[ram_gib(report, p["capacity_bytes"]) for p in unresolved],
        y=[percent(p["hit_ratio"]) for p in unresolved],
        mode="markers",
        name=f"unresolved (sampled at {report.get('mrc_sampling_rate'):g})",
        uid="unresolved",
        marker={"color": UNRESOLVED, "symbol": "x", "size": 6},
        hovertemplate="%{x:,.2f} GiB: below 100/R slots, not resolved<extra></extra>",
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


def in_right_half(x: float, axis: dict) -> bool:
    """Whether x (GiB) lies in the right half of a log axis (its range is log10)."""
    low, high = axis["range"]
    return x > 0 and (math.log10(x) - low) / (high - low) > 0.5


def _recommended_note(report: dict, axis: dict) -> dict:
    """The recommended point's label, an annotation beside it on a light box (readable
    over the band or the ceiling's line). Written right of the point in one line it ran
    past the chart's edge and was cut off whenever the point lay in the right half: in
    short lines it is at most a third of a chart wide, and it goes left of a point in the
    right half (at its height: the curve is lower there), right of and below a point in
    the left half (the curve is higher there)."""
    rec = report["recommendation"]
    x, y = gib(rec["ram_bytes"]), percent(rec["hit_ratio"])
    right_half = in_right_half(x, axis)
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
        "font": {"color": RECOMMENDED, "size": 12},
        "bgcolor": LABEL_BOX,
    }


def _recommended_trace(report: dict) -> go.Scatter:
    """The recommended point, at the recommendation's RAM (its label is an annotation:
    see _recommended_note)."""
    rec = report["recommendation"]
    return go.Scatter(
        x=[gib(rec["ram_bytes"])],
        y=[percent(rec["hit_ratio"])],
        mode="markers",
        name="recommended",
        uid="recommended",
        showlegend=False,  # labelled beside it
        text=[_recommended_text(report)],
        marker={"color": RECOMMENDED, **RECOMMENDED_MARKER},
        cliponaxis=False,
        hovertemplate="%{text}<extra></extra>",
    )


def _level_traces(report: dict, axis: dict) -> list[go.Scatter]:
    """The ceiling the recommendation aims under, and the infinite-cache hit ratio when a
    lifetime makes the two differ, across the whole axis."""
    rec = report["recommendation"]
    span = [10**end for end in axis["range"]]
    lifetime = rec.get("lifetime_s")
    ceiling_name = "ceiling" if lifetime is None else f"ceiling (lifetime {window_name(lifetime)})"
    ceiling_line = {"color": INK, "dash": "dash", "width": 1.5}
    traces = [_level_trace(span, rec["ceiling"], ceiling_name, "ceiling", ceiling_line)]
    infinite = report.get("infinite_hit_ratio")
    if infinite is not None and abs(infinite - rec["ceiling"]) > 1e-12:
        infinite_line = {"color": MUTED, "dash": "dot", "width": 1.5}
        traces.append(_level_trace(span, infinite, "infinite cache", "infinite", infinite_line))
    return traces


def _marks_layout(report: dict, marks: list[Mark], axis: dict) -> dict:
    """The knee's and the budgets' lines, markers and labels, and the y axis with a row
    for each label above the ceiling (console.uploads.curve_marks)."""
    rec = report["recommendation"]
    highest = percent(max(rec["ceiling"], report.get("infinite_hit_ratio") or 0))
    top = y_top(marks, highest)
    yaxis = {"title": {"text": "token hit ratio (%)"}, "rangemode": "tozero"}
    if top is not None:
        yaxis["range"] = [0, top]
    return {
        "traces": [mark_trace(mark) for mark in marks],
        "shapes": [mark_line(mark, row) for row, mark in enumerate(marks) if mark.x > 0],
        "annotations": [
            mark_label(mark, row, in_right_half(mark.x, axis)) for row, mark in enumerate(marks)
        ],
        "yaxis": yaxis,
    }


def mrc_figure(report: dict) -> dict:
    """The hit-ratio curve: token hit ratio (%) vs the host RAM holding the cache, with
    headroom (log axis), with the ceiling the recommendation aims under (the hit ratio of
    an unbounded cache within the block lifetime, if any), the infinite-cache hit ratio
    when a lifetime makes it differ, the recommended point, the knee and the budgets."""
    xs, ys = _curve_xy(report)
    marks = curve_marks(report)
    rec_x = gib(report["recommendation"]["ram_bytes"])
    axis = log_axis([*xs, rec_x, *(m.x for m in marks)], BYTES_IN_GIB, ram_title(report))
    split = _split_points(report)
    fig = go.Figure()
    for band in _band_traces(split, xs):  # under the curve, which is drawn over them
        fig.add_trace(band)
    fig.add_trace(_curve_trace(xs, ys, split))
    unresolved = [p for p in report["mrc"] if p.get("resolved") is False]
    if unresolved:  # a SHARDS-sampled curve is noise below 100 / R slots: say so on it
        fig.add_trace(_unresolved_trace(report, unresolved))
    for trace in _level_traces(report, axis):
        fig.add_trace(trace)
    extra = _marks_layout(report, marks, axis)
    for trace in [*extra["traces"], _recommended_trace(report)]:
        fig.add_trace(trace)
    # the curve's one name on every page and download: the hit-ratio curve
    title = f"Hit-ratio curve ({sampling_words(report)})"
    style(
        fig,
        title,
        xaxis=axis,
        yaxis=extra["yaxis"],
        # in the traces' order (plotly.js lists stacked areas reversed unless told)
        legend={**LEGEND_TOP, "traceorder": "normal"},
        shapes=extra["shapes"],
        annotations=[*extra["annotations"], _recommended_note(report, axis)],
        showlegend=True,
    )
    return to_dict(fig)


def _compared_title(reports: list[dict]) -> str:
    """The compare chart's axis title: the headroom once when the analyses share it."""
    if len({headroom(r) for r in reports}) == 1:
        return ram_title(reports[0], "host RAM for KV blocks")
    return "host RAM for KV blocks, with each analysis's headroom (log scale)"


def _compared_traces(i: int, label: str, report: dict) -> list[go.Scatter]:
    """One analysis's curve and its recommended point, in its colour."""
    colour = series_colour(i)
    xs, ys = _curve_xy(report)
    rec = report["recommendation"]
    curve = go.Scatter(
        x=xs, y=ys, mode="lines", name=label, uid=f"curve-{i}", legendgroup=f"r{i}",
        line={"color": colour, "width": 2},
        hovertemplate="%{fullData.name}<br>%{x:,.2f} GiB of RAM<br>"
                      "%{y:.1f}% of prompt tokens hit<extra></extra>",
    )  # fmt: skip
    point = go.Scatter(
        x=[gib(rec["ram_bytes"])], y=[percent(rec["hit_ratio"])], mode="markers",
        name=f"{label}: recommended", uid=f"recommended-{i}", legendgroup=f"r{i}",
        showlegend=False, marker={"color": colour, **RECOMMENDED_MARKER},
        text=[_recommended_text(report)], meta=[label], cliponaxis=False,
        hovertemplate="%{meta[0]}<br>%{text}<extra></extra>",
    )  # fmt: skip
    return [curve, point]


def compare_figure(items: list[tuple[str, dict]]) -> dict:
    """The hit-ratio curves of several reports overlaid, each with its recommended point,
    over the RAM holding each one's cache with its own headroom."""
    fig = go.Figure()
    for i, (label, report) in enumerate(items):
        for trace in _compared_traces(i, label, report):
            fig.add_trace(trace)
    xs = [x for trace in fig.data for x in trace.x]
    style(
        fig,
        "Hit-ratio curves, compared",
        xaxis=log_axis(xs, BYTES_IN_GIB, _compared_title([r for _, r in items])),
        yaxis={"title": {"text": "token hit ratio (%)"}, "rangemode": "tozero"},
        legend={
            "orientation": "v",
            "x": 0.01,
            "xanchor": "left",
            "y": 0.99,
            "yanchor": "top",
            "bgcolor": LABEL_BOX,
        },
        showlegend=True,
    )
    return to_dict(fig)


__all__ = ["RECOMMENDED_MARKER", "SESSION_BAND", "compare_figure", "in_right_half", "mrc_figure"]
