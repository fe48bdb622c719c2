"""A fleet set on the re-analysis form in a real browser (headless Chromium, as
test_browser.py), by keyboard where a person would use it: routers ticked without replicas
are refused in words at the routers; with 2 replicas the analysis runs on the stored
stream and its page shows the router chart (one line per router) and each router's
recommendation per replica and per TP rank in the fleet table (#15)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.models import FINISHED, Analysis, Upload
from console.uploads.services import upload_create
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
JOB_TIMEOUT_MS = 120_000  # an analysis on the real worker (as test_browser.py)
NO_REPLICAS = (
    "Routers share the traffic among replicas: give 2 or more replicas to compare them, "
    "or untick the routers."
)


@pytest.fixture
def first_analysis(analyst, chat_log) -> Analysis:
    created = upload_create(name="fleet day", sources=[chat_log], user=analyst, block_sizes=[256])
    upload = wait_for(lambda: Upload.objects.filter(pk=created.pk, status__in=FINISHED).first())
    return Analysis.objects.get(upload=upload)


def _tick_by_keyboard(page, router: str) -> None:
    box = page.locator(f"input[name=routers][value='{router}']")
    box.focus()
    page.keyboard.press("Space")
    expect(box).to_be_checked()


def test_a_fleet_set_on_the_form_shows_the_router_chart_and_table(
    browser_page, analyst, first_analysis, settings
):
    settings.KVSCOPE_EAGER_IN_THREAD = False  # the analysis runs in the request (test_browser)
    page, session = browser_page.page, browser_page
    sign_in(page, analyst.username)
    page.goto(f"/analyses/{first_analysis.pk}/")
    # no fleet yet: the page says where to set one
    expect(page.locator("[data-no-fleet]")).to_contain_text("Fleet part of the re-analysis form")
    page.locator("details.panel summary", has_text="Re-analyze with other parameters").click()
    expect(page.get_by_role("group", name="Fleet (optional)")).to_be_visible()

    # --- routers without replicas: refused, in words, at the routers ---------------------
    _tick_by_keyboard(page, "round_robin")
    _tick_by_keyboard(page, "prefix")
    page.get_by_role("button", name="Run analysis").click()
    expect(page.locator("#id_routers_error")).to_have_text(NO_REPLICAS)
    # the ticks survive the refusal
    expect(page.locator("input[name=routers][value='prefix']")).to_be_checked()
    # the refusal is a 400 by design (the form with its errors): that one, and nothing else
    refused = session.url(f"/uploads/{first_analysis.upload_id}/analyses/new/")
    assert session.failed == [f"400 {refused}"], session.failed
    assert len(session.errors) == 1 and "status of 400" in session.errors[0], session.errors
    session.failed.clear()
    session.errors.clear()

    # --- 2 replicas, typed; run ----------------------------------------------------------
    page.locator("#id_replicas").focus()
    page.keyboard.type("2")
    page.keyboard.press("Enter")  # submits the form, as a person would
    expect(page).to_have_url(re.compile(r"/analyses/\d+/$"))
    pk = int(re.search(r"/analyses/(\d+)/$", page.url).group(1))
    assert pk != first_analysis.pk
    expect(page.locator(".page-head .badge")).to_have_text("Done", timeout=JOB_TIMEOUT_MS)
    analysis = Analysis.objects.get(pk=pk)
    assert analysis.status == "done", analysis.message
    assert (analysis.params["replicas"], analysis.params["routers"]) == (
        2, ["round_robin", "prefix"])  # fmt: skip

    # --- the router chart: one line per router, the single cache for reference ------------
    charts = {chart["id"]: chart for chart in wait_for_charts(page)}
    uids = charts["chart-fleet"]["uids"]
    lines = [u for u in uids if re.fullmatch(r"fleet-(?!recommended)\w+", u)]
    assert lines == ["fleet-round_robin", "fleet-prefix"]
    assert "single-cache-ceiling" in uids
    assert {"chart-fleet_load", "chart-admission"} <= set(charts)
    legend = page.locator("#chart-fleet .legend .legendtext").all_text_contents()
    assert legend[:2] == ["round robin", "prefix-aware"]

    # --- the table: each router's recommendation per replica and per TP rank ---------------
    for entry in analysis.report["fleet"]["routers"]:
        rec = entry["recommendation"]
        row = page.locator(f"#fleet-table tr[data-router='{entry['router']}']")
        expect(row.locator("[data-metric=ram_bytes]")).to_have_text(
            f"{rec['ram_bytes'] / 2**30:,.2f} GiB"
        )
        expect(row.locator("[data-metric=per_rank_bytes]")).to_have_text(
            f"{rec['per_rank_bytes'] / 2**30:,.2f} GiB"
        )
        expect(row.locator("[data-metric=ceiling]")).to_have_text(f"{entry['ceiling'] * 100:.1f} %")
    expect(page.locator("[data-fleet-sentence]")).to_contain_text("one cache fed all of the")
    csv_link = "Fleet curves per router, cache capacity per replica (CSV)"
    expect(page.get_by_role("link", name=csv_link)).to_be_visible()
    page.locator("#fleet").screenshot(path="/tmp/kvscope-fleet.png")
    page.locator("#admission").screenshot(path="/tmp/kvscope-admission.png")
    # the form opens again with the fleet chosen
    page.locator("details.panel summary", has_text="Re-analyze with other parameters").click()
    expect(page.locator("#id_replicas")).to_have_value("2")
    expect(page.locator("input[name=routers][value='prefix']")).to_be_checked()
    expect(page.locator("input[name=routers][value='session']")).not_to_be_checked()
    session.assert_clean()
