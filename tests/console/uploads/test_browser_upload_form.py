"""The upload form's block sizes and Retry in a real browser (headless Chromium, as
test_browser.py), by keyboard: the form shows the format's own size ticked and explains
it; a Mooncake trace read at 256 fails naming 512, and Retry with 512 reads it. A running
upload's details box and status badge follow its progress."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.models import Upload
from console.uploads.forms import BLOCK_SIZES_HELP
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, update_row, upload_page_after_ingest
from tests.console.factories import FIT_512

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
JOB_TIMEOUT_MS = 120_000  # an ingest on the real worker (as test_browser.py)
OWN_LABEL = "The format's own (chat 256, Mooncake 512 …)"


def _facts(page) -> dict[str, str]:
    terms = page.locator("dl.facts dt").all_text_contents()
    return dict(zip(terms, page.locator("dl.facts dd").all_text_contents(), strict=True))


def test_the_form_explains_the_default_and_retry_changes_the_block_size(
    browser_page, analyst, long_prompts, settings
):
    settings.KVSCOPE_EAGER_IN_THREAD = False  # the ingest runs in the request (see test_browser)
    lines = len(long_prompts.read_bytes().splitlines())
    page, session = browser_page.page, browser_page
    sign_in(page, analyst.username)
    page.get_by_role("link", name="New upload").click()

    # --- the default, ticked and explained ----------------------------------------------
    own = page.get_by_label(OWN_LABEL)
    expect(own).to_be_checked()
    for size in ("16", "64", "128", "256", "512"):
        expect(page.locator(f"input[name=block_sizes][value='{size}']")).not_to_be_checked()
    expect(page.locator("#id_block_sizes_helptext")).to_have_text(BLOCK_SIZES_HELP)
    expect(page.locator("#id_block_sizes_helptext")).to_be_visible()
    page.screenshot(path="/tmp/kvscope-upload-block-sizes.png", full_page=True)

    # --- by keyboard: the trace with 256 ticked instead -----------------------------------
    page.locator("#id_name").fill("trace at 256")
    page.locator("#id_files").set_input_files(long_prompts)
    own.focus()
    page.keyboard.press("Space")  # untick the format's own
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # 16, 64, 128, 256
    expect(page.locator("input[name=block_sizes][value='256']")).to_be_focused()
    page.keyboard.press("Space")
    expect(own).not_to_be_checked()
    page.get_by_role("button", name="Upload and analyze").click()

    expect(page).to_have_url(re.compile(r"/uploads/\d+/$"))
    expect(page.locator("[data-upload-status]")).to_have_text("Failed", timeout=JOB_TIMEOUT_MS)
    expect(page.locator(".error-box")).to_contain_text(FIT_512)
    facts = _facts(page)
    assert (facts["Requests read"], facts["Lines skipped"]) == ("0", f"{lines:,}")
    page.screenshot(path="/tmp/kvscope-retry.png", full_page=True)
    # Retry offers the sizes again, with what was chosen ticked
    retry = page.locator("[data-retry-form]")
    expect(retry.locator("input[value='256']")).to_be_checked()
    expect(retry.get_by_label(OWN_LABEL)).not_to_be_checked()
    retry.locator("input[value='256']").focus()
    page.keyboard.press("Space")  # untick 256
    page.keyboard.press("Tab")
    expect(retry.locator("input[value='512']")).to_be_focused()
    page.keyboard.press("Space")
    retry.get_by_role("button", name="Retry the ingest").click()

    upload_page_after_ingest(page, Upload.objects.get().pk, JOB_TIMEOUT_MS)
    expect(page.locator("[data-upload-status]")).to_have_text("Done")
    facts = _facts(page)
    assert (facts["Requests"], facts["Lines skipped"], facts["Block sizes"]) == (
        f"{lines:,}", "0", "512")  # fmt: skip
    assert Upload.objects.get().block_sizes == [512]
    session.assert_clean()


def test_the_details_box_follows_a_running_ingest(browser_page, analyst):
    page, session = browser_page.page, browser_page
    upload = Upload.objects.create(name="busy", status="pending", progress_total=10_000,
                                   requests_done=5)  # fmt: skip
    sign_in(page, analyst.username)
    page.goto(f"/uploads/{upload.pk}/")
    expect(page.locator("dd[data-live-requests]")).to_have_text("5")
    expect(page.locator("[data-upload-status]")).to_have_text("Queued")
    update_row(Upload, upload.pk, status="running", stage="reading", requests_done=16_000,
               skipped_so_far=12, progress_done=4_000)  # fmt: skip
    # the badge drawn with the page follows the job, as the panel does
    expect(page.locator("[data-upload-status]")).to_have_text("Running")
    expect(page.locator("[data-upload-status]")).to_have_class("badge running")
    # the progress panel and the details box show the same numbers, as they change
    expect(page.locator("dd[data-live-requests]")).to_have_text("16,000")
    expect(page.locator("dd[data-requests]")).to_have_text("16,000")
    expect(page.locator("dd[data-live-skipped]")).to_have_text("12")
    expect(page.locator("dd[data-skipped]")).to_have_text("12")
    session.assert_clean()
