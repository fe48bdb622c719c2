"""Comparing across uploads in a real browser (headless Chromium, as test_browser.py), by
keyboard: from an analysis page, tick analyses of two uploads and choose the baseline; the
compare page names what differs, shows each other column against the baseline, fits
1280 px without the page scrolling sideways, and any column can become the baseline."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from bench.generate import chat_requests, write_jsonl
from console.models import Analysis
from console.uploads.services import upload_create
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.factories import default_analysis, rerun

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
# how far the compare table and the page reach, against their boxes
FIT = """() => {
  const table = document.querySelector('#compare-table');
  const box = table.parentElement.getBoundingClientRect();
  return {tableRight: table.getBoundingClientRect().right, boxRight: box.right,
          tableWidth: table.scrollWidth, boxWidth: table.parentElement.clientWidth,
          pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth};
}"""


@pytest.fixture
def four(analysis, analyst, tmp_path) -> list[Analysis]:
    """Two analyses of each of two uploads (the day's at 256 tokens per block, on 1 and
    2 TP ranks; a later night log's at 64, as one cache and as 2 replicas behind round
    robin): the widest headers the table meets."""
    path = tmp_path / "night.jsonl"
    write_jsonl(chat_requests(90, seed=5, documents=4, doc_words=(200, 400)), path)
    upload = upload_create(name="night traffic of the support assistant", sources=[path],
                           user=analyst, block_sizes=[64])  # fmt: skip
    night = default_analysis(upload)
    return [analysis, rerun(analysis, analyst, tp=2), night,
            rerun(night, analyst, replicas=2, routers=["round_robin"])]  # fmt: skip


def _press(page: Page, selector: str) -> None:
    """Focus a checkbox or radio and tick it with the space bar, as a keyboard user."""
    control = page.locator(selector)
    control.focus()
    page.keyboard.press("Space")
    expect(control).to_be_checked()


def test_analyses_of_two_uploads_compared_by_keyboard(browser_page, analyst, four):
    page = browser_page.page
    sign_in(page, analyst.username)
    day, day_tp2, night, fleet = four
    page.goto(f"/analyses/{day.pk}/")
    picker = page.get_by_role("form", name="Compare with other analyses")
    expect(picker.get_by_role("group")).to_have_count(2)  # one per upload
    expect(picker.locator(f"input[name=a][value='{day.pk}']")).to_be_checked()
    for other in (day_tp2, night, fleet):
        _press(page, f"#compare-picker input[name=a][value='{other.pk}']")
    _press(page, f"#compare-picker input[name=baseline][value='{night.pk}']")
    picker.get_by_role("button", name="Compare").focus()
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="Compare analyses")).to_be_visible()
    table = page.locator("#compare-table")
    expect(table.locator("th[data-baseline]")).to_have_attribute("data-analysis", str(night.pk))
    expect(page.locator("#compare-differs")).to_contain_text(
        "Parameters that differ: Upload (log); Block size (tokens); Tensor-parallel ranks;"
    )
    # the columns in the picker's order (newest upload first, then newest analysis), each
    # other than the baseline with its difference under its value
    columns = table.locator("thead th[data-analysis]")
    order = [int(pk) for pk in columns.evaluate_all("(ths) => ths.map((t) => t.dataset.analysis)")]
    assert order == [fleet.pk, night.pk, day_tp2.pk, day.pk]
    blocks = table.locator("tr[data-key=param_block_tokens] td")
    # (retried: the page writes the differences after the columns)
    expect(blocks).to_have_text(["64\n±0", "64", "256\n+192", "256\n+192"], use_inner_text=True)
    # the table wraps to fit: neither it nor the page scrolls sideways at 1280 px
    fit = page.evaluate(FIT)
    assert fit["viewport"] == 1280
    assert fit["tableWidth"] <= fit["boxWidth"] and fit["pageWidth"] <= fit["viewport"], fit
    wait_for_charts(page)

    # another column made the baseline, by keyboard
    table.locator(f"th[data-analysis='{day.pk}'] [data-make-baseline]").focus()
    page.keyboard.press("Enter")
    expect(table.locator("th[data-baseline]")).to_have_attribute("data-analysis", str(day.pk))
    expect(blocks).to_have_text(["64\n−192", "64\n−192", "256\n±0", "256"], use_inner_text=True)
    expect(page.locator("#compare-picker input[name=baseline]:checked")).to_have_value(
        str(day.pk))  # fmt: skip
    assert re.search(rf"baseline={day.pk}", page.url)
    browser_page.assert_clean()


def test_the_picker_asks_for_a_second_analysis_before_it_sends(browser_page, analyst, analysis):
    tp2 = rerun(analysis, analyst, tp=2)
    page = browser_page.page
    sign_in(page, analyst.username)
    page.goto(f"/analyses/{analysis.pk}/")
    picker = page.get_by_role("form", name="Compare with other analyses")
    refused = picker.locator("[data-compare-refused]")
    expect(refused).to_be_hidden()
    # only this analysis, ticked and the baseline: one to compare, so nothing is sent
    picker.get_by_role("button", name="Compare").click()
    expect(refused).to_be_visible()
    expect(refused).to_contain_text("Tick at least one more analysis")
    assert page.url.endswith(f"/analyses/{analysis.pk}/")
    # this one unticked, the other ticked: still two, the baseline counts
    _press(page, f"#compare-picker input[name=a][value='{tp2.pk}']")
    page.locator(f"#compare-picker input[name=a][value='{analysis.pk}']").uncheck()
    picker.get_by_role("button", name="Compare").click()
    expect(page.get_by_role("heading", name="Compare analyses")).to_be_visible()
    columns = page.locator("#compare-table thead th[data-analysis]")
    got = columns.evaluate_all("(ths) => ths.map((t) => Number(t.dataset.analysis))")
    assert sorted(got) == sorted([analysis.pk, tp2.pk])
