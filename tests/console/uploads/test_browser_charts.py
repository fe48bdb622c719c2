"""When charts.js draws (headless Chromium, as test_browser.py): a chart far below the
screen is not drawn until it is scrolled near, then it is; printing draws every chart; a
browser without IntersectionObserver draws them all at once, as before."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from console.models import FINISHED, Analysis, Upload
from console.uploads.services import upload_create
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page

# a short window: the analysis page's charts start below it, the last several screens
# down (the first within charts.js's margin of one screen below it: the cards above the
# charts grew with their same-session / cross-session lines, #14)
# short enough that the page's last charts are two screens below the first screen, tall
# enough that the first chart (below the first screen's figures) is within one
VIEWPORT = {"width": 1280, "height": 600}
# each chart's state and where it was with the page at its top
STATES = """() => [...document.querySelectorAll('[data-figure]')].map((el) => ({
  id: el.id, drawn: el.dataset.drawn || null,
  top: el.getBoundingClientRect().top + window.scrollY,
  bottom: el.getBoundingClientRect().bottom + window.scrollY,
  svg: el.querySelectorAll('svg.main-svg').length,
}))"""
ALL_DRAWN = """() => [...document.querySelectorAll('[data-figure]')]
  .every((el) => el.dataset.drawn === '1')"""
SETTLED = """() => new Promise((done) => {
  // two idle periods, a frame apart: the observer has called back, the queue is drained
  const idle = window.requestIdleCallback || ((f) => setTimeout(f, 50));
  idle(() => requestAnimationFrame(() => idle(() => done(true))));
})"""


@pytest.fixture
def analysis_url(analyst, chat_log) -> str:
    created = upload_create(name="lazy", sources=[chat_log], user=analyst, block_sizes=[256])
    upload = wait_for(lambda: Upload.objects.filter(pk=created.pk, status__in=FINISHED).first())
    return f"/analyses/{Analysis.objects.get(upload=upload).pk}/"


def _settle(page: Page) -> list[dict]:
    page.wait_for_timeout(300)  # longer than any task charts.js queues (one chart each)
    page.evaluate(SETTLED)
    return page.evaluate(STATES)


def test_off_screen_charts_wait_until_scrolled_near(browser_page, analyst, analysis_url):
    page, session = browser_page.page, browser_page
    page.set_viewport_size(VIEWPORT)
    sign_in(page, analyst.username)
    page.goto(analysis_url)
    height = VIEWPORT["height"]
    states = _settle(page)
    # near: within one screen below the first one (charts.js's margin); far: well past it
    near = [s for s in states if s["top"] < 2 * height - 20]
    far = [s for s in states if s["top"] > 2 * height + 20]
    assert near and far, states  # the page is long enough to tell them apart
    assert all(s["drawn"] == "1" and s["svg"] for s in near), near
    assert all(s["drawn"] is None and not s["svg"] for s in far), far
    # the empty boxes keep their height: drawing one does not move the page under the user
    boxes = {s["id"]: s["bottom"] - s["top"] for s in states}
    assert all(h >= 360 for h in boxes.values()), boxes

    # scrolled to the last one: it and those around it are drawn, the page did not jump
    last = far[-1]
    page.locator(f"#{last['id']}").scroll_into_view_if_needed()
    page.wait_for_function(f"() => document.getElementById('{last['id']}').dataset.drawn")
    after = {s["id"]: s for s in _settle(page)}
    assert after[last["id"]]["drawn"] == "1" and after[last["id"]]["svg"]
    assert after[last["id"]]["top"] == pytest.approx(last["top"], abs=1)
    # and the rest, one by one, with the checks every browser test makes
    charts = wait_for_charts(page)
    assert [c["id"] for c in charts] == [s["id"] for s in states]
    session.assert_clean()


def test_printing_draws_every_chart(browser_page, analyst, analysis_url):
    page, session = browser_page.page, browser_page
    page.set_viewport_size(VIEWPORT)
    sign_in(page, analyst.username)
    page.goto(analysis_url)
    states = _settle(page)
    assert any(s["drawn"] is None for s in states), states
    # what window.print() fires first; the charts are laid out before it returns
    drawn = page.evaluate("""() => {
      window.dispatchEvent(new Event('beforeprint'));
      return [...document.querySelectorAll('[data-figure]')].map(
        (el) => el.querySelectorAll('svg.main-svg').length > 0);
    }""")
    assert all(drawn), drawn
    page.wait_for_function(ALL_DRAWN)
    session.assert_clean()


def test_without_intersection_observer_every_chart_is_drawn(browser_page, analyst, analysis_url):
    page, session = browser_page.page, browser_page
    page.set_viewport_size(VIEWPORT)
    page.context.add_init_script("delete window.IntersectionObserver;")
    sign_in(page, analyst.username)
    page.goto(analysis_url)
    page.wait_for_function(ALL_DRAWN)
    assert page.evaluate("() => window.scrollY") == 0  # nothing was scrolled to
    session.assert_clean()


def test_a_chart_in_a_closed_details_is_drawn_when_opened(browser_page, analyst, analysis_url):
    """A chart with no box (a closed <details>, a hidden tab) waits until it is shown."""
    page, session = browser_page.page, browser_page
    sign_in(page, analyst.username)
    # the first chart moved into a closed <details> before charts.js runs
    page.context.add_init_script("""document.addEventListener('readystatechange', () => {
      if (document.readyState !== 'interactive') return;
      const chart = document.querySelector('[data-figure]');
      const details = document.createElement('details');
      details.id = 'folded';
      details.innerHTML = '<summary>More</summary>';
      chart.parentNode.insertBefore(details, chart);
      details.appendChild(chart);
    });""")
    page.goto(analysis_url)
    page.evaluate(SETTLED)
    page.wait_for_timeout(300)
    folded = page.locator("#folded [data-figure]")
    assert folded.get_attribute("data-drawn") is None
    page.locator("#folded summary").click()
    page.wait_for_function("() => document.querySelector('#folded [data-figure]').dataset.drawn")
    assert folded.get_attribute("data-drawn") == "1"
    box = folded.bounding_box()
    assert box and box["width"] > 200 and box["height"] > 200, box
    session.assert_clean()
