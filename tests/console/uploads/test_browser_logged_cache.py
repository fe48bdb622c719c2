"""A log whose responses report cached tokens, in a real browser (#18): the engineer says
on the re-analysis form what RAM the engine had, and reads the engine's reported reuse
beside kvscope's prediction, its chart drawn; the page saved into screenshots/."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bench.generate import chat_requests
from console.models import Analysis, JobStatus
from console.uploads.services import upload_create
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.factories import default_analysis
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
SCREENSHOTS = Path(os.environ.get("KVSCOPE_SCREENSHOTS", Path(__file__).parents[3] / "screenshots"))


def test_the_engines_reported_reuse_beside_kvscopes_prediction(browser_page, analyst, tmp_path):
    page, session = browser_page.page, browser_page
    rows = list(chat_requests(80, seed=4, documents=5, doc_words=(200, 400)))
    log = tmp_path / "served.jsonl"  # the engine reported 300 of 1,000 tokens cached each
    log.write_text("".join(json.dumps({**row, "usage": {
        "prompt_tokens": 1000, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 300}}}) + "\n" for row in rows))  # fmt: skip
    first = default_analysis(upload_create(name="served", sources=[log], user=analyst))
    sign_in(page, analyst.username)
    page.goto(f"/analyses/{first.pk}/")
    expect(page.locator("[data-logged-measured]")).to_have_text("30.0 %")
    expect(page.locator("[data-logged-sentence]")).to_contain_text("Say what the engine ran with")

    page.locator("details.panel summary", has_text="Re-analyze with other parameters").click()
    page.locator("#id_replicas").fill("1")
    page.locator("#id_gpu_cache_gib").fill("0.25")
    page.locator("#id_logged_ram_gib").fill("1")
    page.get_by_role("button", name="Run analysis").click()
    done = wait_for(lambda: Analysis.objects.filter(upload=first.upload, status=JobStatus.DONE)
                    .exclude(pk=first.pk).first())  # fmt: skip
    page.goto(f"/analyses/{done.pk}/#logged-cache")
    logged = done.report["logged_cache"]
    predicted = f"{100 * logged['predicted_hit_ratio']:.1f} %"
    expect(page.locator("[data-logged-predicted]")).to_have_text(predicted)
    points = 100 * (0.3 - logged["predicted_hit_ratio"])
    sign = "+" if points > 0 else "−"
    expect(page.locator("[data-logged-difference]")).to_have_text(f"{sign}{abs(points):.1f} points")
    facts = wait_for_charts(page)
    assert "chart-logged_cache" in [chart["id"] for chart in facts]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#logged-cache").screenshot(path=SCREENSHOTS / "analysis-logged-cache.png")
    session.assert_clean()
