"""Dates in one format with the time zone (console.format.moment_text, the |when filter):
on the pages, in the CSV of benchmark runs, in a policy export's header."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.template import Context, Template
from django.urls import reverse

from console.format import moment_text
from console.models import BenchRun, Upload
from console.policies.signed_exports import export_text
from tests.console.factories import BENCH_TAGS, PASSWORD, approved_version, vllm_file

UTC = dt.UTC
# 2026-12-01 14:03:07 UTC: winter, so Berlin is one hour ahead (CET); in July two (CEST)
WINTER = dt.datetime(2026, 12, 1, 14, 3, 7, tzinfo=UTC)
SUMMER = dt.datetime(2026, 7, 1, 14, 3, 7, tzinfo=UTC)


def _when(value, precision: str | None = None) -> str:
    argument = f':"{precision}"' if precision else ""
    template = Template("{% load kvscope %}{{ value|when" + argument + " }}")
    return template.render(Context({"value": value}))


def test_a_moment_reads_in_the_configured_zone_with_its_name(settings):
    assert _when(WINTER) == "2026-12-01 14:03 UTC"
    assert _when(WINTER, "seconds") == "2026-12-01 14:03:07 UTC"
    settings.TIME_ZONE = "Europe/Berlin"
    assert _when(WINTER) == "2026-12-01 15:03 CET"
    assert _when(SUMMER) == "2026-07-01 16:03 CEST"
    # 23:30 in New York on 30 November is already 1 December in UTC: the zone's own day
    settings.TIME_ZONE = "America/New_York"
    assert _when(dt.datetime(2026, 12, 1, 4, 30, tzinfo=UTC)) == "2026-11-30 23:30 EST"


def test_a_calendar_day_and_nothing_read_plainly():
    assert _when(dt.date(2026, 12, 1)) == "2026-12-01"
    assert _when(None) == "—"


@pytest.mark.django_db
def test_pages_show_dates_in_that_format(client, analyst, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    upload = Upload.objects.create(name="dated", created_by=analyst, status="failed",
                                   keep_raw_until=dt.date(2026, 12, 3))  # fmt: skip
    Upload.objects.filter(pk=upload.pk).update(created_at=WINTER)
    assert client.login(username=analyst.username, password=PASSWORD)
    home = client.get(reverse("home")).content.decode()
    assert "2026-12-01 15:03 CET" in home
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert "2026-12-01 15:03 CET by ana" in page


def test_the_text_function_is_the_filters(settings):
    settings.TIME_ZONE = "Asia/Kolkata"  # +05:30, named by its offset-free abbreviation
    assert moment_text(WINTER) == _when(WINTER) == "2026-12-01 19:33 IST"


@pytest.mark.django_db
def test_the_runs_csv_says_when_each_run_was_uploaded(client, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    client.post(reverse("evidence_list"), {**BENCH_TAGS, "files": [vllm_file("c4.json")]})
    BenchRun.objects.update(created_at=WINTER)
    response = client.get(reverse("evidence_runs_csv"), {"model": "meta-llama/Llama-3.1-8B"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["uploaded_at"] for r in rows] == ["2026-12-01 14:03 UTC"]


@pytest.mark.django_db(transaction=True)
def test_an_export_says_when_it_was_approved(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver)
    at = version.signoff.at.astimezone(UTC)  # (sign-offs are append-only: the real moment)
    stamp = f"{at.year}-{at.month:02}-{at.day:02} {at.hour:02}:{at.minute:02}:{at.second:02}"
    assert f"(approved {stamp} UTC by appr)" in export_text(version, "vllm")
