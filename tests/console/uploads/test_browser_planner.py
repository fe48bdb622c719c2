"""The capacity planner's walk in a real browser (headless Chromium, as test_browser.py),
issue #16: upload the shared Mooncake trace with the defaults, land on its analysis, give
a host budget the recommendation does not fit, read from the first screen what that host
buys, ask what other sizes buy and see the answer change without a reload, and find the
knee and the budget on the curve. The analysis page is saved as a planner sees it, at
1280 and 800 px wide, into SCREENSHOTS (README, "What a planner sees"); at both widths the
three numbers (the size, its hit ratio, what the host buys) are on the first screen."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from analysis.metrics.at_budget import buys
from bench.generate import mooncake_requests, write_jsonl
from console.models import Analysis
from console.templatetags.kvscope import gib, pct
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.uploads.conftest import SHARED_TRACE

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
JOB_TIMEOUT_MS = 120_000  # an ingest or analysis on the real worker (as test_browser.py)
GIB = 1 << 30
# where the pictures go: the README names this folder
SCREENSHOTS = Path(os.environ.get("KVSCOPE_SCREENSHOTS", Path(__file__).parents[3] / "screenshots"))
FIRST_SCREEN = {1280: 720, 800: 720}  # width: height of the screen the numbers must fit


@pytest.fixture
def planner_trace(tmp_path) -> Path:
    """The shared Mooncake trace, whole; where the machine lacks it, one generated like it."""
    if SHARED_TRACE.exists():
        return SHARED_TRACE
    path = tmp_path / "mooncake_synthetic_trace.jsonl"
    write_jsonl(mooncake_requests(4000, seed=16), path)
    return path


def _upload_with_defaults(page: Page, trace: Path) -> int:
    """Through the upload form, nothing changed, to the first analysis, done. On a real
    worker the upload's page lands there when the ingest is over (progress.js); run in
    the request, the upload's page shows the finished ingest and links to it."""
    page.get_by_role("link", name="New upload").click()
    page.locator("#id_name").fill("planner week")
    page.locator("#id_files").set_input_files(trace)
    page.get_by_role("button", name="Upload and analyze").click()
    expect(page).to_have_url(re.compile(r"/(uploads|analyses)/\d+/"))
    if "/analyses/" not in page.url and not page.locator("[data-progress]").count():
        page.get_by_role("link", name=re.compile(r"^#\d+ ")).first.click()
    expect(page).to_have_url(re.compile(r"/analyses/\d+/"), timeout=JOB_TIMEOUT_MS)
    expect(page.locator(".page-head .badge")).to_have_text("Done", timeout=JOB_TIMEOUT_MS)
    return int(re.search(r"/analyses/(\d+)/", page.url).group(1))


def _reanalyze_with_host(page: Page, host_gib: float) -> Analysis:
    page.locator("#analysis-form summary").click()
    page.locator("#id_host_ram_gib").fill(f"{host_gib:g}")
    page.get_by_role("button", name="Run analysis").click()
    expect(page.locator(".page-head .badge")).to_have_text("Done", timeout=JOB_TIMEOUT_MS)
    pk = int(re.search(r"/analyses/(\d+)/", page.url).group(1))
    return Analysis.objects.get(pk=pk)


def _on_first_screen(page: Page, selector: str, height: int) -> None:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, (selector, box, height)


def test_a_planner_reads_what_the_host_buys_and_asks_what_other_sizes_buy(
    browser_page, analyst, planner_trace, settings
):
    settings.KVSCOPE_EAGER_IN_THREAD = False  # the jobs run in the request (test_browser)
    page, session = browser_page.page, browser_page
    sign_in(page, analyst.username)
    first_pk = _upload_with_defaults(page, planner_trace)
    first = Analysis.objects.get(pk=first_pk).report
    recommended = first["recommendation"]["ram_bytes"]

    # --- a host budget the recommendation does not fit -----------------------------------
    host_gib = round(recommended * 0.6 / GIB)
    analysis = _reanalyze_with_host(page, host_gib)
    report = analysis.report
    host = report["recommendation"]["host"]
    assert not host["fits"]
    exact = next(e for e in report["at_budget"] if e["source"] == "host")
    expect(page.locator("[data-metric=fits]")).to_have_text("Does not fit")
    expect(page.locator("[data-metric=host_buys]")).to_have_text(pct(exact["hit_ratio"]))
    expect(page.locator("[data-metric=ram_bytes]")).to_have_text(gib(recommended))
    expect(page.locator("[data-metric=rec_hit_ratio]")).to_have_text(
        pct(report["recommendation"]["hit_ratio"])
    )
    expect(page.locator("[data-knee-sentence]")).to_contain_text(
        f"Past {gib(report['knee']['ram_bytes'])}, doubling RAM adds less than one point"
    )

    # --- what does N GiB buy? typed, answered in place -----------------------------------
    page.wait_for_load_state("load")  # planner.js is deferred: typing waits for it
    page.evaluate("window.__samePage = true")
    answer = page.locator("[data-answer]")
    field = page.locator("input[name=buy_gib]")
    for size in (64, 512, 2048):
        field.fill(str(size))
        got = buys(report, size * GIB)
        expect(answer).to_contain_text(
            f"{gib(size * GIB)} of host RAM buys a {pct(got['hit_ratio'])}"
        )
    assert page.evaluate("window.__samePage") is True, "the answer reloaded the page"
    assert session.requested(rf"/analyses/{analysis.pk}/buys\.json\?buy_gib=2048")

    # --- the knee and the host budget on the curve ---------------------------------------
    wait_for_charts(page)
    curve = page.locator("#chart-mrc")
    expect(curve).to_contain_text("knee")
    expect(curve).to_contain_text("host budget")

    # --- what a planner sees, at two widths ----------------------------------------------
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in FIRST_SCREEN.items():
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate("window.scrollTo(0, 0)")
        for selector in ("[data-metric=ram_bytes]", "[data-metric=rec_hit_ratio]",
                         "[data-metric=host_buys]"):  # fmt: skip
            _on_first_screen(page, selector, height)
        page.screenshot(path=SCREENSHOTS / f"analysis-{width}.png")
        page.screenshot(path=SCREENSHOTS / f"analysis-{width}-full.png", full_page=True)
    session.assert_clean()
