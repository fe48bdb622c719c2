"""The report and figures columns are read with orjson (console.json_field): the values
that come back are the ones written, as the standard library would read them."""

from __future__ import annotations

import json

import pytest
from django.db.models.fields.json import KeyTransform

from console.models import Analysis

pytestmark = pytest.mark.django_db(transaction=True)

REPORT = {
    "hit_ratio": 0.1 + 0.2,  # 0.30000000000000004: the shortest repr, both ways
    "tiny": 1e-7,
    "big": 2**53 + 1,
    "name": "Grüße, 東京 🚀 \u2028",
    "nested": {"mrc": [{"capacity_slots": 1, "hit_ratio": 0.5}], "none": None},
    "flags": [True, False],
}


def test_a_report_reads_back_as_written(analysis):
    Analysis.objects.filter(pk=analysis.pk).update(report=REPORT, figures=[["mrc", {"x": 1}]])
    row = Analysis.objects.get(pk=analysis.pk)
    assert row.report == REPORT == json.loads(json.dumps(REPORT))
    assert row.figures == [["mrc", {"x": 1}]]
    # a part of it, read by the database's own JSON operators
    part = Analysis.objects.annotate(nested=KeyTransform("nested", "report")).get(pk=analysis.pk)
    assert part.nested == REPORT["nested"]
