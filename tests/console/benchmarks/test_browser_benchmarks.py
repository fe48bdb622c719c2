"""From analysis to proof, in a real browser (headless Chromium, as test_browser.py): export
a replay trace from an upload, upload three benchmark results, see the matrix and the
degradation boundary."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bench.generate import chat_requests, write_jsonl
from console.models import FINISHED, BenchRun, ReplayExport, Upload
from console.uploads.services import upload_create
from tests.analysis.factories import vllm_result
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page


@pytest.fixture
def upload(tmp_path, analyst) -> Upload:
    log = tmp_path / "replay-day.jsonl"
    write_jsonl(chat_requests(80, seed=6, documents=6, doc_words=(200, 400)), log)
    created = upload_create(name="replay day", sources=[log], user=analyst, block_sizes=[64])
    return wait_for(lambda: Upload.objects.filter(pk=created.pk, status__in=FINISHED).first())


def test_export_a_trace_upload_three_runs_and_see_the_boundary(
    browser_page, upload, analyst, tmp_path
):
    page, session = browser_page.page, browser_page
    sign_in(page, analyst.username)

    # --- the replay trace ----------------------------------------------------------------
    page.goto(f"/uploads/{upload.pk}/")
    page.get_by_role("link", name="Export a replay trace").click()
    expect(page.locator("[data-replay-summary]")).to_contain_text("80 requests")
    expect(page.locator("pre").first).to_contain_text("--dataset-name timed_trace")
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download the trace (JSON lines)").click()
    download = download_info.value
    export = ReplayExport.objects.get()
    assert download.suggested_filename == f"kvscope-replay-upload{upload.pk}-b64-x{export.pk}.jsonl"
    assert hashlib.sha256(Path(download.path()).read_bytes()).hexdigest() == export.sha256
    lines = [json.loads(x) for x in Path(download.path()).read_text().splitlines()]
    assert len(lines) == 80 and lines[0]["timestamp"] == 0
    assert all(set(x) == {"timestamp", "input_length", "output_length", "hash_ids"}
               for x in lines)  # fmt: skip

    # --- three benchmark results ---------------------------------------------------------
    files = []
    for concurrency, ttft in ((4, 600.0), (16, 1400.0), (64, 3300.0)):
        path = tmp_path / f"vllm-c{concurrency}.json"
        path.write_text(json.dumps(vllm_result(ttft=ttft, max_concurrency=concurrency)))
        files.append(str(path))
    page.get_by_role("link", name="Benchmarks").click()
    expect(page.locator("main")).to_contain_text("No benchmark runs yet")
    page.locator("#id_files").set_input_files(files)
    page.locator("#id_tier").select_option("none")
    page.locator("#id_context_tokens").fill("8192")
    page.locator("#id_engine").fill("vllm 0.11")
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("main")).to_contain_text("3 runs stored.")
    assert BenchRun.objects.count() == 3

    # --- the matrix and its boundary -----------------------------------------------------
    page.locator("[data-matrix-link]", has_text="meta-llama/Llama-3.1-8B").click()
    expect(page).to_have_url(re.compile(r"/evidence/matrix/\?model="))
    expect(page.locator("[data-boundary]")).to_contain_text("up to 16 concurrent")
    expect(page.locator("td.cell.bad")).to_have_count(1)
    expect(page.locator("td.cell.ok")).to_have_count(2)
    page.locator("#id_p99_ttft_ms").fill("1000")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("[data-boundary]")).to_contain_text("up to 4 concurrent")
    charts = wait_for_charts(page)
    assert [c["id"] for c in charts] == ["chart-tier-0", "chart-lines"]

    # --- the same schedule with RAM offload, side by side --------------------------------
    offload = tmp_path / "vllm-c16-ram.json"
    offload.write_text(json.dumps(vllm_result(ttft=700.0, max_concurrency=16)))
    page.locator("header").get_by_role("link", name="Benchmarks").click()
    page.get_by_text("Upload runs").click()  # folded away once there are runs
    page.locator("#id_files").set_input_files([str(offload)])
    page.locator("#id_tier").select_option("ram")
    page.locator("#id_ram_gib").fill("64")
    page.locator("#id_context_tokens").fill("8192")
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("main")).to_contain_text("1 run stored.")
    page.get_by_role("link", name="side by side").click()
    rows = page.locator("section.schedule tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("baseline")
    expect(rows.nth(1).locator("[data-change]")).to_have_text("−50.0 %")  # 700 vs 1400
    charts = wait_for_charts(page)
    assert [c["id"] for c in charts] == ["chart-schedule-0"]
    session.assert_clean()
