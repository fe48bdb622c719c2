"""A replay's result uploaded with the engine's /metrics scraped before and after it, in a
real browser (#18): the measured hit ratio, and kvscope's prediction for the export it
replayed, on the run's row, its page and the matrix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from console.models import FINISHED, BenchRun, ReplayExport, Upload
from console.uploads.services import upload_create
from tests.analysis.factories import vllm_result
from tests.analysis.test_scrapes import vllm_scrape
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
# where the pictures go: the README names this folder (as the planner's and reviewer's)
SCREENSHOTS = Path(os.environ.get("KVSCOPE_SCREENSHOTS", Path(__file__).parents[3] / "screenshots"))
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


def test_a_replay_of_an_export_shows_predicted_beside_measured(browser_page, analyst, tmp_path):
    """The four-request trace (A A C A, 512-token blocks) exported, replayed on 2 blocks of
    RAM (128 MiB of Llama-3.1-8B): kvscope predicts 1,024 of 4,096 tokens; the engine's
    connector counted 1,400 (+9.2 points, flagged)."""
    page, session = browser_page.page, browser_page
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": 1000 * i, "input_length": 1024, "output_length": 16,
                    "hash_ids": ids}) + "\n"
        for i, ids in enumerate([[1, 2], [1, 2], [3, 4], [1, 2]])))  # fmt: skip
    created = upload_create(name="four", sources=[trace], user=analyst)
    wait_for(lambda: Upload.objects.filter(pk=created.pk, status__in=FINISHED).first())
    sign_in(page, analyst.username)
    page.goto(f"/uploads/{created.pk}/replay/")
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download the trace (JSON lines)").click()
    export = ReplayExport.objects.get()
    assert download_info.value.suggested_filename.endswith(f"-x{export.pk}.jsonl")
    page.reload()
    expect(page.locator("[data-export-id]")).to_have_text(f"x{export.pk}")

    result, before, after = (tmp_path / name for name in ("r.json", "b.prom", "a.prom"))
    result.write_text(json.dumps(vllm_result(ttft=900.0, max_concurrency=4)))
    before.write_text(vllm_scrape({"0": 0}, {"0": 0}, {"0": 0}))
    after.write_text(vllm_scrape({"0": 4096}, {"0": 0}, {"0": 1400}))
    page.goto("/evidence/")
    page.locator("#id_files").set_input_files(str(result))
    page.locator("#id_tier").select_option("ram")
    page.locator("#id_ram_gib").fill("0.125")
    page.locator("#id_context_tokens").fill("1024")
    page.locator("#id_replay_export").select_option(str(export.pk))
    page.locator("#id_scrape_before_file").set_input_files(str(before))
    page.locator("#id_scrape_after_file").set_input_files(str(after))
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("main")).to_contain_text("1 run stored.")
    wait_for(lambda: BenchRun.objects.exclude(predicted={}).first())
    page.reload()
    expect(page.locator("[data-measured]")).to_have_text("34.2 %")
    expect(page.locator("[data-predicted]")).to_have_text("25.0 % (+9.2 points ⚠)")

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "evidence-runs.png", full_page=True)
    page.locator("[data-run-link]").click()
    expect(page.locator("[data-predicted-ratio]")).to_have_text("25.0 %")
    expect(page.locator("[data-versus-row=all]")).to_contain_text("+9.2 points ⚠ more than 3")
    page.screenshot(path=SCREENSHOTS / "evidence-run-predicted.png", full_page=True)
    page.goto(f"/evidence/matrix/?model={BenchRun.objects.get().model_name}")
    expect(page.locator("td.cell [data-predicted]")).to_have_text("25.0 % predicted ⚠ differs")
    expect(page.locator("td.cell [data-measured]")).to_have_text("hit ratio 34.2 % measured")
    session.assert_clean()
