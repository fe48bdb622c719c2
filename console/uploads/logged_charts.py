"""The figure of what the logged engine reused beside kvscope's prediction (#18; the
report's logged_cache): the two shares over time, and per request (a sample) the hit
tokens kvscope predicts against the cached tokens the engine reported, on the line where
they agree. Every number is read from the report, converted for display only."""

from __future__ import annotations

import plotly.graph_objects as go

from console.format import percent
from console.palette import MUTED, RECOMMENDED, SINGLE_CACHE
from console.plotting import LEGEND_FOOT, MARGIN_FOOT, panels, style, to_dict

MEASURED, PREDICTED = SINGLE_CACHE, RECOMMENDED  # the engine's figures, and kvscope's


def logged_cache_figure(report: dict) -> dict | None:
    """None without a logged_cache section, or without a prediction to set beside it."""
    logged = report.get("logged_cache")
    if not logged or not logged.get("predicted"):
        return None
    fig = panels(2, ("cached share of prompt tokens over time",
                     "per request: predicted vs reported hit tokens"), 0.12)  # fmt: skip
    series = logged["series"]
    for name, key, colour in (("reported by the engine", "measured", MEASURED),
                              ("predicted by kvscope", "predicted", PREDICTED)):  # fmt: skip
        fig.add_trace(go.Scatter(
            x=series["t_s"], y=[None if v is None else percent(v) for v in series[key]],
            mode="lines+markers", name=name, line={"color": colour}, connectgaps=False,
            hovertemplate="%{y:.1f} %<extra>" + name + "</extra>"), row=1, col=1)  # fmt: skip
    sample = logged["sample"]
    top = max([*sample["measured_tokens"], *sample["predicted_tokens"], 1])
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="agreement",
                             line={"color": MUTED, "dash": "dot"}, hoverinfo="skip"),
                  row=1, col=2)  # fmt: skip
    fig.add_trace(go.Scatter(
        x=sample["predicted_tokens"], y=sample["measured_tokens"], mode="markers",
        name="a request", marker={"color": MEASURED, "size": 5, "opacity": 0.6},
        customdata=sample["request"],
        hovertemplate="request %{customdata}: predicted %{x:,} · reported %{y:,}<extra></extra>",
    ), row=1, col=2)  # fmt: skip
    style(fig, "What the engine reported reusing, and kvscope's prediction",
          legend=LEGEND_FOOT, margin=MARGIN_FOOT)  # fmt: skip
    fig.update_xaxes(title_text="seconds from the log's first request", row=1, col=1)
    fig.update_yaxes(title_text="hit ratio (%)", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="predicted hit tokens", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(title_text="cached tokens reported", rangemode="tozero", row=1, col=2)
    return to_dict(fig)
