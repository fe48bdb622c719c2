"""The agent log of agent_log.py uploaded through the form in a real browser (headless
Chromium, as test_browser.py), its choices made from the keyboard; its analysis page shows
"What the prompts carry" and the split cards, and draws the hit-ratio curve over its
stacked same-session / cross-session band, with the recommended point's label inside the
chart, without an error in the page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.models import Analysis, Upload
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, upload_page_after_ingest, wait_for_charts
from tests.console.uploads import agent_log
from tests.console.uploads.agent_log import pct

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
JOB_TIMEOUT_MS = 120_000  # an ingest on the real worker (as test_browser.py)
CHAT_BODIES = "Chat bodies (OpenAI chat, Anthropic Messages, OpenAI Responses; JSONL)"
# the drawn curve: its traces in drawing order, the band's filled areas, and where the
# recommended point's label lies against the chart's own box
CURVE_FACTS = """() => {
  const el = document.getElementById('chart-mrc');
  const svg = el.querySelector('svg.main-svg').getBoundingClientRect();
  const label = el.querySelector('.annotation').getBoundingClientRect();
  return {
    uids: el.data.map((t) => t.uid),
    fills: el.querySelectorAll('.scatterlayer .trace .js-fill').length,
    label: [label.left, label.right], chart: [svg.left, svg.right],
  };
}"""

# the tooltip plotly.js shows when the pointer is on the curve's last point
CURVE_HOVER = """() => {
  const el = document.getElementById('chart-mrc');
  const curve = el.data.findIndex((t) => t.uid === 'curve');
  Plotly.Fx.hover(el, [{curveNumber: curve, pointNumber: el.data[curve].x.length - 1}]);
  return el.querySelector('.hoverlayer').textContent;
}"""


def test_the_analysis_of_an_agent_log_shows_what_its_prompts_carry(
    browser_page, analyst, tmp_path, settings
):
    settings.KVSCOPE_EAGER_IN_THREAD = False  # the ingest runs in the request (see test_browser)
    log = agent_log.write(tmp_path / "agents.jsonl")
    page, session = browser_page.page, browser_page
    sign_in(page, analyst.username)
    page.get_by_role("link", name="New upload").click()
    page.locator("#id_name").fill("agents")
    page.locator("#id_files").set_input_files(log)
    page.get_by_label("Format", exact=True).select_option(label=CHAT_BODIES)
    # the block size 16 instead of the format's own, and tools left to the model route
    page.locator("input[name=block_sizes][value='0']").uncheck()
    page.locator("input[name=block_sizes][value='16']").check()
    auto = page.locator("input[name=tools_position][value='auto']")
    expect(auto).to_be_checked()
    auto.focus()
    page.keyboard.press("ArrowDown")  # a radio group: the arrows move the choice
    expect(page.locator("input[name=tools_position][value='first']")).to_be_checked()
    page.keyboard.press("ArrowUp")
    expect(auto).to_be_checked()
    page.screenshot(path="/tmp/kvscope-upload-prompt-options.png", full_page=True)
    page.get_by_role("button", name="Upload and analyze").click()
    expect(page).to_have_url(re.compile(r"/uploads/\d+/$"))
    upload = Upload.objects.get()
    upload_page_after_ingest(page, upload.pk, JOB_TIMEOUT_MS)
    expect(page.locator("[data-upload-status]")).to_have_text("Done")
    upload.refresh_from_db()
    assert (upload.format, upload.tools_position, upload.block_sizes) == ("chat", "auto", [16])

    page.goto(f"/analyses/{Analysis.objects.get(upload=upload).pk}/")
    carried = page.locator("[data-carried]")
    expect(carried).to_be_visible()
    share = agent_log.TOOL_TOKENS / agent_log.PROMPT_TOKENS
    expect(carried.locator('[data-metric="tool_share"]')).to_have_text(
        f"{pct(share)} of prompt tokens, in 3 of 4 requests")  # fmt: skip
    expect(carried.locator('[data-metric="session_share"]')).to_have_text(
        "50.0 % of requests carry one")  # 2 of 4 # fmt: skip
    expect(page.locator('[data-finding="cache_control"]')).to_be_visible()
    same = agent_log.SAME_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS
    cross = agent_log.CROSS_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS
    expect(page.locator('[data-split="infinite"]')).to_have_text(
        f"= {pct(same)} same-session + {pct(cross)} cross-session")  # fmt: skip

    wait_for_charts(page)
    curve = page.evaluate(CURVE_FACTS)
    assert curve["uids"][:3] == ["cross-session", "same-session", "curve"]
    assert curve["fills"] == 2  # the two stacked areas, drawn
    left, right = curve["label"]
    assert curve["chart"][0] <= left < right <= curve["chart"][1], curve  # not cut off
    page.screenshot(path="/tmp/kvscope-agent-analysis.png", full_page=True)
    # one hover on the curve's last point names the total and both parts (every block kept
    # there: the infinite cache's hits, worked out in agent_log.py)
    tooltip = " ".join(page.evaluate(CURVE_HOVER).split())
    assert f"{pct(same + cross)[:-2]}% of prompt tokens hit" in tooltip, tooltip
    assert f"same-session (conversation history): {pct(same)[:-2]}%" in tooltip, tooltip
    assert f"cross-session (shared material): {pct(cross)[:-2]}%" in tooltip, tooltip
    session.assert_clean()
