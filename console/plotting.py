"""What every figure of the console shares: the layout, and the conversion of a Plotly
figure into a plain JSON-ready dict ({"data": [...], "layout": {...}}, drawn by
static/js/charts.js). The only module besides the wings' charts that imports plotly. The
colours are console.palette's; log axes are console.log_axis's."""

from __future__ import annotations

import base64
import json
from typing import Any

import plotly.graph_objects as go
from plotly.io.json import to_json_plotly
from plotly.subplots import make_subplots

from console.palette import INK, SERIES

CLASS_LABELS = {"hot": "hot", "occasional": "occasional", "one_off": "one-off"}
KINDS = ("instruction", "document", "conversation")

HEIGHT = 360
# the title sits at the top, the legend in its own line just above the plot
MARGIN = {"l": 60, "r": 20, "t": 72, "b": 56}
# every figure's legend unless it says otherwise: one line above the plot, to the right
LEGEND_TOP = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 1, "xanchor": "right"}
SIDE_LEGEND = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"}
# a figure of side-by-side panels: their titles take the top, so the legend goes in a line
# of its own at the figure's foot, under the axes' titles (the margin makes room for it)
LEGEND_FOOT = {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0.0,
               "x": 0, "xanchor": "left"}  # fmt: skip
MARGIN_FOOT = {**MARGIN, "b": 84}
PANEL_TITLE_SIZE = 13  # a panel's title: under the figure's (15), never wider than the panel


# --- serialisation ------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """Plotly >= 6 encodes numpy arrays as {"dtype", "bdata"} typed arrays: turn any such
    leftover back into plain lists so the dicts are JSON and easy to inspect."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value and set(value) <= {"bdata", "dtype", "shape"}:
            import numpy as np

            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            shape = value.get("shape")
            if shape:
                dims = [int(s) for s in str(shape).split(",")] if isinstance(shape, str) else shape
                array = array.reshape(dims)
            return array.tolist()
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def to_dict(fig: go.Figure) -> dict:
    # to_plotly_json keeps the traces' uids (fig.to_json drops them); plotly's encoder turns
    # numpy values into JSON, and plain() the typed arrays back into lists
    out = plain(json.loads(to_json_plotly(fig.to_plotly_json())))
    return {"data": out.get("data", []), "layout": out.get("layout", {})}


def style(fig: go.Figure, title: str, **kwargs: Any) -> None:
    layout = {
        "template": "plotly_white",
        "title": {
            "text": title,
            "x": 0.01,
            "xanchor": "left",
            "y": 0.98,
            "yref": "container",
            "yanchor": "top",
            "font": {"size": 15},
        },
        "height": HEIGHT,
        "margin": MARGIN,
        "legend": LEGEND_TOP,
        "font": {"size": 12, "color": INK},
        # a trace that names no colour takes the palette's, in order
        "colorway": list(SERIES),
    }
    fig.update_layout({**layout, **kwargs})
    # plotly_white turns automargin on for every axis, and each automargined axis makes
    # plotly.js lay the chart out a second time: half of a chart's drawing time. Numeric
    # axes fit the fixed margins (their ticks are short: %, GiB, 10k, and the bottom margin
    # holds a row of ticks and an axis title); category axes (route names, kinds, tiers,
    # context lengths) keep automargin, as their labels vary. And no axis measures each of
    # its tick labels to hide the ones past the chart's edge (plotly.js's default for
    # numeric axes, "hide past div": a getBoundingClientRect a label, a forced layout
    # each): the margins leave them room.
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        axis.update(automargin=category(fig, axis), ticklabeloverflow="allow")


def panels(cols: int, titles: tuple[str, ...] | list[str], spacing: float) -> go.Figure:
    """Side-by-side panels under titles of their own, in a size under the figure's title
    (make_subplots writes them at 16 px, wider than a panel of a narrow chart)."""
    fig = make_subplots(rows=1, cols=cols, subplot_titles=titles, horizontal_spacing=spacing)
    fig.update_annotations(font_size=PANEL_TITLE_SIZE)
    return fig


def category(fig: go.Figure, axis: Any) -> bool:
    """A category axis: so typed, or left to plotly.js with text on it (a bar per kind)."""
    if axis.type is not None:
        return axis.type == "category"
    letter = axis.plotly_name[0]  # "xaxis2" -> x, "2"
    ref = letter + axis.plotly_name[len("xaxis") :]
    on_axis = [t for t in fig.data if (getattr(t, f"{letter}axis", None) or letter) == ref]
    return any(isinstance(v, str) for t in on_axis for v in (getattr(t, letter, None) or ()))
