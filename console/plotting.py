"""What every figure of the console shares: the palette, the layout, and the conversion of a
Plotly figure into a plain JSON-ready dict ({"data": [...], "layout": {...}}, drawn by
static/js/charts.js). The only module besides the wings' charts that imports plotly."""

from __future__ import annotations

import base64
import json
from typing import Any

import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

# colours: accent first (the console's --accent), then distinguishable, colour-blind-safe-ish
PALETTE = ("#2f6fdf", "#e07b39", "#2a9d8f", "#c2417a", "#7b61c9", "#8a6d3b", "#5c6778")
INK = "#1d2430"
MUTED = "#5c6778"
CLASS_COLOURS = {"hot": "#d1495b", "occasional": "#edae49", "one_off": "#8d99ae"}
CLASS_LABELS = {"hot": "hot", "occasional": "occasional", "one_off": "one-off"}
KINDS = ("instruction", "document", "conversation")
STAT_COLOURS = {"p50": PALETTE[0], "p90": PALETTE[2], "p99": PALETTE[1], "max": PALETTE[3]}

HEIGHT = 360
# the title sits at the top, the legend in its own line just above the plot
MARGIN = {"l": 60, "r": 20, "t": 72, "b": 56}
# every figure's legend unless it says otherwise: one line above the plot, to the right
LEGEND_TOP = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 1, "xanchor": "right"}
SIDE_LEGEND = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"}


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


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


def category(fig: go.Figure, axis: Any) -> bool:
    """A category axis: so typed, or left to plotly.js with text on it (a bar per kind)."""
    if axis.type is not None:
        return axis.type == "category"
    letter = axis.plotly_name[0]  # "xaxis2" -> x, "2"
    ref = letter + axis.plotly_name[len("xaxis") :]
    on_axis = [t for t in fig.data if (getattr(t, f"{letter}axis", None) or letter) == ref]
    return any(isinstance(v, str) for t in on_axis for v in (getattr(t, letter, None) or ()))
