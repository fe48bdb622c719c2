"""The Content-Security-Policy in a real browser (headless Chromium, as test_browser.py):
every page with charts draws them with no violation of the policy, and the policy does
block what it should (an inline script is refused and reported)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from console.benchmarks.services import bench_runs_create
from console.middleware import CONTENT_SECURITY_POLICY
from console.models import FINISHED, Analysis, JobStatus, Upload
from console.policies.models import PolicyVersion
from console.policies.services import policy_create
from console.uploads.analyses import analysis_create
from console.uploads.services import upload_create
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.factories import BENCH_TAGS, vllm_file
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page

# every violation the page sees, reported by the browser itself
LISTEN = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"}`);
});
"""


@pytest.fixture
def pages(analyst, chat_log) -> list[str]:
    """An upload with two finished analyses, and benchmark runs for the matrix and the
    side-by-side view: the URLs of every page that draws charts."""
    created = upload_create(name="csp", sources=[chat_log], user=analyst, block_sizes=[256])
    upload = wait_for(lambda: Upload.objects.filter(pk=created.pk, status__in=FINISHED).first())
    first = Analysis.objects.get(upload=upload)
    second = analysis_create(upload=upload, block_tokens=256, user=analyst,
                             params=dict(first.params, tp=2, host_ram_gib=64.0))  # fmt: skip
    wait_for(lambda: Analysis.objects.filter(pk=second.pk, status=JobStatus.DONE).first())
    runs = [vllm_file(f"c{n}.json", ttft=t, itl=i, max_concurrency=n)
            for n, t, i in ((4, 600.0, 30.0), (16, 900.0, 150.0))]  # fmt: skip
    bench_runs_create(files=runs, tags=BENCH_TAGS, user=analyst)
    offload = [vllm_file("ram.json", ttft=500.0, max_concurrency=16)]
    bench_runs_create(
        files=offload, tags={**BENCH_TAGS, "tier": "ram", "ram_gib": 64}, user=analyst
    )
    model = "meta-llama/Llama-3.1-8B"
    return [
        f"/analyses/{first.pk}/",
        f"/analyses/{second.pk}/",
        f"/compare/?a={first.pk}&a={second.pk}",
        f"/evidence/matrix/?model={model}&p99_ttft_ms=2000&p99_itl_ms=100",
        f"/evidence/compare/?model={model}",
    ]


def _violations(page: Page) -> list[str]:
    return page.evaluate("() => window.__csp")


def test_pages_with_charts_draw_them_within_the_policy(browser_page, analyst, pages):
    page, session = browser_page.page, browser_page
    page.context.add_init_script(LISTEN)
    sign_in(page, analyst.username)
    for url in pages:
        response = page.goto(url)
        assert response is not None and response.ok, url
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        charts = wait_for_charts(page)
        assert charts, url
        assert _violations(page) == [], (url, _violations(page))
    session.assert_clean()  # no console error either (Chromium logs each violation there)

    # the control: the policy is in force, and the listener hears it
    page.evaluate("""() => {
      const s = document.createElement("script");
      s.textContent = "window.__ran = true";
      document.body.appendChild(s);
    }""")
    page.wait_for_function("() => window.__csp.length > 0")
    assert page.evaluate("() => window.__ran") is None
    assert _violations(page)[0].startswith("script-src")


def test_the_delete_draft_question_still_asks(browser_page, analyst, chat_log):
    """The policy page's confirm() was an inline onsubmit handler, which the policy blocks:
    static/js/actions.js asks now. Dismissed, nothing is deleted; accepted, the draft goes."""
    created = upload_create(name="csp", sources=[chat_log], user=analyst, block_sizes=[256])
    upload = wait_for(lambda: Upload.objects.filter(pk=created.pk, status__in=FINISHED).first())
    version = policy_create(
        name="draft", user=analyst, analysis=Analysis.objects.get(upload=upload)
    )
    page, session = browser_page.page, browser_page
    page.context.add_init_script(LISTEN)
    sign_in(page, analyst.username)
    page.goto(f"/policies/versions/{version.pk}/")
    asked: list[str] = []

    def answer(dialog, accept: bool) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.get_by_role("button", name="Delete draft").click()
    expect(page.get_by_role("button", name="Delete draft")).to_be_visible()
    assert asked == ["Delete this draft? The deletion is recorded in the audit trail."]
    assert PolicyVersion.objects.filter(pk=version.pk).exists()
    page.once("dialog", lambda d: answer(d, True))
    with page.expect_navigation():
        page.get_by_role("button", name="Delete draft").click()
    assert len(asked) == 2 and not PolicyVersion.objects.filter(pk=version.pk).exists()
    assert _violations(page) == []
    session.assert_clean()
