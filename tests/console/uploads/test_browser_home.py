"""Where the home page's buttons and a watched ingest land, in a real browser (headless
Chromium, as test_browser.py): the bundled sample on its analysis's recommendation, a
finished ingest on its first analysis (still running: its progress)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.models import Analysis, JobStatus, Upload
from console.uploads.analyses import DEFAULT_PARAMS
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, update_row

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
JOB_TIMEOUT_MS = 120_000  # an ingest on the real worker (as test_browser.py)


def test_the_bundled_sample_lands_on_the_recommendation(browser_page, analyst, settings):
    settings.KVSCOPE_EAGER_IN_THREAD = False  # the ingest runs in the request (see test_browser)
    page, session = browser_page.page, browser_page
    sign_in(page, analyst.username)
    expect(page.get_by_role("heading", name="No uploads yet")).to_be_visible()
    page.get_by_role("button", name="Analyze the bundled sample").click()
    # in the request: redirected there; on a real worker: the upload's page polls, then lands
    expect(page).to_have_url(re.compile(r"/analyses/\d+/#recommendation$"), timeout=JOB_TIMEOUT_MS)
    analysis = Analysis.objects.get()
    assert page.url.endswith(f"/analyses/{analysis.pk}/#recommendation")
    ram = analysis.report["recommendation"]["ram_bytes"]
    cards = page.locator("#recommendation")
    expect(cards.locator("[data-metric=ram_bytes]")).to_have_text(f"{ram / 2**30:,.2f} GiB")
    expect(cards).to_be_in_viewport()
    # the home page lists it now, with the same number
    page.get_by_role("link", name="kvscope").first.click()
    row = page.locator(f"tr[data-analysis='{analysis.pk}']")
    expect(row.locator("[data-metric=ram_bytes]")).to_have_text(f"{ram / 2**30:,.2f} GiB")
    expect(row.locator("[data-fleet]")).to_have_text("one cache")
    page.screenshot(path="/tmp/kvscope-home.png", full_page=True)
    session.assert_clean()


def test_a_watched_ingest_lands_on_its_analysis_showing_its_progress(browser_page, analyst):
    page, session = browser_page.page, browser_page
    upload = Upload.objects.create(name="busy", created_by=analyst, status=JobStatus.RUNNING,
                                   stage="reading", progress_total=10_000)  # fmt: skip
    # its first analysis, not finished yet (no worker takes it: it stays so)
    first = Analysis.objects.create(upload=upload, block_tokens=256, params=DEFAULT_PARAMS,
                                    status=JobStatus.RUNNING, stage="analyzing")  # fmt: skip
    sign_in(page, analyst.username)
    page.goto(f"/uploads/{upload.pk}/#recommendation")
    expect(page.locator("[data-progress]")).to_be_visible()
    update_row(Upload, upload.pk, status=JobStatus.DONE, stage="done")
    # the fragment asked for comes along
    expect(page).to_have_url(re.compile(rf"/analyses/{first.pk}/#recommendation$"))
    expect(page.get_by_role("heading", name=re.compile(rf"^Analysis #{first.pk}"))).to_be_visible()
    expect(page.locator("[data-progress]")).to_be_visible()  # the analysis's own progress
    session.assert_clean()
