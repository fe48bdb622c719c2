"""A replay's result uploaded with the engine's /metrics scraped before and after it, in a
real browser (#18): the measured hit ratio on the run's row, its page and the matrix."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from console.models import BenchRun
from tests.analysis.factories import vllm_result
from tests.analysis.test_scrapes import vllm_scrape
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page


def test_a_run_with_its_two_scrapes_shows_what_the_engine_measured(browser_page, analyst, tmp_path):
    page, session = browser_page.page, browser_page
    result = tmp_path / "vllm-c16.json"
    result.write_text(json.dumps(vllm_result(ttft=900.0, max_concurrency=16)))
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    # by hand: 3,000 prompt tokens looked up; 900 GPU hits, 600 from the connector: 50 %
    before.write_text(vllm_scrape({"0": 1000}, {"0": 100}, {"0": 50}))
    after.write_text(vllm_scrape({"0": 4000}, {"0": 1000}, {"0": 650}))
    sign_in(page, analyst.username)
    page.goto("/evidence/")
    page.locator("#id_files").set_input_files(str(result))
    page.locator("#id_tier").select_option("ram")
    page.locator("#id_ram_gib").fill("64")
    page.locator("#id_context_tokens").fill("8192")
    page.locator("#id_scrape_before_file").set_input_files(str(before))
    page.locator("#id_scrape_after_file").set_input_files(str(after))
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("main")).to_contain_text("1 run stored.")
    expect(page.locator("[data-measured]")).to_have_text("50.0 %")
    run = BenchRun.objects.get()
    assert run.measured["hit_tokens"] == 1500 and run.measured["looked_up_tokens"] == 3000

    page.locator("[data-run-link]").click()
    expect(page.locator("[data-measured-sentence]")).to_contain_text(
        "vLLM counted 1,500 of 3,000 prompt tokens as cache hits between the two scrapes: 50.0 %"
    )
    rows = page.locator("[data-measured-tiers] tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("GPU prefix cache")
    expect(rows.nth(0)).to_contain_text("30.0 %")
    expect(rows.nth(1)).to_contain_text("20.0 %")

    page.goto(f"/evidence/matrix/?model={run.model_name}")
    expect(page.locator("td.cell [data-measured]")).to_have_text("hit ratio 50.0 % measured")
    session.assert_clean()
