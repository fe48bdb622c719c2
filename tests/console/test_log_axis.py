"""Log axes: ticks at 1, 2 and 5 times a power of ten of a unit, written with the unit,
inside the axis's range, thinned to the 1s when a narrow chart has no room; and every log
axis of every figure the console draws gets them from console.log_axis. No database."""

from __future__ import annotations

import math
import re

import pytest

from console.log_axis import BYTES_IN_GIB, COUNT, SECONDS, log_axis
from console.uploads.charts import compare_figure, report_figures
from tests.golden.figures import COMPARED, golden_report, reports

MIB = 2**-10  # a MiB in GiB, the unit of the byte axes' values
# a tick's text: 1, 2 or 5, then zeros, with thousands separators; then its unit, if any
TICK = re.compile(r"^(?P<m>[125])(?P<zeros>(,?0)*)(?: (?P<unit>B|KiB|MiB|GiB|TiB|PiB|µs|ms|s))?$")
UNITS = {"B": 2**-30, "KiB": 2**-20, "MiB": MIB, "GiB": 1, "TiB": 1024, "PiB": 1024**2,
         "µs": 1e-6, "ms": 1e-3, "s": 1, None: 1}  # fmt: skip


def test_a_range_within_two_decades_gets_every_1_2_5_tick():
    # 0.3 to 30 GiB, widened by 1.5 % of its two decades on each side: 0.28 to 32.1 GiB
    axis = log_axis([0.3, 3, 30], BYTES_IN_GIB, "RAM")
    assert axis["ticktext"] == ["500 MiB", "1 GiB", "2 GiB", "5 GiB", "10 GiB", "20 GiB"]
    assert axis["tickvals"] == [500 * MIB, 1, 2, 5, 10, 20]
    assert axis["range"] == pytest.approx([math.log10(0.3) - 0.03, math.log10(30) + 0.03])
    assert "minor" not in axis  # every tick is labelled
    assert (axis["type"], axis["tickmode"], axis["title"]) == ("log", "array", {"text": "RAM"})


def test_a_wide_range_writes_the_1s_and_keeps_the_2s_and_5s_as_grid():
    # 64 MiB to 2.5 TiB: fourteen 1-2-5 ticks, too many to write on a narrow chart
    axis = log_axis([64 * MIB, 2560], BYTES_IN_GIB, "RAM")
    assert axis["ticktext"] == ["100 MiB", "1 GiB", "10 GiB", "100 GiB", "1 TiB"]
    assert axis["tickvals"] == [100 * MIB, 1, 10, 100, 1024]
    # 500 MiB, then 1 GiB (1,024 MiB): never "1,000 MiB" beside it
    assert axis["minor"]["tickvals"] == [200 * MIB, 500 * MIB, 2, 5, 20, 50, 200, 500, 2048]


def test_seconds_from_milliseconds_up():
    axis = log_axis([0.001, 86400], SECONDS, "reuse time", pad=0)
    assert axis["range"] == [-3, pytest.approx(math.log10(86400))]
    assert axis["ticktext"] == ["1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s", "1,000 s",
                                "10,000 s"]  # fmt: skip
    assert axis["tickvals"] == pytest.approx([1e-3, 1e-2, 0.1, 1, 10, 100, 1000, 10000])


def test_counts_have_no_unit_and_an_empty_axis_still_has_ticks():
    assert log_axis([4, 16, 64], COUNT, "concurrency")["ticktext"] == ["5", "10", "20", "50"]
    empty = log_axis([], BYTES_IN_GIB, "RAM")  # 1 MiB to 1 GiB
    assert empty["ticktext"][0] == "1 MiB" and empty["ticktext"][-1] == "1 GiB"


def _log_axes() -> list[tuple[str, dict]]:
    """Every log axis of every golden figure, and of the compare page's."""
    figures = [(f"{name}/{fig}", figure) for name, report in reports().items()
               for fig, figure in report_figures(report).items()]  # fmt: skip
    items = [(label, golden_report(name)) for label, name in COMPARED]
    figures.append(("compare", compare_figure(items)))
    return [(f"{label}/{key}", axis) for label, figure in figures
            for key, axis in figure["layout"].items()
            if key.startswith(("xaxis", "yaxis")) and axis.get("type") == "log"]  # fmt: skip


def test_every_log_axis_has_1_2_5_ticks_with_units_inside_its_range():
    axes = _log_axes()
    # the curve, reuse times and admission of the 9 golden reports, the fleet's routers of
    # one of them, and the compare page's curves
    assert len(axes) == 9 * 3 + 1 + 1
    for where, axis in axes:
        low, high = (10**end for end in axis["range"])
        assert axis["tickmode"] == "array" and axis["ticktext"], where
        for value, text in zip(axis["tickvals"], axis["ticktext"], strict=True):
            match = TICK.match(text)
            assert match, (where, text)
            number = int(match["m"] + match["zeros"].replace(",", ""))
            assert value == pytest.approx(number * UNITS[match["unit"]]), (where, text)
            assert low <= value <= high, (where, text)
        assert axis["tickvals"] == sorted(axis["tickvals"]), where
