"""Fixtures for the browser tests (tests/console/test_browser.py imports them): Debian's
Chromium driven by Playwright's sync API against pytest-django's live server.

Playwright never downloads a browser here: it launches /usr/bin/chromium (`apt-get install
chromium`, done by .ci/run). Every request the page makes is recorded; one to any host but
the live server is aborted and fails the test, so the console must work with no internet.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import OperationalError, models
from playwright.sync_api import (
    Browser,
    Error as PlaywrightError,
    Page,
    Request,
    Route,
    expect,
    sync_playwright,
)

from tests.console.factories import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # without these Chromium calls home (updates, field trials, sync) on its own
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 900}
LOCAL_SCHEMES = {"data", "blob", "about"}
# charts.js draws a chart when it comes near the screen: each one is scrolled to, in turn
CHART_COUNT = "() => document.querySelectorAll('[data-figure]').length"
DRAWN_NTH = """(n) => {
  const el = document.querySelectorAll('[data-figure]')[n];
  return el.dataset.drawn === '1' || el.dataset.drawn === 'error';
}"""
CHART_FACTS = """() => [...document.querySelectorAll('[data-figure]')].map((el) => {
  const box = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  const svg = el.querySelector('svg.main-svg');
  return {
    id: el.id,
    drawn: el.dataset.drawn,
    text: el.dataset.drawn === '1' ? '' : el.textContent,
    plot: el.classList.contains('js-plotly-plot') || !!el.querySelector('.js-plotly-plot'),
    svg: el.querySelectorAll('svg.main-svg').length,
    uids: (el.data || []).map((t) => t.uid || t.name || ''),
    left: box.left, right: box.right, width: box.width, height: box.height,
    // the drawn plot must stay inside the element's content box (the card's border)
    plotRight: svg ? svg.getBoundingClientRect().right : null,
    contentRight: box.right - parseFloat(style.borderRightWidth) - parseFloat(style.paddingRight),
  };
})"""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless Chromium for the module's tests."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install chromium (as .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # Playwright's sync API keeps an event loop in this thread; Django refuses ORM calls
    # from a thread with a running loop unless told it is safe (it is: nothing is async).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@dataclass
class BrowserSession:
    """A page on the live server, with what it asked for and what went wrong."""

    page: Page
    base_url: str
    requests: list[str] = field(default_factory=list)  # every URL requested, in order
    foreign: list[str] = field(default_factory=list)  # requests to other hosts (aborted)
    failed: list[str] = field(default_factory=list)  # HTTP >= 400 from the live server
    errors: list[str] = field(default_factory=list)  # JS exceptions and console errors

    def url(self, path: str) -> str:
        return self.base_url + path

    def requested(self, pattern: str) -> list[str]:
        return [u for u in self.requests if re.search(pattern, u)]

    def assert_clean(self) -> None:
        assert not self.foreign, f"requests left the live server: {self.foreign}"
        assert not self.failed, f"failed requests: {self.failed}"
        assert not self.errors, f"errors in the page: {self.errors}"


@pytest.fixture
def browser_page(chromium, live_server, settings) -> Iterator[BrowserSession]:
    """A fresh browser context (no cookies) on the live server, 1280 px wide."""
    # plain storage: {% static %} gives unhashed names that the live server's static
    # handler finds through the finders (plotly.min.js through console.staticfinders)
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    base = live_server.url
    own = urlsplit(base).netloc
    context = chromium.new_context(base_url=base, viewport=VIEWPORT, accept_downloads=True)
    context.set_default_timeout(15_000)
    session = BrowserSession(page=context.new_page(), base_url=base)

    def route(route: Route, request: Request) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in LOCAL_SCHEMES or parts.netloc == own:
            route.continue_()
        else:
            session.foreign.append(request.url)
            route.abort("blockedbyclient")

    def on_response(response) -> None:
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            session.failed.append(f"{response.status} {response.url}")

    def on_console(message) -> None:
        if message.type == "error" and "favicon.ico" not in message.text:
            session.errors.append(f"console: {message.text}")

    context.route("**/*", route)
    context.on("request", lambda request: session.requests.append(request.url))
    context.on("response", on_response)
    session.page.on("console", on_console)
    session.page.on("pageerror", lambda exc: session.errors.append(f"exception: {exc}"))
    try:
        yield session
    finally:
        context.close()


def sign_in(page: Page, username: str) -> None:
    """Through the sign-in form, as a user would."""
    page.goto("/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("header .who")).to_have_text(username)


def wait_for_charts(page: Page) -> list[dict]:
    """Every [data-figure] drawn by plotly (charts.js sets data-drawn), each scrolled into
    view first (charts.js draws a chart as it comes near the screen); returns their facts."""
    page.wait_for_function(f"() => ({CHART_COUNT})() > 0", timeout=30_000)
    charts = page.locator("[data-figure]")
    for n in range(charts.count()):
        charts.nth(n).scroll_into_view_if_needed()
        page.wait_for_function(DRAWN_NTH, arg=n, timeout=30_000)
    facts = page.evaluate(CHART_FACTS)
    width = page.viewport_size["width"]
    for chart in facts:
        assert chart["drawn"] == "1", f"{chart['id']} not drawn: {chart['text']}"
        assert chart["plot"] and chart["svg"] >= 1, chart
        assert chart["uids"], f"{chart['id']} has no trace"
        assert chart["width"] > 200 and chart["height"] > 200, chart
        assert chart["left"] >= 0 and chart["right"] <= width, f"{chart['id']} overflows"
        assert chart["plotRight"] <= chart["contentRight"] + 0.5, (
            f"{chart['id']} overflows its card"
        )
    return facts


def update_row(model: type[models.Model], pk: int, **fields) -> None:
    """Write to a row the live server polls (in-memory SQLite: retry a locked table)."""
    for _ in range(50):
        try:
            model.objects.filter(pk=pk).update(**fields)
            return
        except OperationalError:
            time.sleep(0.1)
    raise AssertionError(f"the {model.__name__} row stayed locked")


def upload_page_after_ingest(page: Page, upload_pk: int, timeout_ms: float) -> None:
    """The upload's page once its ingest is over. Run in the request, it is over when the
    page first shows; on a real worker the progress panel polls until the ingest is done
    and then lands on its first analysis (progress.js), from where the upload's page is
    opened again (a failed ingest reloads the upload's page instead)."""
    try:
        polling = page.locator("[data-progress]").count() > 0
    except PlaywrightError:  # navigating already: only the progress panel does that
        polling = True
    if polling:  # (gone once the page has landed, or reloaded)
        expect(page.locator("[data-progress]")).to_have_count(0, timeout=timeout_ms)
    if not re.search(rf"/uploads/{upload_pk}/(#.*)?$", page.url):
        page.goto(f"/uploads/{upload_pk}/")
