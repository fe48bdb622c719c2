"""The figures of the golden reports (and of a few variants of them) are byte-identical to
the ones stored in tests/golden/figures-*.json (see tests/golden/figures.py). No database."""

from __future__ import annotations

import pytest

from console.uploads.charts import report_figures
from tests.golden.figures import compare_json, figures_json, figures_path, reports

REPORTS = reports()


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_report_figures_are_unchanged(name):
    drawn = figures_json(report_figures(REPORTS[name]))
    assert drawn == figures_path(name).read_bytes()


def test_compare_figure_is_unchanged():
    assert compare_json() == figures_path("compare").read_bytes()
