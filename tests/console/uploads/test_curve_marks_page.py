"""On the analysis page itself: the curve's recommended point says the Recommended RAM
card's figure, word for word, and the stored figure marks the knee and the host budget the
recommendation does not fit in."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from console.models import Analysis, JobStatus, Upload
from tests.console.factories import PASSWORD
from tests.golden.figures import reports

pytestmark = pytest.mark.django_db


def _page(client, analyst, report: dict) -> str:
    upload = Upload.objects.create(name="planner", created_by=analyst, status=JobStatus.DONE)
    analysis = Analysis.objects.create(upload=upload, block_tokens=report["block_tokens"],
                                       params=report["params"], report=report,
                                       status=JobStatus.DONE)  # fmt: skip
    assert client.login(username=analyst.username, password=PASSWORD)
    return client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()


def test_the_recommended_point_says_the_cards_ram(client, analyst):
    report = reports()["mooncake-short-budget"]
    page = _page(client, analyst, report)
    card = re.search(r'data-metric="ram_bytes">([^<]+)<', page)[1]
    assert card == "1,400.16 GiB"  # 1,503,413,036,647 bytes / 2**30
    figure = json.loads(re.search(r'id="fig-mrc" type="application/json">(.*?)</script>',
                                  page)[1])  # fmt: skip
    (label,) = [a["text"] for a in figure["layout"]["annotations"]
                if a["text"].startswith("recommended")]  # fmt: skip
    assert label.split("<br>")[0] == f"recommended {card}"
    (point,) = [t for t in figure["data"] if t.get("uid") == "recommended"]
    assert point["x"] == [report["recommendation"]["ram_bytes"] / 2**30]
    # the host's 1,016 GiB (1 TiB less 8 GiB for the OS) do not hold 1,400.16 GiB: still
    # marked, with what they buy, left of the recommended point; and the knee
    texts = [a["text"] for a in figure["layout"]["annotations"]]
    host = report["at_budget"][1]
    assert f"host budget: {host['hit_ratio'] * 100:.1f} % at 1,016.00 GiB" in texts
    assert "budget: 8.1 % at 64.00 GiB" in texts
    assert any(t.startswith("knee: 64.1 % at ") for t in texts)
