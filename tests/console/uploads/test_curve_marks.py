"""The knee and what each budget buys, marked on the hit-ratio curve (metrics.md section 9),
on a small report written by hand: every position and label below is worked out from its
numbers. No database."""

from __future__ import annotations

import copy
import itertools
import math

import pytest

from console.uploads.curve_charts import mrc_figure

GIB = 2**30
# five points at 1, 2, 4, 8 and 16 GiB of cache; a headroom of 25 % (exact in binary), so
# the RAM holding c GiB is 1.25 c GiB: 1.25, 2.5, 5, 10 and 20 GiB
REPORT = {
    "kv_bytes_per_token": 131072,
    "infinite_hit_ratio": 0.6,
    "mrc": [
        {"capacity_slots": n, "capacity_bytes": n * GIB, "hit_ratio": h}
        for n, h in ((1, 0.1), (2, 0.2), (4, 0.3), (8, 0.5), (16, 0.6))
    ],
    "recommendation": {
        "capacity_bytes": 16 * GIB,
        "capacity_slots": 16,
        "ram_bytes": 20 * GIB,
        "hit_ratio": 0.6,
        "ceiling": 0.6,
        "target": 0.9,
        "headroom": 0.25,
        "tp": 1,
        "lifetime_s": None,
        "replica_kv_bytes_per_token": 131072,
        # a host of 4 GiB, 1.5 GiB of it reserved: 2.5 GiB for KV, short of 20 GiB
        "host": {
            "host_ram_bytes": 4 * GIB,
            "reserves_bytes": {"os": 3 * GIB // 2},
            "available_bytes": 5 * GIB // 2,
            "fits": False,
            "spare_bytes": -35 * GIB // 2,
        },
    },
    "knee": {"capacity_bytes": 8 * GIB, "capacity_slots": 8, "hit_ratio": 0.5},
    "at_budget": [
        # a budget of 5 GiB holds 5 / 1.25 = 4 GiB of cache: 30 %
        {
            "source": "budget",
            "ram_bytes": 5 * GIB,
            "capacity_slots": 4,
            "capacity_bytes": 4 * GIB,
            "hit_ratio": 0.3,
        },
        # the host's 2.5 GiB holds 2 GiB: 20 %
        {
            "source": "host",
            "ram_bytes": 5 * GIB // 2,
            "capacity_slots": 2,
            "capacity_bytes": 2 * GIB,
            "hit_ratio": 0.2,
        },
    ],
}


def _trace(figure: dict, uid: str) -> dict:
    (found,) = [t for t in figure["data"] if t.get("uid") == uid]
    return found


def _labels(figure: dict) -> dict[str, dict]:
    return {a["text"]: a for a in figure["layout"]["annotations"]}


def test_the_knee_and_the_budgets_are_at_the_reports_values():
    figure = mrc_figure(REPORT)
    knee, budget, host = (_trace(figure, uid) for uid in ("knee", "at-budget-0",
                                                          "at-host-budget"))  # fmt: skip
    assert (knee["x"], knee["y"]) == ([10.0], [50.0])  # 8 GiB of cache in 10 GiB of RAM
    assert (budget["x"], budget["y"]) == ([5.0], [30.0])
    assert (host["x"], host["y"]) == ([2.5], [20.0])
    # each lies on the curve: the curve's point of the same capacity is at the same place
    curve = _trace(figure, "curve")
    assert list(zip(curve["x"], curve["y"], strict=True)) == [
        (1.25, 10.0), (2.5, 20.0), (5.0, 30.0), (10.0, 50.0), (20.0, 60.0)]  # fmt: skip
    labels = _labels(figure)
    assert set(labels) >= {"knee: 50.0 % at 10.00 GiB", "budget: 30.0 % at 5.00 GiB",
                           "host budget: 20.0 % at 2.50 GiB"}  # fmt: skip
    assert knee["hovertemplate"].startswith("knee: 50.0 % at 10.00 GiB")
    # a vertical line per mark, at its RAM, from the axis up to its label
    lines = {s["x0"]: s for s in figure["layout"]["shapes"]}
    assert set(lines) == {10.0, 5.0, 2.5}
    for x, line in lines.items():
        assert (line["x1"], line["y0"], line["yref"]) == (x, 0, "paper")
    for text, x in (("knee: 50.0 % at 10.00 GiB", 10.0), ("host budget: 20.0 % at 2.50 GiB", 2.5)):
        assert labels[text]["x"] == pytest.approx(math.log10(x))  # log10 on a log axis
        assert lines[x]["y1"] == labels[text]["y"]


def test_the_budget_the_recommendation_does_not_fit_is_drawn_left_of_it():
    figure = mrc_figure(REPORT)
    rec = _trace(figure, "recommended")
    assert rec["x"] == [20.0]  # the card's 20.00 GiB
    assert _trace(figure, "at-host-budget")["x"][0] < rec["x"][0]
    assert "recommended 20.00 GiB<br>60.0 % hit" in _labels(figure)


def test_labels_sit_in_rows_of_their_own_above_the_ceiling():
    figure = mrc_figure(REPORT)
    layout = figure["layout"]
    low, top = layout["yaxis"]["range"]
    ceiling = 60.0 / top  # the ceiling's height on the plot, 0 to 1
    marks = [a for a in layout["annotations"] if not a["text"].startswith("recommended")]
    rows = sorted((a["y"] for a in marks), reverse=True)
    assert len(set(rows)) == 3  # one row each
    # left to right, top to bottom: host (2.5 GiB), budget (5), knee (10)
    assert [a["text"].split(":")[0] for a in sorted(marks, key=lambda a: -a["y"])] == [
        "host budget", "budget", "knee"]  # fmt: skip
    step = rows[0] - rows[1]
    assert all(math.isclose(a - b, step) for a, b in itertools.pairwise(rows))
    assert low == 0 and rows[-1] - step > ceiling  # the lowest row's foot clears the ceiling
    # a label in the axis's right half reads leftwards from its line, one in the left half
    # rightwards: the knee at 10 GiB is right of the middle, the host at 2.5 GiB left of it
    labels = _labels(figure)
    assert labels["knee: 50.0 % at 10.00 GiB"]["xanchor"] == "right"
    assert labels["host budget: 20.0 % at 2.50 GiB"]["xanchor"] == "left"


def test_the_axis_reaches_a_budget_beyond_the_curve():
    report = copy.deepcopy(REPORT)
    report["at_budget"][0].update(ram_bytes=64 * GIB, capacity_bytes=16 * GIB, hit_ratio=0.6)
    figure = mrc_figure(report)
    high = figure["layout"]["xaxis"]["range"][1]
    assert 10**high > 64 > 20  # past the curve's last point, 20 GiB
    assert "budget: 60.0 % at 64.00 GiB" in _labels(figure)


def test_a_host_with_no_ram_left_is_said_without_a_line():
    report = copy.deepcopy(REPORT)
    report["at_budget"] = [{"source": "host", "ram_bytes": -GIB, "capacity_slots": 0,
                            "capacity_bytes": 0, "hit_ratio": 0.0}]  # fmt: skip
    figure = mrc_figure(report)
    label = _labels(figure)["host budget: 0.0 %, no RAM left after reserves"]
    assert (label["xref"], label["x"], label["xanchor"]) == ("paper", 0, "left")
    assert [s["x0"] for s in figure["layout"]["shapes"]] == [10.0]  # the knee's alone


def test_no_knee_and_no_budget_draw_no_marks():
    report = {**REPORT, "knee": None, "at_budget": []}
    figure = mrc_figure(report)
    uids = {t.get("uid") for t in figure["data"]}
    assert not uids & {"knee", "at-budget-0", "at-host-budget"}
    assert not figure["layout"].get("shapes")
    assert "range" not in figure["layout"]["yaxis"]  # plotly ranges it, from zero


def test_with_two_copies_of_the_kv_the_marks_move_with_the_ram():
    # heads replicated on 2 TP ranks: the replica keeps twice the model's bytes per token,
    # so 8 GiB of cache take 8 x 1.25 x 2 = 20 GiB of RAM; the budgets stay at their RAM
    report = copy.deepcopy(REPORT)
    report["recommendation"].update(tp=2, replica_kv_bytes_per_token=262144, ram_bytes=40 * GIB)
    figure = mrc_figure(report)
    assert _trace(figure, "knee")["x"] == [20.0]
    assert _trace(figure, "at-budget-0")["x"] == [5.0]
    assert "knee: 50.0 % at 20.00 GiB" in _labels(figure)
    title = "host RAM for KV blocks, with 25 % headroom and ×2 KV on 2 TP ranks (log scale)"
    assert figure["layout"]["xaxis"]["title"]["text"] == title
