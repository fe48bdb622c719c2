"""The reuse-time histogram's first bin, the 0 s one, is labelled and says what it holds;
its windows' names stay on the chart. No database: a histogram written by hand, shaped as
analysis.metrics.tables.reuse_histogram writes one."""

from __future__ import annotations

import math

from console.uploads.charts import SAME_INSTANT, reuse_figure

# three log-spaced bins from 1 ms to 1,000 s (the engine counts a reuse under 1 ms, 0 s
# among them, in the first one): 40 tokens at once, none within a second, 10 later
REPORT = {
    "reuse_histogram": {"edges_s": [0.001, 0.1, 10.0, 1000.0], "tokens": [40, 0, 10],
                        "first_reference_tokens": 7},
    "params": {"windows_s": [60.0, 1000.0]},
}  # fmt: skip


def test_the_first_bin_is_labelled_as_the_same_instant():
    figure = reuse_figure(REPORT)
    (label,) = [a for a in figure["layout"]["annotations"] if a["text"] == SAME_INSTANT]
    assert SAME_INSTANT == "0 s (same instant)"
    # pointing down at the top of the first bin, at the axis's left end (log10 of 1 ms)
    assert (label["x"], label["y"], label["showarrow"]) == (-3, 40, True)
    (steps,) = figure["data"]
    assert steps["customdata"] == [
        "reused at once: 0 s (same instant) to 100 ms",
        "reused after 100 ms–10 s",
        "reused after 10 s–1,000 s",
        "reused after 10 s–1,000 s",  # the outline's closing point repeats the last bin
    ]
    assert figure["layout"]["xaxis"]["range"] == [-3, 3]  # the edges, unpadded


def test_an_empty_first_bin_gets_no_label():
    report = {**REPORT, "reuse_histogram": {**REPORT["reuse_histogram"], "tokens": [0, 5, 10]}}
    texts = [a["text"] for a in reuse_figure(report)["layout"]["annotations"]]
    assert SAME_INSTANT not in texts
    assert "not shown: 7 tokens in first references (no reuse)" in texts


def test_a_window_at_the_axis_end_is_named_left_of_its_line():
    notes = {a["text"]: a for a in reuse_figure(REPORT)["layout"]["annotations"]}
    # 1 min is at (log10(60) + 3) / 6 = 80 % of the axis: named to its right; 1,000 s is
    # its right end
    assert (notes["1 min"]["xanchor"], notes["1 min"]["x"]) == ("left", math.log10(60))
    assert notes["1000 s"]["xanchor"] == "right" and notes["1000 s"]["xshift"] < 0
