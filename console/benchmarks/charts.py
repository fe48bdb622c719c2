"""Plotly figures of the benchmarks wing, as plain JSON-ready dicts (console/plotting.py's
style and to_dict): the SLO matrix of one tier, p99 TTFT as load grows, and the TTFT of runs
of one schedule side by side."""

from __future__ import annotations

import plotly.graph_objects as go

from analysis.benchmarks.comparison import SideBySide
from console.log_axis import COUNT, log_axis
from console.palette import FAIL, PASS, series_colour
from console.plotting import MARGIN, style, to_dict

# green and red, kept apart from the series colours: a cell or line in these is a verdict
PASS_COLOUR, FAIL_COLOUR = PASS, FAIL


def slo_heatmap(tier: str, rows: list, concurrencies: list[int]) -> dict:
    """One tier's runs, context length (rows) x concurrency (columns), each cell coloured
    pass or fail against every objective the page checks (the cell's "misses", from
    analysis.benchmarks.slo.Slo.misses: p99 TTFT, TPOT, ITL, failed requests), as the table and
    the boundary judge it; the text shows the cell's p99 TTFT. Colouring by TTFT alone drew
    a run that breaks only the ITL objective green."""
    z, text, hover = [], [], []
    for _, cells in rows:
        z.append([None if not c else (1 if c["misses"] else 0) for c in cells])
        text.append([
            "" if not c else (f"{c['result'].p99('ttft'):,.0f} ms"
                              if c["result"].p99("ttft") is not None else "—")
            + (" ✗" if c["misses"] else " ✓")
            for c in cells
        ])  # fmt: skip
        hover.append([
            "" if not c else ("breaks " + ", ".join(c["misses"]) if c["misses"]
                              else "inside the SLO")
            for c in cells
        ])  # fmt: skip
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[str(n) for n in concurrencies],
            y=[f"{context:,}" for context, _ in rows],
            text=text,
            customdata=hover,
            texttemplate="%{text}",
            # two colours, split at the middle: 0 = inside every objective, 1 = breaks one
            colorscale=[[0, PASS_COLOUR], [0.5, PASS_COLOUR], [0.5, FAIL_COLOUR],
                        [1, FAIL_COLOUR]],
            zmin=0,
            zmax=1,
            colorbar={"title": "SLO", "tickvals": [0.25, 0.75], "ticktext": ["pass", "fail"]},
            hovertemplate="context %{y} tokens, concurrency %{x}: p99 TTFT %{text}"
                          "<br>%{customdata}<extra></extra>",
        )
    )  # fmt: skip
    style(fig, f"SLO pass / fail — {tier}", xaxis={"title": "concurrency", "type": "category"},
            yaxis={"title": "context (tokens)", "type": "category"})  # fmt: skip
    return to_dict(fig)


def ttft_by_concurrency(grid: dict, limit_ms: float | None) -> dict:
    """p99 TTFT as load grows: a line per tier and context length, the SLO as a dashed
    line (where a line crosses it is the boundary the table states)."""
    fig = go.Figure()
    concurrencies = grid["concurrencies"]
    for name, tier in grid["tiers"].items():
        for context, cells in tier["rows"]:
            pairs = zip(concurrencies, cells, strict=True)
            points = [(n, c["result"].p99("ttft")) for n, c in pairs
                      if c and c["result"].p99("ttft") is not None]  # fmt: skip
            if not points:
                continue
            label = f"{name} · {context:,} tokens"
            colour = series_colour(len(fig.data))
            fig.add_trace(go.Scatter(
                x=[n for n, _ in points], y=[v for _, v in points], mode="lines+markers",
                name=label, line={"color": colour}, marker={"color": colour},
                hovertemplate="%{fullData.name}<br>concurrency %{x}: %{y:,.0f} ms"
                "<extra></extra>"))  # fmt: skip
    if limit_ms:
        fig.add_hline(y=limit_ms, line_dash="dash", line_color=FAIL_COLOUR,
                      annotation_text=f"SLO {limit_ms:,.0f} ms")  # fmt: skip
    style(fig, "p99 TTFT as concurrency grows", showlegend=True,
            xaxis=log_axis(concurrencies, COUNT, "concurrency (log scale)"),
            yaxis={"title": "p99 TTFT (ms)"})  # fmt: skip
    return to_dict(fig)


def ttft_side_by_side(group: SideBySide) -> dict:
    """TTFT statistics of one schedule's runs as grouped bars (one bar per run)."""
    fig = go.Figure()
    names = [f"{row.run.label} · {'warm' if row.run.warm else 'cold'}" for row in group.rows]
    for i, (row, name) in enumerate(zip(group.rows, names, strict=True)):
        if names.count(name) > 1:  # two runs of one configuration: tell them apart
            name += f" · {row.run.name}"
        fig.add_trace(go.Bar(
            name=name, x=group.ttft_stats, y=[row.ttft.get(s) for s in group.ttft_stats],
            marker={"color": series_colour(i)},
            hovertemplate="%{fullData.name}<br>%{x}: %{y:,.0f} ms<extra></extra>"))  # fmt: skip
    schedule = group.schedule
    rate = "unlimited rate" if schedule.request_rate is None else f"{schedule.request_rate:g} req/s"
    style(fig, f"TTFT — {schedule.context_tokens:,} tokens, concurrency "
                 f"{schedule.concurrency}, {rate}",
            xaxis={"title": "statistic", "type": "category"}, yaxis={"title": "TTFT (ms)"},
            barmode="group", margin={**MARGIN, "b": 110},
            legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0,
                    "xanchor": "left"})  # fmt: skip
    return to_dict(fig)
