"""The report has one typed shape: every golden report reads back into Report and writes
out byte for byte, so the JSON, the pages and the downloads can all read the dataclasses."""

from __future__ import annotations

import json

import pytest

from analysis.report import HostBudgetCheck, Recommendation, Report, WindowReport
from tests.golden.cases import CASES


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_golden_report_reads_back_into_the_typed_shape(case):
    data = case.golden.read_bytes()
    report = Report.from_dict(json.loads(data))
    assert report.to_json() == data


def test_the_typed_shape_holds_the_nested_dataclasses():
    sample = next(case for case in CASES if case.name == "sample-reanalysis")
    report = Report.from_dict(json.loads(sample.golden.read_bytes()))
    assert isinstance(report.recommendation, Recommendation)
    assert isinstance(report.recommendation.host, HostBudgetCheck)
    assert all(isinstance(window, WindowReport) for window in report.windows)
