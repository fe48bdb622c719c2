"""The hit-ratio curve's "recommended" label is no longer cut off at the chart's right edge:
it is an annotation in short lines, on the side of the point with room (left of a point in
the right half of the log axis, right of one in the left half). No database: the golden
reports' curves, and one of them with its recommended point moved to the left."""

from __future__ import annotations

import copy
import math

import pytest

from console.uploads.curve_charts import mrc_figure
from tests.golden.figures import reports

REPORTS = reports()
GIB = 2**30


def _note(report: dict) -> dict:
    (note,) = mrc_figure(report)["layout"]["annotations"]
    return note


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_label_sits_beside_its_point_on_the_side_with_room(name):
    report = REPORTS[name]
    rec = report["recommendation"]
    x = rec["capacity_bytes"] / GIB
    xs = [p["capacity_bytes"] / GIB for p in report["mrc"]]
    # where the point lies along the log axis, from the curve's first to its last capacity
    position = math.log(x / xs[0]) / math.log(xs[-1] / xs[0])
    note = _note(report)
    assert (note["xref"], note["yref"]) == ("x", "y")
    assert note["x"] == pytest.approx(math.log10(x))  # annotations take log10 on a log axis
    assert note["y"] == pytest.approx(rec["hit_ratio"] * 100)
    assert note["xanchor"] == ("right" if position > 0.5 else "left")
    lines = note["text"].split("<br>")
    assert lines[0] == f"recommended {x:,.2f} GiB"  # with thousands separators, as the card
    assert lines[-1].endswith(f"→ {rec['ram_bytes'] / GIB:,.2f} GiB")
    assert max(len(line) for line in lines) <= 33  # a third of a chart at most


def test_a_point_in_the_left_half_is_labelled_to_its_right_and_below():
    report = copy.deepcopy(REPORTS["sample-default"])
    early = report["mrc"][3]  # the 4th of 75 log-spaced capacities: far left
    report["recommendation"].update(capacity_bytes=early["capacity_bytes"],
                                    hit_ratio=early["hit_ratio"])  # fmt: skip
    note = _note(report)
    assert (note["xanchor"], note["yanchor"]) == ("left", "top")
    assert note["xshift"] > 0 and note["yshift"] < 0
