"""The hit-ratio curve's "recommended" label: at the Recommended RAM card's figure, written
as the card writes it (the x axis is RAM with headroom, and the axis's title says the
headroom, once), and never cut off at the chart's right edge: an annotation in short
lines, on the side of the point with room (left of a point in the right half of the log
axis, right of one in the left half). No database: the golden reports' curves, and one of
them with its recommended point moved to the left; the page itself in
test_curve_marks_page.py."""

from __future__ import annotations

import copy
import math

import pytest

from console.uploads.curve_charts import mrc_figure
from tests.golden.figures import reports

REPORTS = reports()
GIB = 2**30


def _note(figure: dict) -> dict:
    (note,) = [a for a in figure["layout"]["annotations"] if a["text"].startswith("recommended")]
    return note


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_label_sits_beside_its_point_on_the_side_with_room(name):
    report = REPORTS[name]
    rec = report["recommendation"]
    x = rec["ram_bytes"] / GIB
    figure = mrc_figure(report)
    # where the point lies along the log axis, from its left end to its right end
    low, high = figure["layout"]["xaxis"]["range"]
    position = (math.log10(x) - low) / (high - low)
    note = _note(figure)
    assert (note["xref"], note["yref"]) == ("x", "y")
    assert note["x"] == pytest.approx(math.log10(x))  # annotations take log10 on a log axis
    assert note["y"] == pytest.approx(rec["hit_ratio"] * 100)
    assert note["xanchor"] == ("right" if position > 0.5 else "left")
    lines = note["text"].split("<br>")
    # the card's figure, with thousands separators and two decimals, and what it buys
    assert lines == [f"recommended {x:,.2f} GiB", f"{rec['hit_ratio'] * 100:.1f} % hit"]
    assert max(len(line) for line in lines) <= 33  # a third of a chart at most


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_headroom_is_stated_once_in_the_axis_title(name):
    report = REPORTS[name]
    headroom = f"{report['recommendation']['headroom'] * 100:g} % headroom"
    figure = mrc_figure(report)
    assert headroom in figure["layout"]["xaxis"]["title"]["text"]
    texts = [a["text"] for a in figure["layout"]["annotations"]]
    texts += [t.get("name", "") + str(t.get("text", "")) for t in figure["data"]]
    assert not [t for t in texts if "headroom" in t]


def test_copies_of_a_replicas_kv_are_said_on_the_axis():
    # the variant keeping twice the model's bytes per token on its 2 TP ranks: the RAM is
    # capacity x 1.1 x 2, and the axis says so
    report = REPORTS["sample-reanalysis-budgets"]
    figure = mrc_figure(report)
    title = "host RAM for KV blocks, with 10 % headroom and ×2 KV on 2 TP ranks (log scale)"
    assert figure["layout"]["xaxis"]["title"]["text"] == title
    (curve,) = [t for t in figure["data"] if t.get("uid") == "curve"]
    assert curve["x"] == pytest.approx([p["capacity_bytes"] * 1.1 * 2 / GIB
                                        for p in report["mrc"]])  # fmt: skip


def test_a_point_in_the_left_half_is_labelled_to_its_right_and_below():
    report = copy.deepcopy(REPORTS["sample-default"])
    early = report["mrc"][3]  # the 4th of 75 log-spaced capacities: far left
    report["recommendation"].update(capacity_bytes=early["capacity_bytes"],
                                    ram_bytes=round(early["capacity_bytes"] * 1.1),
                                    hit_ratio=early["hit_ratio"])  # fmt: skip
    note = _note(mrc_figure(report))
    assert (note["xanchor"], note["yanchor"]) == ("left", "top")
    assert note["xshift"] > 0 and note["yshift"] < 0
