"""What the hit-ratio curve marks besides its recommended point (metrics.md section 9): the
knee, where doubling the cache stops buying knee_gain of hit ratio, and what each budget
buys (every budget entered, and the host's RAM less its reserves), also, and above all,
when the recommendation does not fit in it.

Each mark is a vertical line from the axis up to its label, a marker on the curve, and the
label: "host budget: 14.2 % at 1,024.00 GiB". The labels sit in rows of their own in a band
above the ceiling (the y axis is stretched to make room), so they never overlap the curve,
the recommended point's label or each other. Every figure is the report's: a budget is
drawn at its RAM (at_budget's ram_bytes) with the hit ratio its capacity buys, the knee at
the RAM holding its capacity (console.uploads.ram_axis, the axis's unit)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go

from console.format import gib, gib_text, percent, percent_text
from console.palette import BUDGET, KNEE, LABEL_BOX, WHITE
from console.uploads.ram_axis import ram_factor

ROW = 0.085  # a label row's height, as a share of the plot's (two rows: 40 px of 232)
BAND_GAP = 0.03  # between the highest level (the ceiling) and the lowest label row
SOURCE_NAMES = {"budget": "budget", "host": "host budget"}


@dataclass(frozen=True)
class Mark:
    """One labelled vertical line on the curve."""

    uid: str
    label: str  # "host budget: 14.2 % at 1,024.00 GiB"
    x: float  # GiB of RAM (the axis's values); 0 for a budget holding nothing
    hit_ratio: float
    colour: str
    dash: str
    symbol: str


def knee_mark(report: dict) -> Mark | None:
    knee = report.get("knee")
    if not knee:
        return None
    # the engine's own RAM for it (as the first screen's card); older reports: converted
    ram = knee.get("ram_bytes") or knee["capacity_bytes"] * ram_factor(report)
    label = f"knee: {percent_text(knee['hit_ratio'])} at {gib_text(ram)}"
    return Mark("knee", label, gib(ram), knee["hit_ratio"], KNEE, "dot", "diamond")


def budget_marks(report: dict) -> list[Mark]:
    """One mark per at_budget entry, in the report's order (entered budgets, the host's)."""
    marks = []
    for i, entry in enumerate(report.get("at_budget") or []):
        name = SOURCE_NAMES.get(entry["source"], entry["source"])
        ram = entry["ram_bytes"]
        if ram > 0:
            label = f"{name}: {percent_text(entry['hit_ratio'])} at {gib_text(ram)}"
        else:  # reserves as large as the host's RAM: nothing left for KV blocks
            label = f"{name}: {percent_text(entry['hit_ratio'])}, no RAM left after reserves"
        uid = "at-host-budget" if entry["source"] == "host" else f"at-budget-{i}"
        marks.append(Mark(uid, label, gib(max(ram, 0)), entry["hit_ratio"], BUDGET,
                          "dash", "square"))  # fmt: skip
    return marks


def curve_marks(report: dict) -> list[Mark]:
    """The knee and the budgets, left to right (their label rows go down in that order)."""
    knee = knee_mark(report)
    return sorted([*([knee] if knee else []), *budget_marks(report)], key=lambda m: m.x)


def y_top(marks: list[Mark], highest: float) -> float | None:
    """The y axis's top (%) leaving a row per label above `highest` (%); None without
    marks (the axis ranges itself)."""
    if not marks:
        return None
    band = BAND_GAP + ROW * len(marks)
    return max(highest, 1.0) / (1 - band)


def _row_y(row: int) -> float:
    return 1 - ROW * row


def mark_trace(mark: Mark) -> go.Scatter:
    return go.Scatter(
        x=[mark.x],
        y=[percent(mark.hit_ratio)],
        mode="markers",
        name=mark.label,
        uid=mark.uid,
        showlegend=False,
        marker={"color": mark.colour, "size": 9, "symbol": mark.symbol,
                "line": {"color": WHITE, "width": 1}},
        cliponaxis=False,
        hovertemplate=f"{mark.label}<extra></extra>",
    )  # fmt: skip


def mark_line(mark: Mark, row: int) -> dict:
    """From the axis up to the label's row (shapes take data values on a log axis)."""
    return {"type": "line", "xref": "x", "yref": "paper", "x0": mark.x, "x1": mark.x,
            "y0": 0, "y1": _row_y(row), "line": {"color": mark.colour, "dash": mark.dash,
                                                 "width": 1.5}}  # fmt: skip


def mark_label(mark: Mark, row: int, right_half: bool) -> dict:
    """The label at the top of its line, on the side with room: left of a line in the
    right half of the axis, right of one in the left half. A budget holding nothing has
    no line: its label starts at the axis's left edge."""
    common = {"yref": "paper", "y": _row_y(row), "yanchor": "top", "showarrow": False,
              "text": mark.label, "font": {"color": mark.colour, "size": 11},
              "bgcolor": LABEL_BOX}  # fmt: skip
    if mark.x <= 0:
        return {**common, "xref": "paper", "x": 0, "xanchor": "left", "xshift": 4}
    return {**common, "xref": "x", "x": math.log10(mark.x),  # annotations take log10
            "xanchor": "right" if right_half else "left",
            "xshift": -4 if right_half else 4}  # fmt: skip


__all__ = ["Mark", "budget_marks", "curve_marks", "knee_mark", "mark_label", "mark_line",
           "mark_trace", "y_top"]  # fmt: skip
