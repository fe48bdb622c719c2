"""The home page (recent analyses and their headline numbers, then the uploads, or what to
do first) and where a finished ingest lands: its first analysis; the bundled sample on
its recommendation."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.models import Analysis, JobStatus, Upload
from tests.console.factories import PASSWORD, rerun
from tests.console.waiting import BROKER_MODE, finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 2**30


def _rows(page: str) -> list[str]:
    """The recent analyses' rows, in the order shown."""
    table = page.split("data-recent-analyses", 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr data-analysis="\d+">.*?</tr>', table, flags=re.S)


def _cell(row: str, name: str) -> str:
    return re.search(rf"<td[^>]*{name}[^>]*>(.*?)</td>", row, flags=re.S).group(1).strip()


def test_home_lists_the_analyses_newest_first_with_their_headline_numbers(
    client, analysis, analyst
):
    fleet = rerun(analysis, analyst, replicas=2, routers=["round_robin", "session"],
                  host_ram_gib=1024.0)  # fmt: skip
    assert client.login(username=analyst.username, password=PASSWORD)
    page = client.get(reverse("home")).content.decode()
    rows = _rows(page)
    assert [re.search(r'data-analysis="(\d+)"', r).group(1) for r in rows] == [
        str(fleet.pk), str(analysis.pk)]  # fmt: skip
    for row, shown in zip(rows, [fleet, analysis], strict=True):
        rec = shown.report["recommendation"]
        ram = _cell(row, 'data-metric="ram_bytes"')
        assert ram.startswith(f"{rec['ram_bytes'] / GIB:,.2f} GiB")
        assert _cell(row, 'data-metric="hit_ratio"') == f"{rec['hit_ratio'] * 100:.1f} %"
        assert f">#{shown.pk} {shown.summary}</a>" in row
        assert f'href="/uploads/{analysis.upload_id}/">day</a>' in row
    assert _cell(rows[0], "data-fleet") == "2 replicas · round robin / session"
    assert _cell(rows[1], "data-fleet") == "one cache"
    # 1 TiB of host RAM holds the chat log's few GiB: it fits, with the rest to spare
    host = fleet.report["recommendation"]["host"]
    assert host["fits"] and host["spare_bytes"] > 1000 * GIB
    assert _cell(rows[0], "data-host") == f"fits, {host['spare_bytes'] / GIB:,.2f} GiB to spare"
    assert _cell(rows[1], "data-host") == "—"
    assert "<h2>Uploads</h2>" in page  # the uploads, below


def test_home_reads_no_report_whole(client, analysis, analyst):
    """The list reads the recommendation out of the report in the database: no query
    selects the report column itself (curves and all) for it."""
    assert client.login(username=analyst.username, password=PASSWORD)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("home")).content.decode()
    rec = analysis.report["recommendation"]
    assert f"{rec['ram_bytes'] / GIB:,.2f} GiB" in page
    analysis_selects = [q["sql"] for q in queries if 'FROM "console_analysis"' in q["sql"]]
    assert analysis_selects
    # selected as a column (not only read inside a JSON function, as "recommendation" is)
    whole = re.compile(r'(?:SELECT|,) "console_analysis"\."(?:report|figures)"(?:,| FROM)')
    assert not [sql for sql in analysis_selects if whole.search(sql)]


def test_home_says_so_while_no_analysis_has_run(client, analyst):
    Upload.objects.create(name="queued", created_by=analyst)
    assert client.login(username=analyst.username, password=PASSWORD)
    page = client.get(reverse("home")).content.decode()
    assert "No analysis yet" in page and ">queued</a>" in page


def test_the_status_of_a_finished_ingest_names_its_first_analysis(client, analysis, analyst):
    upload, first = analysis.upload, analysis  # (the automatic first analysis of its ingest)
    rerun(first, analyst, scope="tenant")  # a later analysis: the landing stays the first
    assert client.login(username=analyst.username, password=PASSWORD)
    status = client.get(reverse("upload_status", args=[upload.pk])).json()
    assert status["analysis_url"] == f"/analyses/{first.pk}/"


def test_the_status_of_a_running_or_failed_ingest_names_no_analysis(client, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    for status in (JobStatus.RUNNING, JobStatus.FAILED):
        upload = Upload.objects.create(name=status, status=status)
        answer = client.get(reverse("upload_status", args=[upload.pk])).json()
        assert answer["analysis_url"] is None


def test_the_bundled_sample_lands_on_its_recommendation(client, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    response = client.post(reverse("upload_sample"))
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == "done" and upload.requests == 2000
    if BROKER_MODE:  # the worker ingests it: its page polls, then lands (progress.js)
        assert response["Location"] == f"/uploads/{upload.pk}/#recommendation"
    else:  # ingested in the request: straight to the analysis's recommendation
        first = Analysis.objects.get(upload=upload)
        assert response["Location"] == f"/analyses/{first.pk}/#recommendation"
        page = client.get(response["Location"].split("#")[0]).content.decode()
        assert 'id="recommendation"' in page


def test_an_analysis_is_named_by_the_sizing_choices_that_differ_from_the_defaults():
    from analysis.params import DEFAULTS

    base = {"model": "llama-3.1-8b", "scope": "global", "target": DEFAULTS.target,
            "headroom": DEFAULTS.headroom, "warmup": 0, "host_ram_gib": None}  # fmt: skip
    assert Analysis(params=base, block_tokens=256).summary == "llama-3.1-8b · global · B=256"
    changed = dict(base, target=0.8, headroom=0.5, warmup=0.05, host_ram_gib=64)
    assert Analysis(params=changed, block_tokens=256).summary == (
        "llama-3.1-8b · global · B=256 · target 80 % · headroom 50 % · warm-up 5 % · host 64 GiB"
    )
    # as stored: the form's percentages are shares (14.5 % is 0.145, not 0.14499…)
    odd = dict(base, headroom=0.145)
    assert Analysis(params=odd, block_tokens=256).summary.endswith("· headroom 14.5 %")
    # no RAM at all is a host budget too, and a big one is written out
    assert Analysis(params=dict(base, host_ram_gib=0), block_tokens=256).summary.endswith(
        "· host 0 GiB"
    )
    big = Analysis(params=dict(base, host_ram_gib=1048576), block_tokens=256)
    assert big.summary.endswith("· host 1,048,576 GiB")
