"""The console in a real browser: headless Chromium (Debian's) driven by Playwright, against
the live server. With no broker the tasks run inside the request (the pages are done when
they first show); in the second CI run a real Celery worker runs them while the pages poll.

One flow, as an analyst would click it: sign in, upload a log, wait for the ingest, read
the analysis and its charts, re-analyze with another scope, compare both, download the
JSON report and check it against the engine run directly on the same log.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError, Page, expect

from analysis import IngestOptions, analyze, ingest
from bench.generate import chat_requests, write_jsonl
from console.engine import analysis_params
from console.models import Analysis, Upload
from console.staticfinders import STATIC_PATH
from console.uploads import charts
from tests.console import browser_fixtures
from tests.console.browser_fixtures import (
    BrowserSession,
    upload_page_after_ingest,
    wait_for_charts,
)
from tests.console.factories import PASSWORD, gib_shown, make_user

pytestmark = pytest.mark.django_db(transaction=True)
# the browser fixtures, visible to this module's tests
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page

JOB_TIMEOUT_MS = 120_000  # an ingest or analysis on the real worker (as wait_for in conftest)
SCREENSHOTS = Path("/tmp")


def _wait_until_done(page: Page, badge_selector: str, session: BrowserSession, status_url: str):
    """The page of a job: done already (eager), or a progress panel that polls the status
    URL and reloads the page when the job is finished (real worker)."""
    badge = page.locator(badge_selector)
    # one look at the first rendering (the panel may reload the page at any moment)
    try:
        first = page.evaluate(
            "(sel) => [document.querySelector(sel).textContent.trim(),"
            " !!document.querySelector('[data-progress]')]",
            badge_selector,
        )
    except PlaywrightError as exc:  # reloading already: only the progress panel does that
        assert "context was destroyed" in str(exc), exc
        first = ["(reloading)", True]
    # a page rendered finished has no progress panel; one rendered unfinished has the panel,
    # and progress.js keeps its badge current: it may say Done already, just before the
    # panel reloads the page
    assert first[1] or first[0] == "Done", f"no progress panel on an unfinished job: {first}"
    if first[1]:
        expect(badge).to_have_text("Done", timeout=JOB_TIMEOUT_MS)
        assert session.requested(re.escape(status_url)), "the progress panel never polled"
    # and as the server renders it, at any moment: the panel exactly while it is not done
    html = page.request.get(page.url).text()
    rendered = re.search(r"data-job-status>([^<]*)<", html).group(1)
    assert ("data-progress" in html) == (rendered != "Done"), rendered
    expect(badge).to_have_text("Done")
    expect(page.locator("[data-progress]")).to_have_count(0)


def _sign_in(page: Page, username: str) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("form .error")).to_be_visible()  # a wrong password is refused
    page.locator("#id_password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("header .who")).to_have_text(username)
    expect(page.get_by_role("heading", name="Uploads", exact=True)).to_be_visible()


@pytest.fixture
def chat_logs(tmp_path) -> tuple[Path, Path]:
    """A generated chat log, plain and gzipped (the same lines)."""
    plain = tmp_path / "browser-chat.jsonl"
    write_jsonl(chat_requests(150, seed=11, documents=8, doc_words=(300, 700)), plain)
    packed = tmp_path / "browser-chat.jsonl.gz"
    with open(plain, "rb") as src, gzip.GzipFile(packed, "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    return plain, packed


def test_analyst_uploads_analyzes_compares_and_downloads(browser_page, chat_logs, settings):
    # Not the background thread of `make run`: on the in-memory (shared-cache) SQLite test
    # database its writes and the live server's reads collide ("database table is locked").
    # The pages' polling is exercised by the second CI run, with the real worker.
    settings.KVSCOPE_EAGER_IN_THREAD = False
    session = browser_page
    page = session.page
    plain_log, gz_log = chat_logs
    make_user("ana", "analyst")

    # --- sign in through the form -----------------------------------------------------
    _sign_in(page, "ana")

    # --- upload the gzipped log with two block sizes ------------------------------------
    page.get_by_role("link", name="New upload").click()
    expect(page.get_by_role("heading", name="Upload request logs")).to_be_visible()
    page.locator("#id_name").fill("browser day")
    page.locator("#id_files").set_input_files(gz_log)
    own = page.locator("input[name=block_sizes][value='0']")
    expect(own).to_be_checked()  # initial: the format's own
    page.locator("input[name=block_sizes][value='64']").check()
    expect(own).not_to_be_checked()  # a size of one's own unticks the format's own
    page.locator("input[name=block_sizes][value='256']").check()
    page.screenshot(path=SCREENSHOTS / "kvscope-upload.png", full_page=True)
    page.get_by_role("button", name="Upload and analyze").click()

    expect(page).to_have_url(re.compile(r"/uploads/\d+/$"))
    upload_pk = int(re.search(r"/uploads/(\d+)/$", page.url).group(1))
    expect(page.get_by_role("heading", name="browser day")).to_be_visible()
    # a real worker's ingest: the page polls, then lands on the first analysis (and back)
    upload_page_after_ingest(page, upload_pk, JOB_TIMEOUT_MS)
    expect(page.locator("[data-upload-status]")).to_have_text("Done")
    upload = Upload.objects.get(pk=upload_pk)
    assert upload.requests == 150 and upload.skipped_lines == 0
    assert upload.raw_names == [gz_log.name]
    facts = dict(
        zip(
            page.locator("dl.facts dt").all_text_contents(),
            page.locator("dl.facts dd").all_text_contents(),
            strict=True,
        )
    )
    assert facts["Requests"] == "150"
    assert facts["Block sizes"] == "64, 256"
    assert facts["Raw file"] == "deleted after ingest"

    # --- the default analysis: numbers and charts ---------------------------------------
    first = Analysis.objects.get(upload=upload)
    assert first.block_tokens == 256  # the chat default, ticked (FIRST_ANALYSIS_BLOCK_TOKENS)
    page.get_by_role("link", name=re.compile(rf"^#{first.pk} ")).click()
    expect(page).to_have_url(re.compile(rf"/analyses/{first.pk}/$"))
    report = first.report
    charts_drawn = wait_for_charts(page)
    assert [c["id"] for c in charts_drawn] == [f"chart-{n}" for n in charts.report_figures(report)]
    rec = report["recommendation"]
    expect(page.locator("[data-metric=ram_bytes]")).to_have_text(
        f"{rec['ram_bytes'] / 2**30:,.2f} GiB"
    )
    expect(page.locator("[data-metric=per_rank_bytes]")).to_have_text(
        f"{rec['per_rank_bytes'] / 2**30:,.2f} GiB"
    )
    expect(page.locator("[data-metric=infinite_hit_ratio]")).to_have_text(
        f"{report['infinite_hit_ratio'] * 100:.1f} %"
    )
    expect(page.locator("[data-metric=requests]")).to_have_text("150")
    page.screenshot(path=SCREENSHOTS / "kvscope-analysis.png", full_page=True)

    # --- re-analyze: tenant scope on the 64-token stream ------------------------------
    page.locator("details.panel summary", has_text="Re-analyze with other parameters").click()
    page.locator("#id_block_tokens").select_option("64")
    page.locator("#id_scope").select_option("tenant")
    # shares are shown and typed as percentages: the stored 0.9 and 0.1 open as 90 and 10
    expect(page.locator("#id_target")).to_have_value("90")
    expect(page.locator("#id_headroom")).to_have_value("10")
    page.locator("#id_target").fill("80")
    page.get_by_role("button", name="Run analysis").click()
    expect(page).to_have_url(re.compile(r"/analyses/\d+/$"))
    second_pk = int(re.search(r"/analyses/(\d+)/$", page.url).group(1))
    assert second_pk != first.pk
    _wait_until_done(page, ".page-head .badge", session, f"/analyses/{second_pk}/status.json")
    second = Analysis.objects.get(pk=second_pk)
    assert second.status == "done", second.message
    assert (second.block_tokens, second.params["scope"]) == (64, "tenant")
    assert (second.params["target"], second.params["headroom"]) == (0.8, 0.1)
    assert second.report["scope"] == "tenant"
    expect(page.locator("h1 small")).to_contain_text("tenant · B=64")
    expect(page.locator("p.small", has_text="scope tenant")).to_be_visible()
    # a term says what it means on hover and links to its definition
    slot = page.locator("p.small a.term", has_text="slot")
    expect(slot).to_have_attribute("title", re.compile(r"^A block slot holds B tokens; its size"))
    slot.click()
    expect(page).to_have_url(re.compile(r"/glossary/#slot$"))
    expect(page.locator("#slot")).to_contain_text("whatever the number of tokens actually in it")
    page.go_back()
    wait_for_charts(page)
    expect(page.locator("[data-metric=ram_bytes]")).to_have_text(
        f"{second.report['recommendation']['ram_bytes'] / 2**30:,.2f} GiB"
    )

    # --- compare both from the upload page -------------------------------------------
    page.locator(".crumbs").get_by_role("link", name="browser day").click()
    expect(page).to_have_url(re.compile(rf"/uploads/{upload_pk}/$"))
    page.locator(f"input[name=a][value='{first.pk}']").check()
    page.locator(f"input[name=a][value='{second.pk}']").check()
    page.get_by_role("button", name="Compare selected").click()
    expect(page.get_by_role("heading", name="Compare analyses")).to_be_visible()
    table = page.locator("#compare-table")
    columns = table.locator("thead th[data-analysis]")
    shown = [int(pk) for pk in columns.evaluate_all("(ths) => ths.map((t) => t.dataset.analysis)")]
    assert sorted(shown) == sorted([first.pk, second.pk])
    # no baseline chosen: the first column is the baseline, the other shows its difference
    expect(table.locator("th[data-baseline]")).to_have_attribute("data-analysis", str(shown[0]))
    reports = {a.pk: a.report for a in (first, second)}
    ram_row = table.locator("tbody tr", has=page.locator("th", has_text="Recommended RAM (with"))
    cells = ram_row.locator("td").all_inner_texts()
    ram = [reports[pk]["recommendation"]["ram_bytes"] for pk in shown]
    delta = ram[1] - ram[0]
    sign = "+" if delta > 0 else ("−" if delta < 0 else "±")
    assert cells == [gib_shown(ram[0]), f"{gib_shown(ram[1])}\n{sign}{gib_shown(abs(delta))}"]
    compare_charts = wait_for_charts(page)
    assert [c["id"] for c in compare_charts] == ["chart-compare"]
    curves = [u for u in compare_charts[0]["uids"] if u.startswith("curve-")]
    assert curves == ["curve-0", "curve-1"]
    page.screenshot(path=SCREENSHOTS / "kvscope-compare.png", full_page=True)

    # --- download the JSON report and check it against the engine -----------------------
    page.goto(f"/analyses/{second.pk}/")
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Report (JSON)").click()
    download = download_info.value
    assert download.suggested_filename == f"kvscope-analysis-{second.pk}.json"
    downloaded = json.loads(Path(download.path()).read_text())
    assert downloaded == second.report

    # the same lines, ungzipped, straight through the engine with only that block size
    stream = ingest(
        [plain_log],
        IngestOptions(hash_key=settings.KVSCOPE_HASH_KEY, block_tokens=second.block_tokens),
    )
    expected = analyze(stream, analysis_params(**second.params)).to_dict()
    assert downloaded["recommendation"]["ram_bytes"] == expected["recommendation"]["ram_bytes"]
    assert downloaded["infinite_hit_ratio"] == expected["infinite_hit_ratio"]
    assert downloaded["prompt_tokens"] == expected["prompt_tokens"]
    assert downloaded["requests"] == 150

    # --- nothing left the live server, nothing failed ---------------------------------
    assert session.requested(re.escape(f"/static/{STATIC_PATH}") + "$")
    session.assert_clean()
